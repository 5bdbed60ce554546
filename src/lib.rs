//! rgml: a ggml-style static compute graph executor.
//!
//! Build a graph of ggml ops over strided tensors in a [`Context`], collect
//! what the outputs need into a [`Graph`], place its buffers with a [`Plan`]
//! and run it on a backend ([`CpuBackend`], [`CudaBackend`]; code written
//! once over the [`Backend`] trait runs on either, and [`AnyBackend`] picks
//! one at run time).
//!
//! ```
//! use rgml::{Context, CpuBackend, Graph};
//! let mut ctx = Context::new();
//! let a = ctx.new_f32(&[3, 2], &[1., 2., 3., 4., 5., 6.]).unwrap();
//! let row0 = ctx.view_1d(a, 3, 0).unwrap();        // a view: zero bytes moved
//! let one = ctx.new_f32(&[1], &[1.0]).unwrap();
//! let w = ctx.add_inplace(row0, one).unwrap();     // writes through the view into a
//! let at = ctx.transpose(a).unwrap();
//! let c = ctx.cont(at).unwrap();                   // the priced copy; sees the write
//! let graph = Graph::build(&ctx, &[w, c]).unwrap();
//! let out = CpuBackend::new(1).unwrap().run(&ctx, &graph).unwrap();
//! assert_eq!(out.read_f32(&ctx, c).unwrap(), vec![2., 4., 3., 5., 4., 6.]);
//! ```

#![warn(missing_docs)]

pub mod backend;
pub mod context;
pub mod cost;
pub mod cpu_info;
pub mod device;
pub mod dlpack;
pub mod dtype;
pub mod error;
pub mod gguf;
pub mod grad;
pub mod graph;
pub mod host;
mod id;
pub mod layout;
pub mod load;
pub mod op;
pub mod ops;
pub mod plan;
pub mod quant;
pub mod safetensors;
pub mod tensor;
pub mod train;

pub use backend::cpu::{CpuBackend, CpuRules, CpuStorage, MAX_THREADS_PER_CORE};
pub use backend::cuda::{CudaBackend, CudaConfig, CudaRules, CudaStorage, GraphStats};
pub use backend::{
    AnyBackend, AnyRules, AnyStorage, Backend, BackendStorage, LeafHome, OpKind, OpTime, Profile, SplitBackend,
    SplitStorage,
};
pub use context::{Context, ContextMark};
pub use cpu_info::CpuInfo;
pub use device::Device;
pub use dtype::DType;
pub use error::{Error, Result};
pub use grad::Gradients;
pub use graph::lint::LintWarning;
pub use graph::transfers::Transfer;
pub use graph::{Dep, Graph};
pub use host::{Element, HostBuffer};
pub use layout::{Layout, Overlap};
pub use load::{load_gguf, load_safetensors, load_safetensors_index, Weights};
pub use op::{BackOp, BinaryOp, GluOp, Op, RopeParams, UnaryOp};
pub use plan::{Allocator, NoReuse, Place, Plan, PlanStats, ReuseRules, CPU_ALIGNMENT, CUDA_ALIGNMENT};
pub use tensor::{Flags, Tensor, TensorId};

pub use half::{bf16, f16};

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
