//! A multilayer perceptron for [`super::Trainer`]: its parameters and its graph.

use crate::context::Context;
use crate::error::{Error, Result};
use crate::tensor::TensorId;

/// The parameters of a multilayer perceptron with layer widths `sizes`
/// (inputs first, classes last): per layer a weight `[n_in, n_out]` uniform in
/// ±sqrt(6 / n_in) (He's uniform, for the ReLUs) and a zero bias `[n_out, 1]`,
/// from a generator seeded with `seed`.
pub fn mlp_params(sizes: &[usize], seed: u64) -> Vec<(Vec<i64>, Vec<f32>)> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut uniform = move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    };
    let mut out = Vec::new();
    for w in sizes.windows(2) {
        let bound = (6.0 / w[0] as f32).sqrt();
        out.push((vec![w[0] as i64, w[1] as i64], (0..w[0] * w[1]).map(|_| uniform() * bound).collect()));
        out.push((vec![w[1] as i64, 1], vec![0.0; w[1]]));
    }
    out
}

/// The perceptron of [`mlp_params`] on `input` (`[n_in, batch]`): per layer
/// `W·x + b`, a ReLU between layers; returns the logits.
pub fn mlp(ctx: &Context, input: TensorId, params: &[TensorId]) -> Result<TensorId> {
    let mut x = input;
    for (i, layer) in params.chunks(2).enumerate() {
        let [w, b] = layer else { return Err(Error::Invalid("mlp: parameters come in (weight, bias) pairs".into())) };
        x = ctx.add(ctx.mul_mat(*w, x)?, *b)?;
        if i + 1 < params.len() / 2 {
            x = ctx.relu(x)?;
        }
    }
    Ok(x)
}
