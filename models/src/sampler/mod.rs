//! Token sampling with llama.cpp's semantics: its default chain
//! (`common/sampling.cpp`, `common_sampler_init`) restricted to the samplers
//! that are on by default, with the defaults of `common_params_sampling`
//! (`common/common.h`).
//!
//! [`Sampler::sample`] runs, in this order:
//!
//! 1. [`apply_penalties`]: repeat, frequency and presence penalties over the
//!    last [`repeat_last_n`](SamplerParams::repeat_last_n) accepted tokens;
//! 2. if [`temperature`](SamplerParams::temperature) `<= 0`: greedy, the
//!    highest penalised logit (lowest id among equals), no random number drawn;
//! 3. otherwise [`top_k`], [`top_p`], [`min_p`], [`temperature`], and the draw
//!    ([`dist`]) from the softmax of what is left, with one uniform `f64` from
//!    the sampler's [`Xoshiro256StarStar`].
//!
//! Sampling and accepting are split as in llama.cpp: `sample` does not record
//! the token it returns; the caller passes it (and the prompt's tokens) to
//! [`Sampler::accept`].
//!
//! Where this departs from llama.cpp, on purpose:
//!
//! - the random numbers: xoshiro256** from a `u64` seed, always deterministic
//!   (llama.cpp: `std::mt19937` from a `u32`, with `0xFFFFFFFF` meaning a random
//!   seed), so a seed does not reproduce llama.cpp's stream, only its
//!   distribution;
//! - greedy draws no random number (llama.cpp's chain keeps `dist` after a
//!   `temp <= 0` sampler, which draws one and discards it);
//! - equal logits are ordered by token id wherever candidates are sorted
//!   (llama.cpp's partial sort leaves their order unspecified);
//! - `repeat_last_n == -1` penalises over every token accepted since the last
//!   [`reset`](Sampler::reset) (llama.cpp's tools used to map `-1` to the
//!   context size; the library now clamps negatives to `0`, which disables
//!   the penalties);
//! - a `+inf` or NaN logit is an error rather than a NaN softmax.

#![warn(missing_docs)]

mod filters;
mod logprobs;
mod params;
mod rng;

use std::collections::VecDeque;

pub use filters::{apply_penalties, candidates, dist, min_p, softmax, temperature, top_k, top_p, Candidate};
pub use logprobs::{logprobs, Logprobs, TokenLogprob};
pub use params::{SamplerError, SamplerParams};
pub use rng::Xoshiro256StarStar;

use filters::fill_candidates;

/// A sampler: the parameters, the penalty history and the random stream.
#[derive(Clone, Debug)]
pub struct Sampler {
    params: SamplerParams,
    n_vocab: usize,
    /// Accepted tokens, oldest first; at most `repeat_last_n` of them when it
    /// is positive, none when it is 0.
    history: VecDeque<u32>,
    rng: Xoshiro256StarStar,
    /// The candidate buffer, kept between calls.
    scratch: Vec<Candidate>,
}

impl Sampler {
    /// A sampler over a vocabulary of `n_vocab` tokens, with an empty history
    /// and the stream seeded from `params.seed`.
    pub fn new(params: SamplerParams, n_vocab: usize) -> Result<Sampler, SamplerError> {
        params.validate()?;
        if n_vocab == 0 || n_vocab - 1 > u32::MAX as usize {
            return Err(SamplerError::InvalidParam {
                name: "n_vocab",
                value: n_vocab as f64,
                reason: "must be in [1, 2^32]",
            });
        }
        Ok(Sampler {
            params,
            n_vocab,
            history: VecDeque::new(),
            rng: Xoshiro256StarStar::seed_from_u64(params.seed),
            scratch: Vec::new(),
        })
    }

    /// The parameters.
    pub fn params(&self) -> &SamplerParams {
        &self.params
    }

    /// The vocabulary size.
    pub fn n_vocab(&self) -> usize {
        self.n_vocab
    }

    /// Records a token in the penalty history: every prompt token and every
    /// token generated (`sample` does not). Ids outside the vocabulary are
    /// recorded and never match a candidate.
    pub fn accept(&mut self, token: u32) {
        match usize::try_from(self.params.repeat_last_n) {
            Ok(0) => {}
            Ok(n) => {
                if self.history.len() >= n {
                    self.history.pop_front();
                }
                self.history.push_back(token);
            }
            Err(_) => self.history.push_back(token),
        }
    }

    /// Clears the history and restarts the random stream from `params.seed`.
    pub fn reset(&mut self) {
        self.history.clear();
        self.rng = Xoshiro256StarStar::seed_from_u64(self.params.seed);
    }

    /// Samples a token from `logits` (one per vocabulary token) through the
    /// chain described in the [module documentation](self). Does not accept it.
    pub fn sample(&mut self, logits: &[f32]) -> Result<u32, SamplerError> {
        if logits.len() != self.n_vocab {
            return Err(SamplerError::LogitsLength { expected: self.n_vocab, got: logits.len() });
        }
        if let Some((i, &value)) = logits.iter().enumerate().find(|(_, l)| l.is_nan() || **l == f32::INFINITY) {
            return Err(SamplerError::InvalidLogit { token: i as u32, value });
        }
        let mut c = std::mem::take(&mut self.scratch);
        fill_candidates(&mut c, logits);
        let result = self.sample_candidates(&mut c);
        self.scratch = c;
        result
    }

    fn sample_candidates(&mut self, c: &mut Vec<Candidate>) -> Result<u32, SamplerError> {
        apply_penalties(c, self.history.make_contiguous(), &self.params);
        if let Some(bad) = c.iter().find(|x| x.logit.is_nan() || x.logit == f32::INFINITY) {
            return Err(SamplerError::PenalisedLogit { token: bad.id, value: bad.logit });
        }
        // `c` is in id order here: the first maximum is the lowest id.
        let best = c.iter().fold(None, |b: Option<&Candidate>, x| match b {
            Some(b) if b.logit >= x.logit => Some(b),
            _ => Some(x),
        });
        let best = match best {
            Some(b) if b.logit > f32::NEG_INFINITY => b.id,
            _ => return Err(SamplerError::NoCandidates),
        };
        let p = self.params;
        if p.is_greedy() {
            return Ok(best);
        }
        // llama.cpp's chain gives top-k no min_keep (`llama_sampler_init_top_k(k)`).
        top_k(c, p.top_k, 0);
        top_p(c, p.top_p, p.min_keep);
        min_p(c, p.min_p, p.min_keep);
        temperature(c, p.temperature);
        let u = self.rng.next_f64();
        let i = dist(c, u).ok_or(SamplerError::NoCandidates)?;
        Ok(c[i].id)
    }
}
