//! Gemma 3: embeddings scaled by √n_embd, Q/K head norms, norms after attention and
//! after the GeGLU feed-forward, and local layers attending through a sliding window
//! with their own rope base.

use rgml::{Result, TensorId};

use crate::transformer::blocks::Block;
use crate::transformer::hparams::{meta, read_sliding_window, Hparams, Keys};
use crate::transformer::weights::{Layer, Needs};
use crate::transformer::Architecture;
use rgml::GluOp;

pub(super) const NEEDS: Needs = Needs { qk_norm: true, post_norms: true, ..Needs::LLAMA };

/// The `gemma3` architecture.
pub(crate) const ARCH: Architecture =
    Architecture { name: "gemma3", rope_mode: rgml::RopeParams::NEOX, read_hparams, needs: NEEDS, block };

/// Gemma 3's layers repeat five local (windowed) layers and one global one.
const SWA_PERIOD: usize = 6;

/// The window (`attention.sliding_window`; absent or 0: none), which layers use it
/// (`attention.sliding_window_pattern`: an array of flags or a period, default 6),
/// their rope base (`rope.freq_base_swa`, default 10000), the attention scale
/// (1/√head_dim; 1/√(n_embd/n_head) for the 27B model, which llama.cpp knows by its 62
/// layers) and the embedding scale.
pub(super) fn read_hparams(k: &Keys, hp: &mut Hparams) -> Result<()> {
    let freq_base = k.opt_f32("rope.freq_base_swa")?.unwrap_or(10000.0);
    hp.swa = read_sliding_window(k, hp.n_layer, SWA_PERIOD, freq_base, 1.0)?;
    if k.opt_f32("final_logit_softcapping")?.is_some_and(|c| c != 0.0) {
        return Err(meta(&k.key("final_logit_softcapping"), "logit soft-capping is not supported"));
    }
    let per_head = if hp.n_layer == 62 { (hp.n_embd / hp.n_head) as f32 } else { hp.head_dim as f32 };
    hp.kq_scale = 1.0 / per_head.sqrt();
    hp.embd_scale = Some((hp.n_embd as f32).sqrt());
    Ok(())
}

/// `s = x + norm(attn(norm(x)))`, then `s + norm(ffn(norm(s)))`.
pub(super) fn block(b: &mut Block, l: &Layer, x: TensorId) -> Result<TensorId> {
    let (q, k, v) = b.qkv(l, b.norm_opt(x, l.attn_norm)?)?;
    let (q, k) = b.head_norms(l, q, k)?;
    let q = b.c.scale(b.rope(l, q)?, b.hp.kq_scale)?;
    let k = b.rope(l, k)?;
    let a = b.attention(l, q, k, v, 1.0)?;
    let (a, x) = b.last_rows(l, a, x)?;
    let s = b.c.add(b.norm_opt(b.attn_out(l, a)?, l.attn_post_norm)?, x)?;
    let f = b.ffn(l, b.norm_opt(s, l.ffn_norm)?, GluOp::Geglu)?;
    b.c.add(b.norm_opt(f, l.ffn_post_norm)?, s)
}
