//! What the encoder architectures (BERT and its kin: [`crate::arch::ENCODERS`]) and the
//! embedding runtime ([`crate::embed`]) share: their hyperparameters, read as llama.cpp
//! reads them, and their tensors by llama.cpp's names (the description each encoder
//! architecture gives of itself is [`super::EncoderArchitecture`]). Encoders run without a KV
//! cache, every token attending to every other (unless the file says `attention.causal`),
//! and with LayerNorm (mean and variance, weight and bias) where decoders have RMS norms.

use rgml::gguf::{GgufFile, Value};
use rgml::{Result, TensorId};

use super::hparams::{meta, read_rope, Keys, Rope, MAX_CONTEXT};
use super::pooling::{read_pooling, Pooling};
use super::weights::{Loader, Qkv};

/// What sets one encoder architecture's files apart.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EncoderNeeds {
    /// Learned absolute positions (`position_embd.weight`, `[n_embd, n_ctx_train]`).
    pub position_embd: bool,
    /// Rotary positions on the queries and keys (the `rope.*` keys).
    pub rope: bool,
    /// A gated feed-forward (`ffn_gate.weight`); without, `up`, GELU, `down`.
    pub ffn_gate: bool,
}

/// An encoder's hyperparameters, from the GGUF metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct EncoderHparams {
    /// The architecture's GGUF name.
    pub arch: &'static str,
    /// Vocabulary size.
    pub n_vocab: usize,
    /// Embedding width.
    pub n_embd: usize,
    /// Layers.
    pub n_layer: usize,
    /// Attention heads.
    pub n_head: usize,
    /// Key/value heads.
    pub n_head_kv: usize,
    /// Width of a head: `n_embd / n_head` (llama.cpp's BERT graph has no other).
    pub head_dim: usize,
    /// Feed-forward width.
    pub n_ff: usize,
    /// Training context length (rows of `position_embd` where the architecture has it).
    pub n_ctx_train: usize,
    /// Token types (`tokenizer.ggml.token_type_count`; rgml feeds type 0, as llama.cpp).
    pub n_token_types: usize,
    /// LayerNorm epsilon (`attention.layer_norm_epsilon`).
    pub norm_eps: f32,
    /// Rotary embedding, for the architectures that use it.
    pub rope: Option<Rope>,
    /// `attention.causal` (default true, as llama.cpp; BERT files say false).
    pub causal: bool,
    /// `pooling_type`: the pooling the model was trained for, if the file names one.
    pub pooling: Option<Pooling>,
}

impl EncoderHparams {
    /// Width of all key (and value) heads together.
    pub fn n_embd_kv(&self) -> usize {
        self.head_dim * self.n_head_kv
    }

    /// A summary for `rgml inspect`.
    pub fn describe(&self) -> String {
        let pooling = self.pooling.map_or("unspecified (none)".to_string(), |p| p.to_string());
        let mut s = format!(
            "architecture {} (an encoder: embeddings only): {} layers, n_embd {}, {} heads ({} kv) of {}, n_ff {}, \
             vocab {}, context {}, {} token types, layer norm eps {:e}, {} attention, pooling {pooling}",
            self.arch,
            self.n_layer,
            self.n_embd,
            self.n_head,
            self.n_head_kv,
            self.head_dim,
            self.n_ff,
            self.n_vocab,
            self.n_ctx_train,
            self.n_token_types,
            self.norm_eps,
            if self.causal { "causal" } else { "bidirectional" },
        );
        if let Some(r) = &self.rope {
            s += &format!("\nrope: neox, {} dims, base {}, scale {}", r.n_rot, r.freq_base, r.freq_scale);
        }
        s
    }

    /// Reads and checks the hyperparameters of `f`, a file of the encoder architecture
    /// `name`, which needs `needs` and rotates heads as `rope_mode` says
    /// ([`super::EncoderArchitecture::read_hparams`] passes its own).
    pub(crate) fn read(
        f: &GgufFile,
        name: &'static str,
        needs: EncoderNeeds,
        rope_mode: i32,
    ) -> Result<EncoderHparams> {
        let k = Keys { f, prefix: name };
        let (n_layer, n_embd, n_head, n_head_kv) = k.layers_and_heads()?;
        if n_embd % n_head != 0 {
            let why = format!("{n_head} heads do not divide n_embd {n_embd}");
            return Err(meta(&k.key("attention.head_count"), why));
        }
        let head_dim = n_embd / n_head;
        for key in ["attention.key_length", "attention.value_length"] {
            // the graph's query projection is [n_embd, n_embd]: a head is n_embd / n_head wide
            if let Some(d) = k.opt_count(key, 1, 1 << 16)?.filter(|&d| d != head_dim) {
                return Err(meta(&k.key(key), format!("{d}; an encoder's heads are n_embd / n_head = {head_dim}")));
            }
        }
        let (n_ctx_train, n_vocab) = (k.count("context_length", 1, MAX_CONTEXT)?, k.n_vocab()?);
        let norm_eps = k.f32("attention.layer_norm_epsilon")?;
        if !(norm_eps.is_finite() && norm_eps >= 0.0) {
            return Err(meta(&k.key("attention.layer_norm_epsilon"), format!("{norm_eps} is not a usable epsilon")));
        }
        let rope = if needs.rope {
            let n_rot = k.opt_count("rope.dimension_count", 1, 1 << 16)?.unwrap_or(head_dim);
            if n_rot > head_dim || n_rot % 2 != 0 {
                let why = format!("{n_rot} rotated dims for heads of {head_dim}");
                return Err(meta(&k.key("rope.dimension_count"), why));
            }
            Some(read_rope(&k, rope_mode, n_rot, n_ctx_train)?)
        } else {
            None
        };
        let causal = read_causal(&k)?;
        Ok(EncoderHparams {
            arch: name,
            n_vocab,
            n_embd,
            n_layer,
            n_head,
            n_head_kv,
            head_dim,
            n_ff: k.count("feed_forward_length", 1, 1 << 24)?,
            n_ctx_train,
            n_token_types: token_type_count(f)?,
            norm_eps,
            rope,
            causal,
            pooling: read_pooling(&k)?,
        })
    }

    /// The model-wide tensors.
    pub(crate) fn globals(&self, ld: &Loader, needs: EncoderNeeds) -> Result<EncoderGlobals> {
        let e = self.n_embd;
        let positions = &[e, self.n_ctx_train];
        Ok(EncoderGlobals {
            tok_embd: ld.get("token_embd.weight", &[e, self.n_vocab])?,
            type_embd: ld.opt("token_types.weight", &[e, self.n_token_types])?,
            pos_embd: if needs.position_embd { Some(ld.get("position_embd.weight", positions)?) } else { None },
            norm: (ld.get("token_embd_norm.weight", &[e])?, ld.get("token_embd_norm.bias", &[e])?),
        })
    }

    /// Layer `i`'s tensors.
    pub(crate) fn layer(&self, ld: &Loader, needs: EncoderNeeds, i: usize) -> Result<EncoderLayer> {
        let n = |t: &str| format!("blk.{i}.{t}");
        let (e, kv, ff) = (self.n_embd, self.n_embd_kv(), self.n_ff);
        let qkv = match ld.opt(&n("attn_qkv.weight"), &[e, e + 2 * kv])? {
            Some(w) => Qkv::Fused { w, b: ld.opt(&n("attn_qkv.bias"), &[e + 2 * kv])? },
            None => Qkv::Split {
                q: ld.get(&n("attn_q.weight"), &[e, e])?,
                k: ld.get(&n("attn_k.weight"), &[e, kv])?,
                v: ld.get(&n("attn_v.weight"), &[e, kv])?,
                bq: ld.opt(&n("attn_q.bias"), &[e])?,
                bk: ld.opt(&n("attn_k.bias"), &[kv])?,
                bv: ld.opt(&n("attn_v.bias"), &[kv])?,
            },
        };
        let norm = |t: &str| -> Result<(TensorId, TensorId)> {
            Ok((ld.get(&n(&format!("{t}.weight")), &[e])?, ld.get(&n(&format!("{t}.bias")), &[e])?))
        };
        Ok(EncoderLayer {
            qkv,
            wo: ld.get(&n("attn_output.weight"), &[e, e])?,
            wo_b: ld.opt(&n("attn_output.bias"), &[e])?,
            attn_out_norm: norm("attn_output_norm")?,
            up: ld.get(&n("ffn_up.weight"), &[e, ff])?,
            up_b: ld.opt(&n("ffn_up.bias"), &[ff])?,
            gate: if needs.ffn_gate { Some(ld.get(&n("ffn_gate.weight"), &[e, ff])?) } else { None },
            down: ld.get(&n("ffn_down.weight"), &[ff, e])?,
            down_b: ld.opt(&n("ffn_down.bias"), &[e])?,
            out_norm: norm("layer_output_norm")?,
        })
    }
}

/// `{arch}.attention.causal`: true where absent (llama.cpp's default; BERT files say false).
pub(crate) fn read_causal(k: &Keys) -> Result<bool> {
    match k.get("attention.causal") {
        None => Ok(true),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(meta(&k.key("attention.causal"), format!("expected bool, found {}", v.type_description()))),
    }
}

/// `tokenizer.ggml.token_type_count`, which llama.cpp's BERT loaders require to be set.
fn token_type_count(f: &GgufFile) -> Result<usize> {
    const KEY: &str = "tokenizer.ggml.token_type_count";
    match f.get(KEY) {
        None => Err(meta(KEY, "not found: an encoder's file must give its token type count")),
        Some(_) => match f.get_u64(KEY)? {
            0 => Err(meta(KEY, "0: an encoder needs at least one token type")),
            n if n > 1 << 16 => Err(meta(KEY, format!("{n} is outside 1..=65536"))),
            n => Ok(n as usize),
        },
    }
}

/// An encoder's model-wide tensors.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EncoderGlobals {
    pub tok_embd: TensorId,
    /// Token-type embeddings (`token_types.weight`), of which type 0 is added.
    pub type_embd: Option<TensorId>,
    /// Absolute position embeddings (BERT).
    pub pos_embd: Option<TensorId>,
    /// The LayerNorm of the summed embeddings (weight, bias).
    pub norm: (TensorId, TensorId),
}

/// One encoder layer's tensors.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EncoderLayer {
    pub qkv: Qkv,
    pub wo: TensorId,
    pub wo_b: Option<TensorId>,
    /// LayerNorm after attention and its residual (weight, bias).
    pub attn_out_norm: (TensorId, TensorId),
    pub up: TensorId,
    pub up_b: Option<TensorId>,
    pub gate: Option<TensorId>,
    pub down: TensorId,
    pub down_b: Option<TensorId>,
    /// LayerNorm after the feed-forward and its residual (weight, bias).
    pub out_norm: (TensorId, TensorId),
}
