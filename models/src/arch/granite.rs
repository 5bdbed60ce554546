//! Granite (IBM, dense): Llama's block with four multipliers from the file —
//! the token embeddings times `embedding_scale`, each block's attention and
//! feed-forward outputs times `residual_scale` before they join the residual,
//! attention scaled by `attention.scale` instead of 1/√head_dim, and the logits
//! divided by `logit_scale`; `rope.scaling.finetuned` false turns rotation off.

use rgml::{GluOp, Result, TensorId};

use crate::transformer::blocks::Block;
use crate::transformer::hparams::{meta, Hparams, Keys};
use crate::transformer::weights::Layer;
use crate::transformer::Architecture;

/// The `granite` architecture.
pub(crate) const ARCH: Architecture = Architecture {
    name: "granite",
    rope_mode: rgml::RopeParams::NORMAL,
    read_hparams,
    needs: super::llama::NEEDS,
    block,
};

/// The multipliers, as llama.cpp reads them: `logit_scale` required, the others
/// optional (0 or absent: none; the attention scale 1/√head_dim).
fn read_hparams(k: &Keys, hp: &mut Hparams) -> Result<()> {
    let positive = |key: &str, v: Option<f32>| -> Result<Option<f32>> {
        match v {
            Some(v) if !v.is_finite() || v < 0.0 => Err(meta(&k.key(key), format!("{v} is not a usable multiplier"))),
            Some(0.0) => Ok(None),
            v => Ok(v),
        }
    };
    let logit = positive("logit_scale", Some(k.f32("logit_scale")?))?
        .ok_or_else(|| meta(&k.key("logit_scale"), "0 would divide the logits by zero"))?;
    hp.logit_scale = Some(logit);
    hp.residual_scale = positive("residual_scale", k.opt_f32("residual_scale")?)?;
    hp.embd_scale = positive("embedding_scale", k.opt_f32("embedding_scale")?)?;
    if let Some(s) = positive("attention.scale", k.opt_f32("attention.scale")?)? {
        hp.kq_scale = s;
    }
    if let Some(rgml::gguf::Value::Bool(false)) = k.get("rope.scaling.finetuned") {
        hp.no_rope = vec![true; hp.n_layer];
    }
    if hp.moe.is_some() {
        return Err(meta(&k.key("expert_count"), "granite with experts is the granitemoe architecture"));
    }
    Ok(())
}

/// `x + r·attn(norm(x))`, then `+ r·ffn(norm(·))` with `r` the residual scale.
fn block(b: &mut Block, l: &Layer, x: TensorId) -> Result<TensorId> {
    let (q, k, v) = b.qkv(l, b.norm_opt(x, l.attn_norm)?)?;
    let a = b.attention(l, b.rope(l, q)?, b.rope(l, k)?, v, b.hp.kq_scale)?;
    let (a, x) = b.last_rows(l, a, x)?;
    let x = b.c.add(b.residual(b.attn_out(l, a)?)?, x)?;
    let f = b.ffn(l, b.norm_opt(x, l.ffn_norm)?, GluOp::Swiglu)?;
    b.c.add(b.residual(f)?, x)
}
