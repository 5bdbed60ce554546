//! Perplexity as llama.cpp's `llama-perplexity` measures it: the text's
//! tokens (BOS first when the vocabulary adds one) cut into chunks of `n_ctx`,
//! each chunk run from an empty cache with its first token replaced by BOS,
//! and the second half of each chunk scored: position `i ≥ n_ctx/2` predicts
//! token `i + 1`. `PPL = exp(mean NLL)`, with llama.cpp's uncertainty
//! `ppl · sqrt((mean NLL² − mean NLL²) / (count − 1))`.

use rgml::{Backend, Error, Result};

use crate::model::Model;

/// The result of [`perplexity`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Perplexity {
    /// `exp` of the mean negative log-likelihood.
    pub ppl: f64,
    /// llama.cpp's `+/-` figure.
    pub uncertainty: f64,
    /// Chunks scored.
    pub chunks: usize,
    /// Tokens scored.
    pub count: usize,
}

/// `-log softmax(logits)[target]`, as llama.cpp computes it: the max in f32,
/// the sum of `exp` in f64.
pub fn nll(logits: &[f32], target: usize) -> f64 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let sum: f64 = logits.iter().map(|&v| ((v - max) as f64).exp()).sum();
    -((logits[target] - max) as f64 - sum.ln())
}

/// The perplexity of `tokens` (already tokenized with the vocabulary's
/// special tokens) under `model`, in chunks of `n_ctx` tokens; `bos` replaces
/// each chunk's first token when the vocabulary adds BOS. `progress(chunk,
/// ppl so far)` is called after each chunk. Errors when the text has fewer
/// than `2 · n_ctx` tokens (as llama.cpp), `n_ctx < 4`, or the model's cache
/// holds fewer than `n_ctx` positions.
pub fn perplexity<B: Backend>(
    model: &mut Model<B>,
    tokens: &[u32],
    n_ctx: usize,
    bos: Option<u32>,
    mut progress: impl FnMut(usize, f64),
) -> Result<Perplexity> {
    if n_ctx < 4 || model.n_ctx() < n_ctx {
        return Err(Error::Invalid(format!(
            "perplexity: a context of {n_ctx} (at least 4, at most the model's {} positions)",
            model.n_ctx()
        )));
    }
    if tokens.len() < 2 * n_ctx {
        return Err(Error::Invalid(format!(
            "perplexity: the text tokenizes to {} tokens; a context of {n_ctx} needs at least {}",
            tokens.len(),
            2 * n_ctx
        )));
    }
    let (chunks, first) = (tokens.len() / n_ctx, n_ctx / 2);
    let (mut sum, mut sum2, mut count) = (0f64, 0f64, 0usize);
    for c in 0..chunks {
        let mut chunk = tokens[c * n_ctx..(c + 1) * n_ctx].to_vec();
        if let Some(b) = bos {
            chunk[0] = b;
        }
        model.reset()?;
        let logits = model.eval(&chunk)?;
        let n_vocab = logits.len() / n_ctx;
        for i in first..n_ctx - 1 {
            let target = tokens[c * n_ctx + i + 1] as usize;
            let v = nll(&logits[i * n_vocab..(i + 1) * n_vocab], target);
            sum += v;
            sum2 += v * v;
            count += 1;
        }
        progress(c + 1, (sum / count as f64).exp());
    }
    let mean = sum / count as f64;
    let ppl = mean.exp();
    let var = sum2 / count as f64 - mean * mean;
    let uncertainty = if var > 0.0 && count > 1 { (var / (count - 1) as f64).sqrt() * ppl } else { 0.0 };
    Ok(Perplexity { ppl, uncertainty, chunks, count })
}

#[cfg(test)]
mod tests {
    use super::nll;

    #[test]
    fn nll_is_minus_log_softmax() {
        assert!((nll(&[0.5; 8], 3) - 8f64.ln()).abs() < 1e-12);
        let logits = [1.0f32, -2.0, 3.5, 0.0];
        let z: f64 = logits.iter().map(|&v| (v as f64).exp()).sum();
        assert!((nll(&logits, 2) - (z.ln() - 3.5)).abs() < 1e-6);
        // large logits do not overflow
        assert!(nll(&[1000.0, 0.0], 0).abs() < 1e-12);
    }
}
