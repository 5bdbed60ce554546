//! Fine-tuning a model file on a text, as llama.cpp's `llama-finetune`: the text's
//! tokens cut into windows of `n_ctx + 1` (a window every `n_ctx / 2` tokens, as
//! llama.cpp's dataset), each window one step of next-token cross-entropy through a
//! training graph of the model's architecture, and AdamW. The graph is the forward
//! graph without a KV cache (attention over the window's own keys and values, unfused,
//! so every op has its gradient), its backward ([`rgml::Context::backward`]) and the
//! optimizer's in-place steps, built and planned once.
//!
//! What is trained: every weight, dequantized to F32 ([`Tuning::Full`]), or LoRA
//! adapters on the layers' matrices with the weights frozen in their file type
//! ([`Tuning::Lora`]). [`Finetuner::save`] writes a GGUF llama.cpp loads: the trained
//! tensors in F32 (adapters merged into their weights), the others as they were.

mod params;
mod save;

use std::path::Path;
use std::time::Instant;

use rgml::gguf::GgufFile;
use rgml::grad::optim::AdamW;
use rgml::{load_gguf, Backend, BackendStorage, Context, CpuBackend, DType, Error, Graph, Result, TensorId};

use crate::model::kv;
use crate::transformer::blocks::{embed_tokens, Adapters, Block};
use crate::transformer::hparams::Hparams;
use crate::transformer::weights::Loader;
use params::Trained;

/// What a [`Finetuner`] trains.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tuning {
    /// Every weight, in F32.
    Full,
    /// LoRA adapters of this rank on every layer matrix (`w·x + scale·b·(a·x)`, `b`
    /// starting at zero); the weights stay frozen in their file type.
    Lora {
        /// The adapters' rank.
        rank: usize,
        /// Their scale (PEFT's `lora_alpha / rank`).
        scale: f32,
    },
}

/// How a [`Finetuner`] trains.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FinetuneOptions {
    /// Tokens per window (the context the model is trained at).
    pub n_ctx: usize,
    /// The optimizer.
    pub optimizer: AdamW,
    /// What is trained.
    pub tuning: Tuning,
    /// Seed of the adapters' initial values.
    pub seed: u64,
}

impl Default for FinetuneOptions {
    /// 128-token windows, AdamW at lr 1e-5 without weight decay (ggml-opt's default
    /// decay), every weight trained.
    fn default() -> FinetuneOptions {
        FinetuneOptions {
            n_ctx: 128,
            optimizer: AdamW { lr: 1e-5, weight_decay: 0.0, ..AdamW::default() },
            tuning: Tuning::Full,
            seed: 42,
        }
    }
}

/// Where an epoch is: after each window, [`Finetuner::epoch`] reports one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    /// Windows done in this epoch, and in all.
    pub done: usize,
    /// Windows of the epoch.
    pub total: usize,
    /// Mean loss of the epoch's windows so far.
    pub loss: f64,
    /// Training tokens per second so far.
    pub tokens_per_s: f64,
}

/// The graph's inputs.
struct Inputs {
    tokens: TensorId,
    pos: TensorId,
    mask: TensorId,
    mask_swa: Option<TensorId>,
    labels: TensorId,
    hyper: TensorId,
}

/// A model file being fine-tuned on backend `B`.
pub struct Finetuner<B: Backend = CpuBackend> {
    backend: B,
    ctx: Context,
    file: GgufFile,
    hp: Hparams,
    opts: FinetuneOptions,
    inputs: Inputs,
    loss: TensorId,
    trained: Vec<Trained>,
    /// Bytes of the planned graph's buffer.
    graph_bytes: usize,
    /// Optimizer steps taken.
    step: u64,
    graph: Graph,
    st: B::Storage,
}

impl<B: Backend> Finetuner<B> {
    /// Loads `path` and builds its training graph for `opts` on `backend`. The
    /// architecture must be one rgml runs; the window must hold at least 2 tokens and
    /// at most the model's training context; the graph's memory must fit.
    pub fn new(path: &Path, opts: FinetuneOptions, backend: B) -> Result<Finetuner<B>> {
        let file = GgufFile::open(path)?;
        let (arch, hp) = crate::arch::read_hparams(&file)?;
        let n = opts.n_ctx;
        if n < 2 || n > hp.n_ctx_train.max(2) {
            return Err(Error::Invalid(format!(
                "finetune: windows of {n} tokens (at least 2, at most the model's training context {})",
                hp.n_ctx_train
            )));
        }
        if let Tuning::Lora { rank, scale } = opts.tuning {
            if rank == 0 || rank > hp.n_embd || !scale.is_finite() {
                return Err(Error::Invalid(format!(
                    "finetune: LoRA rank {rank} (1 to n_embd {}) and scale {scale}",
                    hp.n_embd
                )));
            }
        }
        let mut ctx = Context::new();
        let mut w = load_gguf(&mut ctx, &file)?;
        let mut trained = match opts.tuning {
            Tuning::Full => params::full(&mut ctx, &file, &mut w)?,
            Tuning::Lora { .. } => Vec::new(),
        };
        let ld = Loader { ctx: &ctx, w: &w };
        let globals = hp.globals(&ld)?;
        let layers = (0..hp.n_layer)
            .map(|i| hp.layer(&ld, arch.needs, i, (globals.tok_embd, globals.tok_embd), n))
            .collect::<Result<Vec<_>>>()?;
        let mut adapters = Adapters::new();
        if let Tuning::Lora { rank, scale } = opts.tuning {
            trained = params::lora(&mut ctx, &w, &layers, rank, scale, opts.seed, &mut adapters)?;
        }
        let inputs = Self::inputs(&mut ctx, &hp, n)?;
        let ni = &inputs;
        let mut x = embed_tokens(&ctx, &hp, &globals, ni.tokens)?;
        let mut b = Block::uncached(&mut ctx, &hp, ni.pos, (ni.mask, ni.mask_swa), n, Some(&adapters));
        for l in &layers {
            x = (arch.block)(&mut b, l, x)?;
        }
        let logits = b.logits(&globals, x)?;
        let loss = ctx.cross_entropy_loss(logits, ni.labels)?;
        ctx.set_output(loss)?;
        let ids: Vec<TensorId> = trained.iter().flat_map(Trained::params).collect();
        let grads = ctx.backward(loss, &ids)?;
        let mut outputs = vec![loss];
        for p in ids {
            let g = grads
                .get(p)
                .ok_or_else(|| Error::Invalid(format!("finetune: the loss does not depend on {}", ctx.label(p))))?;
            let ne = ctx.layout(p)?.ne;
            let (m, v) = (ctx.new_tensor(DType::F32, &ne)?, ctx.new_tensor(DType::F32, &ne)?);
            outputs.push(ctx.opt_step_adamw(p, g, m, v, inputs.hyper)?);
        }
        let graph = Graph::build(&ctx, &outputs)?;
        let plan = backend.plan(&ctx, &graph)?;
        kv::check_fits(plan.buffer_size() as u64, "the training graph", "a smaller --ctx or --lora needs less")?;
        let graph_bytes = plan.buffer_size();
        let st = backend.alloc(&ctx, &graph, plan)?;
        Ok(Finetuner { backend, ctx, file, hp, opts, inputs, loss, trained, graph_bytes, step: 0, graph, st })
    }

    fn inputs(ctx: &mut Context, hp: &Hparams, n: usize) -> Result<Inputs> {
        let nt = n as i64;
        let tokens = ctx.new_tensor_1d(DType::I32, nt)?;
        let pos = ctx.new_tensor_1d(DType::I32, nt)?;
        let mask = ctx.new_tensor_2d(DType::F32, nt, nt)?;
        let mask_swa = match hp.swa {
            Some(_) => Some(ctx.new_tensor_2d(DType::F32, nt, nt)?),
            None => None,
        };
        let labels = ctx.new_tensor_2d(DType::F32, hp.n_vocab as i64, nt)?;
        let hyper = ctx.new_tensor_1d(DType::F32, 8)?;
        for t in [tokens, pos, mask, labels, hyper].into_iter().chain(mask_swa) {
            ctx.set_input(t)?;
        }
        Ok(Inputs { tokens, pos, mask, mask_swa, labels, hyper })
    }

    /// Tokens per window.
    pub fn n_ctx(&self) -> usize {
        self.opts.n_ctx
    }
    /// Optimizer steps taken.
    pub fn steps(&self) -> u64 {
        self.step
    }
    /// Values trained (parameters of the optimizer).
    pub fn trained_values(&self) -> usize {
        self.trained.iter().map(|t| t.values(&self.ctx)).sum()
    }
    /// Bytes of the planned training graph's buffer.
    pub fn graph_bytes(&self) -> usize {
        self.graph_bytes
    }

    /// One optimizer step on `window` (`n_ctx + 1` tokens: position `i` learns to
    /// predict token `i + 1`); returns the window's mean loss before the step.
    pub fn train_window(&mut self, window: &[u32]) -> Result<f64> {
        let n = self.opts.n_ctx;
        if window.len() != n + 1 {
            return Err(Error::Invalid(format!("finetune: a window of {} tokens, not {}", window.len(), n + 1)));
        }
        let nv = self.hp.n_vocab;
        if let Some(&t) = window.iter().find(|&&t| t as usize >= nv) {
            return Err(Error::Invalid(format!("token {t} is outside the vocabulary of {nv}")));
        }
        let ids: Vec<i32> = window[..n].iter().map(|&t| t as i32).collect();
        let pos: Vec<i32> = (0..n as i32).collect();
        let mut labels = vec![0f32; nv * n];
        for (i, &t) in window[1..].iter().enumerate() {
            labels[i * nv + t as usize] = 1.0;
        }
        let i = &self.inputs;
        let (tokens, p, mask, labels_t, hyper, swa) = (i.tokens, i.pos, i.mask, i.labels, i.hyper, i.mask_swa);
        self.ctx.set_data(tokens, &ids)?;
        self.ctx.set_data(p, &pos)?;
        let lasts: Vec<Option<usize>> = (0..n).map(Some).collect();
        self.ctx.set_data(mask, &kv::causal_mask(n, &lasts, None))?;
        if let (Some(ms), Some(s)) = (swa, self.hp.swa.as_ref()) {
            let window = s.window;
            self.ctx.set_data(ms, &kv::causal_mask(n, &lasts, Some(window)))?;
        }
        self.ctx.set_data(labels_t, &labels)?;
        self.step += 1;
        self.ctx.set_data(hyper, &self.opts.optimizer.hyper(self.step))?;
        self.backend.compute(&self.ctx, &self.graph, &mut self.st)?;
        Ok(self.st.read_f32(&self.ctx, self.loss)?[0] as f64)
    }

    /// One pass over `tokens`' windows ([`windows`]), a step per window, calling
    /// `progress` after each; returns the mean loss. Errors when the text is shorter
    /// than one window.
    pub fn epoch(&mut self, tokens: &[u32], mut progress: impl FnMut(Progress)) -> Result<f64> {
        let starts = windows(tokens.len(), self.opts.n_ctx)?;
        let t0 = Instant::now();
        let mut sum = 0.0;
        for (k, &s) in starts.iter().enumerate() {
            sum += self.train_window(&tokens[s..s + self.opts.n_ctx + 1])?;
            let secs = t0.elapsed().as_secs_f64().max(1e-9);
            progress(Progress {
                done: k + 1,
                total: starts.len(),
                loss: sum / (k + 1) as f64,
                tokens_per_s: ((k + 1) * self.opts.n_ctx) as f64 / secs,
            });
        }
        Ok(sum / starts.len() as f64)
    }

    /// Writes the model with its trained tensors to `out` (atomically): trained
    /// weights in F32, adapters merged into their weights in F32, the rest of the
    /// file unchanged.
    pub fn save(&self, out: &Path) -> Result<()> {
        save::save(&self.file, &self.ctx, &self.st, &self.trained, out)
    }
}

/// The first token of each window of `n_ctx + 1` tokens in a text of `len` tokens:
/// one every `n_ctx / 2` tokens (llama.cpp's dataset stride), the last ending at or
/// before the text's end.
pub fn windows(len: usize, n_ctx: usize) -> Result<Vec<usize>> {
    if n_ctx == 0 || len < n_ctx + 1 {
        return Err(Error::Invalid(format!(
            "finetune: the text has {len} tokens; a window of {n_ctx} needs at least {}",
            n_ctx + 1
        )));
    }
    let stride = (n_ctx / 2).max(1);
    Ok((0..=len - n_ctx - 1).step_by(stride).collect())
}
