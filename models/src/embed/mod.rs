//! Embeddings: a model file's final hidden states pooled into one vector per input, as
//! llama.cpp computes them with `embeddings = true` (`llama-embedding`, llama-server's
//! `/v1/embeddings`).
//!
//! [`EmbeddingModel`] runs encoders ([`crate::arch::ENCODERS`]: BERT, Nomic-BERT) and the
//! decoders of [`crate::arch::ARCHS`] alike, without a KV cache: one graph per input
//! length computes every token's final hidden state (an encoder's last layer; a decoder's
//! output norm, before the vocabulary projection), every token attending to every other
//! unless the file's `attention.causal` (default true, so decoders stay causal) says
//! otherwise. The states are then pooled ([`Pooling`]: the file's `pooling_type` by
//! default, else none) and, if asked, scaled to length 1. It is a type apart from
//! [`crate::model::Model`], whose graphs are built around the KV cache and a decoder's
//! layers: an encoder has other tensors and no cache, and a decoder's embeddings are
//! one pass over the whole input, which a cache-free graph computes (the same values as
//! llama.cpp's cached pass with an F32 cache).
//!
//! ```no_run
//! use rgml_models::embed::{EmbedOptions, EmbeddingModel};
//! use rgml_models::tokenizer::Tokenizer;
//!
//! let path = std::path::Path::new("nomic-embed-text-v1.5.Q8_0.gguf");
//! let tok = Tokenizer::from_file(path)?;
//! let mut model = EmbeddingModel::load(path, 0)?;
//! let ids = tok.tokenize("search_query: what is rgml?", true, true)?;
//! let v = model.embed(&ids, &EmbedOptions { pooling: None, normalize: true })?;
//! assert_eq!(v.len(), model.info().n_embd);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod graph;
pub mod service;

use std::collections::HashMap;
use std::path::Path;

use rgml::gguf::GgufFile;
use rgml::{load_gguf, Backend, BackendStorage, Context, ContextMark, CpuBackend, Error, Result};

use crate::arch;
use crate::model::kv;
use crate::transformer::encoder::read_causal;
use crate::transformer::hparams::{meta, Keys, MAX_CONTEXT};
use crate::transformer::pooling::read_pooling;
use crate::transformer::weights::Loader;
use graph::{Net, Step};

pub use crate::transformer::encoder::EncoderHparams;
pub use crate::transformer::pooling::{normalize, pool, Pooling};

/// Planned graphs (one per input length) a model keeps by default.
pub const MAX_GRAPHS: usize = 16;

/// How an embedding model is loaded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmbedLoadOptions {
    /// The longest input in tokens (default: the training context, at most 4096; for an
    /// architecture of learned positions, at most the training context).
    pub n_ctx: Option<usize>,
}

/// How an input's hidden states become its embedding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmbedOptions {
    /// The pooling (`None`: the model's, [`EmbedInfo::pooling`]).
    pub pooling: Option<Pooling>,
    /// Scale each returned vector to Euclidean length 1 (llama.cpp's
    /// `--embd-normalize 2`, llama-server's default).
    pub normalize: bool,
}

/// What an embedding model is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmbedInfo {
    /// The architecture's GGUF name.
    pub arch: &'static str,
    /// An encoder (embeddings only), or a decoder that also generates text.
    pub encoder: bool,
    /// Width of an embedding.
    pub n_embd: usize,
    /// Vocabulary size.
    pub n_vocab: usize,
    /// The longest input in tokens.
    pub n_ctx: usize,
    /// The pooling the file names (`pooling_type`), if any.
    pub file_pooling: Option<Pooling>,
    /// The default pooling: the file's, else [`Pooling::None`] (as llama.cpp).
    pub pooling: Pooling,
    /// Whether attention is causal (`attention.causal`; true where absent).
    pub causal: bool,
}

/// A model that turns token ids into embeddings, on backend `B` (the CPU by default).
pub struct EmbeddingModel<B: Backend = CpuBackend> {
    net: Net,
    info: EmbedInfo,
    ctx: Context,
    /// The context right after loading: dropping every graph goes back here.
    weights_only: ContextMark,
    /// Planned graphs by input length.
    steps: HashMap<usize, Step>,
    max_graphs: usize,
    backend: B,
    storage: Option<B::Storage>,
}

impl EmbeddingModel<CpuBackend> {
    /// Loads `path` to run on the CPU with `threads` threads (0: one per core).
    pub fn load(path: &Path, threads: usize) -> Result<EmbeddingModel<CpuBackend>> {
        EmbeddingModel::load_with(path, EmbedLoadOptions::default(), CpuBackend::new(threads)?)
    }
}

impl<B: Backend> EmbeddingModel<B> {
    /// Loads `path` as `opts` says, to run on `backend`: an encoder of
    /// [`crate::arch::ENCODERS`] or a decoder of [`crate::arch::ARCHS`]. Every tensor is
    /// checked against the hyperparameters before anything runs.
    ///
    /// # Errors
    /// [`Error::Metadata`] naming the key for a missing, mistyped or absurd value (an
    /// unknown `pooling_type`, a reranker's); [`Error::Invalid`] for an `n_ctx` outside
    /// 1..=2^24 or past a learned position table; what loading the tensors gives.
    pub fn load_with(path: &Path, opts: EmbedLoadOptions, backend: B) -> Result<EmbeddingModel<B>> {
        let file = GgufFile::open(path)?;
        let name = file.get_str("general.architecture")?;
        let mut ctx = Context::new();
        let (net, info) = match arch::encoder_by_name(name) {
            Some(arch) => {
                let hp = arch.read_hparams(&file)?;
                let n_ctx = n_ctx_of(opts.n_ctx, hp.n_ctx_train)?;
                if arch.needs.position_embd && n_ctx > hp.n_ctx_train {
                    return Err(Error::Invalid(format!(
                        "--n-ctx {n_ctx}: {name} learns {} positions (position_embd.weight), so inputs hold at most {}",
                        hp.n_ctx_train, hp.n_ctx_train
                    )));
                }
                let w = load_gguf(&mut ctx, &file)?;
                let ld = Loader { ctx: &ctx, w: &w };
                let g = hp.globals(&ld, arch.needs)?;
                let layers = (0..hp.n_layer).map(|i| hp.layer(&ld, arch.needs, i)).collect::<Result<Vec<_>>>()?;
                let info = EmbedInfo {
                    arch: arch.name,
                    encoder: true,
                    n_embd: hp.n_embd,
                    n_vocab: hp.n_vocab,
                    n_ctx,
                    file_pooling: hp.pooling,
                    pooling: hp.pooling.unwrap_or(Pooling::None),
                    causal: hp.causal,
                };
                (Net::Encoder { arch, hp, g, layers }, info)
            }
            None => {
                let (arch, hp) = arch::read_hparams(&file)?;
                let k = Keys { f: &file, prefix: arch.name };
                let (causal, file_pooling) = (read_causal(&k)?, read_pooling(&k)?);
                if !causal && hp.swa.is_some() {
                    let why = "false with a sliding window: rgml runs windowed layers causally only";
                    return Err(meta(&k.key("attention.causal"), why));
                }
                let n_ctx = n_ctx_of(opts.n_ctx, hp.n_ctx_train)?;
                let w = load_gguf(&mut ctx, &file)?;
                let ld = Loader { ctx: &ctx, w: &w };
                let g = hp.globals(&ld)?;
                // no cache: the layers' cache slots point at the embeddings, never read
                let layers = (0..hp.n_layer)
                    .map(|i| hp.layer(&ld, arch.needs, i, (g.tok_embd, g.tok_embd), n_ctx))
                    .collect::<Result<Vec<_>>>()?;
                let info = EmbedInfo {
                    arch: arch.name,
                    encoder: false,
                    n_embd: hp.n_embd,
                    n_vocab: hp.n_vocab,
                    n_ctx,
                    file_pooling,
                    pooling: file_pooling.unwrap_or(Pooling::None),
                    causal,
                };
                (Net::Decoder { arch, hp: Box::new(hp), g, layers, causal }, info)
            }
        };
        Ok(EmbeddingModel {
            net,
            info,
            weights_only: ctx.mark(),
            ctx,
            steps: HashMap::new(),
            max_graphs: MAX_GRAPHS,
            backend,
            storage: None,
        })
    }

    /// What the model is.
    pub fn info(&self) -> &EmbedInfo {
        &self.info
    }
    /// The backend the model runs on.
    pub fn backend(&self) -> &B {
        &self.backend
    }
    /// An encoder's hyperparameters (`None` for a decoder).
    pub fn encoder_hparams(&self) -> Option<&EncoderHparams> {
        match &self.net {
            Net::Encoder { hp, .. } => Some(hp),
            Net::Decoder { .. } => None,
        }
    }
    /// Planned graphs held now.
    pub fn graphs(&self) -> usize {
        self.steps.len()
    }
    /// Keep at most `n` (≥ 1) planned graphs (default [`MAX_GRAPHS`]).
    pub fn set_max_graphs(&mut self, n: usize) {
        self.max_graphs = n.max(1);
    }

    /// The embedding of `tokens` (the vocabulary's special tokens already added): the
    /// pooled vector of `n_embd` values, or with [`Pooling::None`] every token's,
    /// token-major (`tokens.len() × n_embd`); each vector normalized if asked.
    ///
    /// # Errors
    /// [`Error::Invalid`] for no tokens, more than [`EmbedInfo::n_ctx`], or a token
    /// outside the vocabulary; what running the graph gives.
    pub fn embed(&mut self, tokens: &[u32], opts: &EmbedOptions) -> Result<Vec<f32>> {
        let pooling = opts.pooling.unwrap_or(self.info.pooling);
        let n_embd = self.info.n_embd;
        let mut out = pool(&self.hidden(tokens)?, n_embd, pooling);
        if opts.normalize {
            out.chunks_mut(n_embd).for_each(normalize);
        }
        Ok(out)
    }

    /// Every token's final hidden state, token-major (`tokens.len() × n_embd`): what
    /// [`EmbeddingModel::embed`] pools.
    ///
    /// # Errors
    /// As [`EmbeddingModel::embed`].
    pub fn hidden(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        let (n, info) = (tokens.len(), &self.info);
        if n == 0 {
            return Err(Error::Invalid("no tokens to embed".into()));
        }
        if n > info.n_ctx {
            return Err(Error::Invalid(format!("{n} tokens: the model takes at most {} (--n-ctx)", info.n_ctx)));
        }
        if let Some(&t) = tokens.iter().find(|&&t| t as usize >= info.n_vocab) {
            return Err(Error::Invalid(format!("token {t} is outside the vocabulary of {}", info.n_vocab)));
        }
        self.step(n)?;
        let s = &self.steps[&n];
        s.set_inputs(&mut self.ctx, &self.net, tokens)?;
        let size = s.plan.buffer_size();
        let st = match self.storage.as_mut() {
            None => {
                kv::check_fits(size as u64, "the compute buffer", "a smaller --n-ctx needs less")?;
                self.storage.insert(self.backend.alloc(&self.ctx, &s.graph, s.plan.clone())?)
            }
            Some(st) => {
                if size > st.capacity() {
                    kv::check_fits(size as u64, "the compute buffer", "shorter inputs need less")?;
                }
                st.grow(size)?;
                st.rebind(&self.ctx, &s.graph, s.plan.clone())?;
                st
            }
        };
        self.backend.compute(&self.ctx, &s.graph, st)?;
        st.read_f32(&self.ctx, s.hidden)
    }

    /// Builds and plans the graph for `n` tokens, once; with the maximum held already,
    /// all are dropped first and the context goes back to the weights.
    fn step(&mut self, n: usize) -> Result<()> {
        if self.steps.contains_key(&n) {
            return Ok(());
        }
        if self.steps.len() >= self.max_graphs {
            self.steps.clear();
            self.ctx.truncate(&self.weights_only)?;
        }
        let step = Step::build(&mut self.ctx, &self.net, n, &self.backend)?;
        self.steps.insert(n, step);
        Ok(())
    }
}

/// The longest input: as asked, else the training context at most 4096.
fn n_ctx_of(asked: Option<usize>, n_ctx_train: usize) -> Result<usize> {
    let n = asked.unwrap_or(n_ctx_train.min(4096));
    if !(1..=MAX_CONTEXT).contains(&n) {
        return Err(Error::Invalid(format!("--n-ctx {n} is outside 1..={MAX_CONTEXT}")));
    }
    Ok(n)
}

/// Whether `f` holds an encoder ([`crate::arch::ENCODERS`]): a model of embeddings only.
pub fn is_encoder(f: &GgufFile) -> bool {
    f.get_str("general.architecture").is_ok_and(|a| arch::encoder_by_name(a).is_some())
}

/// The pooling `f`'s `{arch}.pooling_type` names, if any.
///
/// # Errors
/// As [`EmbeddingModel::load_with`] for the key.
pub fn file_pooling(f: &GgufFile) -> Result<Option<Pooling>> {
    let prefix = f.get_str("general.architecture")?;
    read_pooling(&Keys { f, prefix })
}

/// The layers of the model in `f`, encoder or decoder (the split of `--n-gpu-layers`).
///
/// # Errors
/// As reading its hyperparameters.
pub fn n_layer_of(f: &GgufFile) -> Result<usize> {
    match arch::encoder_by_name(f.get_str("general.architecture")?) {
        Some(a) => Ok(a.read_hparams(f)?.n_layer),
        None => Ok(arch::read_hparams(f)?.1.n_layer),
    }
}

/// What rgml derives from the model file at `path`, an encoder or a decoder (for
/// `rgml inspect`), or why it cannot run it.
pub fn describe_file(path: &Path) -> String {
    let described =
        GgufFile::open(path).and_then(|f| match arch::encoder_by_name(f.get_str("general.architecture")?) {
            Some(a) => a.read_hparams(&f).map(|hp| hp.describe()),
            None => Ok(crate::model::describe_file(path)),
        });
    described.unwrap_or_else(|e| format!("rgml cannot run this file: {e}"))
}
