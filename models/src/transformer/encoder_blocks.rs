//! The pieces an encoder's layers are made of, as llama.cpp's BERT graph builds them:
//! LayerNorm with weight and bias, projections with optional biases, rope where the
//! architecture has it, attention over the input's own keys (no cache; the mask says
//! whether it is causal), and the GELU or gated feed-forward.

use rgml::{Context, GluOp, Result, TensorId};

use super::encoder::{EncoderGlobals, EncoderHparams, EncoderLayer};
use super::weights::Qkv;

/// Builds one graph's layers: the context, the hyperparameters and the graph's inputs.
pub(crate) struct EncoderBlock<'a> {
    pub(crate) c: &'a Context,
    pub(crate) hp: &'a EncoderHparams,
    /// Positions of the tokens (I32, `[n_tokens]`).
    pub(crate) pos: TensorId,
    /// Attention mask `[n_tokens, n_tokens]`: zeros, or −∞ above the diagonal when causal.
    pub(crate) mask: TensorId,
    pub(crate) n_tokens: i64,
}

impl EncoderBlock<'_> {
    /// The input of the first layer: the tokens' embeddings plus token type 0's (and the
    /// positions' where the architecture learns them), LayerNormed. `types` holds the
    /// tokens' types (zeros), `tokens` their ids.
    pub(crate) fn embeddings(&self, g: &EncoderGlobals, tokens: TensorId, types: TensorId) -> Result<TensorId> {
        let c = self.c;
        let mut x = c.get_rows(g.tok_embd, tokens)?;
        if let Some(t) = g.type_embd {
            x = c.add(x, c.get_rows(t, types)?)?;
        }
        if let Some(p) = g.pos_embd {
            // llama.cpp adds the positions last, as the first operand (the same sums)
            x = c.add(c.get_rows(p, self.pos)?, x)?;
        }
        self.layer_norm(x, g.norm)
    }

    /// ggml's `norm` of `x`'s rows, times the weight, plus the bias.
    pub(crate) fn layer_norm(&self, x: TensorId, (w, b): (TensorId, TensorId)) -> Result<TensorId> {
        let c = self.c;
        c.add(c.mul(c.norm(x, self.hp.norm_eps)?, w)?, b)
    }

    /// `w·x`, plus the bias `b`.
    pub(crate) fn linear(&self, w: TensorId, x: TensorId, b: Option<TensorId>) -> Result<TensorId> {
        let y = self.c.mul_mat(w, x)?;
        match b {
            Some(b) => self.c.add(y, b),
            None => Ok(y),
        }
    }

    /// The queries `[head_dim, n_head, n]`, keys `[head_dim, n_head_kv, n]` and values
    /// `[head_dim·n_head_kv, n]` of `x`.
    pub(crate) fn qkv(&self, l: &EncoderLayer, x: TensorId) -> Result<(TensorId, TensorId, TensorId)> {
        let (c, hp, nt) = (self.c, self.hp, self.n_tokens);
        let (hd, nh, nkv) = (hp.head_dim as i64, hp.n_head as i64, hp.n_head_kv as i64);
        match l.qkv {
            Qkv::Split { q, k, v, bq, bk, bv } => {
                let q = c.reshape(self.linear(q, x, bq)?, &[hd, nh, nt])?;
                let k = c.reshape(self.linear(k, x, bk)?, &[hd, nkv, nt])?;
                Ok((q, k, self.linear(v, x, bv)?))
            }
            Qkv::Fused { w, b } => {
                // rows of the product: the queries, then the keys, then the values
                let qkv = self.linear(w, x, b)?;
                let row = c.layout(qkv)?.nb[1];
                let (e, ekv) = (hp.n_embd * 4, hp.n_embd_kv() * 4);
                let q = c.view_3d(qkv, [hd, nh, nt], hd as usize * 4, row, 0)?;
                let k = c.view_3d(qkv, [hd, nkv, nt], hd as usize * 4, row, e)?;
                let v = c.cont(c.view_2d(qkv, hd * nkv, nt, row, e + ekv)?)?;
                Ok((q, k, v))
            }
        }
    }

    /// Rotary embedding of `t` (`[head_dim, heads, n]`); `t` unchanged for an
    /// architecture without rope.
    pub(crate) fn rope(&self, t: TensorId) -> Result<TensorId> {
        match &self.hp.rope {
            Some(r) => self.c.rope_with(t, self.pos, None, r.params(r.freq_base, r.freq_scale)),
            None => Ok(t),
        }
    }

    /// Attention of `q` over the input's own keys `k` and values `v` (scores,
    /// `soft_max_ext` with the mask and 1/√head_dim, values: llama.cpp without flash
    /// attention), then the output projection; `[n_embd, n]`.
    pub(crate) fn attention(&self, l: &EncoderLayer, q: TensorId, k: TensorId, v: TensorId) -> Result<TensorId> {
        let (c, hp, nt) = (self.c, self.hp, self.n_tokens);
        let (hd, nkv) = (hp.head_dim as i64, hp.n_head_kv as i64);
        let keys = c.permute(k, [0, 2, 1, 3])?; // [hd, n, n_head_kv]
        let q = c.permute(q, [0, 2, 1, 3])?; // [hd, n, n_head]
        let scale = 1.0 / (hp.head_dim as f32).sqrt();
        let kq = c.soft_max_ext(c.mul_mat(keys, q)?, Some(self.mask), scale, 0.0)?;
        // [n, hd, n_head_kv]: the values transposed (a view)
        let values = c.permute(c.reshape(v, &[hd, nkv, nt])?, [1, 2, 0, 3])?;
        let o = c.cont_reshape(c.permute(c.mul_mat(values, kq)?, [0, 2, 1, 3])?, &[hp.n_embd as i64, nt])?;
        self.linear(l.wo, o, l.wo_b)
    }

    /// The feed-forward network on `x`: `down(act(up·x))` with GELU (ggml's tanh form),
    /// or `down(silu(gate·x) ⊙ up·x)` where the layer has a gate; biases where present.
    pub(crate) fn ffn(&self, l: &EncoderLayer, x: TensorId) -> Result<TensorId> {
        let up = self.linear(l.up, x, l.up_b)?;
        let h = match l.gate {
            Some(g) => self.c.glu_split(GluOp::Swiglu, self.linear(g, x, None)?, up)?,
            None => self.c.gelu(up)?,
        };
        self.linear(l.down, h, l.down_b)
    }
}
