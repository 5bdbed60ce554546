//! DLPack: sharing tensors with other libraries (numpy, PyTorch, JAX…)
//! without copying, through the [DLPack](https://dmlc.github.io/dlpack/latest/)
//! C ABI: v0.8, the unversioned `DLManagedTensor` of the `"dltensor"`
//! capsule, and 1.x, the `DLManagedTensorVersioned` of `"dltensor_versioned"`
//! ([`ManagedTensor::into_versioned`], [`import_versioned`]).
//!
//! - [`export()`] (a leaf with host data, or a view of one) and
//!   [`export_results`] (tensors of a CPU run's [`CpuStorage`](crate::CpuStorage))
//!   give [`ManagedTensor`]s: a heap-allocated `DLManagedTensor` over rgml's
//!   bytes that keeps them alive (it holds an `Arc` of the leaf's buffer, file
//!   mapping or run storage) until its deleter runs, exactly once: when the
//!   `ManagedTensor` is dropped, or, after [`ManagedTensor::into_raw`], when
//!   the consumer calls it.
//! - [`import()`] (unsafe: the caller vouches for the pointer) makes a
//!   read-only leaf of a [`Context`](crate::Context) over a `DLManagedTensor`'s
//!   memory, plus a view for strided or offset tensors; the context calls the
//!   deleter when it drops the leaf.
//!
//! # Layout
//! rgml's `ne[0]` is the fastest dim, DLPack's last: an export's `shape` is
//! `ne` reversed, trimmed to the tensor's dims (up to the last dim of more
//! than one element, at least 1: a 3×4 matrix is `[4, 3]`, not
//! `[1, 1, 4, 3]`), and its `strides` are `nb` reversed, in elements
//! (`nb[i] / type_size`). `byte_offset` is the view's offset in its storage
//! and `data` the storage's start. An import reverses this and pads to 4 dims.
//!
//! Types: f32, f16, f64 (`kDLFloat`), bf16 (`kDLBfloat`), i8–i64 (`kDLInt`).
//! Block-quantized types are refused: their strides are not whole elements.
//! Exports are on the CPU (`kDLCPU`); only CPU memory is imported.
//!
//! # Ownership and writes
//! DLPack v0.8 has no read-only flag (versioned exports set
//! `DLPACK_FLAG_BITMASK_READ_ONLY`). Imported leaves are read-only for rgml
//! (writes into them are [`Error::ReadOnly`](crate::Error::ReadOnly)), so
//! stride-0 (broadcast) imports are allowed; the producer must not write the
//! memory while rgml holds it. Consumers of an export must treat it as
//! read-only too: the bytes are rgml's (a write into the leaf through its
//! context afterwards goes to a fresh copy, the export keeps the old bytes).
//!
//! ```
//! use rgml::{dlpack, Context};
//! let mut ctx = Context::new();
//! let a = ctx.new_f32(&[3, 2], &[1., 2., 3., 4., 5., 6.]).unwrap();
//! let at = ctx.transpose(a).unwrap();
//! let m = dlpack::export(&ctx, at).unwrap();
//! assert_eq!((m.shape(), m.strides()), (&[3i64, 2][..], &[1i64, 3][..]));
//! let mut other = Context::new();
//! // SAFETY: `m` is a valid managed tensor, handed over with `into_raw`.
//! let t = unsafe { dlpack::import(&mut other, m.into_raw()) }.unwrap();
//! assert_eq!(other.layout(t).unwrap().nb, ctx.layout(at).unwrap().nb);
//! ```

pub mod abi;
mod export;
mod import;

pub use abi::{DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor};
pub use export::{export, export_results, live_exports, ManagedTensor, ManagedTensorVersioned};
pub use import::{import, import_versioned};
