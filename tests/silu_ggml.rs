//! SiLU and SwiGLU against ggml's own output (tests/fixtures/silu, made by
//! scripts/fixtures/ggml_silu.c with the ggml of llama-cpp-python 0.3.36 on an
//! AVX2 CPU): on a CPU with AVX2 and FMA rgml computes ggml's vector exp lane
//! for lane, so every bit matches; elsewhere (ggml's scalar form, the C
//! library's `expf`) within 4 ulp.

use rgml::{Context, CpuBackend, Graph};

const N: usize = 12000;

fn fixture() -> (Vec<f32>, Vec<f32>) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/silu/ggml_avx2.bin");
    let raw = std::fs::read(path).unwrap();
    let v: Vec<f32> = raw.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    assert_eq!(v.len(), 2 * N);
    (v[..N].to_vec(), v[N..].to_vec())
}

/// Whether rgml's kernels run at AVX2 or above here (AVX2 and FMA, and not
/// capped below by `RGML_SIMD`): then its exp is ggml's vector one.
fn vector_exp() -> bool {
    use rgml::quant::dot::SimdLevel;
    SimdLevel::detect() >= SimdLevel::Avx2
}

#[test]
fn silu_and_swiglu_give_ggmls_bits() {
    let (want_silu, want_glu) = fixture();
    let mut ctx = Context::new();
    let xs: Vec<f32> = (0..N).map(|i| (i as f32 - 6000.0) * 0.0151).collect();
    let gs: Vec<f32> = (0..N).map(|i| 1.0 + (i % 7) as f32 * 0.125).collect();
    let x = ctx.new_f32(&[N as i64], &xs).unwrap();
    let g = ctx.new_f32(&[N as i64], &gs).unwrap();
    let y = ctx.silu(x).unwrap();
    let z = ctx.swiglu_split(x, g).unwrap();
    let graph = Graph::build(&ctx, &[y, z]).unwrap();
    for threads in [1, 2] {
        let st = CpuBackend::new(threads).unwrap().run(&ctx, &graph).unwrap();
        for (name, got, want) in
            [("silu", st.read_f32(&ctx, y).unwrap(), &want_silu), ("swiglu", st.read_f32(&ctx, z).unwrap(), &want_glu)]
        {
            for (i, (&a, &b)) in got.iter().zip(want.iter()).enumerate() {
                if vector_exp() {
                    assert_eq!(a.to_bits(), b.to_bits(), "{name}({}) = {a}, ggml {b}", xs[i]);
                } else {
                    assert!(
                        (a - b).abs() <= 4.0 * f32::EPSILON * b.abs().max(1e-30),
                        "{name}({}) = {a}, ggml {b}",
                        xs[i]
                    );
                }
            }
        }
    }
}
