//! Generation: evaluate a prompt after what the KV cache holds, then sample one token
//! at a time until an end-of-generation token, a token limit, the end of the cache or
//! the caller says stop.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use rgml::Backend;

use crate::model::Model;
use crate::sampler::{Sampler, SamplerError};

/// Why generation stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The model produced an end-of-generation token (the last of [`Generated::tokens`]).
    EndOfGeneration(u32),
    /// `max_tokens` tokens were generated.
    MaxTokens,
    /// The KV cache is full: the last token could not be evaluated.
    ContextFull,
    /// The per-token callback returned `Break`.
    Callback,
}

/// How long to generate and what to keep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GenerateOptions {
    /// The most tokens to sample.
    pub max_tokens: usize,
    /// Keep every evaluated position's logits (the prompt's and each generated token's
    /// but the last), in [`Generated::logits`].
    pub all_logits: bool,
}

/// What [`Model::generate`] produced.
#[derive(Clone, Debug, PartialEq)]
pub struct Generated {
    /// The sampled tokens, an end-of-generation token included. The KV cache holds the
    /// prompt and all of these but the last.
    pub tokens: Vec<u32>,
    /// Why it stopped.
    pub stop: Stop,
    /// Time spent evaluating the prompt.
    pub prompt_time: Duration,
    /// Time spent generating (evaluating and sampling) after the prompt.
    pub gen_time: Duration,
    /// With [`GenerateOptions::all_logits`], every evaluated position's logits,
    /// position-major; empty otherwise.
    pub logits: Vec<f32>,
}

/// A failure during generation.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// Nothing to evaluate.
    #[error("the prompt is empty: give at least one token")]
    EmptyPrompt,
    /// The prompt does not fit in what is left of the KV cache.
    #[error("the prompt needs {need} positions but the KV cache has {free} of {n_ctx} left (use a larger --n-ctx)")]
    PromptTooLong {
        /// Positions the prompt needs.
        need: usize,
        /// Positions left.
        free: usize,
        /// The cache's size.
        n_ctx: usize,
    },
    /// The model failed to evaluate.
    #[error(transparent)]
    Model(#[from] rgml::Error),
    /// The sampler refused the logits or its parameters.
    #[error(transparent)]
    Sampler(#[from] SamplerError),
}

impl<B: Backend> Model<B> {
    /// Evaluates `prompt` after the cached positions, then samples up to
    /// `opts.max_tokens` tokens with `sampler` (which sees the prompt too, for its penalties). Stops after a
    /// token for which `is_end` is true, when the cache is full, or when `on_token` — called
    /// with every other token as it is sampled — returns `Break`.
    ///
    /// # Errors
    /// An empty prompt, a prompt longer than the free cache, or a model or sampler error.
    pub fn generate(
        &mut self,
        prompt: &[u32],
        sampler: &mut Sampler,
        opts: GenerateOptions,
        is_end: impl Fn(u32) -> bool,
        mut on_token: impl FnMut(u32) -> ControlFlow<()>,
    ) -> Result<Generated, GenerateError> {
        let free = self.n_ctx() - self.n_past();
        if prompt.is_empty() {
            return Err(GenerateError::EmptyPrompt);
        }
        if prompt.len() > free {
            return Err(GenerateError::PromptTooLong { need: prompt.len(), free, n_ctx: self.n_ctx() });
        }
        prompt.iter().for_each(|&t| sampler.accept(t));
        let n_vocab = self.hp.n_vocab;
        let mut all = Vec::new();
        let mut eval = |m: &mut Self, toks: &[u32]| -> Result<Vec<f32>, GenerateError> {
            if !opts.all_logits {
                return Ok(m.eval_last(toks)?);
            }
            let l = m.eval(toks)?;
            all.extend_from_slice(&l);
            Ok(l[l.len() - n_vocab..].to_vec())
        };
        let t0 = Instant::now();
        let mut logits = eval(self, prompt)?;
        let prompt_time = t0.elapsed();
        let t1 = Instant::now();
        let mut tokens = Vec::new();
        let stop = loop {
            if tokens.len() >= opts.max_tokens {
                break Stop::MaxTokens;
            }
            let next = sampler.sample(&logits)?;
            sampler.accept(next);
            tokens.push(next);
            if is_end(next) {
                break Stop::EndOfGeneration(next);
            }
            if on_token(next).is_break() {
                break Stop::Callback;
            }
            if tokens.len() >= opts.max_tokens {
                break Stop::MaxTokens;
            }
            if self.n_past() >= self.n_ctx() {
                break Stop::ContextFull;
            }
            logits = eval(self, &[next])?;
        };
        let gen_time = t1.elapsed();
        Ok(Generated { tokens, stop, prompt_time, gen_time, logits: all })
    }
}
