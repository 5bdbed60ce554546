//! An MLP classifier (64 → 128 → 10, ReLU) trained with AdamW on
//! scikit-learn's digits (1797 8×8 images; `tests/fixtures/digits`), every
//! fifth row held out for testing (a fixed 80 / 20 split), on the CPU:
//!
//!     cargo run --release --example digits [-- --epochs 40 --threads 2 --batch 32 --cuda]
//!
//! (`--cuda`: on CUDA device 0 instead.)
//!
//! Prints the loss and accuracy of every epoch, the time per epoch, and last
//! `test accuracy: 0.9xx`. `scripts/digits_jax.py` trains the same model in
//! JAX on the same split for a speed comparison.

use rgml::grad::optim::AdamW;
use rgml::train::{mlp, mlp_params, Dataset, Optimizer, TrainConfig, Trainer};
use rgml::{Backend, CpuBackend, CudaBackend};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() -> rgml::Result<()> {
    let (epochs, threads, batch) = (arg("--epochs", 40), arg("--threads", 2), arg("--batch", 32));
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/digits/digits.csv");
    let data = Dataset::from_csv(&std::fs::read_to_string(path)?, 10, 1.0 / 16.0)?;
    let (train, test) = data.split_every(5);
    if std::env::args().any(|a| a == "--cuda") {
        println!("digits on {}", CudaBackend::new(0)?.describe());
        return train_and_test(CudaBackend::new(0)?, &train, &test, epochs, batch);
    }
    let backend = CpuBackend::new(threads)?.with_profile(std::env::var_os("RGML_PROFILE").is_some());
    println!("digits on the CPU, {threads} threads");
    train_and_test(backend, &train, &test, epochs, batch)
}

fn train_and_test<B: Backend>(
    backend: B,
    train: &Dataset,
    test: &Dataset,
    epochs: usize,
    batch: usize,
) -> rgml::Result<()> {
    let opt = Optimizer::AdamW(AdamW { lr: 3e-3, ..AdamW::default() });
    let mut trainer = Trainer::new(backend, TrainConfig::new(64, 10, batch, opt), &mlp_params(&[64, 128, 10], 1), mlp)?;
    println!("{} training rows, {} test rows, batch {batch}", train.len(), test.len());
    let mut seconds = 0.0;
    for epoch in 1..=epochs {
        let m = trainer.train_epoch(train, epoch as u64)?;
        seconds += m.seconds;
        println!("epoch {epoch:3}: loss {:.4}  accuracy {:.4}  ({:.1} ms)", m.loss, m.accuracy, m.seconds * 1e3);
    }
    if let Some(p) = trainer.backend().take_profile() {
        for (kind, t) in p.by_time().into_iter().take(12) {
            eprintln!("{kind}: {t:?}");
        }
    }
    let t = trainer.evaluate(test)?;
    println!("time per epoch: {:.2} ms", seconds / epochs.max(1) as f64 * 1e3);
    println!("test loss: {:.4}", t.loss);
    println!("test accuracy: {:.3}", t.accuracy);
    Ok(())
}
