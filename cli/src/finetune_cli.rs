//! `rgml finetune`: trains a model file on a text (`rgml_models::finetune`), every
//! weight in F32 or LoRA adapters, with a progress line per window and the loss per
//! epoch, and writes the trained model as a GGUF file llama.cpp loads.

use std::path::{Path, PathBuf};
use std::time::Instant;

use rgml::grad::optim::AdamW;
use rgml::train::ProgressBar;
use rgml::Backend;
use rgml_models::finetune::{FinetuneOptions, Finetuner, Progress, Tuning};

use crate::outln;
use crate::run::{read_text_file, require_tokenizer};

/// What `rgml finetune` trains, on what, and where the result goes.
#[derive(Clone, Debug)]
pub struct FinetuneRun {
    /// The GGUF model.
    pub model: PathBuf,
    /// The UTF-8 text to train on.
    pub file: PathBuf,
    /// Where the trained model is written.
    pub out: PathBuf,
    /// Passes over the text.
    pub epochs: usize,
    /// AdamW's learning rate.
    pub lr: f32,
    /// Tokens per window.
    pub ctx: usize,
    /// LoRA rank (none: every weight in F32).
    pub lora: Option<usize>,
    /// LoRA's alpha (the adapters' scale is alpha / rank).
    pub lora_alpha: Option<f32>,
}

/// Runs `run` on `backend`.
pub fn run<B: Backend>(run: &FinetuneRun, backend: B) -> Result<(), String> {
    if run.epochs == 0 || !(run.lr.is_finite() && run.lr > 0.0) {
        return Err(format!("finetune: {} epochs at learning rate {} (need ≥ 1 and > 0)", run.epochs, run.lr));
    }
    // refused before the training rather than after it
    let dir = run.out.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(format!("{}: the directory {} does not exist", run.out.display(), dir.display()));
    }
    let gguf = rgml::gguf::GgufFile::open(&run.model).map_err(|e| format!("{}: {e}", run.model.display()))?;
    let tok = require_tokenizer(&gguf, &run.model)?;
    let tokens = tok.tokenize(&read_text_file(&run.file)?, true, false).map_err(|e| e.to_string())?;
    let tuning = match run.lora {
        None => Tuning::Full,
        Some(rank) => Tuning::Lora { rank, scale: run.lora_alpha.unwrap_or(rank as f32) / rank.max(1) as f32 },
    };
    let optimizer = AdamW { lr: run.lr, weight_decay: 0.0, ..AdamW::default() };
    let opts = FinetuneOptions { n_ctx: run.ctx, optimizer, tuning, ..FinetuneOptions::default() };
    let describe = backend.describe();
    let mut ft = Finetuner::new(&run.model, opts, backend).map_err(|e| format!("{}: {e}", run.model.display()))?;
    let n_windows = rgml_models::finetune::windows(tokens.len(), run.ctx).map_err(|e| e.to_string())?.len();
    eprintln!(
        "finetune: {} tokens, {n_windows} windows of {} per epoch, {} values trained ({}), graph {:.1} MiB, on {describe}",
        tokens.len(),
        run.ctx,
        ft.trained_values(),
        match tuning {
            Tuning::Full => "every weight in F32".to_string(),
            Tuning::Lora { rank, scale } => format!("LoRA rank {rank}, scale {scale}"),
        },
        ft.graph_bytes() as f64 / (1u64 << 20) as f64
    );
    let bar = ProgressBar::new();
    let t0 = Instant::now();
    for e in 1..=run.epochs {
        let loss = ft.epoch(&tokens, |p| progress(&bar, e, run.epochs, p)).map_err(|e| e.to_string())?;
        let secs = t0.elapsed().as_secs_f64();
        let trained = e * n_windows * run.ctx;
        outln!(
            "epoch {e}/{}: loss {loss:.4} (ppl {:.2}), {:.1} tokens/s trained, {secs:.1} s",
            run.epochs,
            loss.exp(),
            trained as f64 / secs
        );
    }
    ft.save(&run.out).map_err(|e| format!("{}: {e}", run.out.display()))?;
    outln!("wrote {}", run.out.display());
    Ok(())
}

/// The bar's label: the epoch, the loss so far and the speed.
fn progress(bar: &ProgressBar, epoch: usize, epochs: usize, p: Progress) {
    bar.show(p.done, p.total, &format!("epoch {epoch}/{epochs} loss {:.4} {:.1} tok/s", p.loss, p.tokens_per_s));
}
