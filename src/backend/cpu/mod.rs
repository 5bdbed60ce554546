//! The CPU executor: runs a planned graph on a rayon pool, node by node in the
//! graph's order, each node split across threads by rows or blocks.

mod copy;
mod elementwise;
mod matmul;
mod mem;
mod norm;
mod reduce;
mod rope;
mod rows;
mod shape;
mod softmax;

use std::collections::HashMap;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::host::HostBuffer;
use crate::plan::{Allocator, Place, Plan, ReuseRules, CPU_ALIGNMENT};
use crate::tensor::{Op, TensorId};
use mem::{Exec, Strided};

/// Runs graphs on the CPU.
pub struct CpuBackend {
    pool: rayon::ThreadPool,
    poison: bool,
    repack: bool,
}

/// What the CPU kernels allow the planner: 64-byte alignment, and writing a
/// result over a source with the same layout for the single-pass kernels
/// (elementwise ops read each element before writing it; a copy onto an
/// identical layout is a no-op). `mul_mat` and reductions never.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuRules;

impl ReuseRules for CpuRules {
    fn alignment(&self) -> usize {
        CPU_ALIGNMENT
    }
    fn may_overwrite_source(&self, op: &Op, slot: usize) -> bool {
        match op {
            Op::Binary(_) => slot <= 1,
            Op::Scale(_) | Op::Unary(_) | Op::Cont | Op::Dup => slot == 0,
            // diag_mask_inf reads each element once, right before writing it
            Op::DiagMaskInf { .. } => slot == 0,
            _ => false,
        }
    }
}

impl std::fmt::Debug for CpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CpuBackend({} threads)", self.threads())
    }
}

/// The memory of one planned graph on the CPU: the plan buffer and the
/// backend's copies of leaves the graph writes into. Holds the plan it was
/// made for; reads results back with [`CpuStorage::read_f32`].
#[derive(Debug)]
pub struct CpuStorage {
    plan: Plan,
    buffer: HostBuffer,
    leaf_copies: HashMap<TensorId, HostBuffer>,
    /// Repacked weight matrices by leaf ([`CpuBackend::with_repacked_weights`]);
    /// `None` for a leaf that does not qualify.
    packed: HashMap<TensorId, Option<HostBuffer>>,
}

/// Where one storage root's bytes are, for one compute.
#[derive(Clone, Copy)]
struct Region {
    base: *mut u8,
    len: usize,
    writable: bool,
}

impl CpuBackend {
    /// A backend with `threads` worker threads (0: one per core).
    pub fn new(threads: usize) -> Result<CpuBackend> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("rgml-cpu-{i}"))
            .build()
            .map_err(|e| Error::Unavailable { what: "CPU thread pool".into(), why: e.to_string() })?;
        Ok(CpuBackend { pool, poison: false, repack: false })
    }
    /// Poison mode (a debug aid): before a run the plan buffer (inputs
    /// excepted) is filled with NaN bytes, and every range the plan frees is
    /// refilled with NaN right after its last use, so a kernel that reads freed
    /// or unwritten memory produces NaN instead of a plausible value.
    pub fn with_poison(mut self, poison: bool) -> CpuBackend {
        self.poison = poison;
        self
    }
    /// Repacked weights (off by default: weights are read in place). When on,
    /// a Q4_0 (AVX2 or AVX-512 VNNI) or Q4_K (AVX-512 VNNI) weight matrix that
    /// is a read-only file mapping (a GGUF leaf, see [`crate::load_gguf`]), 2-D
    /// with packed rows, is repacked for the tile kernel the first time a
    /// `mul_mat` reads it ([`crate::quant::tile::TileKernel::packs`]): its storage
    /// keeps the repacked copy (as many bytes again as the weights) for every
    /// later compute and graph it is rebound to. Results are bit for bit the
    /// same; a matrix-vector product runs about 1.4–2× faster (see the README).
    pub fn with_repacked_weights(mut self, repack: bool) -> CpuBackend {
        self.repack = repack;
        self
    }
    /// Whether [`CpuBackend::with_repacked_weights`] is on.
    pub fn repacks_weights(&self) -> bool {
        self.repack
    }
    /// Number of worker threads.
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Runs `f` inside this backend's rayon pool (rayon's `install`): rayon's
    /// parallel iterators in `f` use the executor's worker threads, as a
    /// baseline measured beside it should.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.pool.install(f)
    }

    /// Memory for `graph` placed by `plan`: a zeroed plan buffer, and copies of
    /// the leaves the graph writes, taken from the context now.
    pub fn alloc(&self, ctx: &Context, graph: &Graph, plan: Plan) -> Result<CpuStorage> {
        let leaf_copies = leaf_copies(ctx, graph, &plan, HashMap::new())?;
        Ok(CpuStorage { buffer: HostBuffer::zeroed(plan.buffer_size())?, plan, leaf_copies, packed: HashMap::new() })
    }
    /// Like [`CpuBackend::alloc`], with a buffer of `capacity` bytes so that
    /// other plans up to that size can be bound later ([`CpuStorage::rebind`]).
    pub fn alloc_with_capacity(&self, ctx: &Context, graph: &Graph, plan: Plan, capacity: usize) -> Result<CpuStorage> {
        let mut st = self.alloc(ctx, graph, plan)?;
        if capacity > st.buffer.len() {
            st.buffer = HostBuffer::zeroed(capacity)?;
        }
        Ok(st)
    }

    /// Runs every node of `graph` in order. Leaves are read from `ctx` (in place,
    /// no copy) except those the graph writes, which live in `storage`.
    pub fn compute(&self, ctx: &Context, graph: &Graph, storage: &mut CpuStorage) -> Result<()> {
        graph.check_context(ctx)?;
        storage.plan.check_graph(graph)?;
        let regions = storage.regions(ctx, graph)?;
        if self.poison {
            storage.poison_all(ctx, graph)?;
        }
        let ex = Exec { pool: Some(&self.pool) };
        for (step, &id) in graph.nodes().iter().enumerate() {
            let t = ctx.tensor(id)?;
            if t.op().is_metadata() {
                continue;
            }
            let bind = |s: TensorId| bind(ctx, &regions, s, false);
            let dst = bind(id).and_then(|_| self::bind(ctx, &regions, id, true))?;
            let src = t.src();
            match t.op() {
                Op::Cont | Op::Dup | Op::Cpy => copy::copy(&ex, t.op().name(), dst, bind(src[0])?)?,
                Op::Binary(op) => elementwise::binary(&ex, op, dst, bind(src[0])?, bind(src[1])?)?,
                Op::Scale(s) => elementwise::scale(&ex, s, dst, bind(src[0])?)?,
                Op::Unary(op) => elementwise::unary(&ex, op, dst, bind(src[0])?)?,
                Op::SumRows => reduce::sum_rows(&ex, dst, bind(src[0])?)?,
                Op::MulMat => {
                    let packed = match self.repack {
                        true => storage.packed(ctx, &ex, src[0])?,
                        false => None,
                    };
                    matmul::mul_mat(&ex, dst, bind(src[0])?, bind(src[1])?, packed)?
                }
                Op::GetRows => rows::get_rows(&ex, dst, bind(src[0])?, bind(src[1])?)?,
                Op::SetRows => rows::set_rows(&ex, dst, bind(src[1])?, bind(src[2])?)?,
                Op::RmsNorm { eps } => norm::rms_norm(&ex, eps, dst, bind(src[0])?)?,
                Op::Norm { eps } => norm::norm(&ex, eps, dst, bind(src[0])?)?,
                Op::SoftMax { scale, max_bias } => {
                    let mask = src.get(1).map(|&m| bind(m)).transpose()?;
                    softmax::soft_max(&ex, scale, max_bias, dst, bind(src[0])?, mask)?
                }
                Op::DiagMaskInf { n_past } => softmax::diag_mask_inf(&ex, n_past, dst, bind(src[0])?)?,
                Op::Rope(p) => {
                    let ff = src.get(2).map(|&f| bind(f)).transpose()?;
                    rope::rope(&ex, &p, dst, bind(src[0])?, bind(src[1])?, ff)?
                }
                Op::Concat { dim } => shape::concat(&ex, dim, dst, bind(src[0])?, bind(src[1])?)?,
                Op::Repeat => shape::repeat(&ex, dst, bind(src[0])?)?,
                Op::Leaf | Op::View | Op::Reshape | Op::Transpose | Op::Permute(_) | Op::Expand => {}
            }
            if self.poison {
                storage.poison_ranges(step);
            }
        }
        Ok(())
    }

    /// Plans `graph` (liveness and in-place reuse), allocates and computes it:
    /// the one-call way. Only leaves, inputs and outputs can be read afterwards.
    pub fn run(&self, ctx: &Context, graph: &Graph) -> Result<CpuStorage> {
        let plan = Allocator::new(CpuRules).plan(ctx, graph)?;
        let mut storage = self.alloc(ctx, graph, plan)?;
        self.compute(ctx, graph, &mut storage)?;
        Ok(storage)
    }
}

/// The backend's copies of the leaves `plan` says the graph writes: those in
/// `held` are kept as they are (and so are the rest of `held`), the others are
/// taken from the context.
fn leaf_copies(
    ctx: &Context,
    graph: &Graph,
    plan: &Plan,
    mut held: HashMap<TensorId, HostBuffer>,
) -> Result<HashMap<TensorId, HostBuffer>> {
    graph.check_context(ctx)?;
    plan.check_graph(graph)?;
    let mut copies = HashMap::new();
    for (root, place) in plan.places() {
        if place == Place::LeafCopy {
            let copy = match held.remove(&root) {
                Some(c) => c,
                None => HostBuffer::from_bytes(ctx.leaf_bytes(root).ok_or_else(|| Error::NoData(ctx.label(root)))?)?,
            };
            copies.insert(root, copy);
        }
    }
    // copies the new plan does not use are kept for a later rebind
    copies.extend(held);
    Ok(copies)
}

/// The bytes of tensor `id` during a compute.
fn bind(ctx: &Context, regions: &HashMap<TensorId, Region>, id: TensorId, write: bool) -> Result<Strided> {
    let t = ctx.tensor(id)?;
    let root = t.view_src().unwrap_or(id);
    let r =
        regions.get(&root).ok_or_else(|| Error::Mismatch(format!("{} has no place in the plan", ctx.label(root))))?;
    if write && !r.writable {
        return Err(Error::Invalid(format!(
            "internal: {} would write the read-only storage of {}",
            ctx.label(id),
            ctx.label(root)
        )));
    }
    Strided::new(r.base, r.len, t.view_offs(), *t.layout())
}

impl CpuStorage {
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
    /// copies this storage already holds are kept as they are (state such as a
    /// KV cache carries over from graph to graph); new ones are taken from the
    /// context.
    pub fn rebind(&mut self, ctx: &Context, graph: &Graph, plan: Plan) -> Result<()> {
        if plan.buffer_size() > self.buffer.len() {
            return Err(Error::Invalid(format!(
                "plan needs a {}-byte buffer but this storage holds {} bytes",
                plan.buffer_size(),
                self.buffer.len()
            )));
        }
        self.leaf_copies = leaf_copies(ctx, graph, &plan, std::mem::take(&mut self.leaf_copies))?;
        // repacked weights stay for later graphs; those of dropped tensors go
        self.packed.retain(|&id, _| ctx.tensor(id).is_ok());
        self.plan = plan;
        Ok(())
    }
    /// Grows the plan buffer to at least `capacity` bytes (its contents are not
    /// kept: the next compute rewrites them; inputs placed in it must be set again).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], the old buffer kept.
    pub fn grow(&mut self, capacity: usize) -> Result<()> {
        if capacity > self.buffer.len() {
            self.buffer = HostBuffer::zeroed(capacity)?;
        }
        Ok(())
    }
    /// Sets the backend's copy of leaf `id` back to the context's data (e.g. to
    /// clear a KV cache).
    pub fn reset_leaf(&mut self, ctx: &Context, id: TensorId) -> Result<()> {
        let bytes = ctx.leaf_bytes(id).ok_or_else(|| Error::NoData(ctx.label(id)))?;
        match self.leaf_copies.get_mut(&id) {
            Some(copy) => {
                copy.as_bytes_mut().copy_from_slice(bytes);
                Ok(())
            }
            None => Err(Error::Invalid(format!("{} is not a leaf this storage keeps a copy of", ctx.label(id)))),
        }
    }

    /// Writes `bytes` into the storage of an input `id` that the plan placed
    /// (a leaf without data in the context, e.g. from a `no_alloc` context).
    pub fn set_bytes(&mut self, ctx: &Context, id: TensorId, bytes: &[u8]) -> Result<()> {
        let t = ctx.tensor(id)?;
        if t.op() != Op::Leaf {
            return Err(Error::Invalid(format!("{} is not a leaf", ctx.label(id))));
        }
        let size = t.layout().nbytes();
        if bytes.len() != size {
            return Err(Error::DataSize { name: ctx.label(id), expected: size, found: bytes.len() });
        }
        let dst = match self.plan.place(id) {
            Some(Place::Buffer { offset }) => &mut self.buffer.as_bytes_mut()[offset..offset + size],
            Some(Place::LeafCopy) => match self.leaf_copies.get_mut(&id) {
                Some(b) => b.as_bytes_mut(),
                None => return Err(Error::NoData(ctx.label(id))),
            },
            Some(Place::Leaf) => {
                return Err(Error::Invalid(format!("{} holds its data in the context: set it there", ctx.label(id))))
            }
            None => return Err(Error::Mismatch(format!("{} is not in this storage's graph", ctx.label(id)))),
        };
        dst.copy_from_slice(bytes);
        Ok(())
    }
    /// [`CpuStorage::set_bytes`] with typed values.
    pub fn set_data<T: crate::host::Element>(&mut self, ctx: &Context, id: TensorId, values: &[T]) -> Result<()> {
        let dtype = ctx.layout(id)?.dtype;
        if dtype != T::DTYPE {
            return Err(Error::DTypeMismatch {
                what: format!("set_data({})", ctx.label(id)),
                expected: dtype,
                found: T::DTYPE,
            });
        }
        self.set_bytes(ctx, id, bytemuck::cast_slice(values))
    }

    /// Poison mode: NaN bytes over the whole buffer except data-less leaves (inputs).
    fn poison_all(&mut self, ctx: &Context, graph: &Graph) -> Result<()> {
        let mut keep: Vec<(usize, usize)> = Vec::new();
        for &leaf in graph.leafs() {
            if let Some(Place::Buffer { offset }) = self.plan.place(leaf) {
                keep.push((offset, ctx.tensor(leaf)?.layout().nbytes()));
            }
        }
        keep.sort_unstable();
        let buf = self.buffer.as_bytes_mut();
        let mut at = 0;
        for (o, n) in keep.into_iter().chain([(buf.len(), 0)]) {
            if o > at {
                buf[at..o].fill(0xFF);
            }
            at = at.max(o + n);
        }
        Ok(())
    }
    /// Poison mode: NaN bytes over the ranges freed after `step`.
    fn poison_ranges(&mut self, step: usize) {
        let buf = self.buffer.as_bytes_mut();
        for &(o, n) in self.plan.freed_after(step) {
            if let Some(r) = buf.get_mut(o..o + n) {
                r.fill(0xFF);
            }
        }
    }

    /// Base and length of every storage root the graph touches.
    fn regions(&mut self, ctx: &Context, graph: &Graph) -> Result<HashMap<TensorId, Region>> {
        let mut out = HashMap::new();
        let buf_base = self.buffer.as_bytes_mut().as_mut_ptr();
        let buf_len = self.buffer.len();
        for &id in graph.leafs().iter().chain(graph.nodes()) {
            let t = ctx.tensor(id)?;
            if t.view_src().is_some() {
                continue;
            }
            let size = t.layout().nbytes();
            let region = match self.plan.place(id) {
                Some(Place::Leaf) => match ctx.leaf_bytes(id) {
                    Some(b) => Region { base: b.as_ptr() as *mut u8, len: b.len(), writable: false },
                    None => return Err(Error::NoData(ctx.label(id))),
                },
                Some(Place::LeafCopy) => {
                    let b = self.leaf_copies.get_mut(&id).ok_or_else(|| Error::NoData(ctx.label(id)))?;
                    Region { base: b.as_bytes_mut().as_mut_ptr(), len: b.len(), writable: true }
                }
                Some(Place::Buffer { offset }) if offset.checked_add(size).is_some_and(|e| e <= buf_len) => {
                    Region { base: buf_base.wrapping_add(offset), len: size, writable: true }
                }
                Some(Place::Buffer { offset }) => {
                    return Err(Error::Mismatch(format!(
                        "{} placed at {offset}+{size} outside the {buf_len}-byte buffer",
                        ctx.label(id)
                    )))
                }
                None => return Err(Error::Mismatch(format!("{} has no place in the plan", ctx.label(id)))),
            };
            out.insert(id, region);
        }
        Ok(out)
    }

    /// Bytes this storage holds in repacked weights
    /// ([`CpuBackend::with_repacked_weights`]; 0 when off or nothing qualified).
    pub fn repacked_bytes(&self) -> usize {
        self.packed.values().flatten().map(HostBuffer::len).sum()
    }

    /// The repacked form of weight leaf `a`, made on first use; `None` when it
    /// does not qualify ([`matmul::repack`]).
    fn packed(&mut self, ctx: &Context, ex: &Exec, a: TensorId) -> Result<Option<&[u8]>> {
        if !self.packed.contains_key(&a) {
            let in_place = self.plan.place(a) == Some(Place::Leaf);
            let p = if in_place { matmul::repack(ex, ctx, a)? } else { None };
            self.packed.insert(a, p);
        }
        Ok(self.packed.get(&a).and_then(|p| p.as_ref()).map(HostBuffer::as_bytes))
    }

    /// The bytes of the storage under `id` (its root's), after the last compute.
    fn root_bytes<'a>(&'a self, ctx: &'a Context, id: TensorId) -> Result<&'a [u8]> {
        let root = ctx.storage_root(id)?;
        if !self.plan.is_retained(root) {
            return Err(Error::Invalid(format!(
                "{} is an intermediate whose memory the plan reuses: mark it as an output (Context::set_output or build_forward_expand) to read it",
                ctx.label(id)
            )));
        }
        match self.plan.place(root) {
            Some(Place::Leaf) => ctx.leaf_bytes(root).ok_or_else(|| Error::NoData(ctx.label(root))),
            Some(Place::LeafCopy) => {
                self.leaf_copies.get(&root).map(HostBuffer::as_bytes).ok_or_else(|| Error::NoData(ctx.label(root)))
            }
            Some(Place::Buffer { offset }) => {
                let size = ctx.tensor(root)?.layout().nbytes();
                self.buffer
                    .as_bytes()
                    .get(offset..offset + size)
                    .ok_or_else(|| Error::Mismatch("plan offset outside buffer".into()))
            }
            None => Err(Error::Mismatch(format!("{} is not in this storage's graph", ctx.label(id)))),
        }
    }

    /// The values of tensor `id` (any type, any layout, views included; block
    /// types dequantized) as f32 in logical order, as they are after the last compute.
    pub fn read_f32(&self, ctx: &Context, id: TensorId) -> Result<Vec<f32>> {
        let t = ctx.tensor(id)?;
        let bytes = self.root_bytes(ctx, id)?;
        // read-only: the copy kernel only reads from its source
        let src = Strided::new(bytes.as_ptr() as *mut u8, bytes.len(), t.view_offs(), *t.layout())?;
        copy::read_f32(src)
    }

    /// The raw bytes of a contiguous tensor `id` (e.g. a quantized result), after the last compute.
    pub fn read_bytes(&self, ctx: &Context, id: TensorId) -> Result<Vec<u8>> {
        let t = ctx.tensor(id)?;
        let l = t.layout();
        if !l.is_contiguous() {
            return Err(Error::NotContiguous { op: "read_bytes", ne: l.ne, nb: l.nb, dtype: l.dtype });
        }
        let bytes = self.root_bytes(ctx, id)?;
        bytes
            .get(t.view_offs()..t.view_offs() + l.nbytes())
            .map(<[u8]>::to_vec)
            .ok_or_else(|| Error::Mismatch("view outside its storage".into()))
    }
}

#[cfg(test)]
mod tests;
