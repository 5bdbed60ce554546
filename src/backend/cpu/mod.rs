//! The CPU executor: runs a planned graph on a rayon pool, node by node in the
//! graph's order, each node split across threads by rows or blocks.

mod copy;
mod elementwise;
mod matmul;
mod mem;
mod reduce;

use std::collections::HashMap;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::host::HostBuffer;
use crate::plan::{Place, Plan, CPU_ALIGNMENT};
use crate::tensor::{Op, TensorId};
use mem::{Exec, Strided};

/// Runs graphs on the CPU.
pub struct CpuBackend {
    pool: rayon::ThreadPool,
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
        Ok(CpuBackend { pool })
    }
    /// Number of worker threads.
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Memory for `graph` placed by `plan`: a zeroed plan buffer, and copies of
    /// the leaves the graph writes, taken from the context now.
    pub fn alloc(&self, ctx: &Context, graph: &Graph, plan: Plan) -> Result<CpuStorage> {
        graph.check_context(ctx)?;
        plan.check_graph(graph)?;
        let mut leaf_copies = HashMap::new();
        for (root, place) in plan.places() {
            if place == Place::LeafCopy {
                let bytes = ctx.leaf_bytes(root).ok_or_else(|| Error::NoData(ctx.label(root)))?;
                leaf_copies.insert(root, HostBuffer::from_bytes(bytes));
            }
        }
        Ok(CpuStorage { buffer: HostBuffer::zeroed(plan.buffer_size()), plan, leaf_copies })
    }

    /// Runs every node of `graph` in order. Leaves are read from `ctx` (in place,
    /// no copy) except those the graph writes, which live in `storage`.
    pub fn compute(&self, ctx: &Context, graph: &Graph, storage: &mut CpuStorage) -> Result<()> {
        graph.check_context(ctx)?;
        storage.plan.check_graph(graph)?;
        let regions = storage.regions(ctx, graph)?;
        let ex = Exec { pool: Some(&self.pool) };
        for &id in graph.nodes() {
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
                Op::MulMat => matmul::mul_mat(&ex, dst, bind(src[0])?, bind(src[1])?)?,
                Op::Leaf | Op::View | Op::Reshape | Op::Transpose | Op::Permute(_) | Op::Expand => {}
            }
        }
        Ok(())
    }

    /// Plans `graph` naively, allocates and computes it: the one-call way.
    pub fn run(&self, ctx: &Context, graph: &Graph) -> Result<CpuStorage> {
        let plan = Plan::naive(ctx, graph, CPU_ALIGNMENT)?;
        let mut storage = self.alloc(ctx, graph, plan)?;
        self.compute(ctx, graph, &mut storage)?;
        Ok(storage)
    }
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

    /// The values of tensor `id` (any float or integer type, any layout, views
    /// included) as f32 in logical order, as they are after the last compute.
    pub fn read_f32(&self, ctx: &Context, id: TensorId) -> Result<Vec<f32>> {
        let t = ctx.tensor(id)?;
        let root = t.view_src().unwrap_or(id);
        let bytes: &[u8] = match self.plan.place(root) {
            Some(Place::Leaf) => ctx.leaf_bytes(root).ok_or_else(|| Error::NoData(ctx.label(root)))?,
            Some(Place::LeafCopy) => {
                self.leaf_copies.get(&root).map(HostBuffer::as_bytes).ok_or_else(|| Error::NoData(ctx.label(root)))?
            }
            Some(Place::Buffer { offset }) => {
                let size = ctx.tensor(root)?.layout().nbytes();
                self.buffer
                    .as_bytes()
                    .get(offset..offset + size)
                    .ok_or_else(|| Error::Mismatch("plan offset outside buffer".into()))?
            }
            None => return Err(Error::Mismatch(format!("{} is not in this storage's graph", ctx.label(id)))),
        };
        // read-only: the copy kernel only reads from its source
        let src = Strided::new(bytes.as_ptr() as *mut u8, bytes.len(), t.view_offs(), *t.layout())?;
        copy::read_f32(src)
    }
}

#[cfg(test)]
mod tests;
