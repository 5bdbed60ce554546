//! Training a classifier, as ggml's `ggml-opt` does: a dataset of feature
//! rows and class labels, minibatches in a shuffled order each epoch, one
//! graph holding forward, backward ([`Context::backward`]) and an optimizer
//! step ([`crate::grad::optim`]) run once per minibatch, loss and accuracy per
//! epoch, and evaluation through the forward graph alone. Parameters are F32
//! and live in the backend's storage between steps; any backend runs it.

use std::time::Instant;

use crate::backend::{Backend, BackendStorage};
use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::grad::optim::{AdamW, Sgd};
use crate::graph::Graph;
use crate::tensor::TensorId;

/// Feature rows and their classes.
#[derive(Clone, Debug)]
pub struct Dataset {
    features: Vec<f32>,
    n_features: usize,
    labels: Vec<usize>,
    n_classes: usize,
}

impl Dataset {
    /// `features` holds `labels.len()` rows of `n_features` values; every
    /// label is below `n_classes`.
    pub fn new(features: Vec<f32>, n_features: usize, labels: Vec<usize>, n_classes: usize) -> Result<Dataset> {
        if n_features == 0 || n_classes < 2 || features.len() != labels.len() * n_features {
            return Err(Error::Invalid(format!(
                "dataset: {} values for {} rows of {n_features} features, {n_classes} classes",
                features.len(),
                labels.len()
            )));
        }
        if let Some(bad) = labels.iter().find(|&&l| l >= n_classes) {
            return Err(Error::Invalid(format!("dataset: label {bad} of {n_classes} classes")));
        }
        Ok(Dataset { features, n_features, labels, n_classes })
    }
    /// A dataset from CSV text: one row per line, its features then its
    /// class (an integer) last, each feature multiplied by `scale`. Blank
    /// lines are skipped; anything else that does not parse is an error
    /// naming the line.
    pub fn from_csv(text: &str, n_classes: usize, scale: f32) -> Result<Dataset> {
        let (mut features, mut labels, mut n_features) = (Vec::new(), Vec::new(), None);
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let bad = || Error::Invalid(format!("csv line {}: {:.60}", i + 1, line));
            let cells: Vec<&str> = line.split(',').map(str::trim).collect();
            let (label, row) = cells.split_last().ok_or_else(bad)?;
            if *n_features.get_or_insert(row.len()) != row.len() {
                return Err(bad());
            }
            for c in row {
                features.push(c.parse::<f32>().map_err(|_| bad())? * scale);
            }
            labels.push(label.parse::<usize>().map_err(|_| bad())?);
        }
        Dataset::new(features, n_features.unwrap_or(0), labels, n_classes)
    }
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.labels.len()
    }
    /// True without rows.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
    /// The rows `0..at` and `at..`.
    pub fn split(&self, at: usize) -> (Dataset, Dataset) {
        let at = at.min(self.len());
        let part = |r: std::ops::Range<usize>| Dataset {
            features: self.features[r.start * self.n_features..r.end * self.n_features].to_vec(),
            n_features: self.n_features,
            labels: self.labels[r].to_vec(),
            n_classes: self.n_classes,
        };
        (part(0..at), part(at..self.len()))
    }
    /// A fixed split: every `k`-th row (rows `k-1, 2k-1, …`) in the second
    /// part, the others in the first (`k = 5`: 80 / 20, each part drawn from
    /// the whole file).
    pub fn split_every(&self, k: usize) -> (Dataset, Dataset) {
        let k = k.max(1);
        let pick = |second: bool| {
            let rows: Vec<usize> = (0..self.len()).filter(|r| (r % k == k - 1) == second).collect();
            Dataset {
                features: rows
                    .iter()
                    .flat_map(|&r| self.features[r * self.n_features..(r + 1) * self.n_features].to_vec())
                    .collect(),
                n_features: self.n_features,
                labels: rows.iter().map(|&r| self.labels[r]).collect(),
                n_classes: self.n_classes,
            }
        };
        (pick(false), pick(true))
    }
    /// The features and one-hot labels of `rows`, padded with zero rows to `batch`.
    fn batch(&self, rows: &[usize], batch: usize) -> (Vec<f32>, Vec<f32>) {
        let mut x = vec![0f32; batch * self.n_features];
        let mut y = vec![0f32; batch * self.n_classes];
        for (i, &r) in rows.iter().enumerate() {
            x[i * self.n_features..(i + 1) * self.n_features]
                .copy_from_slice(&self.features[r * self.n_features..(r + 1) * self.n_features]);
            y[i * self.n_classes + self.labels[r]] = 1.0;
        }
        (x, y)
    }
}

/// The optimizer of a [`Trainer`].
#[derive(Clone, Copy, Debug)]
pub enum Optimizer {
    /// Plain SGD with decoupled weight decay.
    Sgd(Sgd),
    /// AdamW (PyTorch's update).
    AdamW(AdamW),
}

/// Loss and accuracy over a pass of a dataset.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Metrics {
    /// Mean cross-entropy per row.
    pub loss: f64,
    /// Fraction of rows whose largest logit is their class.
    pub accuracy: f64,
    /// Wall time of the pass.
    pub seconds: f64,
}

/// One classifier being trained on a backend.
pub struct Trainer<B: Backend> {
    backend: B,
    ctx: Context,
    batch: usize,
    n_features: usize,
    n_classes: usize,
    input: TensorId,
    labels: TensorId,
    logits: TensorId,
    loss: TensorId,
    params: Vec<TensorId>,
    eval_params: Vec<TensorId>,
    eval_logits: TensorId,
    hyper: TensorId,
    optimizer: Optimizer,
    step: u64,
    train: Graph,
    eval: Graph,
    train_st: B::Storage,
    eval_st: B::Storage,
}

impl<B: Backend> Trainer<B> {
    /// A trainer for the model `model(ctx, input, params) -> logits` (logits
    /// `[n_classes, batch]` for an input `[n_features, batch]`) with F32
    /// parameters of the given shapes and initial values, minibatches of
    /// `batch` rows and the cross-entropy loss.
    pub fn new(
        backend: B,
        (n_features, n_classes, batch): (usize, usize, usize),
        init: &[(Vec<i64>, Vec<f32>)],
        model: impl Fn(&Context, TensorId, &[TensorId]) -> Result<TensorId>,
        optimizer: Optimizer,
    ) -> Result<Trainer<B>> {
        if batch == 0 {
            return Err(Error::Invalid("trainer: a batch of 0 rows".into()));
        }
        // the context holds the inputs' data (set before each compute) and the
        // parameters' initial values; the storage keeps its own copy of what
        // the steps write (parameters and moments)
        let mut ctx = Context::new();
        let input = ctx.new_tensor(DType::F32, &[n_features as i64, batch as i64])?;
        let labels = ctx.new_tensor(DType::F32, &[n_classes as i64, batch as i64])?;
        ctx.set_input(input)?;
        ctx.set_input(labels)?;
        let mut params = Vec::with_capacity(init.len());
        for (ne, values) in init {
            let p = ctx.new_f32(ne, values)?;
            ctx.set_param(p)?;
            params.push(p);
        }
        let logits = model(&ctx, input, &params)?;
        let loss = ctx.cross_entropy_loss(logits, labels)?;
        ctx.set_output(logits)?;
        ctx.set_output(loss)?;
        let grads = ctx.backward(loss, &params)?;
        let n_hyper = if matches!(optimizer, Optimizer::Sgd(_)) { 2 } else { 8 };
        let hyper = ctx.new_tensor(DType::F32, &[n_hyper])?;
        ctx.set_input(hyper)?;
        let mut steps = vec![loss, logits];
        for &p in &params {
            let g = grads
                .get(p)
                .ok_or_else(|| Error::Invalid(format!("trainer: the loss does not depend on {}", ctx.label(p))))?;
            steps.push(match optimizer {
                Optimizer::Sgd(_) => ctx.opt_step_sgd(p, g, hyper)?,
                Optimizer::AdamW(_) => {
                    let ne = ctx.layout(p)?.ne;
                    let (m, v) = (ctx.new_tensor(DType::F32, &ne)?, ctx.new_tensor(DType::F32, &ne)?);
                    ctx.opt_step_adamw(p, g, m, v, hyper)?
                }
            });
        }
        let train = Graph::build(&ctx, &steps)?;
        // evaluation reads its own copies of the parameters, inputs set from
        // the trained values before each evaluation (a backend keeps other
        // leaves as uploaded)
        let mut eval_params = Vec::with_capacity(params.len());
        for (ne, values) in init {
            let p = ctx.new_f32(ne, values)?;
            ctx.set_input(p)?;
            eval_params.push(p);
        }
        let eval_logits = model(&ctx, input, &eval_params)?;
        ctx.set_output(eval_logits)?;
        let eval = Graph::build(&ctx, &[eval_logits])?;
        let train_st = backend.alloc(&ctx, &train, backend.plan(&ctx, &train)?)?;
        let eval_st = backend.alloc(&ctx, &eval, backend.plan(&ctx, &eval)?)?;
        let (step, dims) = (0, (n_features, n_classes));
        Ok(Trainer {
            backend,
            ctx,
            batch,
            n_features: dims.0,
            n_classes: dims.1,
            input,
            labels,
            logits,
            loss,
            params,
            eval_params,
            eval_logits,
            hyper,
            optimizer,
            step,
            train,
            eval,
            train_st,
            eval_st,
        })
    }

    /// One epoch: the rows in an order shuffled by `seed`, one optimizer step
    /// per full minibatch (a last partial one is left out, as ggml-opt does).
    pub fn train_epoch(&mut self, data: &Dataset, seed: u64) -> Result<Metrics> {
        self.check(data)?;
        let start = Instant::now();
        let order = shuffled(data.len(), seed);
        let (mut loss, mut correct, mut rows) = (0.0, 0usize, 0usize);
        for chunk in order.chunks_exact(self.batch) {
            self.step += 1;
            let hyper: Vec<f32> = match self.optimizer {
                Optimizer::Sgd(s) => s.hyper().to_vec(),
                Optimizer::AdamW(a) => a.hyper(self.step).to_vec(),
            };
            let (x, y) = data.batch(chunk, self.batch);
            self.ctx.set_data(self.hyper, &hyper)?;
            self.ctx.set_data(self.input, &x)?;
            self.ctx.set_data(self.labels, &y)?;
            self.backend.compute(&self.ctx, &self.train, &mut self.train_st)?;
            loss += self.train_st.read_f32(&self.ctx, self.loss)?[0] as f64 * chunk.len() as f64;
            correct += self.correct(&self.train_st.read_f32(&self.ctx, self.logits)?, data, chunk);
            rows += chunk.len();
        }
        let n = rows.max(1) as f64;
        Ok(Metrics { loss: loss / n, accuracy: correct as f64 / n, seconds: start.elapsed().as_secs_f64() })
    }

    /// Loss and accuracy on every row of `data`, through the forward graph
    /// with the current parameters.
    pub fn evaluate(&mut self, data: &Dataset) -> Result<Metrics> {
        self.check(data)?;
        let start = Instant::now();
        for (&p, &e) in self.params.iter().zip(&self.eval_params) {
            let values = self.train_st.read_f32(&self.ctx, p)?;
            self.ctx.set_data(e, &values)?;
        }
        let (mut loss, mut correct) = (0.0, 0usize);
        let rows: Vec<usize> = (0..data.len()).collect();
        for chunk in rows.chunks(self.batch) {
            let (x, _) = data.batch(chunk, self.batch);
            self.ctx.set_data(self.input, &x)?;
            self.backend.compute(&self.ctx, &self.eval, &mut self.eval_st)?;
            let logits = self.eval_st.read_f32(&self.ctx, self.eval_logits)?;
            correct += self.correct(&logits, data, chunk);
            for (i, &r) in chunk.iter().enumerate() {
                let row = &logits[i * self.n_classes..(i + 1) * self.n_classes];
                let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
                let lse = max + row.iter().map(|&v| (v as f64 - max).exp()).sum::<f64>().ln();
                loss += lse - row[data.labels[r]] as f64;
            }
        }
        let n = data.len().max(1) as f64;
        Ok(Metrics { loss: loss / n, accuracy: correct as f64 / n, seconds: start.elapsed().as_secs_f64() })
    }

    /// The backend (e.g. to read its profile).
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The current values of every parameter.
    pub fn params(&self) -> Result<Vec<Vec<f32>>> {
        self.params.iter().map(|&p| self.train_st.read_f32(&self.ctx, p)).collect()
    }

    /// Rows of `chunk` whose largest logit (the first of equal ones) is their class.
    fn correct(&self, logits: &[f32], data: &Dataset, chunk: &[usize]) -> usize {
        chunk
            .iter()
            .enumerate()
            .filter(|&(i, &r)| {
                let row = &logits[i * self.n_classes..(i + 1) * self.n_classes];
                let best = row.iter().enumerate().fold(0, |b, (j, &v)| if v > row[b] { j } else { b });
                best == data.labels[r]
            })
            .count()
    }

    fn check(&self, data: &Dataset) -> Result<()> {
        if data.n_features != self.n_features || data.n_classes != self.n_classes {
            return Err(Error::Invalid(format!(
                "trainer of {} features and {} classes given a dataset of {} and {}",
                self.n_features, self.n_classes, data.n_features, data.n_classes
            )));
        }
        Ok(())
    }
}

/// The parameters of a multilayer perceptron with layer widths `sizes`
/// (inputs first, classes last): per layer a weight `[n_in, n_out]` uniform in
/// ±sqrt(6 / n_in) (He's uniform, for the ReLUs) and a zero bias `[n_out, 1]`,
/// from a generator seeded with `seed`.
pub fn mlp_params(sizes: &[usize], seed: u64) -> Vec<(Vec<i64>, Vec<f32>)> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut uniform = move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    };
    let mut out = Vec::new();
    for w in sizes.windows(2) {
        let bound = (6.0 / w[0] as f32).sqrt();
        out.push((vec![w[0] as i64, w[1] as i64], (0..w[0] * w[1]).map(|_| uniform() * bound).collect()));
        out.push((vec![w[1] as i64, 1], vec![0.0; w[1]]));
    }
    out
}

/// The perceptron of [`mlp_params`] on `input` (`[n_in, batch]`): per layer
/// `W·x + b`, a ReLU between layers; returns the logits.
pub fn mlp(ctx: &Context, input: TensorId, params: &[TensorId]) -> Result<TensorId> {
    let mut x = input;
    for (i, layer) in params.chunks(2).enumerate() {
        let [w, b] = layer else { return Err(Error::Invalid("mlp: parameters come in (weight, bias) pairs".into())) };
        x = ctx.add(ctx.mul_mat(*w, x)?, *b)?;
        if i + 1 < params.len() / 2 {
            x = ctx.relu(x)?;
        }
    }
    Ok(x)
}

/// `0..n` in an order given by `seed` (Fisher–Yates over xorshift64*).
fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..n).rev() {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        let j = (s.wrapping_mul(0x2545_F491_4F6C_DD1D) % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}
