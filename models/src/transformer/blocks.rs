//! The pieces every architecture's block is made of: norms, projections, rotary
//! embedding, attention through the KV cache, and the feed-forward variants. Each is
//! one or a few ggml ops, as llama.cpp's `llm_graph_context` builds them.

use std::collections::HashMap;

use rgml::{Context, DType, GluOp, Result, TensorId};

use super::hparams::Hparams;
use super::weights::{Ffn, Globals, Layer, Qkv};

/// A LoRA adapter of a weight `w` (`[n_in, n_out]`): the product `w·x` becomes
/// `w·x + scale·b·(a·x)`, with `a` `[n_in, rank]` and `b` `[rank, n_out]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Adapter {
    pub a: TensorId,
    pub b: TensorId,
    pub scale: f32,
}

/// Adapters by the weight they adapt.
pub(crate) type Adapters = HashMap<TensorId, Adapter>;

/// Where a graph's keys and values live in the layers' caches: streams of
/// `stream_cells` cells, one per sequence. A graph of one sequence attends over
/// the stream from cell `first_cell`; a graph of a token of every stream
/// (`streams > 1`, `first_cell` 0) over each stream for its own row.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KvSpan {
    pub first_cell: usize,
    pub stream_cells: usize,
    pub streams: usize,
}

/// Builds one graph's blocks: the context, the hyperparameters and the graph's inputs.
pub(crate) struct Block<'a> {
    pub c: &'a mut Context,
    pub hp: &'a Hparams,
    /// Positions of the batch's tokens (I32, `[n_tokens]`).
    pub pos: TensorId,
    /// The cache cells their keys and values go to (I32, `[n_tokens]`).
    pub cells: TensorId,
    /// The part of the caches attended.
    pub kv: KvSpan,
    /// Causal mask over the attended cache positions (`[n_kv, n_tokens]`).
    pub mask: TensorId,
    /// The same limited to the sliding window, for windowed layers.
    pub mask_swa: Option<TensorId>,
    pub n_tokens: i64,
    /// Cache positions attended.
    pub n_kv: i64,
    /// After the last layer's attention only the last position is computed.
    pub last_only: bool,
    /// Attention by `flash_attn_ext` instead of three ops.
    pub fused: bool,
    /// Keys and values go through the layers' KV caches; without, attention
    /// reads the batch's own (a training graph: no cache, every op differentiable).
    pub cached: bool,
    /// LoRA adapters of some of the weights.
    pub adapters: Option<&'a Adapters>,
}

impl<'a> Block<'a> {
    /// A block over a batch's own keys and values, no cache (a training or an
    /// embedding graph): every position computed, attention unfused (every op
    /// differentiable), `mask` (and `mask_swa` for windowed layers) `[n, n]`.
    pub fn uncached(
        c: &'a mut Context,
        hp: &'a Hparams,
        pos: TensorId,
        masks: (TensorId, Option<TensorId>),
        n_tokens: usize,
        adapters: Option<&'a Adapters>,
    ) -> Block<'a> {
        let nt = n_tokens as i64;
        Block {
            c,
            hp,
            pos,
            cells: pos,
            kv: KvSpan { first_cell: 0, stream_cells: n_tokens, streams: 1 },
            mask: masks.0,
            mask_swa: masks.1,
            n_tokens: nt,
            n_kv: nt,
            last_only: false,
            fused: false,
            cached: false,
            adapters,
        }
    }
}

impl Block<'_> {
    /// RMS norm of `x`'s rows, times the weight `w` (one fused op).
    pub fn norm(&self, x: TensorId, w: TensorId) -> Result<TensorId> {
        self.c.rms_norm_mul(x, w, self.hp.rms_eps)
    }

    /// `w·x` (with `w`'s adapter where it has one), plus the bias `b`.
    pub fn linear(&self, w: TensorId, x: TensorId, b: Option<TensorId>) -> Result<TensorId> {
        let mut y = self.c.mul_mat(w, x)?;
        if let Some(ad) = self.adapters.and_then(|m| m.get(&w)) {
            let low = self.c.mul_mat(ad.b, self.c.mul_mat(ad.a, x)?)?;
            y = self.c.add(y, self.c.scale(low, ad.scale)?)?;
        }
        match b {
            Some(b) => self.c.add(y, b),
            None => Ok(y),
        }
    }

    /// The queries `[head_dim, n_head, n]`, keys `[head_dim, n_head_kv, n]` and values
    /// `[head_dim_v·n_head_kv, n]` of the normed input `h`.
    pub fn qkv(&self, l: &Layer, h: TensorId) -> Result<(TensorId, TensorId, TensorId)> {
        let hp = self.hp;
        let (hd, nt) = (hp.head_dim as i64, self.n_tokens);
        let (nq, nk, nv) = (hp.n_embd_q(), hp.n_embd_k_gqa(), hp.n_embd_v_gqa());
        match l.qkv {
            Qkv::Split { q, k, v, bq, bk, bv } => {
                let q = self.linear(q, h, bq)?;
                let k = self.linear(k, h, bk)?;
                let v = self.linear(v, h, bv)?;
                let q = self.c.reshape(q, &[hd, hp.n_head as i64, nt])?;
                let k = self.c.reshape(k, &[hd, hp.n_head_kv as i64, nt])?;
                Ok((q, k, v))
            }
            Qkv::Fused { w, b } => {
                let qkv = self.linear(w, h, b)?;
                let row = self.c.layout(qkv)?.nb[1];
                let q = self.c.view_3d(qkv, [hd, hp.n_head as i64, nt], hd as usize * 4, row, 0)?;
                let k = self.c.view_3d(qkv, [hd, hp.n_head_kv as i64, nt], hd as usize * 4, row, nq * 4)?;
                let v = self.c.cont(self.c.view_2d(qkv, nv as i64, nt, row, (nq + nk) * 4)?)?;
                Ok((q, k, v))
            }
        }
    }

    /// [`Block::norm`] where the layer has the weight, else `t` unchanged.
    pub fn norm_opt(&self, t: TensorId, w: Option<TensorId>) -> Result<TensorId> {
        match w {
            Some(w) => self.norm(t, w),
            None => Ok(t),
        }
    }

    /// Rotary embedding of `t` (`[head_dim, heads, n]`) with layer `l`'s settings;
    /// `t` itself in a layer without rotation (SmolLM3's every fourth).
    pub fn rope(&self, l: &Layer, t: TensorId) -> Result<TensorId> {
        if !self.hp.has_rope(l.index) {
            return Ok(t);
        }
        self.c.rope_with(t, self.pos, l.rope_factors, self.hp.rope_params(l.index))
    }

    /// The queries and keys (`[head_dim, heads, n]`) normed where the layer has
    /// their norms: each head, or the whole projection (`qk_norm_full`).
    pub fn head_norms(&self, l: &Layer, q: TensorId, k: TensorId) -> Result<(TensorId, TensorId)> {
        let norm = |t: TensorId, w: Option<TensorId>| -> Result<TensorId> {
            let Some(w) = w else { return Ok(t) };
            if !l.qk_norm_full {
                return self.norm(t, w);
            }
            let ne = self.c.layout(t)?.ne;
            let whole = self.c.cont_reshape(t, &[ne[0] * ne[1], ne[2]])?;
            self.c.reshape(self.norm(whole, w)?, &[ne[0], ne[1], ne[2]])
        };
        Ok((norm(q, l.q_norm)?, norm(k, l.k_norm)?))
    }

    /// `r`, the output of a block's branch, times the architecture's residual
    /// scale (Granite), before it joins the residual stream.
    pub fn residual(&self, r: TensorId) -> Result<TensorId> {
        match self.hp.residual_scale {
            Some(s) => self.c.scale(r, s),
            None => Ok(r),
        }
    }

    /// Attention of the rotated queries `q` over the cache after writing the rotated
    /// keys `k` and the values `v` at the batch's positions; returns
    /// `[head_dim_v·n_head, n]`, before the output projection.
    pub fn attention(&mut self, l: &Layer, q: TensorId, k: TensorId, v: TensorId, kq_scale: f32) -> Result<TensorId> {
        let hp = self.hp;
        let (hd, hdv, nh, nkv) = (hp.head_dim as i64, hp.head_dim_v as i64, hp.n_head as i64, hp.n_head_kv as i64);
        let (nt, n_kv) = (self.n_tokens, self.n_kv);
        if !self.cached {
            return self.attention_uncached(l, q, k, v, kq_scale);
        }
        self.c.set_rows(l.k_cache, self.c.reshape(k, &[hd * nkv, nt])?, self.cells)?;
        self.c.set_rows(l.v_cache, v, self.cells)?;
        if self.kv.streams > 1 {
            return self.attention_streams(l, q, kq_scale);
        }
        // attention over the stream's first n_kv cache positions, built after the writes (program order)
        let kl = self.c.layout(l.k_cache)?;
        let row_bytes = |w: i64| kl.dtype.row_size(w).unwrap_or(0);
        let first = self.kv.first_cell * kl.nb[1];
        let keys = self.c.view_3d(l.k_cache, [hd, n_kv, nkv], kl.nb[1], row_bytes(hd), first)?;
        let mask = if hp.is_swa(l.index) { self.mask_swa.unwrap_or(self.mask) } else { self.mask };
        // the queries seen as [hd, nt, nh]
        let q = self.c.permute(q, [0, 2, 1, 3])?;
        if self.fused {
            let vl = self.c.layout(l.v_cache)?;
            let v_head = vl.dtype.row_size(hdv).unwrap_or(0);
            let values =
                self.c.view_3d(l.v_cache, [hdv, n_kv, nkv], vl.nb[1], v_head, self.kv.first_cell * vl.nb[1])?;
            // [hdv, nh, nt]: the heads of each position side by side, as the unfused result
            let o = self.fused_attention(l, [q, keys, values], mask, kq_scale)?;
            return self.c.reshape(o, &[hdv * nh, nt]);
        }
        // [n_kv, nt, nh]: the keys against the queries
        let kq = self.c.mul_mat(keys, q)?;
        let kq = self.attention_weights(l, kq, mask, kq_scale)?;
        let values = self.values(l, hdv, nkv)?; // [n_kv, hdv, nkv]
                                                // [hdv, nt, nh] seen as [hdv, nh, nt], copied to rows of hdv·nh
        self.c.cont_reshape(self.c.permute(self.c.mul_mat(values, kq)?, [0, 2, 1, 3])?, &[hdv * nh, nt])
    }

    /// [`Block::attention`] for a token of every stream (token `s` of the batch is
    /// stream `s`'s): each query row attends over its own stream's first `n_kv`
    /// cells, one fused op over the streams (a query row's result does not depend
    /// on the other streams: their keys are not its keys, and masked keys are skipped).
    fn attention_streams(&self, l: &Layer, q: TensorId, kq_scale: f32) -> Result<TensorId> {
        if !self.fused {
            return Err(rgml::Error::Invalid(
                "a step of several sequences needs fused attention (flash_attn_ext)".into(),
            ));
        }
        let hp = self.hp;
        let (hd, hdv, nh, nkv) = (hp.head_dim as i64, hp.head_dim_v as i64, hp.n_head as i64, hp.n_head_kv as i64);
        let (nt, n_kv, s) = (self.n_tokens, self.n_kv, self.kv.streams as i64);
        let mask = if hp.is_swa(l.index) { self.mask_swa.unwrap_or(self.mask) } else { self.mask };
        // [hd, 1, nh, streams]: one query row per stream
        let q = self.c.permute(self.c.reshape(q, &[hd, nh, 1, nt])?, [0, 2, 1, 3])?;
        let (kl, vl) = (self.c.layout(l.k_cache)?, self.c.layout(l.v_cache)?);
        let stream = |nb1: usize| nb1 * self.kv.stream_cells;
        let k_head = kl.dtype.row_size(hd).unwrap_or(0);
        let v_head = vl.dtype.row_size(hdv).unwrap_or(0);
        let keys = self.c.view_4d(l.k_cache, [hd, n_kv, nkv, s], [kl.nb[1], k_head, stream(kl.nb[1])], 0)?;
        let values = self.c.view_4d(l.v_cache, [hdv, n_kv, nkv, s], [vl.nb[1], v_head, stream(vl.nb[1])], 0)?;
        // [hdv, nh, 1, streams]
        let o = self.fused_attention(l, [q, keys, values], mask, kq_scale)?;
        self.c.reshape(o, &[hdv * nh, nt])
    }

    /// [`Block::attention`] over the batch's own keys `[head_dim, n_head_kv, n]` and
    /// values `[head_dim_v·n_head_kv, n]`, unfused: scores, `soft_max_ext`, values.
    fn attention_uncached(&self, l: &Layer, q: TensorId, k: TensorId, v: TensorId, kq_scale: f32) -> Result<TensorId> {
        let hp = self.hp;
        let (hdv, nh, nkv, nt) = (hp.head_dim_v as i64, hp.n_head as i64, hp.n_head_kv as i64, self.n_tokens);
        let mask = if hp.is_swa(l.index) { self.mask_swa.unwrap_or(self.mask) } else { self.mask };
        let keys = self.c.permute(k, [0, 2, 1, 3])?; // [hd, nt, nkv]
        let q = self.c.permute(q, [0, 2, 1, 3])?; // [hd, nt, nh]
        let kq = self.attention_weights(l, self.c.mul_mat(keys, q)?, mask, kq_scale)?;
        // [nt, hdv, nkv]: the values transposed (a view)
        let values = self.c.permute(self.c.reshape(v, &[hdv, nkv, nt])?, [1, 2, 0, 3])?;
        self.c.cont_reshape(self.c.permute(self.c.mul_mat(values, kq)?, [0, 2, 1, 3])?, &[hdv * nh, nt])
    }

    /// The cached values of the attended positions as the first operand of a product
    /// with the attention weights: `[n_kv, head_dim_v, n_head_kv]`, a transposed view of
    /// the cache (a block type's is dequantized first: its blocks run along the other dim).
    fn values(&mut self, l: &Layer, hdv: i64, nkv: i64) -> Result<TensorId> {
        let n_kv = self.n_kv;
        let vl = self.c.layout(l.v_cache)?;
        let first = self.kv.first_cell * vl.nb[1];
        if vl.dtype.is_quantized() {
            let rows =
                self.c.view_3d(l.v_cache, [hdv, n_kv, nkv], vl.nb[1], vl.dtype.row_size(hdv).unwrap_or(0), first)?;
            let f = self.c.new_tensor(DType::F32, &[hdv, n_kv, nkv])?;
            return self.c.permute(self.c.cpy(rows, f)?, [1, 0, 2, 3]);
        }
        let es = vl.dtype.type_size();
        self.c.view_strided(
            l.v_cache,
            [n_kv, hdv, nkv, 1],
            [vl.nb[1], es, hdv as usize * es, vl.nb[1] * n_kv as usize],
            first,
        )
    }

    /// The softmax of the scores `kq` (scaled, masked), with the layer's sinks.
    fn attention_weights(&self, l: &Layer, kq: TensorId, mask: TensorId, scale: f32) -> Result<TensorId> {
        let p = self.c.soft_max_ext(kq, Some(mask), scale, 0.0)?;
        match l.sinks {
            Some(s) => self.c.soft_max_add_sinks(p, s),
            None => Ok(p),
        }
    }

    /// `flash_attn_ext` of the queries, keys and values, with the layer's sinks.
    fn fused_attention(&self, l: &Layer, qkv: [TensorId; 3], mask: TensorId, scale: f32) -> Result<TensorId> {
        let [q, k, v] = qkv;
        let o = self.c.flash_attn_ext(q, k, v, Some(mask), scale, 0.0)?;
        match l.sinks {
            Some(s) => self.c.flash_attn_ext_add_sinks(o, s),
            None => Ok(o),
        }
    }

    /// The output projection of an attention result.
    pub fn attn_out(&self, l: &Layer, a: TensorId) -> Result<TensorId> {
        self.linear(l.wo, a, l.wo_b)
    }

    /// In the last layer of a last-position graph, the last rows of `a` and `b` (views);
    /// else both unchanged.
    pub fn last_rows(&self, l: &Layer, a: TensorId, b: TensorId) -> Result<(TensorId, TensorId)> {
        if !self.last_only || l.index + 1 != self.hp.n_layer || self.n_tokens <= 1 {
            return Ok((a, b));
        }
        Ok((last_row(self.c, a)?, last_row(self.c, b)?))
    }

    /// The gated feed-forward network on the normed input `h`: `glu` of the
    /// gate and up projections (one fused projection split in halves, or two),
    /// then the down projection.
    pub fn ffn(&self, l: &Layer, h: TensorId, glu: GluOp) -> Result<TensorId> {
        match l.ffn {
            Ffn::Gated { gate, up, down, b_gate, b_up, b_down } => {
                let (g, u) = (self.linear(gate, h, b_gate)?, self.linear(up, h, b_up)?);
                let gu = self.c.glu_split(glu, g, u)?;
                self.linear(down, gu, b_down)
            }
            Ffn::FusedGateUp { up, down } => {
                let gu = self.linear(up, h, None)?;
                let gu = self.c.glu(glu, gu, false)?;
                self.linear(down, gu, None)
            }
            Ffn::Experts(ref x) => self.moe_ffn(x, h, glu),
        }
    }
}

/// The embeddings of the I32 `tokens`, scaled where the architecture says
/// (Gemma's √n_embd, Granite's `embedding_scale`).
pub(crate) fn embed_tokens(c: &Context, hp: &Hparams, g: &Globals, tokens: TensorId) -> Result<TensorId> {
    let x = c.get_rows(g.tok_embd, tokens)?;
    match hp.embd_scale {
        Some(s) => c.scale(x, s),
        None => Ok(x),
    }
}

impl Block<'_> {
    /// The logits of the last layer's output `x`: the output norm, the vocabulary
    /// projection (and its bias), divided by the logit scale where there is one.
    pub fn logits(&self, g: &Globals, x: TensorId) -> Result<TensorId> {
        let logits = self.linear(g.output, self.norm(x, g.output_norm)?, g.output_b)?;
        match self.hp.logit_scale {
            Some(s) => self.c.scale(logits, 1.0 / s),
            None => Ok(logits),
        }
    }
}

/// The last row of the 2-D tensor `t` (a view).
fn last_row(c: &Context, t: TensorId) -> Result<TensorId> {
    let l = c.layout(t)?;
    c.view_2d(t, l.ne[0], 1, l.nb[1], (l.ne[1] as usize).saturating_sub(1) * l.nb[1])
}
