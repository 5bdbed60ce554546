//! `Context`: the arena of tensor headers, the host data of leaves, and the
//! per-storage write history that gives graphs eager program-order semantics.

use std::any::Any;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::host::{Element, HostBuffer};
use crate::layout::{Layout, Overlap};
use crate::tensor::{Flags, Op, Tensor, TensorId};

static NEXT_CONTEXT_ID: AtomicU32 = AtomicU32::new(1);

/// The bytes of a leaf: its own host buffer, a range of a mapped file, or
/// memory owned outside rgml.
#[derive(Debug)]
enum LeafData {
    /// Shared with DLPack exports of the leaf ([`crate::dlpack::export`]):
    /// a write while one is alive goes to a fresh copy (copy on write).
    Owned(Arc<HostBuffer>),
    /// Read-only bytes of a file mapping (a GGUF weight), used in place.
    Mapped(Arc<memmap2::Mmap>, Range<usize>),
    /// Read-only bytes owned by someone else (an imported DLPack tensor).
    Borrowed(Arc<BorrowedBytes>),
}

impl LeafData {
    fn bytes(&self) -> &[u8] {
        match self {
            LeafData::Owned(b) => b.as_bytes(),
            LeafData::Mapped(m, r) => &m[r.clone()],
            LeafData::Borrowed(b) => b.bytes(),
        }
    }
    /// What keeps the bytes alive, shared.
    fn keeper(&self) -> Arc<dyn Any + Send + Sync> {
        match self {
            LeafData::Owned(b) => b.clone(),
            LeafData::Mapped(m, _) => m.clone(),
            LeafData::Borrowed(b) => b.clone(),
        }
    }
}

/// Bytes rgml reads but does not own (an imported DLPack tensor): `len`
/// bytes at `ptr`, released by dropping `owner` (e.g. a guard that calls the
/// producer's deleter). Read-only for rgml.
pub(crate) struct BorrowedBytes {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    _owner: Box<dyn Any + Send + Sync>,
}

// SAFETY: the bytes are only read (never written through this type), and the
// contract of `BorrowedBytes::new` is that they stay valid and unwritten, from
// any thread, until `owner` is dropped; `owner` itself is `Send + Sync`.
unsafe impl Send for BorrowedBytes {}
// SAFETY: as for `Send`: shared access only reads.
unsafe impl Sync for BorrowedBytes {}

impl BorrowedBytes {
    /// `len` bytes at `ptr`, kept by `owner`.
    ///
    /// # Safety
    /// Unless `len` is 0 (then `ptr` may be null or dangling), `ptr` must be
    /// valid for reads of `len` bytes, from any thread, and not be written by
    /// anyone, until `owner` is dropped; `len` must be at most `isize::MAX`.
    pub(crate) unsafe fn new(ptr: *const u8, len: usize, owner: Box<dyn Any + Send + Sync>) -> BorrowedBytes {
        #[repr(align(64))]
        struct Aligned;
        let ptr = match std::ptr::NonNull::new(ptr.cast_mut()) {
            Some(p) if len > 0 => p,
            // no bytes: a dangling pointer aligned for every type (kernels check alignment)
            _ => std::ptr::NonNull::<Aligned>::dangling().cast(),
        };
        BorrowedBytes { ptr, len, _owner: owner }
    }
    fn bytes(&self) -> &[u8] {
        // SAFETY: `new`'s contract: `len` readable bytes at `ptr`, unwritten, while
        // `_owner` (a field of `self`) lives; for `len == 0` a dangling pointer is
        // valid for an empty slice.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::fmt::Debug for BorrowedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BorrowedBytes({} bytes at {:p})", self.len, self.ptr)
    }
}

/// One tensor of the arena: its header, a leaf's host data, and the epoch
/// it was made in.
#[derive(Debug)]
struct Entry {
    tensor: Tensor,
    data: Option<LeafData>,
    epoch: u32,
}

/// Reads and writes of one storage since its last write, in program order.
#[derive(Clone, Default, Debug)]
struct StorageHistory {
    last_write: Option<TensorId>,
    readers_since_write: Vec<TensorId>,
}

/// The arena that owns tensor headers (and the host data of leaves).
///
/// Ops are methods on the context (see [`crate::ops`]) taking `&self`, so
/// they nest (`ctx.cont(ctx.transpose(a)?)?`); each returns the new tensor's
/// [`TensorId`]. Leaves are made, named, flagged and filled through
/// `&mut self`. In a `no_alloc` context leaves get no data, so graphs of any
/// size can be built and planned without memory.
#[derive(Debug)]
pub struct Context {
    id: u32,
    no_alloc: bool,
    /// Binary ops promote their operands' types (PyTorch's rule) instead of
    /// taking the first's (ggml's); see [`Context::promote`].
    promote: bool,
    /// Append-only: a node is added through `&self` while references to
    /// earlier headers are held (their addresses never move).
    entries: boxcar::Vec<Entry>,
    /// The write history of every storage; held while a node is added, so
    /// nodes are added one at a time, in program order.
    history: Mutex<HashMap<TensorId, StorageHistory>>,
    /// The length each truncation cut the arena to, in order: the epoch is
    /// their count.
    cuts: Vec<usize>,
}

/// A point in a context's history, taken with [`Context::mark`], to drop
/// every tensor made after it with [`Context::truncate`].
#[derive(Clone, Debug)]
pub struct ContextMark {
    ctx: u32,
    epoch: u32,
    len: usize,
    history: HashMap<TensorId, StorageHistory>,
}

impl Default for Context {
    fn default() -> Self {
        Context::new()
    }
}

impl Context {
    /// A context whose leaves own zero-initialised host data.
    pub fn new() -> Context {
        Context::with_alloc(true)
    }
    /// A context whose leaves get no data (shape-only graphs).
    pub fn new_no_alloc() -> Context {
        Context::with_alloc(false)
    }
    fn with_alloc(alloc: bool) -> Context {
        Context {
            id: NEXT_CONTEXT_ID.fetch_add(1, Ordering::Relaxed),
            no_alloc: !alloc,
            promote: false,
            entries: boxcar::Vec::new(),
            history: Mutex::new(HashMap::new()),
            cuts: Vec::new(),
        }
    }
    /// This point in the context's history: [`Context::truncate`] with it drops
    /// every tensor made after it.
    pub fn mark(&self) -> ContextMark {
        let history = self.history().clone();
        ContextMark { ctx: self.id, epoch: self.epoch(), len: self.len(), history }
    }
    /// Drops every tensor made after `mark` (their headers and host data), and
    /// restores the write history of that moment, so graph building goes on as if
    /// they had never been made (e.g. a model dropping the graphs of batch sizes
    /// it no longer uses). Handles to the dropped tensors are then
    /// [`Error::UnknownTensor`], graphs holding them fail their context check,
    /// and their index is never mistaken for a newer tensor's. Errors if `mark`
    /// is of another context, or predates a truncation below it.
    pub fn truncate(&mut self, mark: &ContextMark) -> Result<()> {
        if mark.ctx != self.id {
            return Err(Error::Mismatch(format!("mark of context {} used with context {}", mark.ctx, self.id)));
        }
        let cut_below = self.cuts.get(mark.epoch as usize..).unwrap_or(&[]).iter().any(|&c| c < mark.len);
        if cut_below || mark.len > self.len() {
            return Err(Error::Invalid(format!(
                "mark at {} tensors predates a truncation below it (the context holds {})",
                mark.len,
                self.len()
            )));
        }
        let entries = std::mem::take(&mut self.entries);
        self.entries = entries.into_iter().take(mark.len).collect();
        *self.history_mut() = mark.history.clone();
        self.cuts.push(mark.len);
        Ok(())
    }
    /// Declares every node built so far as executed, its writes as state:
    /// nodes built later neither wait for nor pull into their graphs any node
    /// built before this call. For storages that persist across runs (a KV
    /// cache a graph wrote in an earlier compute): without it, the next graph
    /// reading the cache would pull in, and run again, the writes of every
    /// earlier graph. Program order within the nodes built after the call is
    /// kept as always.
    pub fn forget_writes(&mut self) {
        self.history_mut().clear();
    }
    /// Incremented by every [`Context::truncate`].
    pub fn epoch(&self) -> u32 {
        self.cuts.len() as u32
    }
    /// This context's id (distinct for every context of the process).
    pub fn id(&self) -> u32 {
        self.id
    }
    /// True when leaves get no host data.
    pub fn is_no_alloc(&self) -> bool {
        self.no_alloc
    }
    /// Turns type promotion on or off for the ops built from now on. Off (the
    /// default), a binary op's result has its first operand's type and the
    /// second is converted to it, as in ggml, on which llama.cpp's graphs
    /// rely; on, the result has the two operands' promoted type
    /// ([`DType::promote`], PyTorch's category rule): an operand of another
    /// type is first `cast` to it (a priced copy in the graph), a quantized
    /// or integer operand becomes float, and `scale` and the unary ops turn a
    /// non-float operand into F32 first. Integer and F64 results are refused
    /// ([`Error::Unsupported`]): rgml's arithmetic kernels compute in f32.
    /// An in-place op keeps its destination's type and rounds into it, as
    /// PyTorch's `a += b` does. [`crate::Graph::lint`] reports the mixed ops
    /// built without promotion that round an operand.
    pub fn promote(&mut self, on: bool) -> &mut Context {
        self.promote = on;
        self
    }
    /// True when ops built now promote types (see [`Context::promote`]).
    pub fn promotes(&self) -> bool {
        self.promote
    }
    /// Number of tensors.
    pub fn len(&self) -> usize {
        self.entries.count()
    }
    /// True when the context holds no tensor.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// All tensors in creation order.
    pub fn tensors(&self) -> impl Iterator<Item = (TensorId, &Tensor)> {
        let ctx = self.id;
        self.entries.iter().map(move |(i, e)| (TensorId { ctx, idx: i as u32, epoch: e.epoch }, &e.tensor))
    }

    /// A new leaf of `dtype` with shape `ne` (1 to 4 dims, `ne[0]` fastest).
    pub fn new_tensor(&mut self, dtype: DType, ne: &[i64]) -> Result<TensorId> {
        let alloc = !self.no_alloc;
        self.new_leaf(dtype, ne, |l| {
            alloc.then(|| HostBuffer::zeroed(l.nbytes()).map(|b| LeafData::Owned(Arc::new(b)))).transpose()
        })
    }
    fn new_leaf(
        &mut self,
        dtype: DType,
        ne: &[i64],
        data: impl FnOnce(&Layout) -> Result<Option<LeafData>>,
    ) -> Result<TensorId> {
        if ne.is_empty() || ne.len() > 4 {
            return Err(Error::shape("new_tensor", format!("1 to 4 dims, got {}", ne.len())));
        }
        let mut ne4 = [1i64; 4];
        ne4[..ne.len()].copy_from_slice(ne);
        let layout = Layout::contiguous(dtype, ne4)?;
        let data = data(&layout)?;
        self.push_entry(Tensor::new(layout, Op::Leaf), data)
    }
    /// A new 1-d leaf.
    pub fn new_tensor_1d(&mut self, dtype: DType, ne0: i64) -> Result<TensorId> {
        self.new_tensor(dtype, &[ne0])
    }
    /// A new 2-d leaf.
    pub fn new_tensor_2d(&mut self, dtype: DType, ne0: i64, ne1: i64) -> Result<TensorId> {
        self.new_tensor(dtype, &[ne0, ne1])
    }
    /// A new 3-d leaf.
    pub fn new_tensor_3d(&mut self, dtype: DType, ne0: i64, ne1: i64, ne2: i64) -> Result<TensorId> {
        self.new_tensor(dtype, &[ne0, ne1, ne2])
    }
    /// A new 4-d leaf.
    pub fn new_tensor_4d(&mut self, dtype: DType, ne0: i64, ne1: i64, ne2: i64, ne3: i64) -> Result<TensorId> {
        self.new_tensor(dtype, &[ne0, ne1, ne2, ne3])
    }
    /// A new read-only leaf whose bytes are `map[offset..offset + nbytes]` (e.g. a
    /// GGUF tensor): no copy is made, and writing into it (an in-place op or
    /// `cpy`) is an error. A range misaligned for `dtype` is copied instead.
    pub fn new_tensor_mapped(
        &mut self,
        dtype: DType,
        ne: &[i64],
        map: Arc<memmap2::Mmap>,
        offset: usize,
    ) -> Result<TensorId> {
        self.new_leaf(dtype, ne, |l| {
            let size = l.nbytes();
            let range = offset..offset.checked_add(size).filter(|&e| e <= map.len()).ok_or_else(|| {
                Error::Invalid(format!(
                    "mapped tensor: bytes {offset}+{size} lie outside the {}-byte mapping",
                    map.len()
                ))
            })?;
            let aligned = (map.as_ptr() as usize + offset).is_multiple_of(dtype.align());
            Ok(Some(if aligned {
                LeafData::Mapped(map, range)
            } else {
                LeafData::Owned(Arc::new(HostBuffer::from_bytes(&map[range])?))
            }))
        })
    }
    /// Lets the OS drop leaf `id`'s resident mapped pages (a no-op unless its
    /// bytes are a file mapping; they read the same afterwards).
    pub(crate) fn release_mapped_pages(&self, id: TensorId) {
        if let Ok(Entry { data: Some(LeafData::Mapped(map, range)), .. }) = self.entry(id) {
            crate::gguf::release_pages(map, range.clone());
        }
    }
    /// True if leaf `id`'s bytes are a read-only file mapping.
    pub fn is_mapped(&self, id: TensorId) -> bool {
        self.entry(id).is_ok_and(|e| matches!(e.data, Some(LeafData::Mapped(..))))
    }
    /// True if leaf `id`'s bytes are read-only: a file mapping, or memory
    /// borrowed from another library ([`crate::dlpack::import`]).
    pub fn is_read_only(&self, id: TensorId) -> bool {
        self.entry(id).is_ok_and(|e| matches!(e.data, Some(LeafData::Mapped(..) | LeafData::Borrowed(..))))
    }
    /// A new read-only leaf of `dtype` and shape `ne` over `bytes` (exactly
    /// its contiguous size), made by `bytes` only once the shape is known to be
    /// valid and the size to match; nothing is made (so the owner `bytes` would
    /// hold is not taken) when this returns an error before calling it.
    pub(crate) fn new_tensor_borrowed(
        &mut self,
        dtype: DType,
        ne: &[i64],
        len: usize,
        bytes: impl FnOnce() -> BorrowedBytes,
    ) -> Result<TensorId> {
        self.new_leaf(dtype, ne, |l| {
            if l.nbytes() != len {
                return Err(Error::DataSize { name: "borrowed tensor".into(), expected: l.nbytes(), found: len });
            }
            Ok(Some(LeafData::Borrowed(Arc::new(bytes()))))
        })
    }
    /// What keeps leaf `id`'s bytes alive (shared), with the bytes; `None`
    /// for non-leaves and data-less leaves.
    pub(crate) fn leaf_keeper(&self, id: TensorId) -> Option<(Arc<dyn Any + Send + Sync>, &[u8])> {
        let data = self.entry(id).ok()?.data.as_ref()?;
        Some((data.keeper(), data.bytes()))
    }

    /// A new F32 leaf holding `values` (shape `ne`, contiguous order).
    pub fn new_f32(&mut self, ne: &[i64], values: &[f32]) -> Result<TensorId> {
        let id = self.new_tensor(DType::F32, ne)?;
        self.set_data(id, values)?;
        Ok(id)
    }

    /// The header of `id`.
    #[inline]
    pub fn tensor(&self, id: TensorId) -> Result<&Tensor> {
        self.entry(id).map(|e| &e.tensor)
    }
    /// Inlined: every node of every compute looks its header up here.
    #[inline]
    fn entry(&self, id: TensorId) -> Result<&Entry> {
        match self.entries.get(id.index()) {
            Some(e) if e.epoch == id.epoch && id.ctx == self.id => Ok(e),
            _ => Err(self.unknown(id)),
        }
    }
    /// Why `id` names no tensor of this context.
    #[cold]
    #[inline(never)]
    fn unknown(&self, id: TensorId) -> Error {
        if id.ctx != self.id {
            return Error::UnknownTensor(format!("{id} belongs to context {}, not {}", id.ctx, self.id));
        }
        match self.entries.get(id.index()) {
            e if e.is_none_or(|e| e.epoch != id.epoch) && id.epoch < self.epoch() => {
                Error::UnknownTensor(format!("{id} was dropped by Context::truncate"))
            }
            _ => Error::UnknownTensor(id.to_string()),
        }
    }
    fn entry_mut(&mut self, id: TensorId) -> Result<&mut Entry> {
        self.entry(id)?;
        self.entries.get_mut(id.index()).ok_or_else(|| Error::UnknownTensor(id.to_string()))
    }
    fn tensor_mut(&mut self, id: TensorId) -> Result<&mut Tensor> {
        self.entry_mut(id).map(|e| &mut e.tensor)
    }
    /// The write history (a poisoned lock still holds a consistent map: it
    /// is only changed after every check of a push has passed).
    fn history(&self) -> MutexGuard<'_, HashMap<TensorId, StorageHistory>> {
        self.history.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn history_mut(&mut self) -> &mut HashMap<TensorId, StorageHistory> {
        self.history.get_mut().unwrap_or_else(|e| e.into_inner())
    }
    /// The layout of `id`.
    pub fn layout(&self, id: TensorId) -> Result<Layout> {
        Ok(self.tensor(id)?.layout)
    }
    /// The tensor that owns `id`'s storage (itself unless it is a view).
    pub fn storage_root(&self, id: TensorId) -> Result<TensorId> {
        Ok(self.tensor(id)?.view_src.unwrap_or(id))
    }
    /// A readable label: the name, or the id.
    pub fn label(&self, id: TensorId) -> String {
        match self.tensor(id) {
            Ok(t) if !t.name.is_empty() => t.name.clone(),
            _ => id.to_string(),
        }
    }

    /// Names `id`; returns it for chaining.
    pub fn set_name(&mut self, id: TensorId, name: impl Into<String>) -> Result<TensorId> {
        self.tensor_mut(id)?.name = name.into();
        Ok(id)
    }
    /// The first tensor with this name.
    pub fn find(&self, name: &str) -> Option<TensorId> {
        self.tensors().find(|(_, t)| t.name == name).map(|(id, _)| id)
    }
    /// Marks `id` as a graph input (set before each run; never overwritten by the planner).
    pub fn set_input(&mut self, id: TensorId) -> Result<()> {
        self.tensor_mut(id)?.flags.input = true;
        Ok(())
    }
    /// Marks `id` as a graph output (never overwritten or freed by the planner).
    pub fn set_output(&mut self, id: TensorId) -> Result<()> {
        self.tensor_mut(id)?.flags.output = true;
        Ok(())
    }
    /// Marks `id` as a parameter.
    pub fn set_param(&mut self, id: TensorId) -> Result<()> {
        self.tensor_mut(id)?.flags.param = true;
        Ok(())
    }
    /// The roles of `id`.
    pub fn flags(&self, id: TensorId) -> Result<Flags> {
        Ok(self.tensor(id)?.flags)
    }

    fn leaf_buffer(&mut self, id: TensorId) -> Result<&mut HostBuffer> {
        let t = self.tensor(id)?;
        if !t.op.is_leaf() {
            return Err(Error::Invalid(format!(
                "{}: data can only be set on a leaf, this is a {} node",
                self.label(id),
                t.op.name()
            )));
        }
        let label = self.label(id);
        match self.entry_mut(id)?.data.as_mut() {
            Some(LeafData::Owned(b)) => {
                // shared with a DLPack export: the export keeps the old bytes
                if Arc::get_mut(b).is_none() {
                    *b = Arc::new(HostBuffer::from_bytes(b.as_bytes())?);
                }
                Arc::get_mut(b).ok_or_else(|| Error::internal("a fresh leaf buffer is shared"))
            }
            Some(LeafData::Mapped(..) | LeafData::Borrowed(..)) => Err(Error::ReadOnly(label)),
            None => Err(Error::NoData(label)),
        }
    }
    /// Copies `bytes` into the leaf `id` (exactly `nbytes` of them, in storage order).
    pub fn set_bytes(&mut self, id: TensorId, bytes: &[u8]) -> Result<()> {
        let label = self.label(id);
        let buf = self.leaf_buffer(id)?;
        if buf.len() != bytes.len() {
            return Err(Error::DataSize { name: label, expected: buf.len(), found: bytes.len() });
        }
        buf.as_bytes_mut().copy_from_slice(bytes);
        Ok(())
    }
    /// Copies `values` into the leaf `id`; `T` must be its element type.
    pub fn set_data<T: Element>(&mut self, id: TensorId, values: &[T]) -> Result<()> {
        let dtype = self.layout(id)?.dtype;
        if dtype != T::DTYPE {
            return Err(Error::DTypeMismatch {
                what: format!("set_data({})", self.label(id)),
                expected: dtype,
                found: T::DTYPE,
            });
        }
        self.set_bytes(id, bytemuck::cast_slice(values))
    }
    /// The host bytes of leaf `id` (`None` for non-leaves and data-less leaves).
    pub fn leaf_bytes(&self, id: TensorId) -> Option<&[u8]> {
        self.entry(id).ok()?.data.as_ref().map(LeafData::bytes)
    }
    /// The values of leaf `id` as `T` (its element type), in storage order.
    pub fn data<T: Element>(&self, id: TensorId) -> Result<&[T]> {
        let dtype = self.layout(id)?.dtype;
        if dtype != T::DTYPE {
            return Err(Error::DTypeMismatch {
                what: format!("data({})", self.label(id)),
                expected: dtype,
                found: T::DTYPE,
            });
        }
        let bytes = self.leaf_bytes(id).ok_or_else(|| Error::NoData(self.label(id)))?;
        // host buffers are 64-byte aligned and hold whole elements, so this cannot fail
        bytemuck::try_cast_slice(bytes).map_err(|e| Error::Invalid(format!("data({}): {e}", self.label(id))))
    }

    /// Adds a header: records which storages it reads and writes (program
    /// order), refuses overlapping writes, and returns its id.
    pub(crate) fn push(&self, t: Tensor) -> Result<TensorId> {
        self.push_entry(t, None)
    }

    /// [`Context::push`] with a leaf's data. Holds the history for the whole
    /// push, so ids are handed out in program order.
    fn push_entry(&self, mut t: Tensor, data: Option<LeafData>) -> Result<TensorId> {
        let mut history = self.history();
        let idx = self.entries.count();
        let id = TensorId {
            ctx: self.id,
            idx: u32::try_from(idx).map_err(|_| Error::Invalid("too many tensors".into()))?,
            epoch: self.epoch(),
        };
        let mut roots = Vec::with_capacity(t.src.len());
        for &s in &t.src {
            roots.push(self.tensor(s)?.view_src.unwrap_or(s));
        }
        if t.op.is_compute() {
            if t.writes_in_place() {
                self.check_write(&t)?;
            }
            roots.sort_unstable();
            roots.dedup();
            for r in roots {
                let h = history.entry(r).or_default();
                if let Some(w) = h.last_write {
                    t.after.push(w);
                }
                h.readers_since_write.push(id);
            }
            if let (true, Some(root)) = (t.writes_in_place(), t.view_src) {
                let h = history.entry(root).or_default();
                t.after_readers = h.readers_since_write.drain(..).filter(|&r| r != id).collect();
                h.last_write = Some(id);
            }
            t.after.sort_unstable();
            t.after.dedup();
        }
        let at = self.entries.push(Entry { tensor: t, data, epoch: id.epoch });
        if at != idx {
            return Err(Error::internal(format!("tensor {idx} was stored at {at}")));
        }
        Ok(id)
    }

    /// The most recent node that wrote `id`'s storage, if any.
    pub(crate) fn last_write(&self, id: TensorId) -> Option<TensorId> {
        let root = self.storage_root(id).ok()?;
        self.history().get(&root).and_then(|h| h.last_write)
    }

    /// A write must not map two elements to one byte, nor partly overlap a source.
    fn check_write(&self, t: &Tensor) -> Result<()> {
        let op = t.op.name();
        let (Some(root), l) = (t.view_src, &t.layout) else { return Ok(()) };
        if self.is_read_only(root) {
            return Err(Error::ReadOnly(format!("{} (written by {op})", self.label(root))));
        }
        if l.self_overlaps() {
            return Err(Error::overlap(
                op,
                format!("destination ne={:?} nb={:?} maps several elements to the same bytes", l.ne, l.nb),
            ));
        }
        for &s in &t.src {
            let st = self.tensor(s)?;
            if st.view_src.unwrap_or(s) != root {
                continue;
            }
            if st.layout.overlap(st.view_offs, l, t.view_offs) == Overlap::Partial {
                return Err(Error::overlap(
                    op,
                    format!(
                        "source {} (ne={:?} nb={:?} offset {}) partly overlaps the destination (ne={:?} nb={:?} offset {}) in the same storage",
                        self.label(s), st.layout.ne, st.layout.nb, st.view_offs, l.ne, l.nb, t.view_offs
                    ),
                ));
            }
        }
        Ok(())
    }
}
