//! Helpers shared by the integration tests: the CUDA device of the tests that
//! run on CUDA when one is present (`tests/cuda_*.rs`,
//! `models/tests/llama_cuda.rs`) and a deterministic generator of test data.

// each test crate uses a different subset
#![allow(dead_code)]

use rgml::{Context, CudaBackend, Error, TensorId};

pub mod blocks;

/// CUDA device 0, or `None` after printing `SKIP: …` when there is none.
/// Opening must fail only with [`Error::Unavailable`]; with
/// `RGML_REQUIRE_CUDA=1` a missing device fails the test instead.
pub fn cuda() -> Option<CudaBackend> {
    match CudaBackend::new(0) {
        Ok(b) => Some(b),
        Err(e) => {
            assert!(matches!(e, Error::Unavailable { .. }), "CudaBackend::new must fail with Unavailable: {e}");
            if std::env::var("RGML_REQUIRE_CUDA").is_ok_and(|v| v == "1") {
                panic!("RGML_REQUIRE_CUDA=1 but {e}");
            }
            println!("SKIP: CUDA: {e}");
            None
        }
    }
}

/// xorshift64*: deterministic test data. The expected values of some tests
/// are derived from its sequence: don't change it.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in `[-r, r)`.
    pub fn f(&mut self, r: f32) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * r
    }
    /// `n` values uniform in `[-r, r)`.
    pub fn vec(&mut self, n: usize, r: f32) -> Vec<f32> {
        (0..n).map(|_| self.f(r)).collect()
    }
}

/// An F32 leaf of shape `ne`, uniform in `[-r, r)`.
pub fn leaf(ctx: &mut Context, rng: &mut Rng, ne: &[i64], r: f32) -> TensorId {
    let n = ne.iter().product::<i64>() as usize;
    ctx.new_f32(ne, &rng.vec(n, r)).unwrap()
}

/// Rows of `k` values as the dot partner of the weight type `wt` stores them
/// (ggml's rounding of a product's activations), back in f32.
pub fn as_partner(wt: rgml::DType, v: &[f32], k: usize) -> Vec<f32> {
    use rgml::quant::{self, dot};
    if wt == rgml::DType::F32 {
        return v.to_vec();
    }
    let pt = dot::vec_dot_type(wt);
    let mut out = vec![0f32; v.len()];
    let mut q = vec![0u8; pt.row_size(k as i64).unwrap()];
    for (src, dst) in v.chunks(k).zip(out.chunks_mut(k)) {
        dot::quantize_activations(wt, src, &mut q).unwrap();
        quant::dequantize_row(pt, &q, dst).unwrap();
    }
    out
}
