//! Phi-3: fused QKV and gate-up projections, NEOX rotary embedding (with the long or
//! short frequency factors of the 128k models), queries scaled before attention.

use rgml::{Result, TensorId};

use crate::transformer::blocks::Block;
use crate::transformer::hparams::{Hparams, Keys};
use crate::transformer::weights::{Layer, Needs};
use crate::transformer::Architecture;
use rgml::GluOp;

pub(super) const NEEDS: Needs = Needs { fused_gate_up: true, ..Needs::LLAMA };

/// The `phi3` architecture.
pub(crate) const ARCH: Architecture =
    Architecture { name: "phi3", rope_mode: rgml::RopeParams::NEOX, read_hparams, needs: NEEDS, block };

/// llama.cpp turns Phi-3's sliding window off (its conversions mark it wrongly); so does rgml.
pub(super) fn read_hparams(_k: &Keys, hp: &mut Hparams) -> Result<()> {
    hp.swa = None;
    Ok(())
}

/// `x + attn(norm(x))` (queries scaled by 1/√head_dim first), then `+ ffn(norm(·))`
/// with SwiGLU over the halves of the fused up projection.
pub(super) fn block(b: &mut Block, l: &Layer, x: TensorId) -> Result<TensorId> {
    let (q, k, v) = b.qkv(l, b.norm_opt(x, l.attn_norm)?)?;
    let (q, k) = (b.rope(l, q)?, b.rope(l, k)?);
    let a = b.attention(l, b.c.scale(q, b.hp.kq_scale)?, k, v, 1.0)?;
    let (a, x) = b.last_rows(l, a, x)?;
    let x = b.c.add(b.attn_out(l, a)?, x)?;
    b.c.add(x, b.ffn(l, b.norm_opt(x, l.ffn_norm)?, GluOp::Swiglu)?)
}
