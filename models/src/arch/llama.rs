//! Llama (1 to 3, and the models on its graph): pre-norm attention with rotary
//! embedding (llama-3's frequency factors where the file has them) and a SwiGLU
//! feed-forward; optional projection biases. Qwen 2 and 3 run this block too.

use rgml::{Result, TensorId};

use crate::transformer::blocks::Block;
use crate::transformer::weights::{Layer, Needs};
use crate::transformer::Architecture;
use rgml::GluOp;

pub(super) const NEEDS: Needs = Needs { qk_norm: false, post_norms: false, fused_gate_up: false };

/// The `llama` architecture.
pub(crate) const ARCH: Architecture = Architecture {
    name: "llama",
    rope_mode: rgml::RopeParams::NORMAL,
    read_hparams: Architecture::no_own_hparams,
    needs: NEEDS,
    block,
};

/// `x + attn(norm(x))`, then `+ ffn(norm(·))`; the query and key heads normed first
/// where the layer has head norms (Qwen 3).
pub(super) fn block(b: &mut Block, l: &Layer, x: TensorId) -> Result<TensorId> {
    let (q, k, v) = b.qkv(l, b.norm(x, l.attn_norm)?)?;
    let (q, k) = (b.norm_opt(q, l.q_norm)?, b.norm_opt(k, l.k_norm)?);
    let a = b.attention(l, b.rope(l, q)?, b.rope(l, k)?, v, b.hp.kq_scale)?;
    let (a, x) = b.last_rows(l, a, x)?;
    let x = b.c.add(b.attn_out(l, a)?, x)?;
    b.c.add(b.ffn(l, b.norm(x, l.ffn_norm)?, GluOp::Swiglu)?, x)
}
