//! The CUDA backend: a device and the settings of its runs
//! ([`CudaConfig`]); a compute binds the storage's regions and runs the
//! executor loop with the CUDA kernels, eagerly or as a CUDA graph.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaStream};

use super::device::Device;
use super::graphs::Key;
use super::launch::cuda_err;
use super::matmul::{mmvq, QuantPath};
use super::run::{check_types, CudaKernels};
use super::storage::CudaStorage;
use crate::backend::cuda_config::{CudaConfig, CudaRules};
use crate::backend::exec::{self, Run};
use crate::backend::traits::{Backend, BackendStorage};
use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::plan::{Allocator, Plan};
use crate::tensor::TensorId;

/// Runs graphs on one CUDA device (see the module docs for what is wired).
/// Clones share the device (its context, stream and loaded kernels).
#[derive(Clone)]
pub struct CudaBackend {
    pub(crate) dev: Arc<Device>,
    poison: bool,
    quant: QuantPath,
    graphs: bool,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaBackend(#{} {}, {})", self.dev.ordinal, self.dev.name, self.dev.arch)
    }
}

impl CudaBackend {
    /// Opens device `ordinal` with [`CudaConfig::default`]. Errors with
    /// [`Error::Unavailable`] (never a panic) when a CUDA library is missing,
    /// no device is present, or the ordinal is out of range.
    pub fn new(ordinal: usize) -> Result<CudaBackend> {
        CudaBackend::with_config(ordinal, CudaConfig::default())
    }
    /// Opens device `ordinal` with the settings `config`.
    pub fn with_config(ordinal: usize, config: CudaConfig) -> Result<CudaBackend> {
        let dev = Arc::new(Device::open(ordinal)?);
        let quant = QuantPath { staged: config.staged_mmvq, dequant_from: config.dequant_gemm_from.map(|n| n as i64) };
        Ok(CudaBackend { dev, poison: false, quant, graphs: config.graphs })
    }
    /// Poison mode (a debug aid, as [`CpuBackend::with_poison`](crate::CpuBackend::with_poison)):
    /// before a run the plan buffer (inputs placed in it excepted) is filled
    /// with NaN bytes (0xFF), and every range the plan frees is refilled right
    /// after its last use, so a planner bug shows as NaN.
    pub fn with_poison(mut self, poison: bool) -> CudaBackend {
        self.poison = poison;
        self
    }
    /// True in poison mode.
    pub fn poison(&self) -> bool {
        self.poison
    }
    /// [`CudaConfig::staged_mmvq`] for this backend.
    pub fn with_staged_mmvq(mut self, staged: bool) -> CudaBackend {
        self.quant.staged = staged;
        self
    }
    /// [`CudaConfig::dequant_gemm_from`] for this backend (`Some(0)` counts as 1).
    pub fn with_dequant_gemm(mut self, from: Option<usize>) -> CudaBackend {
        self.quant.dequant_from = from.map(|n| n.max(1) as i64);
        self
    }
    /// [`CudaConfig::graphs`] for this backend.
    pub fn with_graphs(mut self, graphs: bool) -> CudaBackend {
        self.graphs = graphs;
        self
    }
    /// Whether the CUDA kernels compute with `dtype`: false for F64, and a
    /// graph whose computed nodes read or write one is refused before
    /// anything is uploaded (I64 is only `count_equal`'s count: another op on
    /// it is refused when it runs).
    pub fn handles(dtype: DType) -> bool {
        super::kernels::handles(dtype)
    }
    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.dev.ordinal
    }
    /// The device's name.
    pub fn name(&self) -> &str {
        &self.dev.name
    }
    /// The NVRTC architecture kernels are compiled for (`compute_XY`).
    pub fn arch(&self) -> &str {
        &self.dev.arch
    }
    /// The cudarc context. Its event tracking is off (the backend orders all
    /// of its work on one stream): slices made from it do not synchronize
    /// across streams by themselves.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.dev.ctx
    }
    /// A pinned (page-locked) host buffer of `bytes` zeros (one byte for 0),
    /// the fast source of host-to-device copies.
    pub fn pinned_zeroed(&self, bytes: usize) -> Result<cudarc::driver::PinnedHostSlice<u8>> {
        super::upload::pinned_zeroed(&self.dev.ctx, bytes)
    }
    /// The one stream every operation of this backend is ordered on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.dev.stream
    }
    /// Kernel `func` of module `module`, compiling and loading the module at first use.
    pub fn function(&self, module: &'static str, func: &'static str) -> Result<CudaFunction> {
        self.dev.function(module, func)
    }

    /// Device memory for `graph` placed by `plan` (made with [`CudaRules`] or
    /// any rules with 256-byte alignment): a zeroed plan buffer, and every
    /// data-holding leaf uploaded now, once.
    pub fn alloc(&self, ctx: &Context, graph: &Graph, plan: Plan) -> Result<CudaStorage> {
        self.alloc_with_capacity(ctx, graph, plan, 0)
    }
    /// Like [`CudaBackend::alloc`], with a plan buffer of at least `capacity`
    /// bytes so that other plans up to that size can be bound later
    /// ([`CudaStorage::rebind`]).
    pub fn alloc_with_capacity(
        &self,
        ctx: &Context,
        graph: &Graph,
        plan: Plan,
        capacity: usize,
    ) -> Result<CudaStorage> {
        let _stream = self.dev.exclusive()?;
        graph.check_context(ctx)?;
        // before any weight is uploaded
        check_types(ctx, graph)?;
        CudaStorage::new(&self.dev, ctx, graph, plan, capacity)
    }

    /// Plans `graph` with [`CudaRules`], allocates and computes it: the
    /// one-call way. Only leaves, inputs and outputs can be read afterwards.
    pub fn run(&self, ctx: &Context, graph: &Graph) -> Result<CudaStorage> {
        let plan = Allocator::new(CudaRules).plan(ctx, graph)?;
        let mut storage = self.alloc(ctx, graph, plan)?;
        self.compute(ctx, graph, &mut storage)?;
        Ok(storage)
    }

    /// Runs every node of `graph` in order on the device, then waits for the
    /// stream. Index errors of `get_rows`/`set_rows` and expert ids of
    /// `mul_mat_id` out of range are reported after the run.
    /// Data-holding leaves flagged as inputs are uploaded again first (so
    /// `Context::set_data` between computes is seen, as on the CPU); in
    /// poison mode the plan buffer is filled with NaN bytes first and every
    /// range the plan frees after a step is refilled right after it. With
    /// [`CudaBackend::with_graphs`], repeated runs launch a CUDA graph.
    pub fn compute(&self, ctx: &Context, graph: &Graph, storage: &mut CudaStorage) -> Result<()> {
        self.compute_steps(ctx, graph, storage, 0..graph.nodes().len())
    }

    /// [`CudaBackend::compute`] of the nodes at positions `steps` only
    /// ([`Backend::compute_steps`]; a CUDA graph per range).
    pub fn compute_steps(
        &self,
        ctx: &Context,
        graph: &Graph,
        storage: &mut CudaStorage,
        steps: Range<usize>,
    ) -> Result<()> {
        graph.check_context(ctx)?;
        exec::check_steps(graph, &steps)?;
        check_types(ctx, graph)?;
        storage.plan.check_graph(graph)?;
        if !Arc::ptr_eq(&storage.dev, &self.dev) {
            return Err(Error::Mismatch("storage was allocated by another CudaBackend".into()));
        }
        let dev = &*self.dev;
        let _stream = dev.exclusive()?;
        let regions = storage.regions(ctx, graph)?;
        storage.refresh_inputs(ctx)?;
        // the index-error flag, then each set_rows' claims: only graphs that
        // have them pay for the buffer, its zeroing and the read-back
        let claims = exec::index_claims(ctx, graph)?;
        let flags = match claims {
            Some(n) => storage.zeroed_flags(1 + n)?,
            None => 0,
        };
        if self.poison {
            dev.scratch.release()?;
            let buf = storage.buffer_extent();
            let mut k = self.kernels(flags, buf);
            if steps.start == 0 {
                exec::poison_all(&mut k, ctx, graph, &storage.plan, buf.1)?;
            }
            let poison = Some(&storage.plan);
            exec::run(&mut k, &Run { ctx, graph, regions: &regions, poison, profile: None, steps })?;
        } else if self.graphs {
            let key = Key::new(graph, &regions, flags, self.quant, &steps);
            let mut eager = || self.run_nodes(ctx, graph, &regions, flags, steps.clone());
            storage.graphs.run(dev, key, &mut eager)?;
        } else {
            self.run_nodes(ctx, graph, &regions, flags, steps)?;
        }
        dev.stream.synchronize().map_err(cuda_err("synchronize"))?;
        let flag = if claims.is_some() { storage.first_flag()? } else { 0 };
        // bit 0: a row index out of range; bit 1: a set_rows claim taken twice; bit 2: an expert id out of range
        match flag {
            0 => Ok(()),
            f if f & 1 != 0 => {
                Err(Error::Invalid("get_rows/set_rows: an index is outside the rows of its tensor".into()))
            }
            f if f & 4 != 0 => {
                Err(Error::Invalid("mul_mat_id: an expert id is outside the experts of its weights".into()))
            }
            _ => Err(Error::Invalid("set_rows: two rows are written to the same place".into())),
        }
    }

    /// The kernels of one run: index flags at `flags`, the plan buffer `buf`.
    fn kernels(&self, flags: u64, buf: (u64, usize)) -> CudaKernels<'_> {
        CudaKernels { dev: &self.dev, quant: self.quant, err_ptr: flags, claims_ptr: flags + 4, buf }
    }

    /// Queues the kernels of the nodes at `steps` on the stream (no poison mode).
    fn run_nodes(
        &self,
        ctx: &Context,
        graph: &Graph,
        regions: &exec::Regions<u64>,
        flags: u64,
        steps: Range<usize>,
    ) -> Result<()> {
        self.dev.scratch.release()?;
        exec::run(&mut self.kernels(flags, (0, 0)), &Run { ctx, graph, regions, poison: None, profile: None, steps })
    }

    /// Quantizes `x` (rows of `k` values, `x.len() / k` of them) on the device
    /// exactly as `mul_mat` does for weights of type `w`, and returns the bytes
    /// the CPU's [`quant::dot::quantize_activations`](crate::quant::dot::quantize_activations)
    /// writes for them, row after row (for tests and diagnostics).
    ///
    /// Errors when `w` is not a quantized weight type, `k` is not a whole
    /// number of its partner's blocks, or `x.len()` not a multiple of `k`.
    pub fn quantize_activations(&self, w: DType, x: &[f32], k: usize) -> Result<Vec<u8>> {
        let _stream = self.dev.exclusive()?;
        mmvq::quantize_activations(&self.dev, w, x, k)
    }
}

impl Backend for CudaBackend {
    type Storage = CudaStorage;
    type Rules = CudaRules;

    fn rules(&self) -> CudaRules {
        CudaRules
    }
    fn describe(&self) -> String {
        format!("cuda #{} ({}, {})", self.ordinal(), self.name(), self.arch())
    }
    fn device(&self) -> crate::device::Device {
        crate::device::Device::Cuda(self.ordinal() as u32)
    }
    fn pinned_buffer(&self, bytes: usize) -> Option<Result<Box<dyn crate::backend::traits::PinnedBuffer>>> {
        Some(self.pinned_zeroed(bytes).map(|p| Box::new(Pinned(p)) as Box<dyn crate::backend::traits::PinnedBuffer>))
    }
    fn supports_node(&self, ctx: &Context, id: TensorId) -> bool {
        super::run::node_types_ok(ctx, id).is_ok()
    }
    fn alloc(&self, ctx: &Context, graph: &Graph, plan: Plan) -> Result<CudaStorage> {
        CudaBackend::alloc(self, ctx, graph, plan)
    }
    fn alloc_with_capacity(&self, ctx: &Context, graph: &Graph, plan: Plan, capacity: usize) -> Result<CudaStorage> {
        CudaBackend::alloc_with_capacity(self, ctx, graph, plan, capacity)
    }
    fn compute_steps(
        &self,
        ctx: &Context,
        graph: &Graph,
        storage: &mut CudaStorage,
        steps: Range<usize>,
    ) -> Result<()> {
        CudaBackend::compute_steps(self, ctx, graph, storage, steps)
    }
}

impl BackendStorage for CudaStorage {
    fn plan(&self) -> &Plan {
        CudaStorage::plan(self)
    }
    fn capacity(&self) -> usize {
        CudaStorage::capacity(self)
    }
    fn rebind(&mut self, ctx: &Context, graph: &Graph, plan: Plan) -> Result<()> {
        CudaStorage::rebind(self, ctx, graph, plan)
    }
    fn grow(&mut self, capacity: usize) -> Result<()> {
        CudaStorage::grow(self, capacity)
    }
    fn reset_leaf(&mut self, ctx: &Context, id: TensorId) -> Result<()> {
        CudaStorage::reset_leaf(self, ctx, id)
    }
    fn set_bytes(&mut self, ctx: &Context, id: TensorId, bytes: &[u8]) -> Result<()> {
        CudaStorage::set_bytes(self, ctx, id, bytes)
    }
    fn read_f32(&self, ctx: &Context, id: TensorId) -> Result<Vec<f32>> {
        CudaStorage::read_f32(self, ctx, id)
    }
    fn read_bytes(&self, ctx: &Context, id: TensorId) -> Result<Vec<u8>> {
        CudaStorage::read_bytes(self, ctx, id)
    }
    fn read_bytes_into(&self, ctx: &Context, id: TensorId, out: &mut [u8]) -> Result<()> {
        CudaStorage::read_bytes_into(self, ctx, id, out)
    }
}

/// A pinned host buffer of the device's context.
struct Pinned(cudarc::driver::PinnedHostSlice<u8>);

impl crate::backend::traits::PinnedBuffer for Pinned {
    fn bytes_mut(&mut self) -> Result<&mut [u8]> {
        self.0.as_mut_slice().map_err(super::launch::cuda_err("pinned buffer"))
    }
}
