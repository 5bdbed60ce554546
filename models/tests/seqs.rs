//! Several sequences in one model (`LoadOptions::n_seq`): a sequence's logits
//! are the same bits whether it runs alone or shares its decode steps with
//! others (`Model::eval_seqs`), in any order and with any subset of the
//! sequences stepping, for the architecture fixtures (Q8_0 weights, the
//! backend running their tile at every row count, so that the products keep a
//! row's bits at any batch size on every CPU: at AVX2 the default takes the
//! dot kernels for one row; F32 and F16 caches,
//! Gemma-3's sliding window, the mixtures of experts and gpt-oss's sinks among
//! them). Bad steps are errors.

mod common;

use common::arch::{dir, tokens};
use rgml::CpuBackend;
use rgml_models::model::kv::KvType;
use rgml_models::model::{argmax, Attention, LoadOptions, Model};

const PROMPTS: [std::ops::Range<usize>; 4] = [0..3, 3..10, 10..22, 22..27];
const DECODE: usize = 6;

fn load(file: &str, kv: KvType, n_seq: usize, attention: Attention) -> Model {
    let opts = LoadOptions { n_ctx: Some(64), kv_type: kv, attention, n_seq };
    Model::load_with(&dir().join(file), opts, CpuBackend::new(2).unwrap().with_row_invariant_products(true)).unwrap()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Each prompt alone: its prompt logits, then `DECODE` greedy steps' logits.
fn alone(file: &str, kv: KvType) -> Vec<(Vec<u32>, Vec<Vec<u32>>)> {
    let toks = tokens();
    PROMPTS
        .iter()
        .map(|r| {
            let mut m = load(file, kv, 1, Attention::Fused);
            let prompt = m.eval(&toks[r.clone()]).unwrap();
            let nv = m.hp.n_vocab;
            let mut next = argmax(&prompt[prompt.len() - nv..]);
            let mut steps = Vec::new();
            for _ in 0..DECODE {
                let l = m.eval(&[next]).unwrap();
                next = argmax(&l);
                steps.push(bits(&l));
            }
            (bits(&prompt), steps)
        })
        .collect()
}

#[test]
fn a_sequence_gets_the_same_bits_alone_and_in_company() {
    let toks = tokens();
    for name in
        ["llama3", "qwen2", "qwen3", "phi3", "gemma3", "qwen3moe", "qwen2moe", "olmoe", "gpt_oss", "olmo2", "smollm3"]
    {
        for kv in [KvType::F32, KvType::F16] {
            let file = format!("{name}_q8_0.gguf");
            let want = alone(&file, kv);
            let mut m = load(&file, kv, 4, Attention::Fused);
            let mut next = Vec::new();
            for (s, r) in PROMPTS.iter().enumerate() {
                let l = m.eval_seq(s, &toks[r.clone()]).unwrap();
                assert_eq!(bits(&l), want[s].0, "{file} {kv:?}: sequence {s}'s prompt in its stream");
                next.push(argmax(&l[l.len() - m.hp.n_vocab..]));
            }
            // steps of every sequence, of two in reverse order, then of the others
            let mut done = [0usize; 4];
            let schedule: Vec<Vec<usize>> =
                vec![vec![0, 1, 2, 3], vec![3, 1], vec![2, 0], vec![1, 3, 0, 2]].into_iter().cycle().take(20).collect();
            for step in schedule {
                let batch: Vec<(usize, u32)> =
                    step.iter().filter(|&&s| done[s] < DECODE).map(|&s| (s, next[s])).collect();
                if batch.is_empty() {
                    continue;
                }
                let out = m.eval_seqs(&batch).unwrap();
                for (&(s, _), l) in batch.iter().zip(&out) {
                    assert_eq!(bits(l), want[s].1[done[s]], "{file} {kv:?}: sequence {s}, decode step {}", done[s]);
                    next[s] = argmax(l);
                    done[s] += 1;
                }
            }
            assert_eq!(done, [DECODE; 4], "{file}");
            for (s, r) in PROMPTS.iter().enumerate() {
                assert_eq!(m.seq_past(s).unwrap(), r.len() + DECODE);
            }
        }
    }
}

#[test]
fn bad_steps_are_errors() {
    let mut m = load("llama3_q8_0.gguf", KvType::F32, 2, Attention::Fused);
    for (batch, why) in [
        (vec![], "no sequences"),
        (vec![(2, 1)], "holds 2"),
        (vec![(0, 1), (0, 2)], "twice"),
        (vec![(1, 100_000)], "vocabulary"),
    ] {
        let e = m.eval_seqs(&batch).unwrap_err().to_string();
        assert!(e.contains(why), "{batch:?}: {e}");
    }
    assert_eq!(m.seq_past(0).unwrap() + m.seq_past(1).unwrap(), 0, "a refused step changes nothing");
    assert!(m.eval_seq(5, &[1]).is_err() && m.seq_reset(2).is_err());
    // a full stream
    let mut small = Model::load_with(
        &dir().join("llama3_q8_0.gguf"),
        LoadOptions { n_ctx: Some(4), kv_type: KvType::F32, attention: Attention::Fused, n_seq: 2 },
        CpuBackend::new(1).unwrap(),
    )
    .unwrap();
    small.eval_seq(1, &[1, 2, 3, 4]).unwrap();
    assert!(small.eval_seqs(&[(0, 5), (1, 5)]).unwrap_err().to_string().contains("full"));
    small.seq_reset(1).unwrap();
    assert_eq!(small.eval_seqs(&[(0, 5), (1, 5)]).unwrap().len(), 2);
    // unfused attention has no step of several sequences
    let mut unfused = load("llama3_q8_0.gguf", KvType::F32, 2, Attention::Unfused);
    assert!(unfused.eval_seqs(&[(0, 1), (1, 2)]).unwrap_err().to_string().contains("fused attention"));
    assert!(Model::load_with(
        &dir().join("llama3_q8_0.gguf"),
        LoadOptions { n_ctx: Some(4), kv_type: KvType::F32, attention: Attention::Fused, n_seq: 100_000 },
        CpuBackend::new(1).unwrap(),
    )
    .is_err());
}

/// The step of several sequences on CUDA (the emulator without a GPU) follows
/// the CPU's (to rounding: the device sums in its own order).
#[cfg(feature = "cuda")]
#[test]
fn several_sequences_on_cuda_follow_the_cpu() {
    let Some(dev) = common::cuda() else { return };
    let toks = tokens();
    let opts = LoadOptions { n_ctx: Some(64), kv_type: KvType::F32, attention: Attention::Fused, n_seq: 3 };
    let file = dir().join("qwen3_q8_0.gguf");
    let mut cpu = Model::load_with(&file, opts, CpuBackend::new(2).unwrap()).unwrap();
    let mut gpu = Model::load_with(&file, opts, dev).unwrap();
    for (s, r) in PROMPTS.iter().take(3).enumerate() {
        cpu.eval_seq(s, &toks[r.clone()]).unwrap();
        gpu.eval_seq(s, &toks[r.clone()]).unwrap();
    }
    for batch in [vec![(0, 5u32), (1, 6), (2, 7)], vec![(2, 8), (0, 9)], vec![(1, 10)]] {
        let (a, b) = (cpu.eval_seqs(&batch).unwrap(), gpu.eval_seqs(&batch).unwrap());
        for (x, y) in a.iter().zip(&b) {
            let d = x.iter().zip(y).fold(0f32, |m, (p, q)| m.max((p - q).abs()));
            assert!(d <= 1e-3, "{batch:?}: max abs diff {d}");
        }
    }
}
