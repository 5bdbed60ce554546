//! Writes a synthetic llama GGUF of random weights (for profiling, and for timing
//! rgml against llama.cpp on a large model):
//!
//! `cargo run --release --example synthetic_llama -- OUT.gguf [TYPE] [--1b | --moe-1b | --tiny] [--tokenizer-from FILE.gguf]`
//!
//! TYPE defaults to q4_0. `--1b` writes the 1B-class shape (n_embd 2048, 16 layers,
//! n_ff 5632, 32 heads, 8 KV heads) instead of `rgml bench --llama`'s 4-layer one,
//! `--moe-1b` a Mixtral-style mixture of experts of about 1B parameters (8 layers of
//! 8 experts, 2 used; `LlamaDims::MOE_1B`), `--tiny` a 4-layer llama of width 256
//! (`LlamaDims::TINY`).
//! `--tokenizer-from` copies that file's tokenizer (vocabulary included), which
//! llama.cpp needs to load the file.

use rgml_models::synthetic::{synthetic_llama, LlamaDims};

fn main() -> Result<(), String> {
    let usage = "usage: synthetic_llama OUT.gguf [TYPE] [--1b | --moe-1b | --tiny] [--tokenizer-from FILE.gguf]";
    let (mut out, mut dtype, mut dims, mut tokenizer) = (None, rgml::DType::Q4_0, LlamaDims::BENCH, None);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--1b" => dims = LlamaDims::ONE_B,
            "--moe-1b" => dims = LlamaDims::MOE_1B,
            "--tiny" => dims = LlamaDims::TINY,
            "--tokenizer-from" => tokenizer = Some(args.next().ok_or(usage)?),
            _ if out.is_none() => out = Some(a),
            _ => dtype = rgml::DType::from_name(&a).ok_or_else(|| format!("unknown type {a}"))?,
        }
    }
    let out = out.ok_or(usage)?;
    let file = match &tokenizer {
        Some(p) => Some(rgml::gguf::GgufFile::open(p).map_err(|e| e.to_string())?),
        None => None,
    };
    synthetic_llama(out.as_ref(), dtype, dims, file.as_ref().map(|f| f.header())).map_err(|e| e.to_string())
}
