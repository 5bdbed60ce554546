//! Training end to end (`rgml::train`): the digits MLP of `examples/digits.rs`
//! reaches the 0.97 test accuracy on the CPU; a dataset refuses what
//! does not fit; on CUDA (a device or `tools/cuda-emu`) a few steps follow
//! the CPU's trajectory.

mod common;

use rgml::grad::optim::AdamW;
use rgml::train::{mlp, mlp_params, Dataset, Optimizer, TrainConfig, Trainer};
use rgml::{Backend, CpuBackend, Error};

fn digits() -> Dataset {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/digits/digits.csv")).unwrap();
    Dataset::from_csv(&text, 10, 1.0 / 16.0).unwrap()
}

fn trainer<B: Backend>(backend: B) -> Trainer<B> {
    let opt = Optimizer::AdamW(AdamW { lr: 3e-3, ..AdamW::default() });
    Trainer::new(backend, TrainConfig::new(64, 10, 32, opt), &mlp_params(&[64, 128, 10], 1), mlp).unwrap()
}

#[test]
fn an_mlp_learns_the_digits() {
    let (train, test) = digits().split_every(5);
    assert_eq!((train.len(), test.len()), (1438, 359));
    let mut t = trainer(CpuBackend::new(2).unwrap());
    let before = t.evaluate(&test).unwrap();
    let mut losses = Vec::new();
    for epoch in 1..=39 {
        losses.push(t.train_epoch(&train, epoch).unwrap().loss);
    }
    // the last epoch reports each of its 44 full minibatches, in order
    let mut seen = Vec::new();
    losses.push(t.train_epoch_with(&train, 40, |done, total| seen.push((done, total))).unwrap().loss);
    assert_eq!(seen, (1..=44).map(|k| (k, 44)).collect::<Vec<_>>());
    let after = t.evaluate(&test).unwrap();
    assert!(before.accuracy < 0.3, "an untrained model guesses: {before:?}");
    assert!(losses[39] < losses[0] / 10.0, "the training loss falls: {losses:?}");
    assert!(after.accuracy >= 0.97, "test accuracy {after:?}");
}

/// Accumulating the gradients of k minibatches of b rows takes the step one
/// minibatch of k·b rows takes (the mean cross-entropy's gradient is the mean
/// of the parts'), within rounding; with SGD the trajectory is exact to f32 sums.
#[test]
fn gradient_accumulation_steps_as_one_bigger_batch() {
    let (train, _) = digits().split(256);
    let sgd = Optimizer::Sgd(rgml::grad::optim::Sgd { lr: 0.1, weight_decay: 0.0 });
    let adamw = Optimizer::AdamW(AdamW { lr: 1e-2, ..AdamW::default() });
    let init = mlp_params(&[64, 16, 10], 3);
    for (opt, tol) in [(sgd, 1e-5), (adamw, 1e-4)] {
        check_accumulation(&train, &init, opt, tol);
    }
    let bad = Trainer::new(CpuBackend::new(1).unwrap(), TrainConfig::new(64, 10, 8, sgd).accumulate(0), &init, mlp);
    assert!(matches!(bad, Err(Error::Invalid(_))));
}

type Params = Vec<(Vec<i64>, Vec<f32>)>;

fn check_accumulation(train: &Dataset, init: &Params, opt: Optimizer, tol: f32) {
    let run = |batch: usize, k: usize| {
        let config = TrainConfig::new(64, 10, batch, opt).accumulate(k);
        let mut t = Trainer::new(CpuBackend::new(2).unwrap(), config, init, mlp).unwrap();
        // one epoch; both runs see the rows in the same order
        t.train_epoch(train, 0).unwrap();
        t.params().unwrap()
    };
    let (big, accumulated, plain) = (run(32, 1), run(8, 4), run(8, 1));
    let max_diff = |a: &[Vec<f32>], b: &[Vec<f32>]| {
        a.iter().zip(b).flat_map(|(x, y)| x.iter().zip(y).map(|(p, q)| (p - q).abs())).fold(0f32, f32::max)
    };
    let d = max_diff(&big, &accumulated);
    assert!(d < tol, "{opt:?}: accumulated 4 × 8 against 32: {d}");
    assert!(max_diff(&big, &plain) > 1e-3, "{opt:?}: a step per 8 rows moves elsewhere");
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
