//! Log-probabilities of a position's tokens, as OpenAI's `logprobs` report them: the
//! model's distribution (the log-softmax of the raw logits, before penalties,
//! temperature and the filters), so a reported value does not depend on how the token
//! was drawn.

/// One token and its log-probability.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenLogprob {
    /// The token.
    pub token: u32,
    /// Its natural log-probability.
    pub logprob: f32,
}

/// The sampled token's log-probability and the most likely alternatives.
#[derive(Clone, Debug, PartialEq)]
pub struct Logprobs {
    /// The token sampled.
    pub chosen: TokenLogprob,
    /// The `top` most likely tokens, most likely first (lowest id among equals).
    pub top: Vec<TokenLogprob>,
}

/// The log-probabilities of `chosen` and of the `top` most likely tokens under the
/// softmax of `logits` (f64 sums; `-inf` logits have probability 0). `None` when
/// `chosen` is outside `logits` or no logit is finite.
pub fn logprobs(logits: &[f32], chosen: u32, top: usize) -> Option<Logprobs> {
    if chosen as usize >= logits.len() {
        return None;
    }
    let max = logits.iter().copied().filter(|l| l.is_finite()).fold(f32::NEG_INFINITY, f32::max);
    if !max.is_finite() {
        return None;
    }
    let sum: f64 = logits.iter().map(|&l| (f64::from(l) - f64::from(max)).exp()).sum();
    let log_z = f64::from(max) + sum.ln();
    let lp = |token: u32| TokenLogprob { token, logprob: (f64::from(logits[token as usize]) - log_z) as f32 };
    let chosen = lp(chosen);
    let mut order: Vec<u32> = (0..logits.len() as u32).collect();
    let top = top.min(logits.len());
    let by_logit = |a: &u32, b: &u32| logits[*b as usize].total_cmp(&logits[*a as usize]).then(a.cmp(b));
    if top > 0 && top < order.len() {
        order.select_nth_unstable_by(top - 1, by_logit);
    }
    order.truncate(top);
    order.sort_by(by_logit);
    Some(Logprobs { chosen, top: order.into_iter().map(lp).collect() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_softmax_of_the_raw_logits() {
        let logits = [1.0f32, 3.0, 2.0, f32::NEG_INFINITY, 3.0];
        let z: f64 = logits.iter().map(|&l| f64::from(l).exp()).sum();
        let want = |i: usize| (f64::from(logits[i]).exp() / z).ln() as f32;
        let got = logprobs(&logits, 2, 3).unwrap();
        assert_eq!(got.chosen, TokenLogprob { token: 2, logprob: want(2) });
        let ids: Vec<u32> = got.top.iter().map(|t| t.token).collect();
        assert_eq!(ids, [1, 4, 2]);
        assert!((got.top[0].logprob - want(1)).abs() < 1e-6);
        assert_eq!(logprobs(&logits, 3, 0).unwrap().chosen.logprob, f32::NEG_INFINITY);
        assert_eq!(logprobs(&logits, 0, 99).unwrap().top.len(), 5);
        assert!(logprobs(&logits, 5, 1).is_none());
        assert!(logprobs(&[f32::NEG_INFINITY; 3], 0, 1).is_none());
    }
}
