//! BERT (`bert`): an encoder of learned absolute positions, Q/K/V projections with
//! biases, post-norm residual layers (LayerNorm after attention and after the
//! feed-forward) and a GELU feed-forward with biases; every token attends to every
//! other. Its output is the embeddings of the input's tokens (`rgml embed`).

use rgml::{Result, TensorId};

use crate::transformer::encoder::{EncoderLayer, EncoderNeeds};
use crate::transformer::encoder_blocks::EncoderBlock;
use crate::transformer::EncoderArchitecture;

/// The `bert` architecture.
pub(crate) const ARCH: EncoderArchitecture = EncoderArchitecture {
    name: "bert",
    // llama.cpp lists BERT as NEOX, though its graph rotates nothing
    rope_mode: rgml::RopeParams::NEOX,
    needs: EncoderNeeds { position_embd: true, rope: false, ffn_gate: false },
    block,
};

/// `s = norm(x + attn(x))`, then `norm(s + ffn(s))` (each LayerNorm with its bias);
/// the feed-forward is `down·gelu(up·s + b) + b`. Nomic-BERT's layer is this one with
/// rotary queries and keys and a gated feed-forward (the blocks see them in the
/// hyperparameters and the layer).
pub(super) fn block(b: &EncoderBlock, l: &EncoderLayer, x: TensorId) -> Result<TensorId> {
    let (q, k, v) = b.qkv(l, x)?;
    let a = b.attention(l, b.rope(q)?, b.rope(k)?, v)?;
    let s = b.layer_norm(b.c.add(a, x)?, l.attn_out_norm)?;
    b.layer_norm(b.c.add(b.ffn(l, s)?, s)?, l.out_norm)
}
