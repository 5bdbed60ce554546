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
/// `output.weight`: then the whole matrix is read for the logits), and of a stack of
/// experts (`*_exps`) the share of the experts a token uses. The bound on decode
/// speed is the machine's read bandwidth divided by this.
pub fn weight_bytes_per_token(f: &GgufFile) -> u64 {
    let tied = f.tensor("output.weight").is_none();
    let arch = f.get_str("general.architecture").unwrap_or_default();
    let used = f.get_u64(&format!("{arch}.expert_used_count")).unwrap_or(0);
    f.tensors()
        .iter()
        .map(|t| match t.name.as_str() {
            "token_embd.weight" if !tied => (t.size / t.ne[1].max(1) as usize) as u64,
            n if n.contains("_exps.") && t.ne[2] > 1 => t.size as u64 / t.ne[2] as u64 * used.min(t.ne[2] as u64),
            _ => t.size as u64,
        })
        .sum()
}

/// The types of the matrices the model file `f` multiplies by: its 2-D weights, the
/// token embeddings only when the output projection is tied to them (otherwise they are
/// only looked up by row).
pub fn matmul_weight_types(f: &GgufFile) -> std::collections::BTreeSet<rgml::DType> {
    let tied = f.tensor("output.weight").is_none();
    f.tensors()
        .iter()
        .filter(|t| t.n_dims >= 2 && t.ne[1] > 1 && (tied || t.name != "token_embd.weight"))
        .map(|t| t.dtype)
        .collect()
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
