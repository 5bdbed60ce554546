//! The CPU-against-CUDA check of the op tests (`tests/cuda_ops.rs`,
//! `tests/cuda_attention.rs`).

use super::common::cuda;
use rgml::{Context, CpuBackend, CudaBackend, Graph, TensorId};

/// Builds a graph with `build`, runs it on the CPU and (when present) CUDA,
/// and checks that CUDA's outputs match the CPU's within `tol` (relative to
/// `1 + |cpu|`; NaN matches NaN, infinities match exactly).
pub fn check_on_cuda(name: &str, tol: f32, build: impl FnOnce(&mut Context) -> Vec<TensorId>) {
    check_on_cuda_variants(name, tol, build, |gpu| vec![(String::new(), gpu)]);
}

/// [`check_on_cuda`] on each CUDA backend `variants` makes of the device
/// (named by a suffix of the test's name): every one must match the CPU.
#[allow(dead_code)] // used by cuda_ops.rs only
pub fn check_on_cuda_variants(
    name: &str,
    tol: f32,
    build: impl FnOnce(&mut Context) -> Vec<TensorId>,
    variants: impl Fn(CudaBackend) -> Vec<(String, CudaBackend)>,
) {
    let mut ctx = Context::new();
    let outs = build(&mut ctx);
    let graph = Graph::build(&ctx, &outs).unwrap();
    let cpu = CpuBackend::new(2).unwrap().run(&ctx, &graph).unwrap();
    let want: Vec<Vec<f32>> = outs.iter().map(|&o| cpu.read_f32(&ctx, o).unwrap()).collect();
    let Some(gpu) = cuda() else { return };
    for (suffix, backend) in variants(gpu) {
        let name = format!("{name}{suffix}");
        let st = backend.run(&ctx, &graph).unwrap_or_else(|e| panic!("{name}: CUDA run failed: {e}"));
        for (k, (&o, w)) in outs.iter().zip(&want).enumerate() {
            let got = st.read_f32(&ctx, o).unwrap();
            assert_eq!(got.len(), w.len(), "{name} output {k}: length");
            for (i, (&g, &c)) in got.iter().zip(w).enumerate() {
                let ok = (g.is_nan() && c.is_nan()) || g == c || (g - c).abs() <= tol * (1.0 + c.abs());
                assert!(ok, "{name} output {k}[{i}]: cuda {g} vs cpu {c}");
            }
        }
        println!("ok: {name} on {backend:?}");
    }
}
