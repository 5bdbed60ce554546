//! Writes a synthetic llama GGUF of random weights (for profiling `rgml run`):
//! `cargo run --release --example synthetic_llama -- OUT.gguf [q4_0]`.

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let out = args.next().ok_or("usage: synthetic_llama OUT.gguf [TYPE]")?;
    let dt = rgml::DType::from_name(&args.next().unwrap_or_else(|| "q4_0".into())).ok_or("unknown type")?;
    rgml_models::bench::synthetic_llama(out.as_ref(), dt, 2048, 4, 5632, 32000).map_err(|e| e.to_string())
}
