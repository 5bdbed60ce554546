//! Executors. Each runs a planned [`Graph`](crate::Graph) node by node on one device; they
//! read tensor headers and placements, never the builder API.
//!
//! Models are written once against two traits: [`Backend`] (plans, allocates
//! and computes) and [`BackendStorage`] (the memory of one planned graph:
//! inputs in, results out, state such as a KV cache kept across graphs).
//! [`CpuBackend`](cpu::CpuBackend) and [`CudaBackend`](cuda::CudaBackend)
//! implement them, keeping their inherent methods of the same names.
//!
//! Two ways to be backend-agnostic:
//! - generic code, `fn f<B: Backend>(b: &B, …)` or a `struct Model<B: Backend>`
//!   (zero cost, the backend fixed at compile time), and
//! - [`AnyBackend`], an enum over the two backends that itself implements
//!   [`Backend`] (storage [`AnyStorage`]), for a choice made at run time (a
//!   command-line flag). A model generic over `B` works with either, so the
//!   CLI picks `AnyBackend` and tests can name the concrete backend.
//!
//! Layers: `traits`, `profile` and `exec` (the executor loop) at the bottom, the
//! backends above them, `any` on top.
//!
//! The trait is not object-safe (`set_data` is generic, storages are an
//! associated type); the enum is the dynamic form.

mod any;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(not(feature = "cuda"))]
#[path = "cuda_off.rs"]
pub mod cuda;
mod cuda_config;
pub(crate) mod exec;
mod profile;
mod split;
mod traits;

pub use any::{AnyBackend, AnyRules, AnyStorage};
pub use profile::{OpKind, OpTime, Profile};
pub use split::{LeafHome, SplitBackend, SplitStorage};
pub use traits::{Backend, BackendStorage, PinnedBuffer};

#[cfg(test)]
mod tests;
