//! The tiny llama-architecture model on CUDA against llama.cpp's logits (F32
//! weights, F32 KV cache): all 16 positions as one batch, one token at a
//! time, and a prompt in two batches. Without a CUDA device the tests print
//! `SKIP: …` and pass; with `RGML_REQUIRE_CUDA=1` a missing device is a failure.

use common::{cuda, fixture, max_diff, reference, tokens};
use rgml::{AnyBackend, Backend, Error};
use rgml_models::llama::Llama;

mod common;

/// Batched, token by token (after a reset), and split in two batches.
fn check_model<B: Backend>(m: &mut Llama<B>, what: &str) {
    let (toks, want) = (tokens(), reference());
    assert_eq!((m.hp.n_vocab, m.hp.n_embd, m.hp.n_head, m.hp.n_head_kv), (288, 64, 4, 2));
    let batch = m.eval(&toks).unwrap();
    let d = max_diff(&batch, &want);
    assert!(d <= 1e-4, "{what}: batch: max abs diff {d}");
    m.reset().unwrap();
    let mut single = Vec::new();
    for &t in &toks {
        single.extend(m.eval(&[t]).unwrap());
    }
    let d = max_diff(&single, &want);
    assert!(d <= 1e-4, "{what}: one at a time: max abs diff {d}");
    m.reset().unwrap();
    let mut split = m.eval(&toks[..5]).unwrap();
    split.extend(m.eval(&toks[5..]).unwrap());
    let d = max_diff(&split, &want);
    assert!(d <= 1e-4, "{what}: two batches: max abs diff {d}");
    assert_eq!(m.n_past(), 16);
    // the cache is full: one more token is an error, not a crash
    assert!(m.eval(&[toks[0]]).is_err());
    println!("ok: {what} on {}", m.backend().describe());
}

#[test]
fn f32_logits_match_llama_cpp_on_cuda() {
    let Some(gpu) = cuda() else { return };
    let mut m = Llama::load_on(&fixture("tiny_llama_f32.gguf"), Some(16), gpu.clone()).unwrap();
    check_model(&mut m, "CudaBackend");
    // poison mode: a planner bug (a freed range read again) would show as NaN
    let mut m = Llama::load_on(&fixture("tiny_llama_f32.gguf"), Some(16), gpu.with_poison(true)).unwrap();
    check_model(&mut m, "CudaBackend (poison)");
}

#[test]
fn f32_logits_match_llama_cpp_through_any_backend() {
    // the CPU through the run-time choice, always
    let mut m = Llama::load_on(&fixture("tiny_llama_f32.gguf"), Some(16), AnyBackend::cpu(2).unwrap()).unwrap();
    check_model(&mut m, "AnyBackend::Cpu");
    let Some(gpu) = cuda() else { return };
    let mut m = Llama::load_on(&fixture("tiny_llama_f32.gguf"), Some(16), AnyBackend::Cuda(gpu)).unwrap();
    check_model(&mut m, "AnyBackend::Cuda");
}

#[test]
fn cuda_unavailable_is_an_error_at_load_time() {
    match AnyBackend::cuda(0) {
        Ok(b) => println!("CUDA present: {}", b.describe()),
        Err(e) => {
            assert!(matches!(e, Error::Unavailable { .. }), "{e}");
            println!("SKIP: {e}");
        }
    }
    // a device ordinal far out of range is an error too
    assert!(AnyBackend::cuda(1 << 20).is_err());
}
