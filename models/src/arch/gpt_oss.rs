//! gpt-oss (OpenAI's open-weight MoE): pre-norm attention with Q/K/V and output
//! biases, a learned sink logit per head in every softmax, sliding-window layers
//! alternating with full ones (every even layer windowed unless the file says),
//! NEOX rotation (YaRN in the released files); a mixture of experts with a biased
//! router whose top logits are softmaxed (not the other way round), per-expert
//! biases and the clamped SwiGLU (`swiglu_oai`). The norm before the experts is
//! the file's `post_attention_norm`.

use rgml::{GluOp, Result, TensorId};

use crate::transformer::blocks::Block;
use crate::transformer::hparams::{meta, read_sliding_window, Gating, Hparams, Keys};
use crate::transformer::weights::{Layer, Needs};
use crate::transformer::Architecture;

/// Windowed layers alternate with full ones unless the file gives a pattern.
const SWA_PERIOD: usize = 2;

/// The `gpt-oss` architecture.
pub(crate) const ARCH: Architecture = Architecture {
    name: "gpt-oss",
    rope_mode: rgml::RopeParams::NEOX,
    read_hparams,
    needs: Needs { ffn_norm_name: "post_attention_norm", ..Needs::LLAMA },
    block,
};

/// The window (required, as llama.cpp), its rope base (`rope.freq_base_swa`, else
/// the global base, at the global scale), the experts' gating (softmax of the
/// picked logits, not renormalised), the attention scale 1/√head_dim.
fn read_hparams(k: &Keys, hp: &mut Hparams) -> Result<()> {
    let base = k.opt_f32("rope.freq_base_swa")?.unwrap_or(hp.rope.freq_base);
    hp.swa = read_sliding_window(k, hp.n_layer, SWA_PERIOD, base, hp.rope.freq_scale)?;
    if hp.swa.is_none() {
        return Err(meta(&k.key("attention.sliding_window"), "gpt-oss needs its sliding window"));
    }
    let m = hp.moe.as_mut().ok_or_else(|| meta(&k.key("expert_count"), "gpt-oss needs its experts"))?;
    m.gating = Gating::SoftmaxWeight;
    m.norm_weights = false;
    Ok(())
}

/// `s = x + attn(norm(x))` with sinks, then `s + experts(norm(s))`.
fn block(b: &mut Block, l: &Layer, x: TensorId) -> Result<TensorId> {
    let (q, k, v) = b.qkv(l, b.norm_opt(x, l.attn_norm)?)?;
    let a = b.attention(l, b.rope(l, q)?, b.rope(l, k)?, v, b.hp.kq_scale)?;
    let (a, x) = b.last_rows(l, a, x)?;
    let s = b.c.add(b.attn_out(l, a)?, x)?;
    b.c.add(b.ffn(l, b.norm_opt(s, l.ffn_norm)?, GluOp::SwigluOai)?, s)
}
