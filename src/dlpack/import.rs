//! Import: a [`DLManagedTensor`] as a read-only leaf of a [`Context`] over
//! the producer's memory (no copy), released through its deleter when the
//! context drops the leaf.

use std::ptr::NonNull;

use super::abi::{device_name, from_dl_dtype, DLManagedTensor, DLManagedTensorVersioned, DLTensor, KDL_CPU};
use crate::context::{BorrowedBytes, Context};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::tensor::TensorId;

/// Owns an imported managed tensor: dropping it calls the producer's deleter once.
enum Imported {
    Legacy(NonNull<DLManagedTensor>),
    Versioned(NonNull<DLManagedTensorVersioned>),
}

// SAFETY: `import`'s contract: the deleter may be called from any thread, and
// the guard is never used but to call it.
unsafe impl Send for Imported {}
// SAFETY: `&Imported` gives no access to anything.
unsafe impl Sync for Imported {}

impl Drop for Imported {
    fn drop(&mut self) {
        // SAFETY: `import`'s (`import_versioned`'s) contract: a valid managed
        // tensor, handed to rgml, whose deleter (if any) is called once, here.
        unsafe {
            match self {
                Imported::Legacy(m) => {
                    if let Some(d) = m.as_ref().deleter {
                        d(m.as_ptr());
                    }
                }
                Imported::Versioned(m) => {
                    if let Some(d) = m.as_ref().deleter {
                        d(m.as_ptr());
                    }
                }
            }
        }
    }
}

fn err(msg: impl std::fmt::Display) -> Error {
    Error::Invalid(format!("dlpack import: {msg}"))
}

/// What a managed tensor describes, checked: rgml's type, `ne`/`nb`, and
/// where the bytes are.
#[derive(Debug)]
struct Plan {
    layout: Layout,
    /// Start of the leaf's bytes.
    base: *const u8,
    /// Bytes from `base` to the first element.
    offs: usize,
    /// Bytes of the leaf (`offs` + the view's extent).
    len: usize,
}

/// Reads and checks the tensor `t` (copies shape and strides out).
///
/// # Safety
/// As [`import`].
unsafe fn plan(t: &DLTensor) -> Result<Plan> {
    if t.device.device_type != KDL_CPU {
        return Err(err(format!(
            "device type {} ({}, device {}): only CPU memory (kDLCPU) is imported",
            t.device.device_type,
            device_name(t.device.device_type),
            t.device.device_id
        )));
    }
    let dtype = from_dl_dtype(t.dtype).ok_or_else(|| {
        err(format!(
            "data type code {} bits {} lanes {} has no rgml type (f16/bf16/f32/f64, i8/i16/i32/i64)",
            t.dtype.code, t.dtype.bits, t.dtype.lanes
        ))
    })?;
    let ndim = usize::try_from(t.ndim).map_err(|_| err(format!("negative ndim {}", t.ndim)))?;
    if ndim > 0 && t.shape.is_null() {
        return Err(err(format!("ndim {ndim} with a null shape")));
    }
    // SAFETY: the contract: `shape` holds `ndim` values (checked non-null above).
    let shape: &[i64] = if ndim == 0 { &[] } else { unsafe { std::slice::from_raw_parts(t.shape, ndim) } };
    let strides: Option<&[i64]> = match (ndim, t.strides.is_null()) {
        (0, _) | (_, true) => None,
        // SAFETY: the contract: non-null `strides` holds `ndim` values.
        _ => Some(unsafe { std::slice::from_raw_parts(t.strides, ndim) }),
    };
    if let Some(&n) = shape.iter().find(|&&n| n < 0) {
        return Err(err(format!("negative size {n} in shape {shape:?}")));
    }
    // leading (outermost) dims of size 1 beyond the fourth are folded away
    let extra = ndim.saturating_sub(4);
    if shape[..extra].iter().any(|&n| n != 1) {
        return Err(err(format!("ndim {ndim} (shape {shape:?}): rgml tensors have at most 4 dims")));
    }
    let ts = dtype.type_size();
    let mut ne = [1i64; 4];
    let mut nb = [0usize; 4];
    let mut compact = ts;
    // innermost first: DLPack's last dim is rgml's dim 0
    for (i, k) in (extra..ndim).rev().enumerate() {
        ne[i] = shape[k];
        let stride = match strides {
            None => Some(compact),
            Some(s) if s[k] < 0 && shape[k] > 1 => {
                return Err(err(format!(
                    "negative stride {} (dim {k} of strides {s:?}): rgml has no negative strides",
                    s[k]
                )))
            }
            // a dim of one element addresses nothing: its stride is kept when usable
            Some(s) => usize::try_from(s[k].max(0)).ok().and_then(|s| s.checked_mul(ts)),
        };
        nb[i] = match stride {
            Some(b) => b,
            None if shape[k] <= 1 => 0,
            None => return Err(err(format!("stride of dim {k} overflows"))),
        };
        compact = compact.checked_mul(shape[k] as usize).ok_or_else(|| err(format!("shape {shape:?} overflows")))?;
    }
    // dims past the tensor's: unused, given the compact stride as fresh tensors have
    nb[ndim - extra..].fill(compact);
    let layout = Layout { dtype, ne, nb, block_dim: 0 };
    if ne.iter().try_fold(1i64, |a, &n| a.checked_mul(n)).is_none() {
        return Err(err(format!("element count of shape {shape:?} overflows")));
    }
    let extent = layout
        .checked_nbytes()
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(|| err(format!("shape {shape:?} with strides {strides:?} spans more bytes than memory holds")))?;
    let byte_offset = usize::try_from(t.byte_offset).map_err(|_| err("byte_offset overflows"))?;
    let data = t.data.cast::<u8>().cast_const();
    if extent == 0 {
        // nothing is read: no pointer needs to be valid
        return Ok(Plan { layout, base: data, offs: 0, len: 0 });
    }
    if data.is_null() {
        return Err(err(format!("null data for shape {shape:?} ({extent} bytes)")));
    }
    let first = (data as usize)
        .checked_add(byte_offset)
        .filter(|&a| a.checked_add(extent).is_some())
        .ok_or_else(|| err("data + byte_offset + size overflows the address space"))?;
    let a = dtype.align();
    if !first.is_multiple_of(a) {
        return Err(err(format!("data + byte_offset = {first:#x} is not aligned to {a} bytes for {dtype}")));
    }
    // the leaf starts at `data` when that is aligned (the offset is kept), else at the first element
    let (base, offs) =
        if (data as usize).is_multiple_of(a) { (data, byte_offset) } else { (data.wrapping_add(byte_offset), 0) };
    let len = offs.checked_add(extent).filter(|&n| n <= isize::MAX as usize).ok_or_else(|| err("size overflows"))?;
    Ok(Plan { layout, base, offs, len })
}

/// True when `p` is the leaf's own shape: offset 0, packed strides.
fn is_plain(p: &Plan) -> bool {
    p.offs == 0 && Layout::contiguous(p.layout.dtype, p.layout.ne).is_ok_and(|c| c.same_places(&p.layout))
}

/// The rgml view `p` asks for, on `root` (in any context).
fn view_on(ctx: &Context, root: TensorId, p: &Plan) -> Result<TensorId> {
    ctx.view_strided(root, p.layout.ne, p.layout.nb, p.offs)
}

/// Imports the DLPack tensor `managed` into `ctx` without copying: a
/// read-only leaf over its memory, or for a strided tensor, or one at an
/// offset, a view (its `ne`/`nb`/offset) of a 1-d leaf spanning it. Returns
/// the tensor to use.
///
/// Layout: DLPack's shape `[.., d1, d0]` (outermost first) becomes
/// `ne = [d0, d1, ..]`, strides in elements become `nb` in bytes; a 0-d
/// tensor is `[1, 1, 1, 1]`; more than 4 dims are accepted when the leading
/// ones are 1. A null `strides` means compact row-major. Dims of size 0 give
/// an empty tensor (its data pointer may be null). Stride-0 (broadcast) dims
/// are accepted: the leaf is read-only, so no write can alias. The leaf
/// starts at `data` when it is aligned for the type, keeping `byte_offset` as
/// the view's offset, else at `data + byte_offset`.
///
/// Refused with [`Error::Invalid`] (ownership stays with the caller, the
/// deleter is not called): a device other than the CPU, a type rgml does not
/// have (unsigned, bool, complex, vector lanes), more than 4 dims of more than
/// one element, a negative size or stride (on a dim of more than one
/// element), null data for a non-empty tensor, a first element misaligned for
/// its type, sizes that overflow.
///
/// # Safety
/// `managed` must be null or point to a valid `DLManagedTensor` (DLPack v0.8
/// ABI) that the caller owns and hands over: `shape` (and `strides`, unless
/// null) hold `ndim` values; the bytes the shape, strides and offset describe
/// are readable from `data` (unless the tensor is empty), from any thread,
/// and nobody writes them until the deleter is called; the deleter (if not
/// null) may be called from any thread. On `Ok`, `ctx` owns the tensor and
/// calls its deleter exactly once when the leaf is dropped (the context
/// dropped, or [`Context::truncate`] below it); the caller must not call it or
/// use `managed` again. On `Err`, nothing is kept and the caller still owns it.
pub unsafe fn import(ctx: &mut Context, managed: *mut DLManagedTensor) -> Result<TensorId> {
    let m = NonNull::new(managed).ok_or_else(|| err("null managed tensor"))?;
    // SAFETY: the contract: a valid managed tensor.
    let t = unsafe { &m.as_ref().dl_tensor };
    // SAFETY: the contract, passed on.
    unsafe { import_tensor(ctx, t, Imported::Legacy(m)) }
}

/// [`import`] for the versioned ABI (DLPack ≥ 1.0, the
/// `"dltensor_versioned"` capsule): the same layout rules and refusals, and
/// a major version other than 1 is refused. The read-only flag needs nothing
/// (imports are read-only), nor does the copied flag.
///
/// # Safety
/// As [`import`], for a `DLManagedTensorVersioned`.
pub unsafe fn import_versioned(ctx: &mut Context, managed: *mut DLManagedTensorVersioned) -> Result<TensorId> {
    let m = NonNull::new(managed).ok_or_else(|| err("null managed tensor"))?;
    // SAFETY: the contract: a valid managed tensor.
    let h = unsafe { m.as_ref() };
    if h.version.major != 1 {
        return Err(err(format!(
            "DLPack version {}.{}: only major version 1 (and the unversioned ABI) is imported",
            h.version.major, h.version.minor
        )));
    }
    // SAFETY: the contract, passed on.
    unsafe { import_tensor(ctx, &h.dl_tensor, Imported::Versioned(m)) }
}

/// Imports `t`, owned by `owner` (taken only on success).
///
/// # Safety
/// As [`import`]: `t` is the tensor of the managed tensor `owner` holds.
unsafe fn import_tensor(ctx: &mut Context, t: &DLTensor, owner: Imported) -> Result<TensorId> {
    // SAFETY: the contract: a valid tensor.
    let p = match unsafe { plan(t) } {
        Ok(p) => p,
        Err(e) => {
            // the caller keeps ownership: no deleter call
            std::mem::forget(owner);
            return Err(e);
        }
    };
    let dtype = p.layout.dtype;
    let ts = dtype.type_size();
    let root_ne = if is_plain(&p) { p.layout.ne } else { [(p.len / ts) as i64, 1, 1, 1] };
    // every check the leaf and the view make, first on a data-less context: once
    // the real leaf owns the tensor, nothing may fail
    let dry = (|| {
        let mut dry = Context::new_no_alloc();
        let dry_root = dry.new_tensor(dtype, &root_ne)?;
        if dry.layout(dry_root)?.nbytes() != p.len {
            return Err(Error::internal("imported leaf of the wrong size"));
        }
        if !is_plain(&p) {
            view_on(&dry, dry_root, &p)?;
        }
        Ok(())
    })();
    if let Err(e) = dry {
        std::mem::forget(owner);
        return Err(e);
    }
    let (base, len) = (p.base, p.len);
    let mut owner = Some(owner);
    let made = ctx.new_tensor_borrowed(dtype, &root_ne, len, || {
        // (called once, so `owner` is still there)
        let owner: Box<dyn std::any::Any + Send + Sync> = match owner.take() {
            Some(o) => Box::new(o),
            None => Box::new(()),
        };
        // SAFETY: the contract: `len` bytes from `base` (those the tensor spans,
        // checked in `plan`) stay readable and unwritten until the deleter runs,
        // which dropping the guard does.
        unsafe { BorrowedBytes::new(base, len, owner) }
    });
    // not taken by the leaf (an error before its data was made): still the caller's
    std::mem::forget(owner);
    let root = made?;
    if is_plain(&p) {
        return Ok(root);
    }
    view_on(ctx, root, &p).map_err(|e| Error::internal(format!("imported view refused after its dry run: {e}")))
}
