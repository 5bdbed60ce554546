//! A llama-architecture model from a GGUF file: hyperparameters and tensors by
//! the `llama.*` keys and llama.cpp's tensor names, a KV cache held by the
//! backend, one forward graph per batch size (planned once, reused for every
//! call of that size); generation is in [`crate::generate`].
//!
//! Each graph stores the new keys and values with `set_rows` at the positions
//! given as input and attends over the first `n_kv` cache positions with a
//! causal mask: `n_kv` is the number of positions in use rounded up to
//! [`KV_PAD`] (as llama.cpp pads it), so one graph serves every call of a batch
//! size while the cache fills up to the next multiple, and a short context does
//! not pay for the whole cache.
//!
//! The model is generic over the [`Backend`]: [`Llama::load`] runs it on the
//! CPU, [`Llama::load_on`] on any backend (a [`rgml::CudaBackend`], or an
//! [`rgml::AnyBackend`] chosen at run time). Graphs are planned with the
//! backend's rules; the KV cache lives in the backend's storage (a written
//! leaf, kept across the graphs of different batch sizes).

use std::collections::HashMap;
use std::path::Path;

use rgml::gguf::GgufFile;
use rgml::{
    load_gguf, Backend, BackendStorage, Context, ContextMark, CpuBackend, DType, Error, Graph, Plan, Result,
    RopeParams, TensorId, Weights,
};

/// Granularity of the attended cache length (llama.cpp pads `n_kv` to 256).
pub const KV_PAD: usize = 256;

/// Planned graphs a model keeps by default (one per batch size and `n_kv`
/// step in use); see [`Llama::set_max_graphs`].
pub const MAX_GRAPHS: usize = 16;
/// The model's hyperparameters, from the GGUF metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct Hparams {
    /// Vocabulary size.
    pub n_vocab: usize,
    /// Embedding width.
    pub n_embd: usize,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Attention heads.
    pub n_head: usize,
    /// Key/value heads (grouped-query attention when fewer than `n_head`).
    pub n_head_kv: usize,
    /// Feed-forward width.
    pub n_ff: usize,
    /// Training context length.
    pub n_ctx_train: usize,
    /// RMS norm epsilon.
    pub rms_eps: f32,
    /// Rotated dims per head.
    pub n_rot: usize,
    /// RoPE frequency base.
    pub rope_base: f32,
    /// RoPE frequency scale (1 / linear scaling factor).
    pub rope_freq_scale: f32,
}

impl Hparams {
    /// Reads the `llama.*` keys; errors name the missing or mistyped key.
    pub fn from_gguf(f: &GgufFile) -> Result<Hparams> {
        let arch = f.get_str("general.architecture")?;
        if arch != "llama" {
            return Err(Error::Metadata {
                key: "general.architecture".into(),
                msg: format!("expected \"llama\", found {arch:?}"),
            });
        }
        let u = |k: &str| f.get_u32(k).map(|v| v as usize);
        let n_embd = u("llama.embedding_length")?;
        let n_head = u("llama.attention.head_count")?;
        let n_head_kv =
            if f.get("llama.attention.head_count_kv").is_some() { u("llama.attention.head_count_kv")? } else { n_head };
        if n_head == 0 || n_head_kv == 0 || n_embd % n_head != 0 || n_head % n_head_kv != 0 {
            return Err(Error::Metadata {
                key: "llama.attention.head_count".into(),
                msg: format!("{n_head} heads ({n_head_kv} kv heads) do not divide n_embd {n_embd}"),
            });
        }
        let opt_f32 = |k: &str, d: f32| if f.get(k).is_some() { f.get_f32(k) } else { Ok(d) };
        let scaling = opt_f32("llama.rope.scaling.factor", 1.0)?;
        let n_vocab = match f.get("llama.vocab_size") {
            Some(_) => u("llama.vocab_size")?,
            None => f.tensor("token_embd.weight").map_or(0, |t| t.ne[1] as usize),
        };
        Ok(Hparams {
            n_vocab,
            n_embd,
            n_layer: u("llama.block_count")?,
            n_head,
            n_head_kv,
            n_ff: u("llama.feed_forward_length")?,
            n_ctx_train: u("llama.context_length")?,
            rms_eps: f.get_f32("llama.attention.layer_norm_rms_epsilon")?,
            n_rot: if f.get("llama.rope.dimension_count").is_some() {
                u("llama.rope.dimension_count")?
            } else {
                n_embd / n_head
            },
            rope_base: opt_f32("llama.rope.freq_base", 10000.0)?,
            rope_freq_scale: if scaling > 0.0 { 1.0 / scaling } else { 1.0 },
        })
    }
    /// Width of one head.
    pub fn head_dim(&self) -> usize {
        self.n_embd / self.n_head
    }
    /// Width of all key (or value) heads together.
    pub fn n_embd_gqa(&self) -> usize {
        self.head_dim() * self.n_head_kv
    }
}

struct Layer {
    attn_norm: TensorId,
    wq: TensorId,
    wk: TensorId,
    wv: TensorId,
    wo: TensorId,
    ffn_norm: TensorId,
    gate: TensorId,
    up: TensorId,
    down: TensorId,
    k_cache: TensorId,
    v_cache: TensorId,
}

/// What a planned graph is for: batch size, attended cache positions, and
/// whether it computes every position's logits or only the last one's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct StepKey {
    n: usize,
    n_kv: usize,
    all_logits: bool,
}

/// The forward graph for one [`StepKey`], planned.
struct Step {
    graph: Graph,
    plan: Plan,
    tokens: TensorId,
    pos: TensorId,
    mask: TensorId,
    logits: TensorId,
}

/// A loaded llama model with its KV cache, on backend `B` (the CPU by default).
pub struct Llama<B: Backend = CpuBackend> {
    /// Hyperparameters.
    pub hp: Hparams,
    ctx: Context,
    n_ctx: usize,
    tok_embd: TensorId,
    output_norm: TensorId,
    output: TensorId,
    layers: Vec<Layer>,
    /// Planned graphs by [`StepKey`].
    steps: HashMap<StepKey, Step>,
    /// The context right after loading: dropping every graph goes back here.
    weights_only: ContextMark,
    /// Planned graphs kept at most.
    max_graphs: usize,
    backend: B,
    storage: Option<B::Storage>,
    n_past: usize,
}

impl Llama<CpuBackend> {
    /// Loads `path` (tensors stay in the file's mapping) with a KV cache of
    /// `n_ctx` positions (default: the training context), on the CPU with
    /// `threads` threads (0: one per core).
    pub fn load(path: &Path, n_ctx: Option<usize>, threads: usize) -> Result<Llama<CpuBackend>> {
        Llama::load_on(path, n_ctx, CpuBackend::new(threads)?)
    }
}

impl<B: Backend> Llama<B> {
    /// Loads `path` with a KV cache of `n_ctx` positions (default: the
    /// training context), to run on `backend`. The weights reach the device
    /// at the first [`Llama::eval`] (uploaded once; on the CPU they stay in
    /// the file's mapping).
    pub fn load_on(path: &Path, n_ctx: Option<usize>, backend: B) -> Result<Llama<B>> {
        let file = GgufFile::open(path)?;
        let hp = Hparams::from_gguf(&file)?;
        let mut ctx = Context::new();
        let w = load_gguf(&mut ctx, &file)?;
        let n_ctx = n_ctx.unwrap_or(hp.n_ctx_train).max(1);
        let mut layers = Vec::with_capacity(hp.n_layer);
        for i in 0..hp.n_layer {
            let t = |n: &str| w.get(&format!("blk.{i}.{n}.weight"));
            let k_cache = ctx.new_tensor_2d(DType::F32, hp.n_embd_gqa() as i64, n_ctx as i64)?;
            ctx.set_name(k_cache, format!("cache_k.{i}"))?;
            let v_cache = ctx.new_tensor_2d(DType::F32, hp.n_embd_gqa() as i64, n_ctx as i64)?;
            ctx.set_name(v_cache, format!("cache_v.{i}"))?;
            layers.push(Layer {
                attn_norm: t("attn_norm")?,
                wq: t("attn_q")?,
                wk: t("attn_k")?,
                wv: t("attn_v")?,
                wo: t("attn_output")?,
                ffn_norm: t("ffn_norm")?,
                gate: t("ffn_gate")?,
                up: t("ffn_up")?,
                down: t("ffn_down")?,
                k_cache,
                v_cache,
            });
        }
        let tok_embd = w.get("token_embd.weight")?;
        check_shape(&ctx, &w, "token_embd.weight", [hp.n_embd, hp.n_vocab])?;
        let output = w.find("output.weight").unwrap_or(tok_embd);
        Ok(Llama {
            weights_only: ctx.mark(),
            max_graphs: MAX_GRAPHS,
            output_norm: w.get("output_norm.weight")?,
            tok_embd,
            output,
            hp,
            ctx,
            n_ctx,
            layers,
            steps: HashMap::new(),
            backend,
            storage: None,
            n_past: 0,
        })
    }

    /// The backend the model runs on.
    pub fn backend(&self) -> &B {
        &self.backend
    }
    /// The backend memory of the model's graphs (its KV cache included),
    /// once a first evaluation has allocated it.
    pub fn storage(&self) -> Option<&B::Storage> {
        self.storage.as_ref()
    }
    /// Positions already in the KV cache.
    pub fn n_past(&self) -> usize {
        self.n_past
    }
    /// Tensor headers in the model's context (weights, caches and graphs).
    pub fn context_len(&self) -> usize {
        self.ctx.len()
    }
    /// Capacity of the KV cache.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }
    /// Empties the KV cache.
    pub fn reset(&mut self) -> Result<()> {
        if let Some(st) = self.storage.as_mut() {
            for l in &self.layers {
                st.reset_leaf(&self.ctx, l.k_cache)?;
                st.reset_leaf(&self.ctx, l.v_cache)?;
            }
        }
        self.n_past = 0;
        Ok(())
    }

    /// The forward graph for `n` tokens (every position's logits) and its DOT text.
    pub fn dot(&mut self, n: usize) -> Result<String> {
        let key = StepKey { n, n_kv: self.n_kv(n), all_logits: true };
        self.step(key)?;
        let s = &self.steps[&key];
        s.graph.to_dot(&self.ctx, Some(&|id| s.plan.annotation(&self.ctx, id)))
    }

    /// Runs `tokens` after the cached positions; returns their logits,
    /// position-major (`tokens.len() × n_vocab`).
    pub fn eval(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        self.forward(tokens, true)
    }

    /// Runs `tokens` after the cached positions like [`Llama::eval`], but
    /// returns only the last position's logits (`n_vocab` values; empty for no
    /// tokens). Its graph skips what only the other positions' logits need:
    /// the last layer's output projection and feed-forward, the final norm and
    /// the vocabulary projection run on the last position alone (the cache
    /// still receives every position). What generation needs, as llama.cpp
    /// computes by default.
    pub fn eval_last(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        self.forward(tokens, false)
    }

    fn forward(&mut self, tokens: &[u32], all_logits: bool) -> Result<Vec<f32>> {
        let n = tokens.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        if self.n_past + n > self.n_ctx {
            return Err(Error::Invalid(format!(
                "{} cached + {n} new tokens exceed the {}-position KV cache",
                self.n_past, self.n_ctx
            )));
        }
        if let Some(&t) = tokens.iter().find(|&&t| t as usize >= self.hp.n_vocab) {
            return Err(Error::Invalid(format!("token {t} is outside the vocabulary of {}", self.hp.n_vocab)));
        }
        let key = StepKey { n, n_kv: self.n_kv(n), all_logits };
        self.step(key)?;
        let s = &self.steps[&key];
        let ids: Vec<i32> = tokens.iter().map(|&t| t as i32).collect();
        let pos: Vec<i32> = (self.n_past..self.n_past + n).map(|p| p as i32).collect();
        let mut mask = vec![f32::NEG_INFINITY; key.n_kv * n];
        for (i, row) in mask.chunks_mut(key.n_kv).enumerate() {
            row[..=self.n_past + i].fill(0.0);
        }
        let (tokens_id, pos_id, mask_id, logits) = (s.tokens, s.pos, s.mask, s.logits);
        self.ctx.set_data(tokens_id, &ids)?;
        self.ctx.set_data(pos_id, &pos)?;
        self.ctx.set_data(mask_id, &mask)?;
        let s = &self.steps[&key];
        let st = match self.storage.as_mut() {
            None => self.storage.insert(self.backend.alloc(&self.ctx, &s.graph, s.plan.clone())?),
            Some(st) => {
                // the storage (and the KV cache in it) stays with the model on an error
                st.grow(s.plan.buffer_size())?;
                st.rebind(&self.ctx, &s.graph, s.plan.clone())?;
                st
            }
        };
        self.backend.compute(&self.ctx, &s.graph, st)?;
        self.n_past += n;
        st.read_f32(&self.ctx, logits)
    }

    /// Drops the cached positions from `n` on (a conversation rewound to a shared
    /// prefix); positions before `n` stay. `n` past the cached ones is an error.
    ///
    /// # Errors
    /// [`Error::Invalid`] when `n > n_past`.
    pub fn truncate_cache(&mut self, n: usize) -> Result<()> {
        if n > self.n_past {
            return Err(Error::Invalid(format!("cannot keep {n} cache positions: {} are cached", self.n_past)));
        }
        // later evaluations overwrite the dropped positions, and the mask never shows them
        self.n_past = n;
        Ok(())
    }

    /// Cache positions a batch of `n` tokens after the cached ones attends
    /// over: those in use, rounded up to [`KV_PAD`], at most the cache.
    pub fn n_kv(&self, n: usize) -> usize {
        (self.n_past + n).div_ceil(KV_PAD).saturating_mul(KV_PAD).min(self.n_ctx)
    }

    /// Planned graphs held now.
    pub fn graphs(&self) -> usize {
        self.steps.len()
    }
    /// Keep at most `n` (≥ 1) planned graphs (default [`MAX_GRAPHS`]).
    pub fn set_max_graphs(&mut self, n: usize) {
        self.max_graphs = n.max(1);
    }

    /// Builds and plans the graph for `key`, once. With the maximum held already, all are
    /// dropped first and the context goes back to the weights (so a model fed
    /// many batch sizes does not grow without bound).
    fn step(&mut self, key: StepKey) -> Result<()> {
        if self.steps.contains_key(&key) {
            return Ok(());
        }
        if self.steps.len() >= self.max_graphs {
            self.steps.clear();
            self.ctx.truncate(&self.weights_only)?;
        }
        let step = self.build(key)?;
        // the cache writes of this graph happen when it runs: graphs built later
        // read the cache as state instead of pulling these writes in again
        self.ctx.forget_writes();
        self.steps.insert(key, step);
        Ok(())
    }

    fn build(&mut self, StepKey { n, n_kv, all_logits }: StepKey) -> Result<Step> {
        let hp = self.hp.clone();
        let (hd, nh, nkv, gqa) = (hp.head_dim() as i64, hp.n_head as i64, hp.n_head_kv as i64, hp.n_embd_gqa() as i64);
        let (nt, nctx) = (n as i64, n_kv as i64);
        let c = &mut self.ctx;
        let tokens = c.new_tensor_1d(DType::I32, nt)?;
        c.set_name(tokens, "inp_tokens")?;
        c.set_input(tokens)?;
        let pos = c.new_tensor_1d(DType::I32, nt)?;
        c.set_name(pos, "inp_pos")?;
        c.set_input(pos)?;
        let mask = c.new_tensor_2d(DType::F32, nctx, nt)?;
        c.set_name(mask, "kq_mask")?;
        c.set_input(mask)?;
        let rope = RopeParams {
            n_ctx_orig: hp.n_ctx_train as i32,
            freq_base: hp.rope_base,
            freq_scale: hp.rope_freq_scale,
            ..RopeParams::new(hp.n_rot as i32, RopeParams::NORMAL)
        };
        let mut x = c.get_rows(self.tok_embd, tokens)?;
        for (il, l) in self.layers.iter().enumerate() {
            let h = c.rms_norm(x, hp.rms_eps)?;
            let h = c.mul(h, l.attn_norm)?;
            let q = c.mul_mat(l.wq, h)?;
            let q = c.reshape(q, &[hd, nh, nt])?;
            let q = c.rope_with(q, pos, None, rope)?;
            let k = c.mul_mat(l.wk, h)?;
            let k = c.reshape(k, &[hd, nkv, nt])?;
            let k = c.rope_with(k, pos, None, rope)?;
            let k = c.reshape(k, &[gqa, nt])?;
            let v = c.mul_mat(l.wv, h)?;
            c.set_rows(l.k_cache, k, pos)?;
            c.set_rows(l.v_cache, v, pos)?;
            // attention over the first n_kv cache positions, built after the writes (program order)
            let keys = c.view_3d(l.k_cache, [hd, nctx, nkv], (gqa * 4) as usize, (hd * 4) as usize, 0)?;
            let q = c.permute(q, [0, 2, 1, 3])?; // [hd, nt, nh]
            let kq = c.mul_mat(keys, q)?; // [nctx, nt, nh]
            let kq = c.soft_max_ext(kq, Some(mask), 1.0 / (hd as f32).sqrt(), 0.0)?;
            let values = c.view_strided(
                l.v_cache,
                [nctx, hd, nkv, 1],
                [(gqa * 4) as usize, 4, (hd * 4) as usize, (gqa * nctx * 4) as usize],
                0,
            )?;
            let kqv = c.mul_mat(values, kq)?; // [hd, nt, nh]
            let kqv = c.permute(kqv, [0, 2, 1, 3])?; // [hd, nh, nt]
            let mut attn = c.cont_reshape(kqv, &[hd * nh, nt])?;
            if !all_logits && il + 1 == self.layers.len() && nt > 1 {
                // from here on only the last position feeds the wanted logits
                attn = last_row(c, attn)?;
                x = last_row(c, x)?;
            }
            let attn = c.mul_mat(l.wo, attn)?;
            let x1 = c.add(attn, x)?;
            let h = c.rms_norm(x1, hp.rms_eps)?;
            let h = c.mul(h, l.ffn_norm)?;
            let g = c.mul_mat(l.gate, h)?;
            let g = c.silu(g)?;
            let u = c.mul_mat(l.up, h)?;
            let gu = c.mul(g, u)?;
            let ffn = c.mul_mat(l.down, gu)?;
            x = c.add(ffn, x1)?;
            c.set_name(x, format!("l_out.{il}"))?;
        }
        let h = c.rms_norm(x, hp.rms_eps)?;
        let h = c.mul(h, self.output_norm)?;
        let logits = c.mul_mat(self.output, h)?;
        c.set_name(logits, "logits")?;
        c.set_output(logits)?;
        let graph = Graph::build(c, &[logits])?;
        let plan = self.backend.plan(c, &graph)?;
        Ok(Step { graph, plan, tokens, pos, mask, logits })
    }
}

/// The last row of the 2-D tensor `t` (a view).
fn last_row(c: &mut Context, t: rgml::TensorId) -> Result<rgml::TensorId> {
    let l = c.layout(t)?;
    c.view_2d(t, l.ne[0], 1, l.nb[1], (l.ne[1] as usize).saturating_sub(1) * l.nb[1])
}

fn check_shape(ctx: &Context, w: &Weights, name: &str, ne: [usize; 2]) -> Result<()> {
    let l = ctx.layout(w.get(name)?)?;
    if l.ne[0] as usize != ne[0] || l.ne[1] as usize != ne[1] {
        return Err(Error::Metadata {
            key: format!("tensor {name}"),
            msg: format!("shape {:?}, expected {ne:?}", l.ne),
        });
    }
    Ok(())
}

/// Index of the largest value (the first on ties).
pub fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as u32
}
