//! [`AnyBackend`]: the CPU, a CUDA device, or a split of them, chosen at run time.

// Without the `cuda` feature the CUDA types are uninhabited: their arms are dead code.
#![cfg_attr(not(feature = "cuda"), allow(unreachable_code, clippy::large_enum_variant))]

use super::cpu::{CpuBackend, CpuRules, CpuStorage};
use super::cuda::{CudaBackend, CudaConfig, CudaRules, CudaStorage};
use super::split::{SplitBackend, SplitStorage};
use super::traits::{Backend, BackendStorage};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::plan::{Plan, ReuseRules};
use crate::tensor::{Op, TensorId};

/// One of the backends, for code that picks one at run time (the CLI's
/// `--backend`). Implements [`Backend`] by dispatching to the one it holds;
/// its storages ([`AnyStorage`]) only work with the same variant.
#[derive(Debug)]
pub enum AnyBackend {
    /// The CPU.
    Cpu(CpuBackend),
    /// A CUDA device.
    Cuda(CudaBackend),
    /// Several backends running each graph together ([`SplitBackend`]).
    Split(SplitBackend<AnyBackend>),
}

/// The planner rules of an [`AnyBackend`].
#[derive(Clone, Copy, Debug)]
pub enum AnyRules {
    /// [`CpuRules`].
    Cpu(CpuRules),
    /// [`CudaRules`].
    Cuda(CudaRules),
}

/// The storage of an [`AnyBackend`].
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // one per model, never in a collection: a box buys nothing
pub enum AnyStorage {
    /// A CPU storage.
    Cpu(CpuStorage),
    /// A CUDA storage.
    Cuda(CudaStorage),
    /// A split run's storages.
    Split(SplitStorage<AnyBackend>),
}

impl AnyBackend {
    /// The CPU with `threads` worker threads (0: one per core).
    pub fn cpu(threads: usize) -> Result<AnyBackend> {
        CpuBackend::new(threads).map(AnyBackend::Cpu)
    }
    /// CUDA device `ordinal`; [`Error::Unavailable`] without CUDA or that device.
    pub fn cuda(ordinal: usize) -> Result<AnyBackend> {
        CudaBackend::new(ordinal).map(AnyBackend::Cuda)
    }
    /// CUDA device `ordinal` with the settings `config` ([`CudaBackend::with_config`]).
    pub fn cuda_with(ordinal: usize, config: CudaConfig) -> Result<AnyBackend> {
        CudaBackend::with_config(ordinal, config).map(AnyBackend::Cuda)
    }
    /// Poison mode on either backend (see [`CpuBackend::with_poison`]).
    pub fn with_poison(self, poison: bool) -> AnyBackend {
        match self {
            AnyBackend::Cpu(b) => AnyBackend::Cpu(b.with_poison(poison)),
            AnyBackend::Cuda(b) => AnyBackend::Cuda(b.with_poison(poison)),
            AnyBackend::Split(b) => AnyBackend::Split(b.map_backends(|b| b.with_poison(poison))),
        }
    }
}

impl AnyBackend {
    /// [`CpuBackend::with_repacked_weights`] on the CPU. Asking for repacked
    /// weights on CUDA is [`crate::Error::Invalid`]: its
    /// kernels read weights as they are.
    pub fn with_repacked_weights(self, repack: bool) -> Result<AnyBackend> {
        self.cpu_option("repacked weights", repack, CpuBackend::with_repacked_weights)
    }
    /// [`CpuBackend::with_row_invariant_products`] on the CPU (an error on CUDA
    /// when on).
    pub fn with_row_invariant_products(self, on: bool) -> Result<AnyBackend> {
        self.cpu_option("row-invariant products", on, CpuBackend::with_row_invariant_products)
    }
    /// Whether this is a CPU backend that repacks weights ([`CpuBackend::repacks_weights`]).
    pub fn repacks_weights(&self) -> bool {
        matches!(self, AnyBackend::Cpu(b) if b.repacks_weights())
    }
    /// [`CpuBackend::with_profile`] on the CPU; on CUDA (whose kernels run
    /// asynchronously) asking for it is [`crate::Error::Invalid`].
    pub fn with_profile(self, on: bool) -> Result<AnyBackend> {
        self.cpu_option("profiling", on, CpuBackend::with_profile)
    }
    /// A CPU-only setting: `set(cpu, on)` on the CPU; on CUDA, off is a no-op
    /// and on is an error naming `what`.
    fn cpu_option(self, what: &str, on: bool, set: fn(CpuBackend, bool) -> CpuBackend) -> Result<AnyBackend> {
        match self {
            AnyBackend::Cpu(b) => Ok(AnyBackend::Cpu(set(b, on))),
            AnyBackend::Cuda(_) | AnyBackend::Split(_) if on => {
                Err(crate::error::Error::Invalid(format!("{what}: only the CPU backend has this option")))
            }
            other => Ok(other),
        }
    }
}

impl From<CpuBackend> for AnyBackend {
    fn from(b: CpuBackend) -> AnyBackend {
        AnyBackend::Cpu(b)
    }
}

impl From<SplitBackend<AnyBackend>> for AnyBackend {
    fn from(b: SplitBackend<AnyBackend>) -> AnyBackend {
        AnyBackend::Split(b)
    }
}

impl From<CudaBackend> for AnyBackend {
    fn from(b: CudaBackend) -> AnyBackend {
        AnyBackend::Cuda(b)
    }
}

impl ReuseRules for AnyRules {
    fn alignment(&self) -> usize {
        match self {
            AnyRules::Cpu(r) => r.alignment(),
            AnyRules::Cuda(r) => r.alignment(),
        }
    }
    fn may_overwrite_source(&self, op: &Op, slot: usize) -> bool {
        match self {
            AnyRules::Cpu(r) => r.may_overwrite_source(op, slot),
            AnyRules::Cuda(r) => r.may_overwrite_source(op, slot),
        }
    }
}

fn wrong_storage() -> Error {
    Error::Mismatch("the storage was allocated by another kind of backend".into())
}

impl Backend for AnyBackend {
    type Storage = AnyStorage;
    type Rules = AnyRules;

    fn rules(&self) -> AnyRules {
        match self {
            AnyBackend::Cpu(b) => AnyRules::Cpu(b.rules()),
            AnyBackend::Cuda(b) => AnyRules::Cuda(b.rules()),
            AnyBackend::Split(b) => b.rules(),
        }
    }
    fn describe(&self) -> String {
        match self {
            AnyBackend::Cpu(b) => b.describe(),
            AnyBackend::Cuda(b) => b.describe(),
            AnyBackend::Split(b) => b.describe(),
        }
    }
    fn device(&self) -> crate::device::Device {
        match self {
            AnyBackend::Cpu(b) => b.device(),
            AnyBackend::Cuda(b) => b.device(),
            AnyBackend::Split(b) => b.device(),
        }
    }
    fn pinned_buffer(&self, bytes: usize) -> Option<Result<Box<dyn super::traits::PinnedBuffer>>> {
        match self {
            AnyBackend::Cpu(b) => b.pinned_buffer(bytes),
            AnyBackend::Cuda(b) => b.pinned_buffer(bytes),
            AnyBackend::Split(b) => b.pinned_buffer(bytes),
        }
    }
    fn supports(&self, op: &str) -> bool {
        match self {
            AnyBackend::Cpu(b) => b.supports(op),
            AnyBackend::Cuda(b) => b.supports(op),
            AnyBackend::Split(b) => b.supports(op),
        }
    }
    fn supports_node(&self, ctx: &Context, id: TensorId) -> bool {
        match self {
            AnyBackend::Cpu(b) => b.supports_node(ctx, id),
            AnyBackend::Cuda(b) => b.supports_node(ctx, id),
            AnyBackend::Split(b) => b.supports_node(ctx, id),
        }
    }
    fn mul_mat_rows_invariant(&self, dtype: crate::dtype::DType) -> bool {
        match self {
            AnyBackend::Cpu(b) => b.mul_mat_rows_invariant(dtype),
            AnyBackend::Cuda(b) => b.mul_mat_rows_invariant(dtype),
            AnyBackend::Split(b) => b.mul_mat_rows_invariant(dtype),
        }
    }
    fn take_profile(&self) -> Option<crate::backend::Profile> {
        match self {
            AnyBackend::Cpu(b) => b.take_profile(),
            AnyBackend::Cuda(b) => b.take_profile(),
            AnyBackend::Split(b) => b.take_profile(),
        }
    }
    fn alloc(&self, ctx: &Context, graph: &Graph, plan: Plan) -> Result<AnyStorage> {
        Ok(match self {
            AnyBackend::Cpu(b) => AnyStorage::Cpu(b.alloc(ctx, graph, plan)?),
            AnyBackend::Cuda(b) => AnyStorage::Cuda(b.alloc(ctx, graph, plan)?),
            AnyBackend::Split(b) => AnyStorage::Split(b.alloc(ctx, graph, plan)?),
        })
    }
    fn alloc_with_capacity(&self, ctx: &Context, graph: &Graph, plan: Plan, capacity: usize) -> Result<AnyStorage> {
        Ok(match self {
            AnyBackend::Cpu(b) => AnyStorage::Cpu(b.alloc_with_capacity(ctx, graph, plan, capacity)?),
            AnyBackend::Cuda(b) => AnyStorage::Cuda(b.alloc_with_capacity(ctx, graph, plan, capacity)?),
            AnyBackend::Split(b) => AnyStorage::Split(b.alloc_with_capacity(ctx, graph, plan, capacity)?),
        })
    }
    fn compute_steps(
        &self,
        ctx: &Context,
        graph: &Graph,
        storage: &mut AnyStorage,
        steps: std::ops::Range<usize>,
    ) -> Result<()> {
        match (self, storage) {
            (AnyBackend::Cpu(b), AnyStorage::Cpu(s)) => b.compute_steps(ctx, graph, s, steps),
            (AnyBackend::Cuda(b), AnyStorage::Cuda(s)) => Backend::compute_steps(b, ctx, graph, s, steps),
            (AnyBackend::Split(b), AnyStorage::Split(s)) => b.compute_steps(ctx, graph, s, steps),
            _ => Err(wrong_storage()),
        }
    }
}

/// `$e` applied to the storage inside `$s`, whichever variant it is.
macro_rules! each {
    ($s:expr, $st:ident => $e:expr) => {
        match $s {
            AnyStorage::Cpu($st) => $e,
            AnyStorage::Cuda($st) => $e,
            AnyStorage::Split($st) => $e,
        }
    };
}

impl BackendStorage for AnyStorage {
    fn plan(&self) -> &Plan {
        each!(self, s => BackendStorage::plan(s))
    }
    fn capacity(&self) -> usize {
        each!(self, s => BackendStorage::capacity(s))
    }
    fn rebind(&mut self, ctx: &Context, graph: &Graph, plan: Plan) -> Result<()> {
        each!(self, s => BackendStorage::rebind(s, ctx, graph, plan))
    }
    fn grow(&mut self, capacity: usize) -> Result<()> {
        each!(self, s => BackendStorage::grow(s, capacity))
    }
    fn reset_leaf(&mut self, ctx: &Context, id: TensorId) -> Result<()> {
        each!(self, s => BackendStorage::reset_leaf(s, ctx, id))
    }
    fn set_bytes(&mut self, ctx: &Context, id: TensorId, bytes: &[u8]) -> Result<()> {
        each!(self, s => BackendStorage::set_bytes(s, ctx, id, bytes))
    }
    fn read_f32(&self, ctx: &Context, id: TensorId) -> Result<Vec<f32>> {
        each!(self, s => BackendStorage::read_f32(s, ctx, id))
    }
    fn read_bytes(&self, ctx: &Context, id: TensorId) -> Result<Vec<u8>> {
        each!(self, s => BackendStorage::read_bytes(s, ctx, id))
    }
    fn read_bytes_into(&self, ctx: &Context, id: TensorId, out: &mut [u8]) -> Result<()> {
        each!(self, s => BackendStorage::read_bytes_into(s, ctx, id, out))
    }
}
