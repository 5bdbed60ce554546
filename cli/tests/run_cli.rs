//! Greedy generation and `rgml run` on the tiny llama: the generated ids are
//! the greedy choices that full-logits evaluation gives, with and without
//! `--logits` (which switches between full and last-position graphs), and the
//! written logits are llama.cpp's for the prompt positions.

use std::ops::ControlFlow;
use std::process::Command;

use common::{fixture, max_diff, reference, tokens};
use rgml_models::generate::{GenerateError, GenerateOptions, Stop};
use rgml_models::llama::{argmax, Llama};
use rgml_models::sampler::{Sampler, SamplerParams};

// the model library's test helpers and fixtures, shared
#[path = "../../models/tests/common/mod.rs"]
mod common;

const N_PREDICT: usize = 5;

/// Greedy ids after the prompt, by full-logits `eval` one token at a time.
fn greedy_by_eval(toks: &[u32]) -> Vec<u32> {
    let mut m = Llama::load(&fixture("tiny_llama_f32.gguf"), None, 1).unwrap();
    let logits = m.eval(toks).unwrap();
    let mut next = argmax(&logits[logits.len() - 288..]);
    let mut out = vec![next];
    while out.len() < N_PREDICT {
        next = argmax(&m.eval(&[next]).unwrap());
        out.push(next);
    }
    out
}

#[test]
fn generate_gives_the_greedy_ids_of_full_evaluation() {
    let toks = tokens();
    let want = greedy_by_eval(&toks);
    let mut m = Llama::load(&fixture("tiny_llama_f32.gguf"), None, 2).unwrap();
    let mut seen = Vec::new();
    let greedy = SamplerParams { temperature: 0.0, ..SamplerParams::default() };
    let mut sampler = Sampler::new(greedy, m.hp.n_vocab).unwrap();
    let opts = GenerateOptions { max_tokens: N_PREDICT, all_logits: false };
    let got = m
        .generate(
            &toks,
            &mut sampler,
            opts,
            |_| false,
            |t| {
                seen.push(t);
                ControlFlow::Continue(())
            },
        )
        .unwrap();
    assert_eq!(got.tokens, want);
    assert_eq!(got.stop, Stop::MaxTokens);
    assert_eq!(seen, want);
    assert_eq!(m.n_past(), toks.len() + N_PREDICT - 1);
}

/// The ids `rgml run` prints on its `generated: [..]` line.
fn printed_ids(stdout: &str) -> Vec<u32> {
    let line = stdout.lines().find_map(|l| l.strip_prefix("generated: ")).expect("a generated line");
    line.trim_matches(|c| c == '[' || c == ']').split(',').map(|t| t.trim().parse().unwrap()).collect()
}

#[test]
fn run_prints_the_same_ids_with_and_without_logits() {
    let toks = tokens();
    let want = greedy_by_eval(&toks);
    let list = toks.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    let out = std::env::temp_dir().join(format!("rgml-run-logits-{}.f32", std::process::id()));
    let run = |extra: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_rgml"))
            .args(["run", fixture("tiny_llama_f32.gguf").to_str().unwrap(), "--tokens", &list])
            .args(["--n-predict", &N_PREDICT.to_string(), "--threads", "2", "--kv-type", "f32"])
            .args(extra)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        // the load line names the backend and its options (repacking: on by default on the CPU)
        assert_eq!(err.contains("repacked weights"), !extra.contains(&"--no-repack"), "{err}");
        printed_ids(&String::from_utf8_lossy(&o.stdout))
    };
    assert_eq!(run(&[]), want);
    assert_eq!(run(&["--repack"]), want, "repacking changes no result (an F32 model has nothing to repack)");
    assert_eq!(run(&["--no-repack"]), want, "nor does keeping the weights in place");
    assert_eq!(run(&["--logits", out.to_str().unwrap()]), want);
    let bytes = std::fs::read(&out).unwrap();
    std::fs::remove_file(&out).ok();
    let logits: Vec<f32> = bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    // the prompt's positions, then one per generated token but the last
    assert_eq!(logits.len(), (toks.len() + N_PREDICT - 1) * 288);
    let d = max_diff(&logits[..toks.len() * 288], &reference());
    assert!(d <= 1e-4, "prompt logits: max abs diff {d} vs llama.cpp");
}

#[test]
fn generate_refuses_an_empty_prompt_and_one_too_long() {
    let mut m = Llama::load(&fixture("tiny_llama_f32.gguf"), Some(8), 1).unwrap();
    let mut sampler = Sampler::new(SamplerParams::default(), m.hp.n_vocab).unwrap();
    let opts = GenerateOptions { max_tokens: 4, all_logits: false };
    let e = m.generate(&[], &mut sampler, opts, |_| false, |_| ControlFlow::Continue(())).unwrap_err();
    assert!(matches!(e, GenerateError::EmptyPrompt), "{e}");
    let e = m.generate(&[1; 9], &mut sampler, opts, |_| false, |_| ControlFlow::Continue(())).unwrap_err();
    assert!(e.to_string().contains("needs 9 positions but the KV cache has 8 of 8 left"), "{e}");
    // nothing was evaluated: the model still works
    let g = m.generate(&[1, 5], &mut sampler, opts, |_| false, |_| ControlFlow::Continue(())).unwrap();
    assert_eq!((g.tokens.len(), m.n_past()), (4, 5));
}
