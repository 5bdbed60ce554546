//! Llama (1 to 3, and the models on its graph): pre-norm attention with rotary
//! embedding (llama-3's frequency factors where the file has them) and a SwiGLU
//! feed-forward; optional projection biases; Mixtral is this architecture with
//! experts. Qwen 2 and 3 (and their MoE forms) run this block too.

use rgml::{Result, TensorId};

use crate::transformer::blocks::Block;
use crate::transformer::hparams::{Hparams, Keys};
use crate::transformer::weights::{Layer, Needs};
use crate::transformer::Architecture;
use rgml::GluOp;

pub(super) const NEEDS: Needs = Needs::LLAMA;

/// The `llama` architecture.
pub(crate) const ARCH: Architecture = Architecture {
    name: "llama",
    rope_mode: rgml::RopeParams::NORMAL,
    read_hparams: normed_experts,
    needs: NEEDS,
    block,
};

/// With experts (Mixtral): the picked experts' softmax weights renormalised to
/// sum to 1, as llama.cpp builds Llama's experts whatever the file says. Qwen 3
/// MoE does the same.
pub(super) fn normed_experts(_k: &Keys, hp: &mut Hparams) -> Result<()> {
    if let Some(m) = &mut hp.moe {
        m.norm_weights = true;
    }
    Ok(())
}

/// `x + attn(norm(x))`, then `+ ffn(norm(·))`; the queries and keys normed first
/// where the layer has their norms (per head: Qwen 3; whole: OLMoE).
pub(super) fn block(b: &mut Block, l: &Layer, x: TensorId) -> Result<TensorId> {
    let (q, k, v) = b.qkv(l, b.norm_opt(x, l.attn_norm)?)?;
    let (q, k) = b.head_norms(l, q, k)?;
    let a = b.attention(l, b.rope(l, q)?, b.rope(l, k)?, v, b.hp.kq_scale)?;
    let (a, x) = b.last_rows(l, a, x)?;
    let x = b.c.add(b.attn_out(l, a)?, x)?;
    b.c.add(b.ffn(l, b.norm_opt(x, l.ffn_norm)?, GluOp::Swiglu)?, x)
}
