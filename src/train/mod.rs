//! Training a classifier, as ggml's `ggml-opt` does: a dataset of feature
//! rows and class labels, minibatches in a shuffled order each epoch, one
//! graph holding forward, backward ([`Context::backward`]) and an optimizer
//! step ([`crate::grad::optim`]) run once per minibatch, loss and accuracy per
//! epoch, and evaluation through the forward graph alone. Parameters are F32
//! and live in the backend's storage between steps; any backend runs it.

mod dataset;
mod mlp;
mod progress;

use std::time::Instant;

use dataset::shuffled;
pub use dataset::Dataset;
pub use mlp::{mlp, mlp_params};
pub use progress::ProgressBar;

use crate::backend::{Backend, BackendStorage};
use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::grad::optim::{AdamW, Sgd};
use crate::graph::Graph;
use crate::tensor::TensorId;

/// The optimizer of a [`Trainer`].
#[derive(Clone, Copy, Debug)]
pub enum Optimizer {
    /// Plain SGD with decoupled weight decay.
    Sgd(Sgd),
    /// AdamW (PyTorch's update).
    AdamW(AdamW),
}

/// What a [`Trainer`] trains: the classifier's sizes, the minibatch, the
/// optimizer and how many minibatches' gradients each step averages.
#[derive(Clone, Copy, Debug)]
pub struct TrainConfig {
    /// Features per row (the model's input width).
    pub n_features: usize,
    /// Classes (the model's logits per row).
    pub n_classes: usize,
    /// Rows per minibatch.
    pub batch: usize,
    /// The optimizer.
    pub optimizer: Optimizer,
    /// Gradient accumulation: one optimizer step per this many minibatches,
    /// with the mean of their gradients (1: a step per minibatch).
    pub accumulate: usize,
}

impl TrainConfig {
    /// A step per minibatch of `batch` rows.
    pub fn new(n_features: usize, n_classes: usize, batch: usize, optimizer: Optimizer) -> TrainConfig {
        TrainConfig { n_features, n_classes, batch, optimizer, accumulate: 1 }
    }
    /// One optimizer step per `k` minibatches, on their mean gradient.
    pub fn accumulate(self, k: usize) -> TrainConfig {
        TrainConfig { accumulate: k, ..self }
    }
}

/// The hyperparameters that make `o`'s step the identity (a minibatch whose
/// gradient is only added to the sums): SGD with no decay and no rate; AdamW
/// with moments decayed by 1 and fed 0, no weight decay and no rate. Exact
/// for finite gradients.
fn hold(o: Optimizer) -> Vec<f32> {
    match o {
        Optimizer::Sgd(_) => vec![1.0, 0.0],
        Optimizer::AdamW(a) => vec![1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, a.eps],
    }
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
    accumulate: usize,
    /// With accumulation: a one-value input, 0 on a cycle's first minibatch
    /// (the sums start over), 1 on the others.
    keep: Option<TensorId>,
    /// Minibatches run, and optimizer steps taken.
    micro: u64,
    step: u64,
    train: Graph,
    eval: Graph,
    train_st: B::Storage,
    eval_st: B::Storage,
}

impl<B: Backend> Trainer<B> {
    /// A trainer for the model `model(ctx, input, params) -> logits` (logits
    /// `[n_classes, batch]` for an input `[n_features, batch]`) with F32
    /// parameters of the given shapes and initial values and the
    /// cross-entropy loss, as `config` says.
    pub fn new(
        backend: B,
        config: TrainConfig,
        init: &[(Vec<i64>, Vec<f32>)],
        model: impl Fn(&Context, TensorId, &[TensorId]) -> Result<TensorId>,
    ) -> Result<Trainer<B>> {
        let TrainConfig { n_features, n_classes, batch, optimizer, accumulate } = config;
        if batch == 0 || accumulate == 0 {
            return Err(Error::Invalid(format!("trainer: batches of {batch} rows, a step per {accumulate} of them")));
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
        // with accumulation one graph serves every minibatch: the sums restart
        // through `keep`, and between steps the optimizer's hyperparameters
        // make its update the identity (`hold`)
        let keep = if accumulate > 1 {
            let k = ctx.new_tensor(DType::F32, &[1])?;
            ctx.set_input(k)?;
            Some(k)
        } else {
            None
        };
        for &p in &params {
            let g = grads
                .get(p)
                .ok_or_else(|| Error::Invalid(format!("trainer: the loss does not depend on {}", ctx.label(p))))?;
            // with accumulation, the step reads the mean of the gradients added up since the last
            let g = match keep {
                None => g,
                Some(keep) => {
                    let acc = ctx.new_tensor(DType::F32, &ctx.layout(p)?.ne)?;
                    let summed = ctx.add_inplace(ctx.mul_inplace(acc, keep)?, g)?;
                    ctx.scale(summed, 1.0 / accumulate as f32)?
                }
            };
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
            accumulate,
            keep,
            micro: 0,
            step,
            train,
            eval,
            train_st,
            eval_st,
        })
    }

    /// One epoch: the rows in an order shuffled by `seed`, one optimizer step
    /// per full minibatch, or per `accumulate` of them (a last partial
    /// minibatch is left out, as ggml-opt does; gradients added up at the end
    /// of an epoch carry into the next).
    pub fn train_epoch(&mut self, data: &Dataset, seed: u64) -> Result<Metrics> {
        self.train_epoch_with(data, seed, |_, _| ())
    }

    /// [`Trainer::train_epoch`], calling `progress(done, total)` after each
    /// minibatch (e.g. to drive a [`ProgressBar`] on a long epoch).
    pub fn train_epoch_with(
        &mut self,
        data: &Dataset,
        seed: u64,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<Metrics> {
        self.check(data)?;
        let start = Instant::now();
        let order = shuffled(data.len(), seed);
        let (mut loss, mut correct, mut rows) = (0.0, 0usize, 0usize);
        let total = data.len() / self.batch;
        for (k, chunk) in order.chunks_exact(self.batch).enumerate() {
            let cycle = self.micro % self.accumulate as u64;
            self.micro += 1;
            let stepping = cycle + 1 == self.accumulate as u64;
            if stepping {
                self.step += 1;
            }
            let hyper: Vec<f32> = match (self.optimizer, stepping) {
                (Optimizer::Sgd(s), true) => s.hyper().to_vec(),
                (Optimizer::AdamW(a), true) => a.hyper(self.step).to_vec(),
                (o, false) => hold(o),
            };
            self.ctx.set_data(self.hyper, &hyper)?;
            if let Some(keep) = self.keep {
                self.ctx.set_data(keep, &[f32::from(u8::from(cycle > 0))])?;
            }
            let (x, y) = data.batch(chunk, self.batch);
            self.ctx.set_data(self.input, &x)?;
            self.ctx.set_data(self.labels, &y)?;
            self.backend.compute(&self.ctx, &self.train, &mut self.train_st)?;
            loss += self.train_st.read_f32(&self.ctx, self.loss)?[0] as f64 * chunk.len() as f64;
            correct += self.correct(&self.train_st.read_f32(&self.ctx, self.logits)?, data, chunk);
            rows += chunk.len();
            progress(k + 1, total);
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
