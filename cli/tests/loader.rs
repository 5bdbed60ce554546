//! The loader refuses broken files with an error that names what is wrong, before it
//! allocates anything: absurd hyperparameters, tensors of the wrong shape, unknown
//! architectures and rope scaling types, caches too large for the machine.

// the model library's test helpers and fixtures, shared
#[path = "../../models/tests/common/mod.rs"]
mod common;

use std::process::Command;

use common::{fixture, gguf_with};
use rgml::gguf::Value;
use rgml_models::model::kv::KvType;
use rgml_models::model::{LoadOptions, Model};

fn load_err(keys: &[(&str, Value)], tensors: &[(&str, rgml::DType, Vec<i64>, Vec<u8>)], tag: &str) -> String {
    let path = gguf_with(&fixture("tiny_llama_f32.gguf"), tag, keys, tensors);
    let r = Model::load(&path, Some(64), 1);
    std::fs::remove_file(&path).ok();
    match r {
        Ok(_) => panic!("{tag}: loaded"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn absurd_hyperparameters_are_errors() {
    let cases: [(&str, Value, &str); 6] = [
        ("llama.block_count", Value::U32(u32::MAX), "llama.block_count"),
        ("llama.block_count", Value::U32(0), "llama.block_count"),
        ("llama.attention.head_count", Value::U32(0), "llama.attention.head_count"),
        ("llama.attention.head_count", Value::U32(6), "not divisible by the 6 heads"),
        ("llama.context_length", Value::U32((1 << 24) + 1), "llama.context_length"),
        ("llama.attention.head_count_kv", Value::U32(3), "does not divide"),
    ];
    for (key, v, want) in cases {
        let e = load_err(&[(key, v)], &[], "hparams");
        assert!(e.contains(want), "{key}: {e}");
    }
}

#[test]
fn a_wrong_shaped_tensor_is_named_with_both_shapes() {
    let bytes: Vec<u8> = (0..32).flat_map(|_| 1f32.to_le_bytes()).collect();
    let e = load_err(&[], &[("blk.1.ffn_norm.weight", rgml::DType::F32, vec![32], bytes)], "norm");
    assert!(e.contains("blk.1.ffn_norm.weight") && e.contains("[32]") && e.contains("[64]"), "{e}");
    let e = load_err(&[], &[("blk.0.attn_norm.weight", rgml::DType::Q8_0, vec![64], vec![0; 68])], "qnorm");
    assert!(e.contains("Q8_0") || e.contains("q8_0"), "a quantized norm: {e}");
}

#[test]
fn an_unknown_architecture_or_scaling_type_is_named() {
    let e = load_err(&[("general.architecture", Value::from("mamba"))], &[], "arch");
    assert!(e.contains("mamba") && e.contains("llama") && e.contains("gemma3"), "{e}");
    let e = load_err(&[("llama.rope.scaling.type", Value::from("longrope"))], &[], "rope");
    assert!(e.contains("longrope"), "{e}");
}

#[test]
fn a_cache_too_large_for_the_machine_is_an_error_before_allocating() {
    let path = fixture("tiny_llama_f32.gguf");
    // 512 layers of 2^24 positions: 2 TiB of F32 cache, refused before the tensors are read
    let big = gguf_with(&path, "big", &[("llama.block_count", Value::U32(512))], &[]);
    let opts = LoadOptions { n_ctx: Some(1 << 24), kv_type: KvType::F32, ..Default::default() };
    let e = Model::load_with(&big, opts, rgml::CpuBackend::new(1).unwrap()).err().map(|e| e.to_string());
    std::fs::remove_file(&big).ok();
    let e = e.expect("a 2 TiB cache loaded");
    assert!(e.contains("KV cache") && e.contains("MiB") && e.contains("--n-ctx"), "{e}");
    // a file claiming a 2^20-position training context gets the 4096-position default
    let long = gguf_with(&path, "long", &[("llama.context_length", Value::U32(1 << 20))], &[]);
    let m = Model::load(&long, None, 1).unwrap();
    std::fs::remove_file(&long).ok();
    assert_eq!(m.n_ctx(), 4096);
    let e = Model::load_with(
        &path,
        LoadOptions { n_ctx: Some(1_000_000_000_000), ..Default::default() },
        rgml::CpuBackend::new(1).unwrap(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("--n-ctx 1000000000000"), "{e}");
    // a Q8_0 cache needs heads of multiples of 32 (the tiny model's are 16)
    let opts = LoadOptions { n_ctx: Some(64), kv_type: KvType::Q8_0, ..Default::default() };
    let e = Model::load_with(&path, opts, rgml::CpuBackend::new(1).unwrap()).err().unwrap().to_string();
    assert!(e.contains("q8_0") && e.contains("16"), "{e}");
}

#[test]
fn the_cli_says_why() {
    let rgml = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_rgml")).args(args).output().unwrap();
    let tiny = fixture("tiny_llama_f32.gguf").to_string_lossy().into_owned();
    let o = rgml(&["run", &tiny, "--tokens", "1,2", "--n-ctx", "1000000000000"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--n-ctx"), "{}", String::from_utf8_lossy(&o.stderr));
    let mamba =
        gguf_with(&fixture("tiny_llama_f32.gguf"), "mamba-cli", &[("general.architecture", Value::from("mamba"))], &[]);
    let o = rgml(&["run", mamba.to_str().unwrap(), "--tokens", "1,2"]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.code() == Some(2) && err.contains("mamba"), "{err}");
    // inspect still lists the file and says why it cannot run it
    let o = rgml(&["inspect", mamba.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success() && out.contains("cannot run") && out.contains("mamba"), "{out}");
    std::fs::remove_file(&mamba).ok();
    let o = rgml(&["inspect", &tiny]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(out.contains("architecture llama: 2 layers, n_embd 64, 4 heads (2 kv) of 16"), "{out}");
    let o = rgml(&["run", &tiny, "--tokens", "1,2", "--kv-type", "q4"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("q4"));
}
