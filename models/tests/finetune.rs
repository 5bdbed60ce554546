//! Fine-tuning (`rgml_models::finetune`) on the tiny architecture fixtures: the
//! training graph's loss at the file's weights equals the loss of llama.cpp's logits
//! for every architecture; full and LoRA training lower the loss; the saved file
//! runs in `Model` at the loss the trainer reached; bad settings are errors.

mod common;

use std::path::PathBuf;

use common::arch::{dir, reference, tokens};
use rgml::gguf::GgufFile;
use rgml::grad::optim::AdamW;
use rgml::{CpuBackend, DType};
use rgml_models::finetune::{windows, FinetuneOptions, Finetuner, Tuning};
use rgml_models::model::kv::KvType;
use rgml_models::model::{Attention, LoadOptions, Model};
use rgml_models::perplexity::nll;

const N_VOCAB: usize = 288;

/// Mean next-token loss of `logits` (position-major) on `tokens`.
fn mean_nll(logits: &[f32], tokens: &[u32]) -> f64 {
    let n = tokens.len() - 1;
    (0..n).map(|i| nll(&logits[i * N_VOCAB..(i + 1) * N_VOCAB], tokens[i + 1] as usize)).sum::<f64>() / n as f64
}

fn options(n_ctx: usize, lr: f32, tuning: Tuning) -> FinetuneOptions {
    FinetuneOptions { n_ctx, optimizer: AdamW { lr, weight_decay: 0.0, ..AdamW::default() }, tuning, seed: 1 }
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rgml-finetune-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// `path`'s mean loss on `tokens` through the inference graph (KV cache, F32).
fn model_loss(path: &std::path::Path, tokens: &[u32]) -> f64 {
    let opts = LoadOptions { n_ctx: Some(64), kv_type: KvType::F32, attention: Attention::Unfused, n_seq: 1 };
    let mut m = Model::load_with(path, opts, CpuBackend::new(2).unwrap()).unwrap();
    mean_nll(&m.eval(&tokens[..tokens.len() - 1]).unwrap(), tokens)
}

#[test]
fn the_training_graph_computes_llama_cpp_loss_for_every_architecture() {
    let toks = tokens();
    for name in ["llama3", "llama_yarn", "llama_linear", "qwen2", "qwen3", "phi3", "gemma3"] {
        // F32 weights trained in full; Q8_0 weights frozen under LoRA adapters (b = 0)
        for (file, tuning, tol) in [
            (format!("{name}_f32.gguf"), Tuning::Full, 1e-5),
            (format!("{name}_q8_0.gguf"), Tuning::Lora { rank: 2, scale: 1.0 }, 5e-4),
        ] {
            let want = mean_nll(&reference(&file, "f32kv"), &toks);
            let mut ft = Finetuner::new(&dir().join(&file), options(39, 1e-3, tuning), CpuBackend::new(2).unwrap())
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            let got = ft.train_window(&toks).unwrap();
            assert!((got - want).abs() <= tol * want, "{file}: training loss {got} against llama.cpp's {want}");
        }
    }
}

#[test]
fn full_training_lowers_the_loss_and_the_saved_file_runs_at_it() {
    let toks = tokens();
    let src = dir().join("llama3_f32.gguf");
    let mut ft = Finetuner::new(&src, options(39, 3e-3, Tuning::Full), CpuBackend::new(2).unwrap()).unwrap();
    let first = ft.train_window(&toks).unwrap();
    for _ in 0..15 {
        ft.train_window(&toks).unwrap();
    }
    let out = tmp("full.gguf");
    ft.save(&out).unwrap();
    let reached = ft.train_window(&toks).unwrap(); // the loss at the saved weights
    assert!(reached < 0.5 * first, "loss {first} -> {reached}");
    let saved = model_loss(&out, &toks);
    assert!((saved - reached).abs() <= 1e-4 * reached, "saved model's loss {saved} against the trainer's {reached}");
    assert!((model_loss(&src, &toks) - first).abs() <= 1e-4 * first);
    let f = GgufFile::open(&out).unwrap();
    assert!(f.tensors().iter().all(|t| t.dtype == DType::F32));
    assert_eq!(f.header().get_u32("general.file_type").unwrap(), 0);
    assert_eq!(f.header().get_str("general.name").unwrap(), "rgml-tiny-llama3");
    assert_eq!(ft.steps(), 17);
}

#[test]
fn lora_on_frozen_quantized_weights_lowers_the_loss_and_merges_on_save() {
    let toks = tokens();
    let src = dir().join("qwen3_q8_0.gguf");
    let tuning = Tuning::Lora { rank: 4, scale: 2.0 };
    let mut ft = Finetuner::new(&src, options(39, 1e-2, tuning), CpuBackend::new(2).unwrap()).unwrap();
    // 4 adapters' a and b per layer matrix: (n_in + n_out) · rank each
    assert!(ft.trained_values() > 0);
    let first = ft.train_window(&toks).unwrap();
    for _ in 0..15 {
        ft.train_window(&toks).unwrap();
    }
    let out = tmp("lora.gguf");
    ft.save(&out).unwrap();
    let reached = ft.train_window(&toks).unwrap();
    assert!(reached < 0.7 * first, "loss {first} -> {reached}");
    // merged in F32 against the trainer's Q8_0 products plus adapters
    let saved = model_loss(&out, &toks);
    assert!((saved - reached).abs() <= 2e-2 * reached, "saved model's loss {saved} against the trainer's {reached}");
    let (a, b) = (GgufFile::open(&src).unwrap(), GgufFile::open(&out).unwrap());
    for t in a.tensors() {
        let got = b.tensor(&t.name).unwrap();
        let adapted = t.name.starts_with("blk.") && t.ne[1] > 1;
        // adapted matrices merged into F32; the rest byte for byte
        if adapted {
            assert_eq!(got.dtype, DType::F32, "{}", t.name);
        } else {
            assert_eq!(b.tensor_bytes(got), a.tensor_bytes(t), "{}", t.name);
        }
    }
}

#[test]
fn bad_settings_are_errors() {
    let src = dir().join("llama3_f32.gguf");
    let cpu = || CpuBackend::new(1).unwrap();
    for (n_ctx, tuning) in [
        (1, Tuning::Full),
        (129, Tuning::Full),
        (16, Tuning::Lora { rank: 0, scale: 1.0 }),
        (16, Tuning::Lora { rank: 4, scale: f32::NAN }),
    ] {
        let e = Finetuner::new(&src, options(n_ctx, 1e-3, tuning), cpu()).err().unwrap().to_string();
        assert!(e.contains("finetune"), "{e}");
    }
    let mut ft = Finetuner::new(&src, options(8, 1e-3, Tuning::Full), cpu()).unwrap();
    assert!(ft.train_window(&[1; 8]).unwrap_err().to_string().contains("window of 8 tokens, not 9"));
    assert!(ft.train_window(&[1, 2, 3, 4, 5, 6, 7, 8, 300]).unwrap_err().to_string().contains("vocabulary"));
    assert!(ft.epoch(&[1; 5], |_| ()).is_err());
    assert_eq!(ft.steps(), 0);
    let missing = Finetuner::new(&dir().join("no-such.gguf"), options(8, 1e-3, Tuning::Full), cpu());
    assert!(missing.is_err());
    assert_eq!(windows(10, 4).unwrap(), vec![0, 2, 4]);
    assert_eq!(windows(5, 4).unwrap(), vec![0]);
    assert!(windows(4, 4).is_err());
}

/// The same training on CUDA (the emulator without a GPU) follows the CPU's
/// losses: every weight in F32 (Gemma-3: windows, post-norms, GeGLU) and LoRA
/// on frozen Q8_0 weights (Qwen3: head norms).
#[cfg(feature = "cuda")]
#[test]
fn training_on_cuda_follows_the_cpu() {
    let toks = tokens();
    for (file, tuning) in [("gemma3_f32.gguf", Tuning::Full), ("qwen3_q8_0.gguf", Tuning::Lora { rank: 4, scale: 2.0 })]
    {
        let Some(dev) = common::cuda() else { return };
        let opts = options(39, 3e-3, tuning);
        let mut cpu = Finetuner::new(&dir().join(file), opts, CpuBackend::new(2).unwrap()).unwrap();
        let mut gpu = Finetuner::new(&dir().join(file), opts, dev).unwrap();
        for step in 0..4 {
            let (a, b) = (cpu.train_window(&toks).unwrap(), gpu.train_window(&toks).unwrap());
            assert!((a - b).abs() <= 1e-3 * a, "{file} step {step}: CPU loss {a}, CUDA {b}");
        }
    }
}
