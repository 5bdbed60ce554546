//! OLMo 2: no norms before attention or the feed-forward; instead RMS norms of
//! their outputs (`post_attention_norm`, `post_ffw_norm`) before each residual
//! add, and RMS norms over the whole query and key projections (not per head);
//! NEOX rotation. OLMo 3's sliding-window layers are refused.

use rgml::{GluOp, Result, TensorId};

use crate::transformer::blocks::Block;
use crate::transformer::hparams::{meta, Hparams, Keys};
use crate::transformer::weights::{Layer, Needs};
use crate::transformer::Architecture;

/// Post-norms and whole-projection Q/K norms, no pre-norms.
const NEEDS: Needs = Needs { qk_norm: true, full_qk_norm: true, pre_norms: false, post_norms: true, ..Needs::LLAMA };

/// The `olmo2` architecture.
pub(crate) const ARCH: Architecture =
    Architecture { name: "olmo2", rope_mode: rgml::RopeParams::NEOX, read_hparams, needs: NEEDS, block };

/// A sliding window (OLMo 3, whose windowed layers rotate without the global
/// scaling) is not supported yet: refused rather than run as something else.
fn read_hparams(k: &Keys, _hp: &mut Hparams) -> Result<()> {
    if k.opt_count("attention.sliding_window", 0, usize::MAX)?.is_some_and(|w| w > 0) {
        return Err(meta(&k.key("attention.sliding_window"), "OLMo 3's sliding-window layers are not supported"));
    }
    Ok(())
}

/// `s = x + norm(attn(x))`, then `s + norm(ffn(s))`.
fn block(b: &mut Block, l: &Layer, x: TensorId) -> Result<TensorId> {
    let (q, k, v) = b.qkv(l, x)?;
    let (q, k) = b.head_norms(l, q, k)?;
    let a = b.attention(l, b.rope(l, q)?, b.rope(l, k)?, v, b.hp.kq_scale)?;
    let (a, x) = b.last_rows(l, a, x)?;
    let s = b.c.add(b.norm_opt(b.attn_out(l, a)?, l.attn_post_norm)?, x)?;
    let f = b.ffn(l, s, GluOp::Swiglu)?;
    b.c.add(b.norm_opt(f, l.ffn_post_norm)?, s)
}
