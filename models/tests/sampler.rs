//! The sampler against llama.cpp's definitions (`src/llama-sampler.cpp`), on
//! small logits vectors whose expected survivors and probabilities are worked
//! out by hand in the comments.

use rgml_models::sampler::{
    apply_penalties, candidates, dist, min_p, softmax, temperature, top_k, top_p, Candidate, Sampler, SamplerError,
    SamplerParams, Xoshiro256StarStar,
};

fn ids(c: &[Candidate]) -> Vec<u32> {
    c.iter().map(|x| x.id).collect()
}

fn logits_of(c: &[Candidate]) -> Vec<f32> {
    c.iter().map(|x| x.logit).collect()
}

/// Parameters with every filter and penalty off, temperature 1.
fn plain() -> SamplerParams {
    SamplerParams { temperature: 1.0, top_k: 0, top_p: 1.0, min_p: 0.0, ..SamplerParams::default() }
}

fn greedy() -> SamplerParams {
    SamplerParams { temperature: 0.0, ..plain() }
}

// ---------------------------------------------------------------- top-k

#[test]
fn top_k_keeps_the_two_highest_of_five_sorted() {
    let mut c = candidates(&[1.0, 5.0, 3.0, 4.0, 2.0]);
    top_k(&mut c, 2, 0);
    assert_eq!(ids(&c), [1, 3]);
    assert_eq!(logits_of(&c), [5.0, 4.0]);
}

#[test]
fn top_k_non_positive_is_no_limit_and_leaves_the_list_alone() {
    for k in [0, -1, -40] {
        let mut c = candidates(&[1.0, 5.0, 3.0, 4.0, 2.0]);
        top_k(&mut c, k, 0);
        assert_eq!(ids(&c), [0, 1, 2, 3, 4], "k = {k}");
    }
}

#[test]
fn top_k_above_the_candidate_count_keeps_all_sorted() {
    let mut c = candidates(&[1.0, 5.0, 3.0, 4.0, 2.0]);
    top_k(&mut c, 10, 0);
    assert_eq!(ids(&c), [1, 3, 2, 4, 0]);
    let mut c = candidates(&[1.0, 5.0, 3.0, 4.0, 2.0]);
    top_k(&mut c, 5, 0);
    assert_eq!(ids(&c), [1, 3, 2, 4, 0]);
}

#[test]
fn top_k_min_keep_raises_k_up_to_the_candidate_count() {
    let mut c = candidates(&[1.0, 5.0, 3.0, 4.0, 2.0]);
    top_k(&mut c, 2, 3);
    assert_eq!(ids(&c), [1, 3, 2]);
    let mut c = candidates(&[1.0, 5.0, 3.0, 4.0, 2.0]);
    top_k(&mut c, 2, 9);
    assert_eq!(ids(&c), [1, 3, 2, 4, 0]);
    // min_keep below k changes nothing.
    let mut c = candidates(&[1.0, 5.0, 3.0, 4.0, 2.0]);
    top_k(&mut c, 3, 1);
    assert_eq!(ids(&c), [1, 3, 2]);
}

#[test]
fn top_k_breaks_ties_by_lowest_id() {
    let mut c = candidates(&[1.0, 2.0, 2.0, 0.0, 2.0]);
    top_k(&mut c, 1, 0);
    assert_eq!(ids(&c), [1]);
    let mut c = candidates(&[1.0, 2.0, 2.0, 0.0, 2.0]);
    top_k(&mut c, 2, 0);
    assert_eq!(ids(&c), [1, 2]);
}

#[test]
fn chain_top_k_ignores_min_keep_as_llama_cpp_does() {
    // llama.cpp's chain builds top-k without min_keep: top_k 2, min_keep 4 still
    // leaves two tokens. Logits 3, 2, 1, 0 at temperature 1 with nothing else on.
    let params = SamplerParams { top_k: 2, min_keep: 4, seed: 3, ..plain() };
    let mut s = Sampler::new(params, 4).unwrap();
    let mut seen = [0usize; 4];
    for _ in 0..2000 {
        seen[s.sample(&[3.0, 2.0, 1.0, 0.0]).unwrap() as usize] += 1;
    }
    assert_eq!(seen[2] + seen[3], 0, "{seen:?}");
    assert!(seen[0] > 0 && seen[1] > 0, "{seen:?}");
}

// ---------------------------------------------------------------- top-p

#[test]
fn top_p_cumulative_reaching_p_exactly_stops_there() {
    // Four equal logits: each p is exactly 0.25, the sums 0.25, 0.5, 0.75, 1.
    let run = |p: f32| {
        let mut c = candidates(&[0.0; 4]);
        top_p(&mut c, p, 0);
        ids(&c)
    };
    assert_eq!(run(0.25), [0]);
    assert_eq!(run(0.5), [0, 1]);
    assert_eq!(run(0.75), [0, 1, 2]);
    // Just above a sum: the next token is needed to reach p.
    assert_eq!(run(0.5f32.next_up()), [0, 1, 2]);
    assert_eq!(run(0.25f32.next_up()), [0, 1]);
}

#[test]
fn top_p_includes_the_crossing_token() {
    // Logits ln 4, ln 3, ln 2, ln 1 (shuffled): p = 0.4, 0.3, 0.2, 0.1;
    // cumulative 0.4, 0.7, 0.9, 1.0.
    let l = [2.0f32.ln(), 4.0f32.ln(), 0.0, 3.0f32.ln()]; // ids 1, 3, 0, 2 by probability
    let run = |p: f32| {
        let mut c = candidates(&l);
        top_p(&mut c, p, 0);
        ids(&c)
    };
    assert_eq!(run(0.35), [1]);
    assert_eq!(run(0.41), [1, 3]);
    assert_eq!(run(0.65), [1, 3]);
    assert_eq!(run(0.71), [1, 3, 0]);
    assert_eq!(run(0.85), [1, 3, 0]);
    assert_eq!(run(0.95), [1, 3, 0, 2]);
}

#[test]
fn top_p_one_keeps_all_tiny_p_keeps_the_top() {
    let l = [2.0f32.ln(), 4.0f32.ln(), 0.0, 3.0f32.ln()];
    let mut c = candidates(&l);
    top_p(&mut c, 1.0, 0);
    assert_eq!(ids(&c), [0, 1, 2, 3], "p = 1 is no filter at all: not even sorted");
    for p in [1e-6, 0.0] {
        let mut c = candidates(&l);
        top_p(&mut c, p, 0);
        assert_eq!(ids(&c), [1], "p = {p}");
    }
}

#[test]
fn top_p_min_keep() {
    let l = [2.0f32.ln(), 4.0f32.ln(), 0.0, 3.0f32.ln()];
    let mut c = candidates(&l);
    top_p(&mut c, 0.1, 3);
    assert_eq!(ids(&c), [1, 3, 0]);
    let mut c = candidates(&l);
    top_p(&mut c, 0.1, 10);
    assert_eq!(ids(&c), [1, 3, 0, 2]);
    // min_keep below what p needs changes nothing.
    let mut c = candidates(&l);
    top_p(&mut c, 0.65, 1);
    assert_eq!(ids(&c), [1, 3]);
}

#[test]
fn top_p_renormalises_over_the_candidates_it_is_given() {
    // p = 0.4, 0.3, 0.2, 0.1 over all four: 0.5 needs two. After top-k 2 the
    // softmax is recomputed over the two: 4/7 = 0.571 >= 0.5, one is enough.
    let l = [4.0f32.ln(), 3.0f32.ln(), 2.0f32.ln(), 0.0];
    let mut c = candidates(&l);
    top_p(&mut c, 0.5, 0);
    assert_eq!(ids(&c), [0, 1]);
    let mut c = candidates(&l);
    top_k(&mut c, 2, 0);
    top_p(&mut c, 0.5, 0);
    assert_eq!(ids(&c), [0]);
}

// ---------------------------------------------------------------- min-p

#[test]
fn min_p_keeps_tokens_at_least_p_times_the_top() {
    // Relative probabilities exp(l - max): 1, 0.607, 0.368, 0.050. With 0.3 the
    // first three stay, in their input order.
    let mut c = candidates(&[-1.0, 0.0, -3.0, -0.5]);
    min_p(&mut c, 0.3, 0);
    assert_eq!(ids(&c), [0, 1, 3]);
    let mut c = candidates(&[-1.0, 0.0, -3.0, -0.5]);
    min_p(&mut c, 0.4, 0);
    assert_eq!(ids(&c), [1, 3]);
}

#[test]
fn min_p_boundary_is_inclusive_in_logit_space() {
    // llama.cpp keeps logit >= max + ln(p), both f32. A token exactly at the
    // threshold stays; the next f32 below it goes.
    let max = 2.0f32;
    let at = max + 0.5f32.ln();
    let below = at.next_down();
    let mut c = candidates(&[below, max, at]);
    min_p(&mut c, 0.5, 0);
    assert_eq!(ids(&c), [1, 2]);
}

#[test]
fn min_p_zero_keeps_all_one_keeps_the_ties_with_the_top() {
    let l = [-1.0, 3.0, -30.0, 3.0, 2.999];
    let mut c = candidates(&l);
    min_p(&mut c, 0.0, 0);
    assert_eq!(ids(&c), [0, 1, 2, 3, 4]);
    let mut c = candidates(&l);
    min_p(&mut c, 1.0, 0);
    assert_eq!(ids(&c), [1, 3]);
}

#[test]
fn min_p_min_keep_falls_back_to_the_highest_sorted() {
    // Only id 1 passes 0.5; min_keep 3 keeps the three highest: ids 1, 3, 0.
    let mut c = candidates(&[-6.0, 0.0, -7.0, -5.0]);
    min_p(&mut c, 0.5, 3);
    assert_eq!(ids(&c), [1, 3, 0]);
    let mut c = candidates(&[-6.0, 0.0, -7.0, -5.0]);
    min_p(&mut c, 0.5, 9);
    assert_eq!(ids(&c), [1, 3, 0, 2]);
}

// ---------------------------------------------------------------- temperature, softmax, dist

#[test]
fn temperature_divides_the_logits() {
    let mut c = candidates(&[2.0, 1.0, -1.0]);
    temperature(&mut c, 0.5);
    assert_eq!(logits_of(&c), [4.0, 2.0, -2.0]);
    let mut c = candidates(&[2.0, 1.0, -1.0]);
    temperature(&mut c, 2.0);
    assert_eq!(logits_of(&c), [1.0, 0.5, -0.5]);
    let mut c = candidates(&[2.0, 1.0, -1.0]);
    temperature(&mut c, 1.0);
    assert_eq!(logits_of(&c), [2.0, 1.0, -1.0]);
}

#[test]
fn temperature_sets_the_probability_ratios() {
    // p_i / p_j = exp((l_i - l_j) / t).
    for (t, r01, r12) in [(2.0f32, 0.5f64, 1.0f64), (0.5, 2.0, 4.0), (1.0, 1.0, 2.0)] {
        let mut c = candidates(&[1.0, 0.0, -2.0]);
        temperature(&mut c, t);
        softmax(&mut c);
        assert_eq!(ids(&c), [0, 1, 2]);
        let p: Vec<f64> = c.iter().map(|x| f64::from(x.p)).collect();
        assert!((p[0] / p[1] - r01.exp()).abs() < 1e-5 * r01.exp(), "t = {t}: {p:?}");
        assert!((p[1] / p[2] - r12.exp()).abs() < 1e-5 * r12.exp(), "t = {t}: {p:?}");
    }
}

#[test]
fn temperature_zero_keeps_only_the_first_maximum() {
    let mut c = candidates(&[1.0, 3.0, 3.0, 2.0]);
    temperature(&mut c, 0.0);
    let ninf = f32::NEG_INFINITY;
    assert_eq!(logits_of(&c), [ninf, 3.0, ninf, ninf]);
}

#[test]
fn softmax_sorts_descending_ties_by_id_and_normalises() {
    // exp(0) : exp(ln 3) = 1 : 3.
    let mut c = candidates(&[0.0, 3.0f32.ln(), 0.0]);
    softmax(&mut c);
    assert_eq!(ids(&c), [1, 0, 2]);
    let p: Vec<f32> = c.iter().map(|x| x.p).collect();
    for (got, want) in p.iter().zip([0.6, 0.2, 0.2]) {
        assert!((got - want).abs() < 1e-6, "{p:?}");
    }
}

#[test]
fn dist_walks_the_cumulative_sum() {
    // Four equal weights: the sum is 4, the target 4u; the running sum reaches
    // 1, 2, 3, 4 (all exact), and `>=` takes the token where it is reached.
    for (u, want) in [(0.0, 0), (0.25, 0), (0.2500001, 1), (0.5, 1), (0.74, 2), (0.75, 2), (0.76, 3), (0.9999, 3)] {
        let mut c = candidates(&[0.0; 4]);
        assert_eq!(dist(&mut c, u), Some(want), "u = {u}");
        assert!(c.iter().all(|x| x.p == 0.25));
    }
    assert_eq!(dist(&mut [], 0.5), None);
}

#[test]
fn dist_never_takes_a_zero_weight_token() {
    let mut c = candidates(&[f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY]);
    assert_eq!(dist(&mut c, 0.0), Some(1));
    let mut c = candidates(&[f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY]);
    assert_eq!(dist(&mut c, 0.999_999), Some(1));
}

#[test]
fn filters_on_empty_lists_do_nothing() {
    let mut c: Vec<Candidate> = Vec::new();
    top_k(&mut c, 3, 2);
    top_p(&mut c, 0.5, 2);
    min_p(&mut c, 0.5, 2);
    temperature(&mut c, 0.0);
    temperature(&mut c, 0.7);
    softmax(&mut c);
    apply_penalties(&mut c, &[1, 2], &SamplerParams { repeat_penalty: 2.0, ..plain() });
    assert!(c.is_empty());
}

// ---------------------------------------------------------------- penalties

#[test]
fn repeat_penalty_divides_positive_and_multiplies_non_positive_logits() {
    let p = SamplerParams { repeat_penalty: 2.0, ..plain() };
    let mut c = candidates(&[2.0, -2.0, 1.0, 0.0, -3.0]);
    apply_penalties(&mut c, &[0, 1, 3, 0], &p);
    // 2 / 2, -2 * 2, untouched, 0 * 2, untouched; once per token, not per occurrence.
    assert_eq!(logits_of(&c), [1.0, -4.0, 1.0, 0.0, -3.0]);
}

#[test]
fn frequency_penalty_counts_occurrences() {
    let p = SamplerParams { frequency_penalty: 0.5, ..plain() };
    let mut c = candidates(&[2.0, -2.0, 1.0]);
    apply_penalties(&mut c, &[0, 0, 0, 1], &p);
    assert_eq!(logits_of(&c), [0.5, -2.5, 1.0]); // 2 - 3 * 0.5, -2 - 0.5
}

#[test]
fn presence_penalty_applies_once() {
    let p = SamplerParams { presence_penalty: 0.25, ..plain() };
    let mut c = candidates(&[2.0, -2.0, 1.0]);
    apply_penalties(&mut c, &[0, 0, 0, 1], &p);
    assert_eq!(logits_of(&c), [1.75, -2.25, 1.0]);
}

#[test]
fn penalties_combine_repeat_first_then_subtract() {
    // 3 / 1.5 = 2, then 2 - (2 * 0.5 + 0.25) = 0.75; -3 * 1.5 = -4.5, then - (0.5 + 0.25).
    let p = SamplerParams { repeat_penalty: 1.5, frequency_penalty: 0.5, presence_penalty: 0.25, ..plain() };
    let mut c = candidates(&[3.0, -3.0]);
    apply_penalties(&mut c, &[0, 1, 0], &p);
    assert_eq!(logits_of(&c), [0.75, -5.25]);
}

#[test]
fn penalties_window_is_the_last_n_tokens() {
    let history = [0, 0, 1, 2];
    let run = |last_n: i32| {
        let p = SamplerParams { frequency_penalty: 1.0, repeat_last_n: last_n, ..plain() };
        let mut c = candidates(&[5.0, 5.0, 5.0, 5.0]);
        apply_penalties(&mut c, &history, &p);
        logits_of(&c)
    };
    assert_eq!(run(2), [5.0, 4.0, 4.0, 5.0]);
    assert_eq!(run(3), [4.0, 4.0, 4.0, 5.0]);
    assert_eq!(run(64), [3.0, 4.0, 4.0, 5.0]);
    assert_eq!(run(-1), [3.0, 4.0, 4.0, 5.0]);
    assert_eq!(run(0), [5.0, 5.0, 5.0, 5.0], "last_n = 0 disables the penalties");
}

#[test]
fn neutral_penalties_change_nothing() {
    let p = SamplerParams { repeat_penalty: 1.0, frequency_penalty: 0.0, presence_penalty: 0.0, ..plain() };
    let mut c = candidates(&[2.0, -2.0, 0.0]);
    apply_penalties(&mut c, &[0, 1, 2, 2], &p);
    assert_eq!(logits_of(&c), [2.0, -2.0, 0.0]);
}

#[test]
fn sampler_history_keeps_the_last_n_accepted() {
    // Greedy over 1.0, 0.9, 0.8 with repeat penalty 2 and a window of 2.
    let params = SamplerParams { repeat_penalty: 2.0, repeat_last_n: 2, ..greedy() };
    let logits = [1.0, 0.9, 0.8];
    let mut s = Sampler::new(params, 3).unwrap();
    assert_eq!(s.sample(&logits).unwrap(), 0);
    s.accept(0); // 0 -> 0.5
    assert_eq!(s.sample(&logits).unwrap(), 1);
    s.accept(1); // window [0, 1]: 0.5, 0.45, 0.8
    assert_eq!(s.sample(&logits).unwrap(), 2);
    s.accept(2); // window [1, 2]: 0 is out of it again
    assert_eq!(s.sample(&logits).unwrap(), 0);
}

#[test]
fn sampler_last_n_minus_one_remembers_everything() {
    let logits = [1.0, 0.9, 0.0];
    for (last_n, want) in [(-1, 1), (64, 0)] {
        let params = SamplerParams { repeat_penalty: 2.0, repeat_last_n: last_n, ..greedy() };
        let mut s = Sampler::new(params, 3).unwrap();
        s.accept(0);
        for _ in 0..100 {
            s.accept(2);
        }
        assert_eq!(s.sample(&logits).unwrap(), want, "repeat_last_n = {last_n}");
    }
}

#[test]
fn sample_does_not_accept_and_reset_clears_the_history() {
    let params = SamplerParams { repeat_penalty: 2.0, ..greedy() };
    let logits = [1.0, 0.9];
    let mut s = Sampler::new(params, 2).unwrap();
    assert_eq!(s.sample(&logits).unwrap(), 0);
    assert_eq!(s.sample(&logits).unwrap(), 0, "sample must not feed the history");
    s.accept(0);
    assert_eq!(s.sample(&logits).unwrap(), 1);
    s.reset();
    assert_eq!(s.sample(&logits).unwrap(), 0);
}

// ---------------------------------------------------------------- greedy

#[test]
fn greedy_takes_the_argmax_whatever_the_filters() {
    let params = SamplerParams { temperature: 0.0, top_k: 1, top_p: 0.1, min_p: 0.9, seed: 5, ..Default::default() };
    let mut s = Sampler::new(params, 5).unwrap();
    for _ in 0..10 {
        assert_eq!(s.sample(&[0.5, -1.0, 2.0, 2.5, 2.4]).unwrap(), 3);
    }
    // Negative temperatures are greedy too, as in llama.cpp.
    let mut s = Sampler::new(SamplerParams { temperature: -1.0, ..Default::default() }, 3).unwrap();
    assert_eq!(s.sample(&[0.0, 7.0, 6.9]).unwrap(), 1);
}

#[test]
fn greedy_ties_go_to_the_lowest_id() {
    let mut s = Sampler::new(greedy(), 4).unwrap();
    assert_eq!(s.sample(&[1.0, 3.0, 3.0, 2.0]).unwrap(), 1);
    assert_eq!(s.sample(&[5.0, 4.0, 4.0, 5.0]).unwrap(), 0);
    assert_eq!(s.sample(&[f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY, 0.0]).unwrap(), 1);
}

#[test]
fn greedy_is_the_argmax_of_the_penalised_logits() {
    let params = SamplerParams { presence_penalty: 0.5, ..greedy() };
    let mut s = Sampler::new(params, 3).unwrap();
    s.accept(0);
    // 1.0 - 0.5 = 0.5 < 0.8.
    assert_eq!(s.sample(&[1.0, 0.8, 0.1]).unwrap(), 1);
}

// ---------------------------------------------------------------- determinism

const LOGITS8: [f32; 8] = [2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -2.0];

fn draws(s: &mut Sampler, n: usize, accept: bool) -> Vec<u32> {
    (0..n)
        .map(|_| {
            let t = s.sample(&LOGITS8).unwrap();
            if accept {
                s.accept(t);
            }
            t
        })
        .collect()
}

#[test]
fn same_seed_same_sequence_other_seed_other_sequence() {
    let params = |seed| SamplerParams { seed, ..plain() };
    let a = draws(&mut Sampler::new(params(7), 8).unwrap(), 200, false);
    let b = draws(&mut Sampler::new(params(7), 8).unwrap(), 200, false);
    let c = draws(&mut Sampler::new(params(8), 8).unwrap(), 200, false);
    assert_eq!(a, b);
    assert_ne!(a, c);
    // Not a constant stream: at least five different tokens in 200 draws.
    let mut distinct = a.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(distinct.len() >= 5, "{distinct:?}");
}

#[test]
fn reset_restarts_the_stream_and_the_history() {
    // Default filters, penalties on and fed: the second run matches only if
    // both the stream and the history start over.
    let params = SamplerParams { repeat_penalty: 1.3, frequency_penalty: 0.1, seed: 11, ..Default::default() };
    let mut s = Sampler::new(params, 8).unwrap();
    let first = draws(&mut s, 200, true);
    s.reset();
    let second = draws(&mut s, 200, true);
    assert_eq!(first, second);
    let mut fresh = Sampler::new(params, 8).unwrap();
    assert_eq!(draws(&mut fresh, 200, true), first);
}

#[test]
fn defaults_are_llama_cpp_common_params_sampling() {
    let p = SamplerParams::default();
    assert_eq!(p.temperature, 0.8);
    assert_eq!(p.top_k, 40);
    assert_eq!(p.top_p, 0.95);
    assert_eq!(p.min_p, 0.05);
    assert_eq!(p.repeat_last_n, 64);
    assert_eq!(p.repeat_penalty, 1.0);
    assert_eq!(p.frequency_penalty, 0.0);
    assert_eq!(p.presence_penalty, 0.0);
    assert_eq!(p.min_keep, 0);
    let s = Sampler::new(p, 10).unwrap();
    assert_eq!(s.params(), &p);
    assert_eq!(s.n_vocab(), 10);
}

#[test]
fn xoshiro_matches_the_reference_vectors() {
    // The reference C code from state {1, 2, 3, 4}.
    let mut r = Xoshiro256StarStar::from_state([1, 2, 3, 4]).unwrap();
    let want: [u64; 6] = [11520, 0, 1509978240, 1215971899390074240, 1216172134540287360, 607988272756665600];
    for w in want {
        assert_eq!(r.next_u64(), w);
    }
    // SplitMix64 from 0 gives 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f,
    // 0xf88bb8a8724c81ec; xoshiro256** from that state (worked out with an
    // independent Python transcription of both reference codes):
    let mut r = Xoshiro256StarStar::seed_from_u64(0);
    assert_eq!(r.next_u64(), 0x99ec_5f36_cb75_f2b4);
    assert_eq!(r.next_u64(), 0xbf6e_1f78_4956_452a);
    assert_eq!(r.next_f64(), (0x1a5f_849d_4933_e6e0u64 >> 11) as f64 / (1u64 << 53) as f64);
    assert!(Xoshiro256StarStar::from_state([0; 4]).is_none());
}

// ---------------------------------------------------------------- distribution

fn softmax64(l: &[f32], t: f64) -> Vec<f64> {
    let e: Vec<f64> = l.iter().map(|&x| (f64::from(x) / t).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|x| x / s).collect()
}

fn counts(s: &mut Sampler, logits: &[f32], n: usize) -> Vec<usize> {
    let mut k = vec![0usize; logits.len()];
    for _ in 0..n {
        k[s.sample(logits).unwrap() as usize] += 1;
    }
    k
}

fn chi_square(observed: &[usize], p: &[f64]) -> f64 {
    let n: usize = observed.iter().sum();
    observed
        .iter()
        .zip(p)
        .map(|(&o, &p)| {
            let e = p * n as f64;
            (o as f64 - e).powi(2) / e
        })
        .sum()
}

#[test]
fn chi_square_plain_softmax() {
    // Temperature 1, no filters: p = softmax(LOGITS8) = 0.4027, 0.2443, 0.1482,
    // 0.0899, 0.0545, 0.0331, 0.0201, 0.0074 (the least expects 147 of 20000).
    let mut s = Sampler::new(SamplerParams { seed: 1234, ..plain() }, 8).unwrap();
    let observed = counts(&mut s, &LOGITS8, 20_000);
    let chi2 = chi_square(&observed, &softmax64(&LOGITS8, 1.0));
    // 7 degrees of freedom: the 0.999 quantile is 24.322.
    assert!(chi2 < 24.322, "chi2 = {chi2}, counts {observed:?}");
}

#[test]
fn chi_square_top_k_top_p_renormalised() {
    // top-k 5 leaves 2, 1.5, 1, 0.5, 0, whose softmax is 0.4287, 0.2600, 0.1577,
    // 0.0956, 0.0580; the cumulative sums 0.4287, 0.6886, 0.8463, 0.9420 reach
    // top-p 0.9 at the fourth. The draw is from those four renormalised:
    // 0.4551, 0.2760, 0.1674, 0.1015.
    let params = SamplerParams { top_k: 5, top_p: 0.9, seed: 99, ..plain() };
    let mut s = Sampler::new(params, 8).unwrap();
    let observed = counts(&mut s, &LOGITS8, 20_000);
    assert_eq!(&observed[4..], [0, 0, 0, 0], "{observed:?}");
    let p = softmax64(&LOGITS8[..4], 1.0);
    assert!((p[3] - 0.1015).abs() < 1e-4);
    let chi2 = chi_square(&observed[..4], &p);
    // 3 degrees of freedom: the 0.999 quantile is 16.266.
    assert!(chi2 < 16.266, "chi2 = {chi2}, counts {observed:?}");
}

#[test]
fn chi_square_temperature_applies_after_the_filters() {
    // Same filters at temperature 0.7. The filters see the temperature-1
    // probabilities, so four tokens survive as above (at 0.7 first, top-p would
    // stop at three: 0.5252, 0.7823, 0.9082). The draw is from softmax(l / 0.7)
    // over the four: 0.5416, 0.2651, 0.1298, 0.0635.
    let params = SamplerParams { temperature: 0.7, top_k: 5, top_p: 0.9, seed: 5, ..plain() };
    let mut s = Sampler::new(params, 8).unwrap();
    let observed = counts(&mut s, &LOGITS8, 20_000);
    assert_eq!(&observed[4..], [0, 0, 0, 0], "{observed:?}");
    let p = softmax64(&LOGITS8[..4], 0.7);
    assert!((p[3] - 0.0635).abs() < 1e-4);
    let chi2 = chi_square(&observed[..4], &p);
    assert!(chi2 < 16.266, "chi2 = {chi2}, counts {observed:?}");
}

// ---------------------------------------------------------------- errors

fn param_error(params: SamplerParams, n_vocab: usize) -> (&'static str, String) {
    match Sampler::new(params, n_vocab) {
        Err(e @ SamplerError::InvalidParam { name, .. }) => (name, e.to_string()),
        other => panic!("expected InvalidParam, got {other:?}"),
    }
}

#[test]
fn bad_parameters_are_errors() {
    let d = SamplerParams::default();
    let cases: Vec<(SamplerParams, &str, &str)> = vec![
        (SamplerParams { temperature: f32::NAN, ..d }, "temperature", "NaN"),
        (SamplerParams { temperature: f32::INFINITY, ..d }, "temperature", "inf"),
        (SamplerParams { top_p: 1.5, ..d }, "top_p", "1.5"),
        (SamplerParams { top_p: -0.1, ..d }, "top_p", "-0.1"),
        (SamplerParams { min_p: 1.25, ..d }, "min_p", "1.25"),
        (SamplerParams { min_p: f32::NAN, ..d }, "min_p", "NaN"),
        (SamplerParams { repeat_penalty: -1.0, ..d }, "repeat_penalty", "-1"),
        (SamplerParams { repeat_penalty: 0.0, ..d }, "repeat_penalty", "0"),
        (SamplerParams { frequency_penalty: f32::NAN, ..d }, "frequency_penalty", "NaN"),
        (SamplerParams { presence_penalty: f32::NEG_INFINITY, ..d }, "presence_penalty", "inf"),
        (SamplerParams { repeat_last_n: -2, ..d }, "repeat_last_n", "-2"),
    ];
    for (params, name, value) in cases {
        let (got, msg) = param_error(params, 8);
        assert_eq!(got, name, "{msg}");
        assert!(msg.contains(name) && msg.contains(value), "{msg}");
    }
    let (got, msg) = param_error(d, 0);
    assert_eq!(got, "n_vocab", "{msg}");
    // The edges of the ranges are valid.
    for params in [
        SamplerParams { top_p: 0.0, min_p: 1.0, repeat_last_n: -1, ..d },
        SamplerParams { top_p: 1.0, min_p: 0.0, temperature: -3.0, frequency_penalty: -1.0, ..d },
    ] {
        assert!(Sampler::new(params, 8).is_ok(), "{params:?}");
    }
}

#[test]
fn bad_logits_are_errors() {
    let mut s = Sampler::new(SamplerParams::default(), 4).unwrap();
    assert_eq!(s.sample(&[0.0; 3]), Err(SamplerError::LogitsLength { expected: 4, got: 3 }));
    assert_eq!(s.sample(&[0.0; 5]), Err(SamplerError::LogitsLength { expected: 4, got: 5 }));
    assert!(matches!(s.sample(&[0.0, f32::NAN, 0.0, 0.0]), Err(SamplerError::InvalidLogit { token: 1, .. })));
    assert!(matches!(
        s.sample(&[0.0, 0.0, 0.0, f32::INFINITY]),
        Err(SamplerError::InvalidLogit { token: 3, value }) if value == f32::INFINITY
    ));
    assert_eq!(s.sample(&[f32::NEG_INFINITY; 4]), Err(SamplerError::NoCandidates));
    let e = s.sample(&[0.0; 3]).unwrap_err().to_string();
    assert!(e.contains('3') && e.contains('4'), "{e}");
    let mut g = Sampler::new(greedy(), 4).unwrap();
    assert!(matches!(g.sample(&[f32::NAN; 4]), Err(SamplerError::InvalidLogit { token: 0, .. })));
    assert_eq!(g.sample(&[f32::NEG_INFINITY; 4]), Err(SamplerError::NoCandidates));
    // After an error the sampler still works, and -inf tokens are never drawn.
    for _ in 0..200 {
        let t = s.sample(&[f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY, 0.1]).unwrap();
        assert!(t == 1 || t == 3);
    }
}
