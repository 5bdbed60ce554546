//! Export: an rgml tensor's bytes as a heap-allocated [`DLManagedTensor`]
//! that shares them (no copy) and keeps them alive until its deleter runs.

use std::any::Any;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::abi::{
    to_dl_dtype, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLTensor, DLPACK_FLAG_BITMASK_READ_ONLY,
    DLPACK_VERSION, KDL_CPU,
};
use crate::backend::cpu::CpuStorage;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::plan::Place;
use crate::tensor::TensorId;

/// Exports made and not yet deleted, process-wide.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// The number of managed tensors rgml has exported and whose deleter has not
/// run yet (process-wide): a leak check for bindings.
pub fn live_exports() -> usize {
    LIVE.load(Ordering::SeqCst)
}

/// The heap block behind an exported tensor: the managed tensor first (its
/// address is the block's), the shape and strides it points to, and what
/// keeps the bytes alive. `manager_ctx` points at the block itself.
#[repr(C)]
struct Export {
    managed: DLManagedTensor,
    shape: [i64; 4],
    strides: [i64; 4],
    _keep: Arc<dyn Any + Send + Sync>,
}

/// The deleter of every tensor rgml exports: frees the block and drops its
/// hold on the bytes. A null pointer is ignored.
unsafe extern "C" fn delete_export(managed: *mut DLManagedTensor) {
    if managed.is_null() {
        return;
    }
    // SAFETY: `managed` is the `managed` field of an `Export` made by
    // `Box::into_raw` in `export_bytes`, whose `manager_ctx` is that box's
    // pointer; DLPack's contract is that the deleter runs once, so the box is
    // rebuilt and dropped once.
    unsafe {
        let block = (*managed).manager_ctx.cast::<Export>();
        drop(Box::from_raw(block));
    }
    LIVE.fetch_sub(1, Ordering::SeqCst);
}

/// An exported tensor: owns one [`DLManagedTensor`] made by rgml, and calls
/// its deleter when dropped unless handed over with [`ManagedTensor::into_raw`].
#[derive(Debug)]
pub struct ManagedTensor {
    ptr: NonNull<DLManagedTensor>,
}

// SAFETY: the managed tensor is plain data plus an `Arc<dyn Any + Send + Sync>`
// keeping the bytes alive; rgml's deleter may run on any thread.
unsafe impl Send for ManagedTensor {}
// SAFETY: `&ManagedTensor` only reads the header.
unsafe impl Sync for ManagedTensor {}

impl ManagedTensor {
    /// The managed tensor, still owned by `self`.
    pub fn as_ptr(&self) -> *mut DLManagedTensor {
        self.ptr.as_ptr()
    }
    /// Hands the managed tensor over (to a consumer, e.g. in a `"dltensor"`
    /// capsule): whoever holds the pointer must call its deleter once.
    pub fn into_raw(self) -> *mut DLManagedTensor {
        let p = self.ptr.as_ptr();
        std::mem::forget(self);
        p
    }
    /// The DLPack header.
    pub fn dl_tensor(&self) -> &DLTensor {
        // SAFETY: `ptr` is a live managed tensor owned by `self`.
        unsafe { &self.ptr.as_ref().dl_tensor }
    }
    /// The shape, outermost dim first.
    pub fn shape(&self) -> &[i64] {
        shape(self.dl_tensor())
    }
    /// The strides in elements, outermost dim first.
    pub fn strides(&self) -> &[i64] {
        strides(self.dl_tensor())
    }
    /// The same export under the versioned ABI (DLPack 1.0, the
    /// `"dltensor_versioned"` capsule), flagged read-only: a block holding
    /// this one, whose deleter runs when the versioned one's does.
    pub fn into_versioned(self) -> ManagedTensorVersioned {
        let block = Box::new(VersionedExport {
            managed: DLManagedTensorVersioned {
                version: DLPACK_VERSION,
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(delete_versioned),
                flags: DLPACK_FLAG_BITMASK_READ_ONLY,
                // shape and strides stay those of `self`'s block, which `_inner` keeps
                dl_tensor: *self.dl_tensor(),
            },
            _inner: self,
        });
        let raw = Box::into_raw(block);
        // SAFETY: `raw` is the box just leaked: valid and unaliased.
        unsafe { (*raw).managed.manager_ctx = raw.cast::<c_void>() };
        // SAFETY: `managed` is the first field of a `#[repr(C)]` block: same address, non-null.
        let ptr = unsafe { NonNull::new_unchecked(raw.cast::<DLManagedTensorVersioned>()) };
        ManagedTensorVersioned { ptr }
    }
}

/// The shape of an rgml export's header.
fn shape(t: &DLTensor) -> &[i64] {
    // SAFETY: rgml's exports point `shape` at `ndim` (1 to 4) values of their own
    // block, alive as long as the header `t` borrows.
    unsafe { std::slice::from_raw_parts(t.shape, t.ndim as usize) }
}
/// The strides of an rgml export's header.
fn strides(t: &DLTensor) -> &[i64] {
    // SAFETY: as for `shape`: rgml's exports always set `strides`.
    unsafe { std::slice::from_raw_parts(t.strides, t.ndim as usize) }
}

/// The heap block behind a versioned export: its header first (its address
/// is the block's), then the legacy export whose bytes and shape it uses.
#[repr(C)]
struct VersionedExport {
    managed: DLManagedTensorVersioned,
    _inner: ManagedTensor,
}

/// The deleter of rgml's versioned exports: frees the block, which deletes
/// the legacy export inside. A null pointer is ignored.
unsafe extern "C" fn delete_versioned(managed: *mut DLManagedTensorVersioned) {
    if managed.is_null() {
        return;
    }
    // SAFETY: `managed` heads a `VersionedExport` leaked by `into_versioned`, whose
    // `manager_ctx` is that box; the deleter runs once, so the box is dropped once.
    unsafe { drop(Box::from_raw((*managed).manager_ctx.cast::<VersionedExport>())) };
}

/// A versioned export ([`ManagedTensor::into_versioned`]): owns one
/// [`DLManagedTensorVersioned`] made by rgml, and calls its deleter when
/// dropped unless handed over with [`ManagedTensorVersioned::into_raw`].
#[derive(Debug)]
pub struct ManagedTensorVersioned {
    ptr: NonNull<DLManagedTensorVersioned>,
}

// SAFETY: as for `ManagedTensor`, which the block holds.
unsafe impl Send for ManagedTensorVersioned {}
// SAFETY: `&ManagedTensorVersioned` only reads the header.
unsafe impl Sync for ManagedTensorVersioned {}

impl ManagedTensorVersioned {
    /// The managed tensor, still owned by `self`.
    pub fn as_ptr(&self) -> *mut DLManagedTensorVersioned {
        self.ptr.as_ptr()
    }
    /// Hands the managed tensor over (e.g. in a `"dltensor_versioned"`
    /// capsule): whoever holds the pointer must call its deleter once.
    pub fn into_raw(self) -> *mut DLManagedTensorVersioned {
        let p = self.ptr.as_ptr();
        std::mem::forget(self);
        p
    }
    /// The header: version, flags and tensor.
    pub fn header(&self) -> &DLManagedTensorVersioned {
        // SAFETY: `ptr` is a live managed tensor owned by `self`.
        unsafe { self.ptr.as_ref() }
    }
    /// The DLPack tensor.
    pub fn dl_tensor(&self) -> &DLTensor {
        &self.header().dl_tensor
    }
    /// The shape, outermost dim first.
    pub fn shape(&self) -> &[i64] {
        shape(self.dl_tensor())
    }
    /// The strides in elements, outermost dim first.
    pub fn strides(&self) -> &[i64] {
        strides(self.dl_tensor())
    }
}

impl Drop for ManagedTensorVersioned {
    fn drop(&mut self) {
        // SAFETY: `self` owns the managed tensor and drops it once; rgml's
        // exports always have a deleter.
        unsafe {
            if let Some(d) = self.ptr.as_ref().deleter {
                d(self.ptr.as_ptr());
            }
        }
    }
}

impl Drop for ManagedTensor {
    fn drop(&mut self) {
        // SAFETY: `self` owns the managed tensor and drops it once; rgml's
        // exports always have a deleter.
        unsafe {
            if let Some(d) = self.ptr.as_ref().deleter {
                d(self.ptr.as_ptr());
            }
        }
    }
}

/// The DLPack shape and element strides of `layout`, outermost first,
/// trimmed to its dims (ggml's `n_dims`: up to the last dim of more than one
/// element, at least 1).
fn dl_shape(layout: &Layout, op: &str) -> Result<(usize, [i64; 4], [i64; 4])> {
    let d = layout.dtype;
    if d.is_quantized() {
        return Err(Error::Invalid(format!(
            "{op}: {d} is a block type ({} values in {} bytes): its strides are not whole elements",
            d.block_size(),
            d.type_size()
        )));
    }
    let ts = d.type_size();
    let n_dims = (1..4).rev().find(|&i| layout.ne[i] != 1).map_or(1, |i| i + 1);
    let (mut shape, mut strides) = ([0i64; 4], [0i64; 4]);
    for k in 0..n_dims {
        let i = n_dims - 1 - k;
        if !layout.nb[i].is_multiple_of(ts) {
            return Err(Error::Invalid(format!(
                "{op}: stride nb[{i}]={} is not a whole number of {d} elements ({ts} bytes) in nb={:?}",
                layout.nb[i], layout.nb
            )));
        }
        shape[k] = layout.ne[i];
        strides[k] = i64::try_from(layout.nb[i] / ts).map_err(|_| Error::Invalid(format!("{op}: stride overflows")))?;
    }
    Ok((n_dims, shape, strides))
}

/// Holds a run's storage alive for its exports.
struct KeepStorage(CpuStorage);

// SAFETY: the storage is only read by `export_results`, on its caller's
// thread, before any export holding it is handed out; afterwards nothing
// reaches it but its drop, so sharing `&KeepStorage` between threads shares nothing.
unsafe impl Sync for KeepStorage {}
// SAFETY: moving the holder only moves the thread the storage may be dropped
// on. A `CpuStorage` is not `Send` only for its caches of raw addresses (the
// regions of the last compute and the operands bound to them), plain values
// that dropping never dereferences; its buffers, plan and maps own their
// memory and are `Send`.
unsafe impl Send for KeepStorage {}

/// The managed tensor over `bytes` (kept alive by `keep`) at `offset` with `layout`.
fn export_bytes(
    layout: &Layout,
    bytes: &[u8],
    offset: usize,
    keep: Arc<dyn Any + Send + Sync>,
) -> Result<ManagedTensor> {
    let (ndim, shape, strides) = dl_shape(layout, "dlpack export")?;
    let end = layout.checked_nbytes().and_then(|n| n.checked_add(offset));
    if end.is_none_or(|e| e > bytes.len()) {
        return Err(Error::internal("exported view outside its storage"));
    }
    let dtype = to_dl_dtype(layout.dtype).ok_or_else(|| Error::internal("plain type without a DLPack type"))?;
    let block = Box::new(Export {
        managed: DLManagedTensor {
            dl_tensor: DLTensor {
                data: bytes.as_ptr().cast_mut().cast::<c_void>(),
                device: DLDevice { device_type: KDL_CPU, device_id: 0 },
                ndim: ndim as i32,
                dtype,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: offset as u64,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_export),
        },
        shape,
        strides,
        _keep: keep,
    });
    let raw = Box::into_raw(block);
    // SAFETY: `raw` is the box just leaked: valid and unaliased. The header's
    // pointers go to the block's own fields, which do not move (heap) until
    // `delete_export` frees the block.
    unsafe {
        (*raw).managed.dl_tensor.shape = (*raw).shape.as_mut_ptr();
        (*raw).managed.dl_tensor.strides = (*raw).strides.as_mut_ptr();
        (*raw).managed.manager_ctx = raw.cast::<c_void>();
    }
    LIVE.fetch_add(1, Ordering::SeqCst);
    // SAFETY: `managed` is the first field of a `#[repr(C)]` block: same address, non-null.
    let ptr = unsafe { NonNull::new_unchecked(raw.cast::<DLManagedTensor>()) };
    Ok(ManagedTensor { ptr })
}

/// Exports tensor `id` of `ctx` — a leaf with host data, or a view of one
/// (transpose, permute, window: its strides and offset are kept) — sharing
/// the leaf's bytes: the managed tensor holds them alive after `ctx` is
/// dropped; a later write into the leaf through the context goes to a fresh
/// copy (the export keeps the bytes of the moment).
///
/// # Errors
/// [`Error::Invalid`] for a block (quantized) type or a stride that is not a
/// whole number of elements, or a tensor a graph computes (export it from the
/// run's storage with [`export_results`]); [`Error::NoData`] for a leaf
/// without data (a `no_alloc` context).
pub fn export(ctx: &Context, id: TensorId) -> Result<ManagedTensor> {
    let t = ctx.tensor(id)?;
    let root = ctx.storage_root(id)?;
    let Some((keep, bytes)) = ctx.leaf_keeper(root) else {
        return Err(if ctx.tensor(root)?.op().is_leaf() {
            Error::NoData(ctx.label(root))
        } else {
            Error::Invalid(format!(
                "dlpack export: {} is computed by a graph: export it from the run's storage (dlpack::export_results)",
                ctx.label(id)
            ))
        });
    };
    export_bytes(t.layout(), bytes, t.view_offs(), keep)
}

/// Exports tensors `ids` as they are in `storage` after a CPU run (results,
/// or any retained tensor of the storage's graph, views included), sharing
/// the storage's bytes: the storage is moved into the exports, which keep it
/// alive until the last of them is deleted (it computes no more: its bytes
/// are theirs). A tensor whose bytes are a leaf's in the context is exported
/// as [`export`] does.
///
/// # Errors
/// As [`export`], and as [`CpuStorage::read_f32`] for a tensor whose memory
/// the plan reuses (not an output) or that is not in the storage's graph;
/// the exports already made are then deleted.
pub fn export_results(storage: CpuStorage, ctx: &Context, ids: &[TensorId]) -> Result<Vec<ManagedTensor>> {
    let keep = Arc::new(KeepStorage(storage));
    let mut out = Vec::with_capacity(ids.len());
    for &id in ids {
        let t = ctx.tensor(id)?;
        let root = ctx.storage_root(id)?;
        if keep.0.plan().place(root) == Some(Place::Leaf) {
            out.push(export(ctx, id)?);
            continue;
        }
        let bytes = keep.0.root_bytes(ctx, id)?;
        let k: Arc<dyn Any + Send + Sync> = keep.clone();
        out.push(export_bytes(t.layout(), bytes, t.view_offs(), k)?);
    }
    Ok(out)
}
