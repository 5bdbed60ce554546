//! Device memory of one planned graph: the plan buffer and device copies of
//! the graph's leaves (uploaded once, at [`CudaBackend::alloc`](crate::Backend::alloc) or the first
//! [`CudaStorage::rebind`] that needs them).
//!
//! Leaf copies mirror the CPU storage: a leaf the graph only reads
//! (`Place::Leaf`) gets a read-only upload of the context's data; a leaf the
//! graph writes (`Place::LeafCopy`, e.g. a KV cache) gets its own copy, which
//! keeps what the graphs wrote across computes and rebinds until
//! [`CudaStorage::reset_leaf`]. Copies the current plan does not use are
//! kept aside for a later rebind.

use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};

use super::copy::to_f32_rows;
use super::device::Device;
use super::graphs::GraphCache;
use super::launch::{cuda_err, Bound};
use crate::backend::cuda_config::GraphStats;
use crate::backend::exec::{self, Region, Regions};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::plan::{Place, Plan};
use crate::tensor::TensorId;

/// The memory of one planned graph on a CUDA device: the plan buffer, and
/// device copies of every data-holding leaf the graph reads or writes. Holds
/// the plan it was made for; reads results back with [`CudaStorage::read_f32`].
pub struct CudaStorage {
    pub(crate) dev: Arc<Device>,
    pub(crate) plan: Plan,
    /// Dropped by hand, under the device's stream lock (see `Drop`).
    buffer: ManuallyDrop<CudaSlice<u8>>,
    /// The device data of every `Leaf`/`LeafCopy` root of the current plan.
    leaves: HashMap<TensorId, CudaSlice<u8>>,
    /// Leaf data the current plan does not use, by (leaf, written): written
    /// copies keep their state for a later rebind; read-only uploads save a
    /// re-upload.
    spare: HashMap<(TensorId, bool), CudaSlice<u8>>,
    /// The index-error flag and `set_rows` claims (grow-only, zeroed per compute).
    flags: Option<CudaSlice<i32>>,
    /// The CUDA graphs captured for this storage ([`CudaBackend::with_graphs`](crate::CudaBackend::with_graphs)).
    pub(crate) graphs: GraphCache,
}

impl Drop for CudaStorage {
    /// Frees the device memory under the stream lock: a free is stream-ordered
    /// work, and must not land in a CUDA graph another thread is capturing on
    /// the same device.
    fn drop(&mut self) {
        let dev = self.dev.clone();
        let _stream = dev.exclusive();
        self.graphs.clear();
        self.leaves.clear();
        self.spare.clear();
        self.flags = None;
        // SAFETY: the buffer is not used after this, and `Drop` runs once.
        unsafe { ManuallyDrop::drop(&mut self.buffer) };
    }
}

impl std::fmt::Debug for CudaStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CudaStorage({} buffer bytes, {} leaves, {} kept aside)",
            self.buffer.len(),
            self.leaves.len(),
            self.spare.len()
        )
    }
}

impl CudaStorage {
    /// Device memory for `graph` placed by `plan`: a zeroed plan buffer of at
    /// least `capacity` bytes, and every data-holding leaf uploaded now, once.
    /// The caller holds the device's stream.
    pub(crate) fn new(
        dev: &Arc<Device>,
        ctx: &Context,
        graph: &Graph,
        plan: Plan,
        capacity: usize,
    ) -> Result<CudaStorage> {
        plan.check_graph(graph)?;
        let size = plan.buffer_size().max(capacity).max(1);
        let buffer = dev.stream.alloc_zeros::<u8>(size).map_err(cuda_err("alloc plan buffer"))?;
        let mut st = CudaStorage {
            dev: dev.clone(),
            plan: plan.clone(),
            buffer: ManuallyDrop::new(buffer),
            leaves: HashMap::new(),
            spare: HashMap::new(),
            flags: None,
            graphs: GraphCache::default(),
        };
        st.bind_leaves(ctx, plan)?;
        Ok(st)
    }
    /// The plan buffer's device address and length (for poison mode).
    pub(crate) fn buffer_extent(&mut self) -> (u64, usize) {
        let len = self.buffer.len();
        let (p, _sync) = self.buffer.device_ptr_mut(&self.dev.stream);
        (p, len)
    }
    /// The plan this storage follows.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }
    /// Bytes of the plan buffer this storage holds (at least the plan's size).
    pub fn capacity(&self) -> usize {
        self.buffer.len()
    }
    /// Switches this storage to `plan` (of another graph over the same
    /// context), keeping its buffer; errors if the plan does not fit. Leaf
    /// copies this storage already holds are kept as they are (state such as
    /// a KV cache carries over from graph to graph; weights are not uploaded
    /// again); new ones are uploaded from the context.
    pub fn rebind(&mut self, ctx: &Context, graph: &Graph, plan: Plan) -> Result<()> {
        let dev = self.dev.clone();
        let _stream = dev.exclusive()?;
        graph.check_context(ctx)?;
        plan.check_graph(graph)?;
        if plan.buffer_size() > self.buffer.len() {
            return Err(Error::Invalid(format!(
                "plan needs a {}-byte buffer but this storage holds {} bytes",
                plan.buffer_size(),
                self.buffer.len()
            )));
        }
        self.bind_leaves(ctx, plan)
    }
    /// Grows the plan buffer to at least `capacity` bytes (its contents are
    /// not kept: the next compute rewrites them; inputs placed in it must be
    /// set again). Errors if the device is out of memory (the old buffer is
    /// kept then).
    pub fn grow(&mut self, capacity: usize) -> Result<()> {
        if capacity > self.buffer.len() {
            let dev = self.dev.clone();
            let _stream = dev.exclusive()?;
            let fresh = self.dev.stream.alloc_zeros::<u8>(capacity).map_err(cuda_err("alloc plan buffer"))?;
            drop(ManuallyDrop::into_inner(std::mem::replace(&mut self.buffer, ManuallyDrop::new(fresh))));
            self.graphs.clear();
        }
        Ok(())
    }
    /// What this storage's computes did with CUDA graphs
    /// ([`CudaBackend::with_graphs`](crate::CudaBackend::with_graphs)): runs eager, captured and replayed.
    pub fn graph_stats(&self) -> GraphStats {
        self.graphs.stats().clone()
    }
    /// The address of `n` zeroed ints (the index-error flag, then the
    /// `set_rows` claims), zeroed on the stream before the nodes run.
    pub(crate) fn zeroed_flags(&mut self, n: usize) -> Result<u64> {
        let stream = self.dev.stream.clone();
        if self.flags.as_ref().is_none_or(|f| f.len() < n) {
            self.flags = Some(stream.alloc_zeros::<i32>(n.next_power_of_two()).map_err(cuda_err("alloc flags"))?);
        }
        let flags = self.flags.as_mut().ok_or_else(|| Error::internal("no flag buffer"))?;
        let mut view = flags.slice_mut(0..n);
        stream.memset_zeros(&mut view).map_err(cuda_err("zero flags"))?;
        let ptr = flags.device_ptr_mut(&stream).0;
        Ok(ptr)
    }
    /// The index-error flag after the last compute (0: no error).
    pub(crate) fn first_flag(&self) -> Result<i32> {
        match &self.flags {
            Some(f) => Ok(self.dev.stream.clone_dtoh(&f.slice(0..1)).map_err(cuda_err("download"))?[0]),
            None => Ok(0),
        }
    }
    /// Sets the device copy of leaf `id`, one the graphs write (e.g. a KV
    /// cache), back to the context's data.
    pub fn reset_leaf(&mut self, ctx: &Context, id: TensorId) -> Result<()> {
        let dev = self.dev.clone();
        let _stream = dev.exclusive()?;
        let bytes = ctx.leaf_bytes(id).ok_or_else(|| Error::NoData(ctx.label(id)))?;
        let stream = self.dev.stream.clone();
        let copy = if self.plan.place(id) == Some(Place::LeafCopy) {
            self.leaves.get_mut(&id)
        } else {
            self.spare.get_mut(&(id, true))
        };
        match copy {
            Some(_) if bytes.is_empty() => Ok(()),
            Some(c) if c.len() >= bytes.len() => {
                stream.memcpy_htod(bytes, &mut c.slice_mut(0..bytes.len())).map_err(cuda_err("upload leaf"))
            }
            Some(_) => Err(Error::internal(format!("{}: device copy smaller than its data", ctx.label(id)))),
            None => Err(Error::Invalid(format!("{} is not a leaf this storage keeps a copy of", ctx.label(id)))),
        }
    }

    /// Makes `leaves` hold the device data of every leaf root `plan` places
    /// (taken from what this storage holds, else uploaded from the context),
    /// sets the plan, and keeps the rest aside. Nothing changes on an error.
    fn bind_leaves(&mut self, ctx: &Context, plan: Plan) -> Result<()> {
        let held = |st: &CudaStorage, id: TensorId, written: bool| {
            (st.leaves.contains_key(&id) && (st.plan.place(id) == Some(Place::LeafCopy)) == written)
                || st.spare.contains_key(&(id, written))
        };
        // uploads first (fallible), then an infallible shuffle
        let mut fresh = HashMap::new();
        for (root, place) in plan.places() {
            let written = match place {
                Place::Leaf => false,
                Place::LeafCopy => true,
                Place::Buffer { .. } => continue,
            };
            if !held(self, root, written) {
                let bytes = ctx.leaf_bytes(root).ok_or_else(|| Error::NoData(ctx.label(root)))?;
                fresh.insert(root, self.dev.staging.upload(&self.dev.ctx, &self.dev.stream, bytes)?);
            }
        }
        let mut pool = std::mem::take(&mut self.spare);
        for (id, s) in std::mem::take(&mut self.leaves) {
            pool.insert((id, self.plan.place(id) == Some(Place::LeafCopy)), s);
        }
        for (root, place) in plan.places() {
            let written = match place {
                Place::Leaf => false,
                Place::LeafCopy => true,
                Place::Buffer { .. } => continue,
            };
            if let Some(s) = pool.remove(&(root, written)).or_else(|| fresh.remove(&root)) {
                self.leaves.insert(root, s);
            }
        }
        self.spare = pool;
        self.plan = plan;
        Ok(())
    }

    /// Uploads again the data-holding leaves flagged as inputs that the plan
    /// reads in place (`Place::Leaf`), so that data set in the context since
    /// the last compute is seen (the CPU reads the context directly).
    pub(crate) fn refresh_inputs(&mut self, ctx: &Context) -> Result<()> {
        let stream = self.dev.stream.clone();
        for (root, place) in self.plan.places() {
            if place != Place::Leaf || !ctx.flags(root)?.input {
                continue;
            }
            let bytes = ctx.leaf_bytes(root).ok_or_else(|| Error::NoData(ctx.label(root)))?;
            let dev = self.leaves.get_mut(&root).ok_or_else(|| Error::NoData(ctx.label(root)))?;
            if !bytes.is_empty() && dev.len() >= bytes.len() {
                stream.memcpy_htod(bytes, &mut dev.slice_mut(0..bytes.len())).map_err(cuda_err("upload input"))?;
            }
        }
        Ok(())
    }

    /// The whole plan buffer, downloaded (tests of poison mode).
    #[cfg(test)]
    pub(crate) fn buffer_bytes(&self) -> Result<Vec<u8>> {
        self.dev.stream.clone_dtoh(&*self.buffer).map_err(cuda_err("download"))
    }

    /// The device buffer under `id`'s storage root, the root's first byte in
    /// it and the root's length; errors for intermediates the plan reuses.
    fn root_slice(&self, ctx: &Context, id: TensorId) -> Result<(&CudaSlice<u8>, usize, usize)> {
        let root = ctx.storage_root(id)?;
        if !self.plan.is_retained(root) {
            return Err(Error::Invalid(format!(
                "{} is an intermediate whose memory the plan reuses: mark it as an output to read it",
                ctx.label(id)
            )));
        }
        match self.plan.place(root) {
            Some(Place::Leaf | Place::LeafCopy) => {
                let b = self.leaves.get(&root).ok_or_else(|| Error::NoData(ctx.label(root)))?;
                Ok((b, 0, b.len()))
            }
            Some(Place::Buffer { offset }) => {
                let size = ctx.tensor(root)?.layout().nbytes();
                if offset.checked_add(size).is_none_or(|e| e > self.buffer.len()) {
                    return Err(Error::internal("plan offset outside the buffer"));
                }
                Ok((&*self.buffer, offset, size))
            }
            None => Err(Error::Mismatch(format!("{} is not in this storage's graph", ctx.label(id)))),
        }
    }

    /// The raw bytes of a contiguous tensor `id` (e.g. a quantized result),
    /// after the last compute; [`Error::NotContiguous`] for other layouts, as
    /// on the CPU.
    pub fn read_bytes(&self, ctx: &Context, id: TensorId) -> Result<Vec<u8>> {
        let _stream = self.dev.exclusive()?;
        let (buf, from, n) = self.contiguous_range(ctx, id)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        self.dev.stream.clone_dtoh(&buf.slice(from..from + n)).map_err(cuda_err("download"))
    }

    /// The device bytes of contiguous tensor `id`: its root's buffer, where
    /// they start in it and how many.
    fn contiguous_range(&self, ctx: &Context, id: TensorId) -> Result<(&CudaSlice<u8>, usize, usize)> {
        let t = ctx.tensor(id)?;
        let l = t.layout();
        if !l.is_contiguous() {
            return Err(Error::NotContiguous { op: "read_bytes", ne: l.ne, nb: l.nb, dtype: l.dtype });
        }
        let (buf, start, len) = self.root_slice(ctx, id)?;
        let n = l.nbytes();
        if t.view_offs().checked_add(n).is_none_or(|e| e > len) {
            return Err(Error::internal("view outside its storage"));
        }
        Ok((buf, start + t.view_offs(), n))
    }

    /// [`CudaStorage::read_bytes`] into `out` (their size): one synchronous
    /// copy, at full speed when `out` is pinned memory.
    pub fn read_bytes_into(&self, ctx: &Context, id: TensorId, out: &mut [u8]) -> Result<()> {
        let _stream = self.dev.exclusive()?;
        let (buf, from, n) = self.contiguous_range(ctx, id)?;
        if out.len() != n {
            return Err(Error::DataSize { name: ctx.label(id), expected: n, found: out.len() });
        }
        if n == 0 {
            return Ok(());
        }
        self.dev.stream.memcpy_dtoh(&buf.slice(from..from + n), out).map_err(cuda_err("download"))
    }

    /// Writes `bytes` into the device storage of an input leaf `id` that the
    /// plan placed (in the plan buffer, or the device copy of a leaf the graph
    /// writes). A leaf that holds its data in the context is set there.
    pub fn set_bytes(&mut self, ctx: &Context, id: TensorId, bytes: &[u8]) -> Result<()> {
        let dev = self.dev.clone();
        let _stream = dev.exclusive()?;
        let t = ctx.tensor(id)?;
        if !t.op().is_leaf() && !self.plan.is_external(id) {
            return Err(Error::Invalid(format!("{} is not a leaf nor an external root", ctx.label(id))));
        }
        let size = t.layout().nbytes();
        if bytes.len() != size {
            return Err(Error::DataSize { name: ctx.label(id), expected: size, found: bytes.len() });
        }
        if size == 0 {
            return Ok(());
        }
        let stream = self.dev.stream.clone();
        let r = match self.plan.place(id) {
            Some(Place::Buffer { offset }) if offset + size <= self.buffer.len() => {
                stream.memcpy_htod(bytes, &mut self.buffer.slice_mut(offset..offset + size))
            }
            Some(Place::Leaf) => {
                // as on the CPU: compute uploads input leaves from the context again
                return Err(Error::Invalid(format!("{} holds its data in the context: set it there", ctx.label(id))));
            }
            Some(Place::LeafCopy) => match self.leaves.get_mut(&id) {
                Some(b) if b.len() >= size => stream.memcpy_htod(bytes, &mut b.slice_mut(0..size)),
                _ => return Err(Error::NoData(ctx.label(id))),
            },
            Some(Place::Buffer { .. }) => return Err(Error::internal("plan offset outside the buffer")),
            None => return Err(Error::Mismatch(format!("{} is not in this storage's graph", ctx.label(id)))),
        };
        r.map_err(cuda_err("upload input"))
    }
    /// [`CudaStorage::set_bytes`] with typed values (checked against the dtype).
    pub fn set_data<T: crate::host::Element>(&mut self, ctx: &Context, id: TensorId, values: &[T]) -> Result<()> {
        crate::backend::traits::BackendStorage::set_data(self, ctx, id, values)
    }

    /// Device base and length of every storage root the graph touches.
    pub(crate) fn regions(&mut self, ctx: &Context, graph: &Graph) -> Result<Regions<u64>> {
        let stream = self.dev.stream.clone();
        let buf_base = {
            let (p, _sync) = self.buffer.device_ptr_mut(&stream);
            p
        };
        let leaves = &mut self.leaves;
        let leaf = |id: TensorId, place: Place| {
            let b = leaves.get_mut(&id).ok_or_else(|| Error::NoData(ctx.label(id)))?;
            let len = b.len();
            let (base, _sync) = b.device_ptr_mut(&stream);
            Ok(Region { base, len, writable: place == Place::LeafCopy })
        };
        exec::regions(ctx, graph, &self.plan, self.buffer.len(), leaf, |offset| buf_base + offset as u64)
    }

    /// The values of tensor `id` (any layout, views included; F32/F16/BF16/I32
    /// and the 12 block types, dequantized on the device bit-identically to
    /// the CPU, transposed quantized views included) as f32 in logical order,
    /// as they are after the last compute.
    pub fn read_f32(&self, ctx: &Context, id: TensorId) -> Result<Vec<f32>> {
        let l = *ctx.tensor(id)?.layout();
        if l.dtype == crate::dtype::DType::I64 && l.is_contiguous() {
            // no kernel reads I64 (count_equal writes it): converted here, as the CPU does
            let bytes = self.read_bytes(ctx, id)?;
            return Ok(bytes
                .chunks_exact(8)
                .map(|b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as f32)
                .collect());
        }
        let _stream = self.dev.exclusive()?;
        let t = ctx.tensor(id)?;
        let stream = &self.dev.stream;
        let (slice, offset, len) = self.root_slice(ctx, id)?;
        let base = slice.device_ptr(stream).0 + offset as u64;
        let src = Bound::new(base, len, t.view_offs(), *t.layout())?;
        if src.l.is_empty() {
            return Ok(Vec::new());
        }
        let (scratch, _) = to_f32_rows(&self.dev, &src)?;
        stream.clone_dtoh(&scratch).map_err(cuda_err("download"))
    }
}
