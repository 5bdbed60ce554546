//! The tiny llama fixture (tests/fixtures/tiny_llama: provenance in its
//! README) shared by the llama tests, and the CUDA device helper.

// each test crate uses a different subset
#![allow(dead_code, unused_imports)]

use std::path::PathBuf;

pub mod arch;
#[path = "../../../tests/common/mod.rs"]
mod cuda_common;
pub use cuda_common::{blocks, cuda, Rng};

/// A file of the tiny llama fixture.
pub fn fixture(p: &str) -> PathBuf {
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tiny_llama");
    // a test binary carried to another machine (scripts/gpu-check.sh) runs in the repository root there
    let dir = if built.exists() { built } else { PathBuf::from("tests/fixtures/tiny_llama") };
    dir.join(p)
}

/// The 16 prompt tokens llama.cpp's logits were computed for.
pub fn tokens() -> Vec<u32> {
    let s = std::fs::read_to_string(fixture("tokens.json")).unwrap();
    s.trim().trim_start_matches('[').trim_end_matches(']').split(',').map(|t| t.trim().parse().unwrap()).collect()
}

/// llama.cpp's logits for the F32 model, position-major.
pub fn reference() -> Vec<f32> {
    llamacpp_logits("f32")
}

/// llama.cpp's logits for the model of type `name` (`f32`, `q8_0`, `q4_0`), position-major.
pub fn llamacpp_logits(name: &str) -> Vec<f32> {
    std::fs::read(fixture(&format!("logits_{name}_llamacpp.f32")))
        .unwrap()
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The F32 model quantized to `dt` by rgml, in a temporary file named after
/// `tag` (the caller removes it).
pub fn quantized_model(dt: rgml::DType, tag: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("rgml-llama-{tag}-{}-{}.gguf", std::process::id(), dt.name()));
    rgml_models::quantize::quantize(&fixture("tiny_llama_f32.gguf"), &path, dt, |_| {}).unwrap();
    path
}

/// The largest absolute difference of two equally long slices.
pub fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()))
}

/// A copy of the GGUF file `src` in the temporary folder (named after `name`) with
/// `keys` set and, where `tensors` names one, that tensor's bytes, type and shape
/// replaced; the caller removes it.
pub fn gguf_with(
    src: &std::path::Path,
    name: &str,
    keys: &[(&str, rgml::gguf::Value)],
    tensors: &[(&str, rgml::DType, Vec<i64>, Vec<u8>)],
) -> PathBuf {
    let f = rgml::gguf::GgufFile::open(src).unwrap();
    let mut w = rgml::gguf::GgufWriter::new();
    for (k, v) in f.metadata() {
        w.set(k.clone(), v.clone()).unwrap();
    }
    for (k, v) in keys {
        w.set(*k, v.clone()).unwrap();
    }
    for t in f.tensors() {
        match tensors.iter().find(|r| r.0 == t.name) {
            Some((n, dt, ne, bytes)) => w.add_tensor(*n, *dt, ne, &bytes[..]).unwrap(),
            None => w.add_tensor(&t.name, t.dtype, &t.ne[..t.n_dims as usize], f.tensor_bytes(t)).unwrap(),
        };
    }
    let path = std::env::temp_dir().join(format!("rgml-test-{}-{name}.gguf", std::process::id()));
    w.write(&path).unwrap();
    path
}

// `target/models/FILE` or a SKIP line: the one helper the CLI's tests use too
#[path = "../../../cli/tests/common/models.rs"]
mod models;
pub use models::model_path;
