//! The chain's parameters and what goes wrong with them: a leaf the sampler's modules share.

/// Parameters of the chain, llama.cpp's defaults in Default.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplerParams {
    /// Divides the logits before the draw; `<= 0` samples greedily. Default 0.8.
    pub temperature: f32,
    /// Keeps the `top_k` most likely tokens; `<= 0` keeps all. Default 40.
    pub top_k: i32,
    /// Keeps the smallest most-likely set whose probability reaches `top_p`;
    /// `1` keeps all. In `[0, 1]`. Default 0.95.
    pub top_p: f32,
    /// Keeps the tokens at least `min_p` times as likely as the most likely;
    /// `0` keeps all. In `[0, 1]`. Default 0.05.
    pub min_p: f32,
    /// Divides a repeated token's positive logit, multiplies its negative one;
    /// `1` is neutral. Finite and `> 0`. Default 1.0.
    pub repeat_penalty: f32,
    /// Subtracted from a repeated token's logit once per occurrence; `0` is
    /// neutral. Default 0.0.
    pub frequency_penalty: f32,
    /// Subtracted once from the logit of a token that occurred; `0` is
    /// neutral. Default 0.0.
    pub presence_penalty: f32,
    /// How many of the last accepted tokens the penalties look at: `0`
    /// disables them, `-1` means all since the last reset. Default 64.
    pub repeat_last_n: i32,
    /// The least number of candidates top-p and min-p leave (top-k takes none
    /// in llama.cpp's chain, nor here); `0` and `1` both mean one. Default 0.
    pub min_keep: usize,
    /// Seed of the random stream (deterministic for every value). Default 0.
    pub seed: u64,
}

impl Default for SamplerParams {
    fn default() -> SamplerParams {
        SamplerParams {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            repeat_last_n: 64,
            min_keep: 0,
            seed: 0,
        }
    }
}

impl SamplerParams {
    /// Checks every parameter: finite values, `top_p` and `min_p` in `[0, 1]`,
    /// `repeat_penalty > 0`, `repeat_last_n >= -1`.
    pub fn validate(&self) -> Result<(), SamplerError> {
        let bad = |name: &'static str, value: f64, reason: &'static str| {
            Err(SamplerError::InvalidParam { name, value, reason })
        };
        let finite = [
            ("temperature", self.temperature),
            ("top_p", self.top_p),
            ("min_p", self.min_p),
            ("repeat_penalty", self.repeat_penalty),
            ("frequency_penalty", self.frequency_penalty),
            ("presence_penalty", self.presence_penalty),
        ];
        for (name, v) in finite {
            if !v.is_finite() {
                return bad(name, v.into(), "must be finite");
            }
        }
        if !(0.0..=1.0).contains(&self.top_p) {
            return bad("top_p", self.top_p.into(), "must be in [0, 1]");
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return bad("min_p", self.min_p.into(), "must be in [0, 1]");
        }
        if self.repeat_penalty <= 0.0 {
            return bad("repeat_penalty", self.repeat_penalty.into(), "must be > 0");
        }
        if self.repeat_last_n < -1 {
            return bad("repeat_last_n", self.repeat_last_n.into(), "must be >= -1");
        }
        Ok(())
    }

    pub(crate) fn is_greedy(&self) -> bool {
        self.temperature <= 0.0
    }
}

/// What can go wrong building a [`Sampler`](super::Sampler) or sampling.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SamplerError {
    /// A parameter out of its range.
    #[error("invalid sampler parameter {name} = {value}: {reason}")]
    InvalidParam {
        /// The parameter's name, as the [`SamplerParams`] field (or `n_vocab`).
        name: &'static str,
        /// Its value.
        value: f64,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// The logits do not have one entry per vocabulary token.
    #[error("logits have {got} entries, expected one per vocabulary token (n_vocab = {expected})")]
    LogitsLength {
        /// The sampler's `n_vocab`.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// A NaN or `+inf` logit.
    #[error("logit of token {token} is {value} (NaN and +inf cannot be sampled)")]
    InvalidLogit {
        /// The token.
        token: u32,
        /// Its logit.
        value: f32,
    },
    /// The penalties turned a logit into NaN or `+inf` (an extreme penalty).
    #[error("penalised logit of token {token} is {value} (the penalties overflow)")]
    PenalisedLogit {
        /// The token.
        token: u32,
        /// Its logit after the penalties.
        value: f32,
    },
    /// Every logit is `-inf`: no token can be drawn.
    #[error("every logit is -inf: no token can be sampled")]
    NoCandidates,
}
