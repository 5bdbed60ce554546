//! The CPU backend: its thread pools and settings; a compute binds the
//! storage's regions and runs the executor loop with the CPU kernels in one
//! session of the graph pool.

use super::kernels::CpuKernels;
use super::mem::Exec;
use super::pool::GraphPool;
use super::storage::CpuStorage;
use std::ops::Range;
use std::sync::Mutex;

use crate::backend::exec;
use crate::backend::profile::Profile;
use crate::backend::traits::{Backend, BackendStorage};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::plan::{Allocator, Plan, ReuseRules, CPU_ALIGNMENT};
use crate::tensor::TensorId;

/// Runs graphs on the CPU.
pub struct CpuBackend {
    /// Every kernel's threads.
    pool: GraphPool,
    /// The threads of the f32 GEMM crate (large f32 products), which runs on rayon.
    gemm: rayon::ThreadPool,
    poison: bool,
    repack: bool,
    /// Tile kernels at every row count ([`CpuBackend::with_row_invariant_products`]).
    tiles_always: bool,
    /// The node times since the last `take_profile`, when profiling.
    profile: Option<Mutex<Profile>>,
}

/// What the CPU kernels allow the planner: 64-byte alignment, and the ops'
/// own in-place rules ([`Op::may_overwrite`](crate::Op::may_overwrite)).
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuRules;

impl ReuseRules for CpuRules {
    fn alignment(&self) -> usize {
        CPU_ALIGNMENT
    }
}

impl std::fmt::Debug for CpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // the kernels' level, since RGML_SIMD may cap it below the CPU's
        let simd = crate::quant::dot::SimdLevel::detect();
        write!(f, "CpuBackend({} threads, {})", self.threads(), simd.name())
    }
}

/// How many threads per available core a backend may ask for: a few more than cores can
/// help where a thread stalls, thousands only exhaust the system.
pub const MAX_THREADS_PER_CORE: usize = 4;

impl CpuBackend {
    /// A backend with `threads` worker threads (0: one per core).
    ///
    /// # Errors
    /// [`Error::Invalid`] for more than [`MAX_THREADS_PER_CORE`] threads per core this
    /// process may use, before any thread starts; [`Error::Unavailable`] if the system
    /// refuses a thread.
    pub fn new(threads: usize) -> Result<CpuBackend> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let max = cores.saturating_mul(MAX_THREADS_PER_CORE);
        if threads > max {
            return Err(Error::Invalid(format!(
                "{threads} threads asked for, but this machine runs {cores} at once: at most {max} \
                 ({MAX_THREADS_PER_CORE} per core) are allowed, 0 means one per core"
            )));
        }
        let pool = GraphPool::new(threads)?;
        let gemm = rayon::ThreadPoolBuilder::new()
            .num_threads(pool.threads())
            .thread_name(|i| format!("rgml-gemm-{i}"))
            .build()
            .map_err(|e| Error::Unavailable { what: "CPU thread pool".into(), why: e.to_string() })?;
        Ok(CpuBackend { pool, gemm, poison: false, repack: false, tiles_always: false, profile: None })
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
    /// a weight matrix whose type has a repacked tile kernel at this CPU's
    /// level ([`crate::quant::tile::TileKernel::packs`]: the AVX-512 VNNI and
    /// AVX2 tile types) that is a read-only file mapping (a GGUF leaf, see
    /// [`crate::load_gguf`]), 2-D with packed rows, is repacked the first time
    /// a `mul_mat` reads it: its storage keeps the repacked copy (as many bytes
    /// again as the weights) for every later compute and graph it is rebound
    /// to. A repacked product runs the tile at every batch size: the bits of
    /// the tile on the weights in place, which those take from the tile's
    /// `min_rows` (below it they run the dot kernels, equal to rounding).
    /// Matrix-vector products stream the weights sequentially (see the README).
    pub fn with_repacked_weights(mut self, repack: bool) -> CpuBackend {
        self.repack = repack;
        self
    }
    /// Row-invariant products (off by default): a weight type with a tile kernel
    /// runs it at every activation row count, in place too, where it otherwise
    /// takes the dot kernels below the tile's `min_rows` (their results differ
    /// from the tile's by rounding). Each row's result then has the same bits
    /// whatever rows share the product ([`Backend::mul_mat_rows_invariant`]), at
    /// the price of the tile's per-call packing at one row (Q5_K, Q6_K, IQ4_NL
    /// and IQ4_XS in place on AVX-512; more types on AVX2).
    pub fn with_row_invariant_products(mut self, on: bool) -> CpuBackend {
        self.tiles_always = on;
        self
    }
    /// Profiling (off by default): every compute adds each node's wall time
    /// to a [`Profile`] by op kind, which [`Backend::take_profile`] returns.
    /// Costs two clock reads a node.
    pub fn with_profile(mut self, on: bool) -> CpuBackend {
        self.profile = on.then(Mutex::default);
        self
    }
    /// Whether [`CpuBackend::with_repacked_weights`] is on.
    pub fn repacks_weights(&self) -> bool {
        self.repack
    }
    /// Whether this backend repacks mapped weight matrices of type `dtype` on
    /// this CPU: repacking is on, the type's tile kernel has a repacked form at
    /// the CPU's level, and it streams faster than the file's layout there
    /// (not Q6_K on AMD's Zen 4, whose dot kernel keeps up as well).
    pub fn repacks_type(&self, dtype: crate::dtype::DType) -> bool {
        self.repack
            && crate::quant::tile::tile_kernel(dtype)
                .is_some_and(|t| super::matmul::repack_pays(&t, crate::cpu_info::CpuInfo::get()))
    }
    /// Number of worker threads.
    pub fn threads(&self) -> usize {
        self.pool.threads()
    }

    /// Runs `f` inside a rayon pool of this backend's thread count (rayon's
    /// `install`), for a baseline measured beside the executor.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.gemm.install(f)
    }

    /// Memory for `graph` placed by `plan`: a zeroed plan buffer, and copies of
    /// the leaves the graph writes, taken from the context now.
    pub fn alloc(&self, ctx: &Context, graph: &Graph, plan: Plan) -> Result<CpuStorage> {
        CpuStorage::new(ctx, graph, plan, 0)
    }
    /// Like [`CpuBackend::alloc`], with a buffer of `capacity` bytes so that
    /// other plans up to that size can be bound later ([`CpuStorage::rebind`]).
    pub fn alloc_with_capacity(&self, ctx: &Context, graph: &Graph, plan: Plan, capacity: usize) -> Result<CpuStorage> {
        CpuStorage::new(ctx, graph, plan, capacity)
    }

    /// Runs every node of `graph` in order. Leaves are read from `ctx` (in place,
    /// no copy) except those the graph writes, which live in `storage`.
    pub fn compute(&self, ctx: &Context, graph: &Graph, storage: &mut CpuStorage) -> Result<()> {
        self.compute_steps(ctx, graph, storage, 0..graph.nodes().len())
    }

    /// [`CpuBackend::compute`] of the nodes at positions `steps` only ([`Backend::compute_steps`]).
    pub fn compute_steps(
        &self,
        ctx: &Context,
        graph: &Graph,
        storage: &mut CpuStorage,
        steps: Range<usize>,
    ) -> Result<()> {
        graph.check_context(ctx)?;
        exec::check_steps(graph, &steps)?;
        storage.plan.check_graph(graph)?;
        let buf = storage.buffer.as_bytes_mut();
        let buf = (buf.as_mut_ptr(), buf.len());
        storage.regions(ctx, graph, buf.0)?;
        let CpuStorage { plan, packed, regions, bindings, .. } = storage;
        let regions = regions.as_ref().ok_or_else(|| Error::internal("regions not made"))?;
        self.pool.session(|session| {
            let ex = Exec { pool: Some(session), gemm: Some(&self.gemm), tiles_always: self.tiles_always };
            let mut k = CpuKernels { ex, ctx, plan, buf, packed: self.repack.then_some(packed) };
            if self.poison && steps.start == 0 {
                exec::poison_all(&mut k, ctx, graph, plan, buf.1)?;
            }
            let poison = self.poison.then_some(&*plan);
            let run = exec::Run { ctx, graph, regions, poison, profile: self.profile.as_ref(), steps };
            exec::run_bound(&mut k, &run, bindings)
        })
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

impl Backend for CpuBackend {
    type Storage = CpuStorage;
    type Rules = CpuRules;

    fn rules(&self) -> CpuRules {
        CpuRules
    }
    fn describe(&self) -> String {
        let repack = if self.repacks_weights() { ", repacked weights" } else { "" };
        format!("cpu ({} threads{repack})", self.threads())
    }
    fn alloc(&self, ctx: &Context, graph: &Graph, plan: Plan) -> Result<CpuStorage> {
        CpuBackend::alloc(self, ctx, graph, plan)
    }
    fn alloc_with_capacity(&self, ctx: &Context, graph: &Graph, plan: Plan, capacity: usize) -> Result<CpuStorage> {
        CpuBackend::alloc_with_capacity(self, ctx, graph, plan, capacity)
    }
    fn compute_steps(&self, ctx: &Context, graph: &Graph, storage: &mut CpuStorage, steps: Range<usize>) -> Result<()> {
        CpuBackend::compute_steps(self, ctx, graph, storage, steps)
    }
    /// The tile kernels at every row count: types whose tile runs from one row in
    /// place, types this backend repacks, every type with a tile under
    /// [`CpuBackend::with_row_invariant_products`] (measured in `tests/repack.rs`);
    /// the others switch between the dot kernels and the tile, or (F32) the GEMM.
    fn mul_mat_rows_invariant(&self, dtype: crate::dtype::DType) -> bool {
        crate::quant::tile::tile_kernel(dtype)
            .is_some_and(|t| t.min_rows() == 1 || self.tiles_always || self.repacks_type(dtype))
    }
    fn take_profile(&self) -> Option<Profile> {
        let p = self.profile.as_ref()?;
        Some(std::mem::take(&mut *p.lock().unwrap_or_else(|e| e.into_inner())))
    }
}

impl BackendStorage for CpuStorage {
    fn plan(&self) -> &Plan {
        CpuStorage::plan(self)
    }
    fn capacity(&self) -> usize {
        CpuStorage::capacity(self)
    }
    fn rebind(&mut self, ctx: &Context, graph: &Graph, plan: Plan) -> Result<()> {
        CpuStorage::rebind(self, ctx, graph, plan)
    }
    fn grow(&mut self, capacity: usize) -> Result<()> {
        CpuStorage::grow(self, capacity)
    }
    fn reset_leaf(&mut self, ctx: &Context, id: TensorId) -> Result<()> {
        CpuStorage::reset_leaf(self, ctx, id)
    }
    fn set_bytes(&mut self, ctx: &Context, id: TensorId, bytes: &[u8]) -> Result<()> {
        CpuStorage::set_bytes(self, ctx, id, bytes)
    }
    fn read_f32(&self, ctx: &Context, id: TensorId) -> Result<Vec<f32>> {
        CpuStorage::read_f32(self, ctx, id)
    }
    fn read_bytes(&self, ctx: &Context, id: TensorId) -> Result<Vec<u8>> {
        CpuStorage::read_bytes(self, ctx, id)
    }
}
