//! The tiny llama-architecture model on CUDA against llama.cpp's logits (F32
//! weights, F32 KV cache): all 16 positions as one batch, one token at a
//! time, and a prompt in two batches. Without a CUDA device the tests print
//! `SKIP: …` and pass; with `RGML_REQUIRE_CUDA=1` a missing device is a failure.

#![cfg(feature = "cuda")]

use common::{cuda, fixture, llamacpp_logits, max_diff, quantized_model, reference, tokens};
use rgml::{AnyBackend, Backend, Error};
use rgml_models::llama::Llama;

mod common;

/// Batched, token by token (after a reset), and split in two batches, against
/// llama.cpp's logits `want`; then the last position alone (`eval_last`).
fn check_model<B: Backend>(m: &mut Llama<B>, want: &[f32], what: &str) {
    let toks = tokens();
    assert_eq!((m.hp.n_vocab, m.hp.n_embd, m.hp.n_head, m.hp.n_head_kv), (288, 64, 4, 2));
    let batch = m.eval(&toks).unwrap();
    let d = max_diff(&batch, want);
    assert!(d <= 1e-4, "{what}: batch: max abs diff {d}");
    m.reset().unwrap();
    let mut single = Vec::new();
    for &t in &toks {
        single.extend(m.eval(&[t]).unwrap());
    }
    let d = max_diff(&single, want);
    assert!(d <= 1e-4, "{what}: one at a time: max abs diff {d}");
    m.reset().unwrap();
    let mut split = m.eval(&toks[..5]).unwrap();
    split.extend(m.eval(&toks[5..]).unwrap());
    let d = max_diff(&split, want);
    assert!(d <= 1e-4, "{what}: two batches: max abs diff {d}");
    assert_eq!(m.n_past(), 16);
    // the cache is full: one more token is an error, not a crash
    assert!(m.eval(&[toks[0]]).is_err());
    m.reset().unwrap();
    let nv = m.hp.n_vocab;
    let last = m.eval_last(&toks[..11]).unwrap();
    let d = max_diff(&last, &want[10 * nv..11 * nv]);
    assert!(d <= 1e-4, "{what}: last position: max abs diff {d}");
    println!("ok: {what} on {}", m.backend().describe());
}

#[test]
fn f32_logits_match_llama_cpp_on_cuda() {
    let Some(gpu) = cuda() else { return };
    let mut m = Llama::load_on(&fixture("tiny_llama_f32.gguf"), Some(16), gpu.clone()).unwrap();
    check_model(&mut m, &reference(), "CudaBackend");
    // poison mode: a planner bug (a freed range read again) would show as NaN
    let mut m = Llama::load_on(&fixture("tiny_llama_f32.gguf"), Some(16), gpu.with_poison(true)).unwrap();
    check_model(&mut m, &reference(), "CudaBackend (poison)");
}

/// Token by token with CUDA graphs: every step after the second replays a
/// captured graph, with the same bits as the backend without graphs.
#[test]
fn decode_with_cuda_graphs_gives_the_eager_bits() {
    let Some(gpu) = cuda() else { return };
    let toks = tokens();
    let mut runs = Vec::new();
    for graphs in [false, true] {
        let mut m = Llama::load_on(&fixture("tiny_llama_f32.gguf"), Some(16), gpu.clone().with_graphs(graphs)).unwrap();
        let logits: Vec<f32> = toks.iter().flat_map(|&t| m.eval(&[t]).unwrap()).collect();
        let stats = m.storage().unwrap().graph_stats();
        runs.push((logits, stats));
    }
    let ((eager, off), (replayed, on)) = (&runs[0], &runs[1]);
    assert_eq!(*off, rgml::GraphStats::default());
    assert_eq!((on.eager, on.captured, on.replayed, on.fallback.clone()), (1, 1, toks.len() as u64 - 2, None));
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert!(bits(eager) == bits(replayed), "graph replays differ from eager runs");
    let d = max_diff(replayed, &reference());
    assert!(d <= 1e-4, "with CUDA graphs: max abs diff {d}");
    println!("ok: {} decode steps, {on:?}, max abs diff {d}", toks.len());
}

#[test]
fn f32_logits_match_llama_cpp_through_any_backend() {
    // the CPU through the run-time choice, always
    let mut m = Llama::load_on(&fixture("tiny_llama_f32.gguf"), Some(16), AnyBackend::cpu(2).unwrap()).unwrap();
    check_model(&mut m, &reference(), "AnyBackend::Cpu");
    let Some(gpu) = cuda() else { return };
    let mut m = Llama::load_on(&fixture("tiny_llama_f32.gguf"), Some(16), AnyBackend::Cuda(gpu)).unwrap();
    check_model(&mut m, &reference(), "AnyBackend::Cuda");
}

/// The Q8_0 and Q4_0 versions of the model (quantized by rgml) on CUDA match
/// llama.cpp's logits for those files as the CPU does: the device quantizes
/// the activations to the CPU's Q8 bytes and dots them with the weight blocks.
#[test]
fn quantized_models_match_llama_cpp_on_cuda() {
    let Some(gpu) = cuda() else { return };
    for (name, dt) in [("q8_0", rgml::DType::Q8_0), ("q4_0", rgml::DType::Q4_0)] {
        let want = llamacpp_logits(name);
        let path = quantized_model(dt, "cuda");
        let mut m = Llama::load_on(&path, Some(16), gpu.clone()).unwrap();
        std::fs::remove_file(&path).ok();
        check_model(&mut m, &want, &format!("CudaBackend {name}"));
    }
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

/// The cache types on CUDA against the CPU with the same type: the qwen3 fixture (head
/// dims of 32, so Q8_0 applies too) and Gemma 3 (sliding window, GELU), 40 positions: 30
/// in a batch, then ten one at a time. Both run the unfused attention (CUDA has no
/// `flash_attn_ext` kernel yet), so the comparison is kernel for kernel.
#[test]
fn kv_cache_types_on_cuda_match_the_cpu() {
    use rgml_models::model::kv::KvType;
    use rgml_models::model::{Attention, LoadOptions, Model};
    let Some(gpu) = cuda() else { return };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/arch");
    let dir = if dir.exists() { dir } else { std::path::PathBuf::from("tests/fixtures/arch") };
    let toks: Vec<u32> = (0..40).map(|i| 3 + (i * 37) % 280).collect();
    for (file, kvs) in [("qwen3_f32.gguf", &[KvType::F16, KvType::Q8_0][..]), ("gemma3_f32.gguf", &[KvType::F16][..])] {
        for &kv in kvs {
            let opts = LoadOptions { n_ctx: Some(64), kv_type: kv, attention: Attention::Unfused, n_seq: 1 };
            let mut cpu = Model::load_with(&dir.join(file), opts, rgml::CpuBackend::new(2).unwrap()).unwrap();
            let mut dev = Model::load_with(&dir.join(file), opts, gpu.clone()).unwrap();
            // a batch, then one token at a time through the cache
            let run = |m: &mut dyn FnMut(&[u32]) -> Vec<f32>| {
                let mut l = m(&toks[..30]);
                toks[30..].iter().for_each(|&t| l.extend(m(&[t])));
                l
            };
            let a = run(&mut |t: &[u32]| cpu.eval(t).unwrap());
            let b = run(&mut |t: &[u32]| dev.eval(t).unwrap());
            let d = max_diff(&a, &b);
            assert!(d <= 2e-3, "{file} {kv:?}: CUDA {d} from the CPU");
            println!("ok: {file} {kv:?} cache on CUDA: {d:.2e} from the CPU");
        }
    }
}
