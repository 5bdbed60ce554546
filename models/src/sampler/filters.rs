//! The chain's filters as pure functions over a candidate list, each matching
//! the llama.cpp sampler of the same name (`src/llama-sampler.cpp`).
//!
//! Wherever llama.cpp sorts, these sort by logit, descending, with ties broken
//! by the lower token id first, so that every result is one fixed list (llama.cpp's
//! `std::partial_sort` leaves the order of equal logits unspecified).

use std::cmp::Ordering;

use super::SamplerParams;

/// One candidate: token id, logit, probability (after softmax).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    /// The token id.
    pub id: u32,
    /// The (possibly penalised, filtered or scaled) logit.
    pub logit: f32,
    /// The probability last computed by [`softmax`], [`top_p`] or [`dist`];
    /// `0.0` until one of them runs.
    pub p: f32,
}

impl Candidate {
    /// A candidate with probability `0.0`.
    pub fn new(id: u32, logit: f32) -> Candidate {
        Candidate { id, logit, p: 0.0 }
    }
}

/// The candidates of a logits vector, in id order (`logits[i]` is token `i`'s).
///
/// # Panics
///
/// If `logits` has more than `u32::MAX + 1` entries.
pub fn candidates(logits: &[f32]) -> Vec<Candidate> {
    let mut c = Vec::with_capacity(logits.len());
    fill_candidates(&mut c, logits);
    c
}

/// Replaces the contents of `c` with the candidates of `logits`, in id order.
pub(crate) fn fill_candidates(c: &mut Vec<Candidate>, logits: &[f32]) {
    assert!(logits.len() <= u32::MAX as usize + 1, "more logits than u32 token ids");
    c.clear();
    c.extend(logits.iter().enumerate().map(|(i, &l)| Candidate::new(i as u32, l)));
}

/// The order of sorted candidate lists: logit descending, then id ascending.
/// A total order even with NaN logits (they sort last), so sorting never panics.
fn by_logit_desc(a: &Candidate, b: &Candidate) -> Ordering {
    let by_logit = match (a.logit.is_nan(), b.logit.is_nan()) {
        (false, false) => b.logit.partial_cmp(&a.logit).unwrap_or(Ordering::Equal),
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
    };
    by_logit.then(a.id.cmp(&b.id))
}

fn sort_desc(c: &mut [Candidate]) {
    c.sort_unstable_by(by_logit_desc);
}

/// `exp(logit - max)`, with the limits a `+inf` maximum implies (a candidate at
/// `+inf` weighs 1, every other 0) instead of `exp(inf - inf) = NaN`.
/// An all `-inf` list weighs each candidate 1 (a uniform draw) for the same reason.
fn rel_exp(logit: f32, max: f32) -> f32 {
    if logit == max {
        1.0
    } else if max == f32::INFINITY {
        0.0
    } else {
        (logit - max).exp()
    }
}

fn max_logit(c: &[Candidate]) -> f32 {
    c.iter().map(|x| x.logit).fold(f32::NEG_INFINITY, f32::max)
}

/// llama.cpp's `penalties` sampler: for every candidate whose token occurs in
/// the window of `history` (the last `p.repeat_last_n` tokens, the whole of it
/// for `-1`), the repeat penalty divides a positive logit and multiplies a
/// logit `<= 0`, then `count * frequency_penalty + presence_penalty` is
/// subtracted, where `count` is the token's number of occurrences in the window.
///
/// `history` holds accepted tokens, oldest first. Does nothing when
/// `repeat_last_n == 0` or every penalty is neutral (repeat 1, frequency 0,
/// presence 0), as llama.cpp. The order of `c` is kept.
pub fn apply_penalties(c: &mut [Candidate], history: &[u32], p: &SamplerParams) {
    let disabled =
        p.repeat_last_n == 0 || (p.repeat_penalty == 1.0 && p.frequency_penalty == 0.0 && p.presence_penalty == 0.0);
    if disabled || history.is_empty() {
        return;
    }
    let window = match usize::try_from(p.repeat_last_n) {
        Ok(n) => &history[history.len().saturating_sub(n)..],
        Err(_) => history, // -1 (any negative): the whole history
    };
    // (token, count) sorted by token: a lookup table independent of any hashing.
    let mut counts: Vec<(u32, u32)> = Vec::new();
    let mut sorted = window.to_vec();
    sorted.sort_unstable();
    for t in sorted {
        match counts.last_mut() {
            Some((last, n)) if *last == t => *n += 1,
            _ => counts.push((t, 1)),
        }
    }
    for cand in c.iter_mut() {
        let Ok(i) = counts.binary_search_by_key(&cand.id, |&(t, _)| t) else { continue };
        let count = counts[i].1;
        if cand.logit <= 0.0 {
            cand.logit *= p.repeat_penalty;
        } else {
            cand.logit /= p.repeat_penalty;
        }
        cand.logit -= count as f32 * p.frequency_penalty + p.presence_penalty;
    }
}

/// Top-k: keeps the `k` candidates of highest logit, sorted.
///
/// `k <= 0` means no limit and leaves `c` untouched. Otherwise the number kept
/// is `max(k, min_keep)`, clamped to the number of candidates: llama.cpp's
/// former `llama_sample_top_k` honoured `min_keep` this way; its current
/// sampler takes no `min_keep` and its default chain gives top-k none, so
/// [`Sampler`](super::Sampler) passes `0`.
pub fn top_k(c: &mut Vec<Candidate>, k: i32, min_keep: usize) {
    if k <= 0 {
        return;
    }
    let k = (k as usize).max(min_keep).min(c.len());
    if k == 0 {
        return;
    }
    if k < c.len() {
        c.select_nth_unstable_by(k - 1, by_logit_desc);
        c.truncate(k);
    }
    sort_desc(c);
}

/// Top-p (nucleus): computes the softmax of the candidates (sorting them), then
/// keeps the smallest prefix whose cumulative probability reaches `p` (`>=`,
/// the crossing candidate included) and that holds at least `min_keep`
/// candidates; all of them if the sum never gets there.
///
/// `p >= 1` leaves `c` untouched (llama.cpp makes it an empty sampler).
/// The sum is accumulated in `f32`, as llama.cpp's.
pub fn top_p(c: &mut Vec<Candidate>, p: f32, min_keep: usize) {
    if p >= 1.0 || c.is_empty() {
        return;
    }
    softmax(c);
    let mut cum = 0.0f32;
    let mut keep = c.len();
    for (i, cand) in c.iter().enumerate() {
        cum += cand.p;
        if cum >= p && i + 1 >= min_keep {
            keep = i + 1;
            break;
        }
    }
    c.truncate(keep);
}

/// Min-p: keeps the candidates whose probability is at least `p` times the
/// largest, computed as llama.cpp does, in logit space: a candidate stays when
/// `logit >= max_logit + ln(p)` (both in `f32`). If fewer than `min_keep` pass,
/// the `min_keep` highest are kept instead (sorted); otherwise the survivors
/// keep their order.
///
/// `p <= 0` leaves `c` untouched.
pub fn min_p(c: &mut Vec<Candidate>, p: f32, min_keep: usize) {
    if p <= 0.0 || c.is_empty() {
        return;
    }
    let min_logit = max_logit(c) + p.ln();
    let passing = c.iter().filter(|x| x.logit >= min_logit).count();
    if passing > 0 && passing >= min_keep {
        c.retain(|x| x.logit >= min_logit);
    } else {
        // llama.cpp's sorted path: the first always stays, then while passing or under min_keep.
        sort_desc(c);
        c.truncate(passing.max(min_keep).max(1).min(c.len()));
    }
}

/// Temperature (llama.cpp's `temp` / `temp_ext` without a dynamic range):
/// divides every logit by `t`. `t <= 0` keeps only the highest logit (the
/// lowest id among equals) and sets every other to `-inf`, llama.cpp's greedy
/// form; `t == 1` changes nothing.
pub fn temperature(c: &mut [Candidate], t: f32) {
    if c.is_empty() || t == 1.0 {
        return;
    }
    if t <= 0.0 {
        let best = (1..c.len()).fold(0, |b, i| if by_logit_desc(&c[i], &c[b]) == Ordering::Less { i } else { b });
        for (i, cand) in c.iter_mut().enumerate() {
            if i != best {
                cand.logit = f32::NEG_INFINITY;
            }
        }
        return;
    }
    for cand in c.iter_mut() {
        cand.logit /= t;
    }
}

/// Sorts the candidates by logit, descending (ties by id), and fills `p` with
/// their softmax: `exp(logit - max)` normalised by its sum, in `f32` as
/// llama.cpp's `llama_sampler_softmax_impl`.
pub fn softmax(c: &mut [Candidate]) {
    if c.is_empty() {
        return;
    }
    sort_desc(c);
    let max = c[0].logit;
    let mut sum = 0.0f32;
    for cand in c.iter_mut() {
        cand.p = rel_exp(cand.logit, max);
        sum += cand.p;
    }
    for cand in c.iter_mut() {
        cand.p /= sum;
    }
}

/// The draw of llama.cpp's `dist` sampler for one uniform `u` in `[0, 1)`:
/// weights `exp(logit - max)` (in `f32`) summed in `f64`, then the first
/// candidate, in the order of `c`, at which the running sum reaches
/// `u * sum` (`>=`) and whose weight is not zero (llama.cpp would take a
/// zero-weight first candidate for `u == 0`). Fills `p` with the normalised probabilities and returns
/// the chosen candidate's index in `c`; `None` if `c` is empty.
///
/// It does not sort: the walk follows the order of `c`.
pub fn dist(c: &mut [Candidate], u: f64) -> Option<usize> {
    if c.is_empty() {
        return None;
    }
    let max = max_logit(c);
    let mut sum = 0.0f64;
    for cand in c.iter_mut() {
        cand.p = rel_exp(cand.logit, max);
        sum += f64::from(cand.p);
    }
    let target = sum * u;
    let mut run = 0.0f64;
    let mut selected = None;
    for (i, cand) in c.iter_mut().enumerate() {
        if selected.is_none() {
            run += f64::from(cand.p);
            if run >= target && cand.p > 0.0 {
                selected = Some(i);
            }
        }
        cand.p = (f64::from(cand.p) / sum) as f32;
    }
    // Unreachable for u < 1 (the running sum ends at `sum`); the last, as llama.cpp.
    Some(selected.unwrap_or(c.len() - 1))
}
