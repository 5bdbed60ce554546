//! Training end to end (`rgml::train`): the digits MLP of `examples/digits.rs`
//! reaches the 0.97 test accuracy on the CPU; a dataset refuses what
//! does not fit; on CUDA (a device or `tools/cuda-emu`) a few steps follow
//! the CPU's trajectory.

mod common;

use rgml::grad::optim::AdamW;
use rgml::train::{mlp, mlp_params, Dataset, Optimizer, Trainer};
use rgml::{Backend, CpuBackend, Error};

fn digits() -> Dataset {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/digits/digits.csv")).unwrap();
    Dataset::from_csv(&text, 10, 1.0 / 16.0).unwrap()
}

fn trainer<B: Backend>(backend: B) -> Trainer<B> {
    let opt = Optimizer::AdamW(AdamW { lr: 3e-3, ..AdamW::default() });
    Trainer::new(backend, (64, 10, 32), &mlp_params(&[64, 128, 10], 1), mlp, opt).unwrap()
}

#[test]
fn an_mlp_learns_the_digits() {
    let (train, test) = digits().split_every(5);
    assert_eq!((train.len(), test.len()), (1438, 359));
    let mut t = trainer(CpuBackend::new(2).unwrap());
    let before = t.evaluate(&test).unwrap();
    let mut losses = Vec::new();
    for epoch in 1..=40 {
        losses.push(t.train_epoch(&train, epoch).unwrap().loss);
    }
    let after = t.evaluate(&test).unwrap();
    assert!(before.accuracy < 0.3, "an untrained model guesses: {before:?}");
    assert!(losses[39] < losses[0] / 10.0, "the training loss falls: {losses:?}");
    assert!(after.accuracy >= 0.97, "test accuracy {after:?}");
}

#[test]
fn a_dataset_refuses_what_does_not_fit() {
    assert!(matches!(Dataset::from_csv("1,2,3\n4,5\n", 10, 1.0), Err(Error::Invalid(m)) if m.contains("line 2")));
    assert!(matches!(Dataset::from_csv("1,2,x,3\n", 10, 1.0), Err(Error::Invalid(m)) if m.contains("line 1")));
    assert!(matches!(Dataset::from_csv("1,2,10\n", 10, 1.0), Err(Error::Invalid(m)) if m.contains("label 10")));
    assert!(Dataset::new(vec![0.0; 5], 2, vec![0, 1], 2).is_err());
    let d = Dataset::from_csv("1,2,0\n\n3,4,1\n", 2, 0.5).unwrap();
    assert_eq!(d.len(), 2);
    let mut t = trainer(CpuBackend::new(1).unwrap());
    assert!(matches!(t.train_epoch(&d, 1), Err(Error::Invalid(_))), "2 features for a 64-feature model");
}

#[cfg(feature = "cuda")]
#[test]
fn the_trainer_on_cuda_follows_the_cpu() {
    let Some(gpu) = common::cuda() else { return };
    let (train, test) = digits().split(320);
    let (mut cpu, mut dev) = (trainer(CpuBackend::new(2).unwrap()), trainer(gpu));
    for epoch in 1..=2 {
        let (a, b) = (cpu.train_epoch(&train, epoch).unwrap(), dev.train_epoch(&train, epoch).unwrap());
        assert!((a.loss - b.loss).abs() <= 1e-4 * a.loss.max(1.0), "epoch {epoch}: {a:?} against {b:?}");
    }
    let (a, b) = (cpu.evaluate(&test).unwrap(), dev.evaluate(&test).unwrap());
    assert!((a.loss - b.loss).abs() <= 1e-4 * a.loss.max(1.0), "test: {a:?} against {b:?}");
    for (p, q) in cpu.params().unwrap().iter().zip(dev.params().unwrap()) {
        assert!(p.iter().zip(&q).all(|(x, y)| (x - y).abs() <= 1e-4 * (1.0 + x.abs())), "parameters");
    }
}
