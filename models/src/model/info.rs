//! What a model file says about running it, read without loading it (for
//! `rgml inspect` and the benchmarks), and the greedy choice of a token.

use std::path::Path;

use rgml::gguf::GgufFile;

use crate::transformer::hparams::Hparams;

/// What rgml derives from the model file at `path` (for `rgml inspect`), or why it
/// cannot run it.
pub fn describe_file(path: &Path) -> String {
    match GgufFile::open(path).and_then(|f| Hparams::from_gguf(&f)) {
        Ok(hp) => hp.describe(),
        Err(e) => format!("rgml cannot run this file: {e}"),
    }
}

/// Bytes of weights one decode step reads from the model file `f`: every tensor, but of
/// the token embeddings one row, unless the output projection is tied to them (no
/// `output.weight`: then the whole matrix is read for the logits). The bound on decode
/// speed is the machine's read bandwidth divided by this.
pub fn weight_bytes_per_token(f: &GgufFile) -> u64 {
    let tied = f.tensor("output.weight").is_none();
    f.tensors()
        .iter()
        .map(|t| match t.name.as_str() {
            "token_embd.weight" if !tied => t.size / t.ne[1].max(1) as usize,
            _ => t.size,
        } as u64)
        .sum()
}

/// Index of the largest value (the first on ties).
pub fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as u32
}
