//! The architecture fixtures (tests/fixtures/arch: tiny random-weight models of
//! every architecture and llama.cpp's logits, provenance in its README), shared
//! by `arch.rs` (the CPU) and `arch_cuda.rs`.

use std::path::{Path, PathBuf};

use rgml::Backend;
use rgml_models::model::kv::KvType;
use rgml_models::model::{argmax, Attention, LoadOptions, Model};

pub fn dir() -> PathBuf {
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/arch");
    if built.exists() {
        built
    } else {
        PathBuf::from("tests/fixtures/arch")
    }
}

pub fn tokens() -> Vec<u32> {
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("manifest.json")).unwrap()).unwrap();
    m["tokens"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect()
}

pub fn reference(file: &str, kv: &str) -> Vec<f32> {
    let p = dir().join(format!("{}.logits_{kv}.f32", file.trim_end_matches(".gguf")));
    std::fs::read(p).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// (max abs difference, positions whose argmax differs).
pub fn compare(got: &[f32], want: &[f32]) -> (f32, usize) {
    assert_eq!(got.len(), want.len());
    let d = got.iter().zip(want).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    let n_vocab = 288;
    let flips = got.chunks(n_vocab).zip(want.chunks(n_vocab)).filter(|(a, b)| argmax(a) != argmax(b)).count();
    (d, flips)
}

/// The largest KL divergence KL(want ‖ got) of one position's next-token distribution.
#[allow(dead_code)] // used by arch_cuda.rs only
pub fn max_kl(got: &[f32], want: &[f32]) -> f64 {
    let n_vocab = 288;
    let probs = |l: &[f32]| {
        let m = l.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x as f64));
        let e: Vec<f64> = l.iter().map(|&x| (x as f64 - m).exp()).collect();
        let s: f64 = e.iter().sum();
        e.into_iter().map(move |x| x / s)
    };
    got.chunks(n_vocab)
        .zip(want.chunks(n_vocab))
        .map(|(g, w)| probs(w).zip(probs(g)).map(|(p, q)| if p > 0.0 { p * (p / q).ln() } else { 0.0 }).sum::<f64>())
        .fold(0.0, f64::max)
}

pub const CASES: [&str; 15] = [
    "llama3",
    "llama_linear",
    "llama_yarn",
    "qwen2",
    "qwen3",
    "gemma3",
    "phi3",
    "qwen3moe",
    "qwen2moe",
    "mixtral",
    "olmoe",
    "granite",
    "olmo2",
    "smollm3",
    "gpt_oss",
];

/// Gemma's GeGLU runs through llama.cpp's f16 GELU table (rgml computes the same), whose
/// steps of 2^-11 turn last-bit differences of its input (sums in another order) into
/// f16-sized ones: Gemma agrees to about 1e-3, not 1e-4.
pub fn tolerance(case: &str, base: f32, gemma: f32) -> f32 {
    if case == "gemma3" {
        gemma
    } else {
        base
    }
}

/// Every position's logits of `path` on the fixture's prompt, in one batch, on `backend`.
pub fn logits_on<B: Backend>(path: &Path, kv: KvType, attention: Attention, backend: B) -> Vec<f32> {
    let opts = LoadOptions { n_ctx: Some(128), kv_type: kv, attention, n_seq: 1 };
    let mut m = Model::load_with(path, opts, backend).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    m.eval(&tokens()).unwrap()
}
