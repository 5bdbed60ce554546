//! Optimizer steps as in-place graph ops on a parameter and its moments: SGD
//! composed from elementwise ops (as tinygrad composes its optimizers), AdamW
//! as three fused ops (its two moments, then the parameter) that round as the
//! elementwise ops would. Their
//! hyperparameters come from a small F32 tensor the caller sets before each
//! run ([`Sgd::hyper`], [`AdamW::hyper`]), so one graph serves every step and
//! a changing learning rate. Build them after [`Context::backward`]: they
//! write the parameters the forward pass read.

use crate::context::Context;
use crate::error::{Error, Result};
use crate::tensor::TensorId;

/// Stochastic gradient descent with decoupled weight decay:
/// `p ← p·(1 − lr·wd) − lr·g`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sgd {
    /// Learning rate.
    pub lr: f32,
    /// Decoupled weight decay (0: none).
    pub weight_decay: f32,
}

impl Sgd {
    /// The values of [`Context::opt_step_sgd`]'s `hyper` tensor (F32, 2 values).
    pub fn hyper(&self) -> [f32; 2] {
        [1.0 - self.lr * self.weight_decay, self.lr]
    }
}

/// AdamW as PyTorch's `torch.optim.AdamW` (decoupled weight decay, bias
/// correction, `eps` added to the corrected second moment's square root).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamW {
    /// Learning rate.
    pub lr: f32,
    /// Decay of the first moment.
    pub beta1: f32,
    /// Decay of the second moment.
    pub beta2: f32,
    /// Added to the denominator.
    pub eps: f32,
    /// Decoupled weight decay.
    pub weight_decay: f32,
}

impl Default for AdamW {
    /// PyTorch's defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01.
    fn default() -> AdamW {
        AdamW { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.01 }
    }
}

impl AdamW {
    /// The values of [`Context::opt_step_adamw`]'s `hyper` tensor (F32, 8
    /// values) for step `t` (1 for the first): the decays and their
    /// complements, the weight-decay factor, the bias corrections (computed
    /// in f64) and `eps`.
    pub fn hyper(&self, t: u64) -> [f32; 8] {
        let (b1, b2) = (self.beta1 as f64, self.beta2 as f64);
        let t = t.max(1).min(i32::MAX as u64) as i32;
        let c1 = 1.0 - b1.powi(t);
        let c2 = 1.0 - b2.powi(t);
        [
            self.beta1,
            (1.0 - b1) as f32,
            self.beta2,
            (1.0 - b2) as f32,
            1.0 - self.lr * self.weight_decay,
            (self.lr as f64 / c1) as f32,
            (1.0 / c2) as f32,
            self.eps,
        ]
    }
}

impl Context {
    /// One SGD step on `p` with gradient `g`, in place; `hyper` is an F32
    /// tensor of [`Sgd::hyper`]'s 2 values. Returns a view of `p`.
    pub fn opt_step_sgd(&self, p: TensorId, g: TensorId, hyper: TensorId) -> Result<TensorId> {
        self.check_step("opt_step_sgd", &[p, g], hyper, 2)?;
        let h = |i: usize| self.view_1d(hyper, 1, 4 * i);
        let decayed = self.mul_inplace(p, h(0)?)?;
        self.sub_inplace(decayed, self.mul(g, h(1)?)?)
    }

    /// One AdamW step on `p` with gradient `g` and moments `m`, `v` (F32 of
    /// `p`'s shape, zero before the first step), all three updated in place;
    /// `hyper` is an F32 tensor of [`AdamW::hyper`]'s 8 values. Returns a
    /// view of `p`.
    pub fn opt_step_adamw(
        &self,
        p: TensorId,
        g: TensorId,
        m: TensorId,
        v: TensorId,
        hyper: TensorId,
    ) -> Result<TensorId> {
        self.check_step("opt_step_adamw", &[p, g, m, v], hyper, 8)?;
        // three fused in-place ops, rounded as the elementwise ops
        // `m·h0 + g·h1`, `v·h2 + g²·h3`, `p·h4 − (m·h5) / (sqrt(v·h6) + h7)` round
        let h = |i: usize, n: i64| self.view_1d(hyper, n, 4 * i);
        let m = self.adamw_moment(m, g, h(0, 2)?, false)?;
        let v = self.adamw_moment(v, g, h(2, 2)?, true)?;
        self.adamw_update(p, m, v, h(4, 4)?)
    }

    /// F32 tensors of one shape, and an F32 `hyper` of `n` packed values.
    fn check_step(&self, op: &'static str, tensors: &[TensorId], hyper: TensorId, n: i64) -> Result<()> {
        let l0 = self.layout(tensors[0])?;
        for &t in tensors {
            let l = self.layout(t)?;
            if l.dtype != crate::dtype::DType::F32 || l.ne != l0.ne {
                return Err(Error::shape(
                    op,
                    format!("{} is {:?} {:?}, the parameter F32 {:?}", self.label(t), l.dtype, l.ne, l0.ne),
                ));
            }
        }
        let lh = self.layout(hyper)?;
        if lh.dtype != crate::dtype::DType::F32 || lh.nelements() != n || !lh.is_contiguous() {
            return Err(Error::shape(
                op,
                format!("hyper must be {n} packed F32 values, is {:?} {:?}", lh.dtype, lh.ne),
            ));
        }
        Ok(())
    }
}
