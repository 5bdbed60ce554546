//! A transformer from a GGUF file, of any architecture [`crate::arch`] knows:
//! hyperparameters and tensors as llama.cpp reads them, a KV cache held by the backend,
//! one forward graph per batch size (planned once, reused for every call of that size).
//!
//! Each graph stores the new keys and values with `set_rows` at the positions given as
//! input and attends over the first `n_kv` cache positions with a causal mask (and,
//! for sliding-window layers, a windowed one): `n_kv` is the number of positions in use
//! rounded up to [`KV_PAD`] (as llama.cpp pads it), so one graph serves every call of a
//! batch size while the cache fills up to the next multiple, and a short context does
//! not pay for the whole cache.
//!
//! The model is generic over the [`Backend`]: [`Model::load`] runs it on the CPU,
//! [`Model::load_on`] on any backend. Graphs are planned with the backend's rules; the
//! KV cache lives in the backend's storage (a written leaf, kept across the graphs of
//! different batch sizes).
//!
//! Several sequences ([`LoadOptions::n_seq`]) each have a stream of the cache:
//! [`Model::eval_seq`] runs one, [`Model::eval_seqs`] a token of several in one graph
//! (what a server's decode step runs). A sequence's logits are the same bits whichever
//! others share its step: its keys are in its own stream, and the products of the
//! weight types that keep their bits per row run the same arithmetic at any row count.

mod info;
pub mod kv;
pub mod offload;

pub use info::{argmax, describe_file, weight_bytes_per_token};

// the shared parts, where they were before they moved to `transformer`
pub use crate::transformer::{blocks, hparams, weights};

use std::collections::HashMap;
use std::path::Path;

use rgml::gguf::GgufFile;
use rgml::{
    load_gguf, Backend, BackendStorage, Context, ContextMark, CpuBackend, DType, Error, Graph, Plan, Result, TensorId,
};

use crate::transformer::blocks::{embed_tokens, Block, KvSpan};
use crate::transformer::hparams::Hparams;
use crate::transformer::weights::{Globals, Layer, Loader};
use crate::transformer::Architecture;
use kv::KvType;

/// Granularity of the attended cache length (llama.cpp pads `n_kv` to 256).
pub const KV_PAD: usize = 256;

/// Planned graphs a model keeps by default (one per batch size and `n_kv` step in
/// use); see [`Model::set_max_graphs`].
pub const MAX_GRAPHS: usize = 16;

/// How a model is loaded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// KV cache positions (default: [`kv::default_n_ctx`]).
    pub n_ctx: Option<usize>,
    /// The KV cache's element type (default F16, as llama.cpp's).
    pub kv_type: KvType,
    /// How attention is computed.
    pub attention: Attention,
    /// Sequences the KV cache holds, each in its own stream of `n_ctx` positions
    /// (0 or 1: one): [`Model::eval_seq`] runs one, [`Model::eval_seqs`] a token of
    /// several in one graph.
    pub n_seq: usize,
}

/// How a model computes attention.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Attention {
    /// Fused (`flash_attn_ext`) where the backend has the op, else unfused.
    #[default]
    Auto,
    /// Always fused: a backend without `flash_attn_ext` fails the graph.
    Fused,
    /// Scores, `soft_max_ext` and the value product as three ops, as llama.cpp
    /// without flash attention.
    Unfused,
}

/// What a planned graph is for: batch size, attended cache positions, whether it
/// computes every position's logits or only the last one's, and the sequence's
/// stream (or a token of every stream: [`Model::eval_seqs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct StepKey {
    n: usize,
    n_kv: usize,
    all_logits: bool,
    seq: usize,
    every_stream: bool,
}

/// The forward graph for one [`StepKey`], planned.
struct Step {
    graph: Graph,
    plan: Plan,
    tokens: TensorId,
    pos: TensorId,
    /// The cache cells the batch's keys and values are written to.
    cells: TensorId,
    mask: TensorId,
    mask_swa: Option<TensorId>,
    logits: TensorId,
}

/// A loaded model with its KV cache, on backend `B` (the CPU by default).
pub struct Model<B: Backend = CpuBackend> {
    /// Hyperparameters.
    pub hp: Hparams,
    /// The architecture's description, from the registry.
    arch: &'static Architecture,
    ctx: Context,
    n_ctx: usize,
    kv_type: KvType,
    /// Attention by `flash_attn_ext`.
    fused_attention: bool,
    globals: Globals,
    layers: Vec<Layer>,
    /// Planned graphs by [`StepKey`].
    steps: HashMap<StepKey, Step>,
    /// The context right after loading: dropping every graph goes back here.
    weights_only: ContextMark,
    /// Planned graphs kept at most.
    max_graphs: usize,
    backend: B,
    storage: Option<B::Storage>,
    /// Positions cached, by sequence.
    past: Vec<usize>,
    /// Cells of one sequence's stream: `n_ctx`, and one more (a cell the idle
    /// sequences of [`Model::eval_seqs`] write) with several sequences.
    stream_cells: usize,
    /// [`weight_bytes_per_token`] of the file.
    bytes_per_token: u64,
    /// Every weight matrix's product keeps a row's bits at any row count on this
    /// backend ([`Backend::mul_mat_rows_invariant`]).
    rows_invariant: bool,
}

impl Model<CpuBackend> {
    /// Loads `path` (tensors stay in the file's mapping) with an F32 KV cache of `n_ctx`
    /// positions (default: the training context, at most 4096), on the CPU with
    /// `threads` threads (0: one per core). [`Model::load_with`] chooses the cache type
    /// (the CLI's default, like llama.cpp's, is F16).
    pub fn load(path: &Path, n_ctx: Option<usize>, threads: usize) -> Result<Model<CpuBackend>> {
        Model::load_on(path, n_ctx, CpuBackend::new(threads)?)
    }
}

impl<B: Backend> Model<B> {
    /// Loads `path` with an F32 KV cache of `n_ctx` positions, to run on `backend`.
    pub fn load_on(path: &Path, n_ctx: Option<usize>, backend: B) -> Result<Model<B>> {
        Model::load_with(path, LoadOptions { n_ctx, kv_type: KvType::F32, ..Default::default() }, backend)
    }

    /// Loads `path` as `opts` says, to run on `backend`. The weights reach the device at
    /// the first evaluation (uploaded once; on the CPU they stay in the file's mapping).
    /// Every tensor is checked against the hyperparameters, and the KV cache against the
    /// memory available, before anything large is allocated.
    pub fn load_with(path: &Path, opts: LoadOptions, backend: B) -> Result<Model<B>> {
        let file = GgufFile::open(path)?;
        let (arch, hp) = crate::arch::read_hparams(&file)?;
        let n_ctx = opts.n_ctx.unwrap_or_else(|| kv::default_n_ctx(&hp));
        let n_seq = opts.n_seq.max(1);
        let stream_cells = if n_seq > 1 { n_ctx + 1 } else { n_ctx };
        if n_seq > MAX_SEQ {
            return Err(Error::Invalid(format!("{n_seq} sequences: at most {}", MAX_SEQ)));
        }
        let bytes = kv::cache_bytes(&hp, stream_cells, opts.kv_type)?.saturating_mul(n_seq as u64);
        // the context keeps the cache's initial zeros and the backend its own copy
        let what = format!(
            "a {}-position {} KV cache for {n_seq} sequences ({} here and {} in the backend)",
            n_ctx,
            opts.kv_type.dtype(),
            kv::mib(bytes),
            kv::mib(bytes)
        );
        kv::check_fits(bytes.saturating_mul(2), &what, "a smaller --n-ctx or --kv-type q8_0 needs less")?;
        let mut ctx = Context::new();
        let w = load_gguf(&mut ctx, &file)?;
        let ld = Loader { ctx: &ctx, w: &w };
        let globals = hp.globals(&ld)?;
        let needs = arch.needs;
        let mut tensors = Vec::new();
        for i in 0..hp.n_layer {
            tensors.push(hp.layer(&ld, needs, i, (globals.tok_embd, globals.tok_embd), n_ctx)?);
        }
        let dt = opts.kv_type.dtype();
        let mut layers = Vec::with_capacity(hp.n_layer);
        for mut l in tensors {
            let cells = (stream_cells * n_seq) as i64;
            let k = ctx.new_tensor_2d(dt, hp.n_embd_k_gqa() as i64, cells)?;
            ctx.set_name(k, format!("cache_k.{}", l.index))?;
            let v = ctx.new_tensor_2d(dt, hp.n_embd_v_gqa() as i64, cells)?;
            ctx.set_name(v, format!("cache_v.{}", l.index))?;
            (l.k_cache, l.v_cache) = (k, v);
            layers.push(l);
        }
        Ok(Model {
            weights_only: ctx.mark(),
            max_graphs: MAX_GRAPHS,
            hp,
            arch,
            ctx,
            n_ctx,
            kv_type: opts.kv_type,
            fused_attention: match opts.attention {
                Attention::Auto => backend.supports("flash_attn_ext"),
                Attention::Fused => true,
                Attention::Unfused => false,
            },
            globals,
            layers,
            steps: HashMap::new(),
            storage: None,
            past: vec![0; n_seq],
            stream_cells,
            bytes_per_token: weight_bytes_per_token(&file),
            rows_invariant: info::matmul_weight_types(&file).into_iter().all(|t| backend.mul_mat_rows_invariant(t)),
            backend,
        })
    }

    /// The backend the model runs on.
    pub fn backend(&self) -> &B {
        &self.backend
    }
    /// The backend memory of the model's graphs (its KV cache included), once a first
    /// evaluation has allocated it.
    pub fn storage(&self) -> Option<&B::Storage> {
        self.storage.as_ref()
    }
    /// Positions already in the KV cache.
    pub fn n_past(&self) -> usize {
        self.past[0]
    }
    /// Tensor headers in the model's context (weights, caches and graphs).
    pub fn context_len(&self) -> usize {
        self.ctx.len()
    }
    /// Weight bytes one decode step reads ([`weight_bytes_per_token`] of the file).
    pub fn weight_bytes_per_token(&self) -> u64 {
        self.bytes_per_token
    }
    /// Capacity of the KV cache.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }
    /// The KV cache's element type.
    pub fn kv_type(&self) -> KvType {
        self.kv_type
    }
    /// Empties the KV cache.
    pub fn reset(&mut self) -> Result<()> {
        if let Some(st) = self.storage.as_mut() {
            for l in &self.layers {
                st.reset_leaf(&self.ctx, l.k_cache)?;
                st.reset_leaf(&self.ctx, l.v_cache)?;
            }
        }
        self.past.fill(0);
        Ok(())
    }

    /// The forward graph for `n` tokens (every position's logits) and its DOT text.
    pub fn dot(&mut self, n: usize) -> Result<String> {
        let key = StepKey { n, n_kv: self.n_kv(n), all_logits: true, seq: 0, every_stream: false };
        self.step(key)?;
        let s = &self.steps[&key];
        s.graph.to_dot(&self.ctx, Some(&|id| s.plan.annotation(&self.ctx, id)))
    }

    /// Runs `tokens` after the cached positions; returns their logits, position-major
    /// (`tokens.len() × n_vocab`).
    pub fn eval(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        self.forward(0, tokens, true)
    }

    /// Runs `tokens` after the cached positions like [`Model::eval`], but returns only
    /// the last position's logits (`n_vocab` values; empty for no tokens). Its graph
    /// skips what only the other positions' logits need: the last layer's output
    /// projection and feed-forward, the final norm and the vocabulary projection run on
    /// the last position alone (the cache still receives every position). What
    /// generation needs, as llama.cpp computes by default.
    pub fn eval_last(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        self.forward(0, tokens, false)
    }

    /// Drops the cached positions from `n` on (a conversation rewound to a shared
    /// prefix); positions before `n` stay. `n` past the cached ones is an error.
    ///
    /// # Errors
    /// [`Error::Invalid`] when `n > n_past`.
    pub fn truncate_cache(&mut self, n: usize) -> Result<()> {
        if n > self.past[0] {
            return Err(Error::Invalid(format!("cannot keep {n} cache positions: {} are cached", self.past[0])));
        }
        // later evaluations overwrite the dropped positions, and the mask never shows them
        self.past[0] = n;
        Ok(())
    }

    fn forward(&mut self, seq: usize, tokens: &[u32], all_logits: bool) -> Result<Vec<f32>> {
        let n = tokens.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        self.check_seq(seq)?;
        if self.past[seq] + n > self.n_ctx {
            return Err(Error::Invalid(format!(
                "{} cached + {n} new tokens exceed the {}-position KV cache",
                self.past[seq], self.n_ctx
            )));
        }
        self.check_tokens(tokens)?;
        let n_kv = self.n_kv_of(seq, n);
        let key = StepKey { n, n_kv, all_logits, seq, every_stream: false };
        self.step(key)?;
        self.set_inputs(key, tokens)?;
        let logits = self.run_step(key)?;
        self.past[seq] += n;
        Ok(logits)
    }

    fn check_tokens(&self, tokens: &[u32]) -> Result<()> {
        match tokens.iter().find(|&&t| t as usize >= self.hp.n_vocab) {
            Some(&t) => Err(Error::Invalid(format!("token {t} is outside the vocabulary of {}", self.hp.n_vocab))),
            None => Ok(()),
        }
    }

    /// Runs the planned step `key` (inputs set) and reads its logits.
    fn run_step(&mut self, key: StepKey) -> Result<Vec<f32>> {
        let s = &self.steps[&key];
        let st = match self.storage.as_mut() {
            None => {
                kv::check_fits(s.plan.buffer_size() as u64, "the compute buffer", "a smaller --n-ctx needs less")?;
                self.storage.insert(self.backend.alloc(&self.ctx, &s.graph, s.plan.clone())?)
            }
            Some(st) => {
                // the storage (and the KV cache in it) stays with the model on an error
                st.grow(s.plan.buffer_size())?;
                st.rebind(&self.ctx, &s.graph, s.plan.clone())?;
                st
            }
        };
        self.backend.compute(&self.ctx, &s.graph, st)?;
        st.read_f32(&self.ctx, s.logits)
    }

    /// Tokens, positions and masks of the next batch into the step's input tensors.
    fn set_inputs(&mut self, key: StepKey, tokens: &[u32]) -> Result<()> {
        let (n, p0) = (tokens.len(), self.past[key.seq]);
        let ids: Vec<i32> = tokens.iter().map(|&t| t as i32).collect();
        let pos: Vec<i32> = (p0..p0 + n).map(|p| p as i32).collect();
        let first = key.seq * self.stream_cells;
        let cells: Vec<i32> = (p0..p0 + n).map(|p| (first + p) as i32).collect();
        // position i sees cache positions 0..=p0+i, and with a window only the last `window` of them
        let lasts: Vec<Option<usize>> = (p0..p0 + n).map(Some).collect();
        let mask = |window: Option<usize>| kv::causal_mask(key.n_kv, &lasts, window);
        let s = &self.steps[&key];
        let (t, p, c, m, ms) = (s.tokens, s.pos, s.cells, s.mask, s.mask_swa);
        self.ctx.set_data(t, &ids)?;
        self.ctx.set_data(p, &pos)?;
        self.ctx.set_data(c, &cells)?;
        self.ctx.set_data(m, &mask(None))?;
        if let (Some(ms), Some(swa)) = (ms, self.hp.swa.as_ref()) {
            let window = swa.window;
            self.ctx.set_data(ms, &mask(Some(window)))?;
        }
        Ok(())
    }

    /// Cache positions a batch of `n` tokens after the cached ones attends over: those
    /// in use, rounded up to [`KV_PAD`], at most the cache.
    pub fn n_kv(&self, n: usize) -> usize {
        self.n_kv_of(0, n)
    }

    /// [`Model::n_kv`] for sequence `seq`.
    fn n_kv_of(&self, seq: usize, n: usize) -> usize {
        (self.past[seq] + n).div_ceil(KV_PAD).saturating_mul(KV_PAD).min(self.n_ctx)
    }

    /// Whether every weight matrix's product keeps a row's bits at any row count on
    /// this backend ([`Backend::mul_mat_rows_invariant`]): then a decode step of
    /// [`Model::eval_seqs`] computes rows only up to its highest sequence, and a
    /// sequence's logits equal its lone run's ([`Model::eval`]).
    pub fn rows_invariant(&self) -> bool {
        self.rows_invariant
    }

    /// Planned graphs held now.
    pub fn graphs(&self) -> usize {
        self.steps.len()
    }
    /// Keep at most `n` (≥ 1) planned graphs (default [`MAX_GRAPHS`]).
    pub fn set_max_graphs(&mut self, n: usize) {
        self.max_graphs = n.max(1);
    }

    /// Builds and plans the graph for `key`, once. With the maximum held already, all
    /// are dropped first and the context goes back to the weights (so a model fed many
    /// batch sizes does not grow without bound).
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

    fn build(&mut self, key: StepKey) -> Result<Step> {
        let StepKey { n, n_kv, all_logits, seq, every_stream } = key;
        let c = &mut self.ctx;
        let (nt, nkv) = (n as i64, n_kv as i64);
        let tokens = c.new_tensor_1d(DType::I32, nt)?;
        let pos = c.new_tensor_1d(DType::I32, nt)?;
        let cells = c.new_tensor_1d(DType::I32, nt)?;
        // one query row per stream, each its own mask row
        let mask_ne: &[i64] = if every_stream { &[nkv, 1, 1, nt] } else { &[nkv, nt] };
        let mask = c.new_tensor(DType::F32, mask_ne)?;
        let mask_swa = match self.hp.swa {
            Some(_) => Some(c.new_tensor(DType::F32, mask_ne)?),
            None => None,
        };
        // set anew before every run: a backend uploads inputs each time (weights once)
        for t in [tokens, pos, cells, mask].into_iter().chain(mask_swa) {
            c.set_input(t)?;
        }
        let streams = if every_stream { n } else { 1 };
        let kv = KvSpan { first_cell: seq * self.stream_cells, stream_cells: self.stream_cells, streams };
        let mut x = embed_tokens(c, &self.hp, &self.globals, tokens)?;
        let fused = self.fused_attention;
        let mut b = Block {
            c,
            hp: &self.hp,
            pos,
            cells,
            kv,
            mask,
            mask_swa,
            n_tokens: nt,
            n_kv: nkv,
            last_only: !all_logits,
            fused,
            cached: true,
            adapters: None,
        };
        for l in &self.layers {
            x = (self.arch.block)(&mut b, l, x)?;
            b.c.set_name(x, format!("l_out.{}", l.index))?;
        }
        let logits = b.logits(&self.globals, x)?;
        c.set_name(logits, "logits")?;
        c.set_output(logits)?;
        let graph = Graph::build(c, &[logits])?;
        let plan = self.backend.plan(c, &graph)?;
        Ok(Step { graph, plan, tokens, pos, cells, mask, mask_swa, logits })
    }
}

/// Sequences a model holds at most.
pub const MAX_SEQ: usize = 256;

impl<B: Backend> Model<B> {
    /// Sequences the KV cache holds.
    pub fn n_seq(&self) -> usize {
        self.past.len()
    }

    /// Positions cached for sequence `seq`.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a sequence the model does not hold.
    pub fn seq_past(&self, seq: usize) -> Result<usize> {
        self.check_seq(seq)?;
        Ok(self.past[seq])
    }

    /// Empties sequence `seq`'s cache (its stream's cells are rewritten as it
    /// fills again; the mask never shows the old ones).
    ///
    /// # Errors
    /// [`Error::Invalid`] for a sequence the model does not hold.
    pub fn seq_reset(&mut self, seq: usize) -> Result<()> {
        self.check_seq(seq)?;
        self.past[seq] = 0;
        Ok(())
    }

    /// Runs `tokens` after sequence `seq`'s cached positions, alone in its graph;
    /// returns their logits, position-major ([`Model::eval`] is sequence 0's).
    pub fn eval_seq(&mut self, seq: usize, tokens: &[u32]) -> Result<Vec<f32>> {
        self.forward(seq, tokens, true)
    }

    /// [`Model::eval_seq`], returning only the last position's logits (as
    /// [`Model::eval_last`]: the last layer's tail runs on that position alone).
    pub fn eval_seq_last(&mut self, seq: usize, tokens: &[u32]) -> Result<Vec<f32>> {
        self.forward(seq, tokens, false)
    }

    /// One token for each sequence of `batch` (`(sequence, token)`, each sequence
    /// at most once) in one graph; returns each one's logits, in `batch`'s order.
    /// The graph holds a row for every stream up to the highest sequence of
    /// `batch` (an idle one computes a row nobody reads and writes a cell no mask
    /// shows); each row attends over its own stream. Where some weight matrix's
    /// product changes a row's bits with the row count on this backend, it holds
    /// a row for every stream whatever `batch` is, so that a sequence's logits
    /// never depend on which others run beside it.
    ///
    /// # Errors
    /// [`Error::Invalid`] for an empty batch, an unknown or repeated sequence, a
    /// token outside the vocabulary, or a sequence whose cache is full; a model
    /// with unfused attention cannot run it.
    pub fn eval_seqs(&mut self, batch: &[(usize, u32)]) -> Result<Vec<Vec<f32>>> {
        let n = self.n_seq();
        let mut token = vec![None; n];
        for &(seq, t) in batch {
            self.check_seq(seq)?;
            if token[seq].replace(t).is_some() {
                return Err(Error::Invalid(format!("sequence {seq} appears twice in one step")));
            }
            if self.past[seq] + 1 > self.n_ctx {
                return Err(Error::Invalid(format!("sequence {seq}'s {}-position cache is full", self.n_ctx)));
            }
        }
        if batch.is_empty() {
            return Err(Error::Invalid("a step of no sequences".into()));
        }
        let n = if self.rows_invariant { batch.iter().map(|&(s, _)| s + 1).max().unwrap_or(n) } else { n };
        token.truncate(n);
        self.check_tokens(&batch.iter().map(|&(_, t)| t).collect::<Vec<_>>())?;
        let n_kv = batch.iter().map(|&(s, _)| self.n_kv_of(s, 1)).max().unwrap_or(KV_PAD);
        let key = StepKey { n, n_kv, all_logits: true, seq: 0, every_stream: true };
        self.step(key)?;
        let cells = self.stream_cells;
        let ids: Vec<i32> = token.iter().map(|t| t.map_or(0, |t| t as i32)).collect();
        let pos: Vec<i32> = (0..n).map(|s| if token[s].is_some() { self.past[s] as i32 } else { 0 }).collect();
        // an idle stream writes its spare cell, past the positions any mask shows
        let spare = cells - 1;
        let cell: Vec<i32> =
            (0..n).map(|s| (s * cells + if token[s].is_some() { self.past[s] } else { spare }) as i32).collect();
        let lasts: Vec<Option<usize>> = (0..n).map(|s| token[s].map(|_| self.past[s])).collect();
        let mask = |window: Option<usize>| kv::causal_mask(n_kv, &lasts, window);
        let (m, m_swa) = (mask(None), self.hp.swa.as_ref().map(|w| mask(Some(w.window))));
        let st = &self.steps[&key];
        let (t, p, c, mk, ms) = (st.tokens, st.pos, st.cells, st.mask, st.mask_swa);
        self.ctx.set_data(t, &ids)?;
        self.ctx.set_data(p, &pos)?;
        self.ctx.set_data(c, &cell)?;
        self.ctx.set_data(mk, &m)?;
        if let (Some(ms), Some(m_swa)) = (ms, m_swa) {
            self.ctx.set_data(ms, &m_swa)?;
        }
        let logits = self.run_step(key)?;
        let nv = self.hp.n_vocab;
        let mut out = Vec::with_capacity(batch.len());
        for &(seq, _) in batch {
            out.push(logits[seq * nv..(seq + 1) * nv].to_vec());
            self.past[seq] += 1;
        }
        Ok(out)
    }

    fn check_seq(&self, seq: usize) -> Result<()> {
        if seq >= self.past.len() {
            return Err(Error::Invalid(format!("sequence {seq}: the model holds {}", self.past.len())));
        }
        Ok(())
    }
}
