//! The two traits models are written against: [`Backend`] and [`BackendStorage`].

use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::host::Element;
use crate::plan::{Allocator, Plan, ReuseRules};
use crate::tensor::TensorId;

/// A device that runs planned graphs.
///
/// A compute reads data-holding leaves (weights) from the backend's view of
/// the context: the CPU reads them in place; CUDA uploads them at `alloc` (or
/// the first `rebind` that needs them) and re-uploads leaves flagged as inputs
/// ([`Context::set_input`]) before every compute, so new input data set in the
/// context with [`Context::set_data`] is seen by the next compute on both.
/// Leaves the graph writes (`Place::LeafCopy`, e.g. a KV cache) live in the
/// storage and persist across computes and rebinds.
pub trait Backend {
    /// The memory of one planned graph on this backend.
    type Storage: BackendStorage;
    /// What the backend's kernels allow the planner (alignment, in-place reuse).
    type Rules: ReuseRules;

    /// The planner rules for this backend.
    fn rules(&self) -> Self::Rules;
    /// A short description of the device ("cpu (4 threads)", "cuda #0 …").
    fn describe(&self) -> String;
    /// The memory this backend computes in (a split run sends a
    /// [`Context::to_device`] node to the backend of its device).
    fn device(&self) -> crate::device::Device {
        crate::device::Device::Cpu
    }
    /// `bytes` of page-locked host memory its device copies to and from at
    /// full speed (a split run stages its crossings there); `None` for a
    /// backend without such memory (the CPU's is the host's).
    fn pinned_buffer(&self, bytes: usize) -> Option<Result<Box<dyn PinnedBuffer>>> {
        let _ = bytes;
        None
    }
    /// Whether this backend has a kernel for the op named `op` ([`Op::name`](crate::Op::name));
    /// a model builds its graphs around the ops a backend lacks (every backend
    /// has every op today; [`Backend::supports_node`] also sees the types).
    fn supports(&self, op: &str) -> bool {
        let _ = op;
        true
    }
    /// Whether this backend can run node `id` of `ctx`: its op and the types it
    /// reads and writes ([`SplitBackend`](crate::SplitBackend) sends the nodes
    /// a backend cannot run to the next one).
    fn supports_node(&self, ctx: &Context, id: TensorId) -> bool {
        let _ = (ctx, id);
        true
    }
    /// Whether a `mul_mat` with weights of type `dtype` gives each activation row
    /// the same bits whatever the number of rows beside it (the same kernel and
    /// summation order at every row count): what lets a server batch sequences
    /// without changing any one's results. False unless the backend knows.
    fn mul_mat_rows_invariant(&self, dtype: crate::dtype::DType) -> bool {
        let _ = dtype;
        false
    }
    /// Plans `graph` with this backend's rules.
    fn plan(&self, ctx: &Context, graph: &Graph) -> Result<Plan> {
        Allocator::new(self.rules()).plan(ctx, graph)
    }
    /// Memory for `graph` placed by `plan` (made with this backend's rules).
    fn alloc(&self, ctx: &Context, graph: &Graph, plan: Plan) -> Result<Self::Storage>;
    /// Like [`Backend::alloc`] with a plan buffer of at least `capacity`
    /// bytes, so that larger plans can be bound later
    /// ([`BackendStorage::rebind`]).
    fn alloc_with_capacity(&self, ctx: &Context, graph: &Graph, plan: Plan, capacity: usize) -> Result<Self::Storage>;
    /// Runs every node of `graph` in order; results stay in `storage`.
    fn compute(&self, ctx: &Context, graph: &Graph, storage: &mut Self::Storage) -> Result<()> {
        self.compute_steps(ctx, graph, storage, 0..graph.nodes().len())
    }
    /// Runs the nodes at positions `steps` of [`Graph::nodes`], in order, on
    /// a storage bound to `graph`: a graph run in stages with other work
    /// between them, as [`SplitBackend`](crate::SplitBackend) runs each
    /// backend's parts in one storage. Poison mode fills the buffer at step 0 only.
    ///
    /// # Errors
    /// [`Error::Invalid`] for steps outside the graph, and what the kernels report.
    fn compute_steps(
        &self,
        ctx: &Context,
        graph: &Graph,
        storage: &mut Self::Storage,
        steps: std::ops::Range<usize>,
    ) -> Result<()>;
    /// The time per op kind of the computes since the last call, and starts
    /// a new profile; `None` unless the backend profiles (the CPU's
    /// [`with_profile`](crate::CpuBackend::with_profile)).
    fn take_profile(&self) -> Option<crate::backend::Profile> {
        None
    }
    /// Plans, allocates and computes `graph`: the one-call way.
    fn run(&self, ctx: &Context, graph: &Graph) -> Result<Self::Storage> {
        let plan = self.plan(ctx, graph)?;
        let mut st = self.alloc(ctx, graph, plan)?;
        self.compute(ctx, graph, &mut st)?;
        Ok(st)
    }
}

/// The memory of one planned graph on a backend: the plan buffer and the
/// backend's copies of leaves. Same semantics on every backend.
pub trait BackendStorage {
    /// The plan this storage follows.
    fn plan(&self) -> &Plan;
    /// Bytes of the plan buffer (at least the plan's size).
    fn capacity(&self) -> usize;
    /// Switches to `plan` of another graph over the same context, keeping the
    /// buffer (errors if the plan does not fit: [`BackendStorage::grow`]
    /// first). Copies of written leaves already held are kept as they are (a
    /// KV cache carries over); new ones are taken from the context.
    fn rebind(&mut self, ctx: &Context, graph: &Graph, plan: Plan) -> Result<()>;
    /// Grows the plan buffer to at least `capacity` bytes; its contents are
    /// not kept (inputs placed in it must be set again).
    fn grow(&mut self, capacity: usize) -> Result<()>;
    /// Sets the storage's copy of a leaf the graph writes back to the
    /// context's data (e.g. to clear a KV cache); errors for other tensors.
    fn reset_leaf(&mut self, ctx: &Context, id: TensorId) -> Result<()>;
    /// Writes `bytes` into an input leaf the plan placed in the buffer (or a
    /// written leaf's copy).
    fn set_bytes(&mut self, ctx: &Context, id: TensorId, bytes: &[u8]) -> Result<()>;
    /// [`BackendStorage::set_bytes`] with typed values (checked against the dtype).
    fn set_data<T: Element>(&mut self, ctx: &Context, id: TensorId, values: &[T]) -> Result<()> {
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
    /// The values of `id` as f32 in logical order, after the last compute
    /// (leaves, inputs and outputs; not reused intermediates).
    fn read_f32(&self, ctx: &Context, id: TensorId) -> Result<Vec<f32>>;
    /// The raw bytes of a contiguous tensor `id` after the last compute
    /// ([`Error::NotContiguous`] otherwise).
    fn read_bytes(&self, ctx: &Context, id: TensorId) -> Result<Vec<u8>>;
    /// [`BackendStorage::read_bytes`] into `out`, which must be their size
    /// ([`Error::DataSize`] otherwise): a copy into memory the caller keeps,
    /// such as a [`PinnedBuffer`].
    fn read_bytes_into(&self, ctx: &Context, id: TensorId, out: &mut [u8]) -> Result<()> {
        let bytes = self.read_bytes(ctx, id)?;
        if bytes.len() != out.len() {
            return Err(Error::DataSize { name: ctx.label(id), expected: bytes.len(), found: out.len() });
        }
        out.copy_from_slice(&bytes);
        Ok(())
    }
}

/// Page-locked host memory from a backend ([`Backend::pinned_buffer`]): its
/// device copies to and from it by DMA, at the link's full speed, where
/// pageable memory is staged by the driver first.
pub trait PinnedBuffer: Send {
    /// The bytes, once any copy into or out of them has finished.
    fn bytes_mut(&mut self) -> Result<&mut [u8]>;
}
