//! The CUDA executor (cudarc, libraries loaded at run time).
//!
//! What exists: library probing (`probe.rs`) that turns a missing
//! driver, NVRTC or cuBLAS into [`Error::Unavailable`](crate::Error::Unavailable)
//! before cudarc can panic; the kernel sources (`kernels/*.cu`) with their argument
//! structs (`kernels.rs`); NVRTC compilation cached per (module, arch)
//! (`nvrtc.rs`); [`CudaBackend`], which opens a device and its stream, binds a
//! [`Plan`](crate::Plan) to device memory ([`CudaBackend::alloc`]: one plan
//! buffer, leaves uploaded once, those of 16 MiB and more through two pinned
//! staging buffers) and runs graphs node by node
//! ([`CudaBackend::compute`]), or as a captured CUDA graph on repeated runs
//! ([`CudaBackend::with_graphs`], `graphs.rs`), node temporaries in one
//! reused scratch buffer (`scratch.rs`); `mul_mat` for every weight type the CPU takes:
//! cuBLAS SGEMM for F32 weights, `cublasGemmStridedBatchedEx` with F16/BF16
//! inputs and F32 accumulation for F16/BF16 weights, and for Q4_0 … Q6_K the
//! activations quantized on the device to the CPU's dot partner bytes and
//! dotted with the weight blocks by `kernels/mmvq.cu` (the CPU's arithmetic;
//! generic and staged kernels for every batch size, no tensor-core int8 GEMM
//! yet). `mul_mat_id` (`matmul/moe.rs`) routes its (slot, token) pairs to
//! their experts on the device and runs the same dot kernels per tile of
//! pairs; `argsort` (`sort.rs`) is a bitonic sort per row.
//!
//! Block types (`kernels/quant.cuh`, host side in `quant.rs`): all 12 of them
//! (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K … Q6_K, Q8_K) are dequantized on
//! the device bit-identically to the CPU, by `get_rows`, by `cont`/`dup`/`cpy`
//! into F32/F16/BF16 from any strided layout (transposed and permuted
//! quantized views included), and by [`CudaStorage::read_f32`]. Same-type
//! block copies move blocks byte for byte (k-quants too), as does `set_rows`
//! of same-type rows. Copies and `set_rows` from F32/F16/BF16 (or another
//! block type) quantize into Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q8_1 with the
//! CPU's reference quantizers, byte-identically. Quantizing into a k-quant is
//! [`Error::Unsupported`](crate::Error::Unsupported): the CPU uses ggml's search quantizers for those, and
//! ggml's CUDA backend does not quantize to k-quants either.
//!
//! Every block type is read (the i-quants' grids are `kernels/iq_grids.cuh`,
//! generated from the CPU's tables); those without dot kernels (IQ4_NL,
//! IQ4_XS, MXFP4, the grid i-quants, TQ1_0, TQ2_0) multiply through the
//! dequantized F16 GEMM. F64 and I64 have no CUDA kernels: a graph in
//! which any computed node reads or writes one is refused by
//! [`CudaBackend::alloc`] and [`CudaBackend::compute`] before anything is
//! uploaded or launched, with [`Error::Unsupported`](crate::Error::Unsupported)
//! naming the op and the type ([`CudaBackend::handles`]). Such leaves may still be viewed or read back as bytes.
//!
//! Kernels are CUDA C compiled with NVRTC for the device's compute capability
//! at first use; they need no CUDA toolkit headers (a small prelude does the
//! f16/bf16 conversions). Strided kernels take `ne`/`nb` by value
//! (`KTensor`) and use 64-bit index math.
//!
//! Layers, each importing only those below it: `launch` (bound operands, the
//! launch macro and configurations, driver errors) and `device` (context,
//! stream, kernel loading); the op modules (`ops`, `copy`, `fast`, `quant`,
//! `matmul`); `run`, the `Kernels` of the executor loop (`backend/exec.rs`);
//! `storage` and `graphs`; `backend` on top.

mod attention;
mod back;
mod backend;
mod copy;
mod device;
mod fast;
mod graphs;
mod grids;
mod kernels;
mod launch;
mod matmul;
mod nvrtc;
mod ops;
mod probe;
mod quant;
mod run;
mod scratch;
mod sort;
mod storage;
mod upload;

pub use crate::backend::cuda_config::{CudaConfig, CudaRules, GraphStats, DEQUANT_GEMM_FROM};
pub use backend::CudaBackend;
pub use storage::CudaStorage;

#[cfg(test)]
mod ptx_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::plan::CUDA_ALIGNMENT;

    #[test]
    fn new_errors_or_opens_without_panicking() {
        match CudaBackend::new(0) {
            Ok(b) => println!("CUDA present: {b:?}"),
            Err(e) => {
                assert!(matches!(e, Error::Unavailable { .. }), "{e}");
                println!("SKIP: {e}");
            }
        }
    }

    #[test]
    fn backend_and_storage_move_between_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<CudaBackend>();
        send_sync::<CudaStorage>();
    }

    #[test]
    fn plans_for_cuda_are_256_byte_aligned() {
        use crate::{Allocator, Context, Graph, Place};
        let mut ctx = Context::new();
        let a = ctx.new_f32(&[3, 5], &[1.0; 15]).unwrap();
        let b = ctx.new_f32(&[3], &[2.0; 3]).unwrap();
        let c = ctx.add(a, b).unwrap();
        let d = ctx.sum_rows(c).unwrap();
        let e = ctx.scale(d, 0.5).unwrap();
        let graph = Graph::build(&ctx, &[e]).unwrap();
        let plan = Allocator::new(CudaRules).plan(&ctx, &graph).unwrap();
        assert_eq!(plan.alignment(), CUDA_ALIGNMENT);
        for (_, place) in plan.places() {
            if let Place::Buffer { offset } = place {
                assert_eq!(offset % CUDA_ALIGNMENT, 0);
            }
        }
    }

    #[test]
    fn alibi_and_rope_parameters() {
        assert_eq!(kernels::alibi_params(8, 0.0), (0, 1.0, 1.0));
        let (n, m0, m1) = kernels::alibi_params(12, 8.0);
        assert_eq!(n, 8);
        assert_eq!(m0, 2.0f32.powf(-1.0));
        assert_eq!(m1, 2.0f32.powf(-0.5));
        let p = kernels::KRope::of(&crate::RopeParams::new(64, crate::RopeParams::NEOX));
        assert_eq!(p.neox, 1);
        assert_eq!(p.theta_scale, 10000f32.powf(-2.0 / 64.0));
        assert!(p.corr0 >= 0.0 && p.corr1 <= 63.0);
    }

    #[test]
    fn bad_arch_and_module_are_errors() {
        assert!(nvrtc::compile("binary", "sm_90").is_err());
        assert!(nvrtc::compile("no_such_module", "compute_90").is_err());
    }
}
