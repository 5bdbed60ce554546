//! Row normalisations: `rms_norm` and `norm` (ggml semantics, any strides).

use super::grad_node::{GradNode, Grads};
use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{Op, TensorId};

impl Context {
    /// ggml's `rms_norm`: every row (dim 0) divided by its root mean square,
    /// `y = x / sqrt(mean(x²) + eps)`. The sum of squares is accumulated in f64
    /// like ggml. `a` may be F32, F16 or BF16 with any strides; the result is
    /// a new contiguous F32 tensor of `a`'s shape. `eps` must be `>= 0`.
    pub fn rms_norm(&self, a: TensorId, eps: f32) -> Result<TensorId> {
        let l = self.norm_input("rms_norm", a, eps)?;
        self.new_result(Op::RmsNorm { a, eps, w: None }, DType::F32, l.ne)
    }

    /// `mul(rms_norm(a, eps), w)` in one op (the norm with its weight, as
    /// llama.cpp's backends fuse them): the same bits as the two ops. `w` is
    /// F32, F16 or BF16 with any strides, broadcast over `a` as `mul`'s second
    /// operand (`a.ne[i] % w.ne[i] == 0`).
    pub fn rms_norm_mul(&self, a: TensorId, w: TensorId, eps: f32) -> Result<TensorId> {
        let l = self.norm_input("rms_norm", a, eps)?;
        let lw = self.require_float("rms_norm", w)?;
        if (0..4).any(|i| lw.ne[i] == 0 || l.ne[i] % lw.ne[i] != 0) {
            return Err(Error::shape(
                "rms_norm",
                format!("weight ne={:?} does not broadcast over ne={:?}: need a.ne[i] % w.ne[i] == 0", lw.ne, l.ne),
            ));
        }
        self.new_result(Op::RmsNorm { a, eps, w: Some(w) }, DType::F32, l.ne)
    }

    /// ggml's `norm`: every row (dim 0) centred and scaled to unit variance,
    /// `y = (x - mean) / sqrt(var + eps)` with the biased variance. Sums are
    /// accumulated in f64 (ggml's contiguous path). `a` may be F32, F16 or BF16
    /// with any strides; the result is a new contiguous F32 tensor of `a`'s
    /// shape. `eps` must be `>= 0`.
    pub fn norm(&self, a: TensorId, eps: f32) -> Result<TensorId> {
        let l = self.norm_input("norm", a, eps)?;
        self.new_result(Op::Norm { a, eps }, DType::F32, l.ne)
    }

    fn norm_input(&self, op: &'static str, a: TensorId, eps: f32) -> Result<crate::layout::Layout> {
        let l = self.require_float(op, a)?;
        // ggml asserts eps >= 0; NaN is refused too
        if eps.is_nan() || eps < 0.0 {
            return Err(Error::Invalid(format!("{op}: eps must be >= 0, got {eps}")));
        }
        Ok(l)
    }
}

impl Context {
    /// The gradient rules of `norm`, and of `rms_norm` with or without its weight (see [`Context::operand_grads`]).
    pub(super) fn grad_norm(&self, n: &GradNode, g: TensorId, out: &mut Grads) -> Result<bool> {
        if let Op::Norm { eps, .. } = n.op {
            // norm(x) = rms_norm(z) with z = x − mean(x); centring's Jacobian is
            // symmetric: ∂x = ∂z − mean(∂z)
            let a = n.x[0];
            out.put(0, || {
                let dz = self.rms_norm_back(self.sub(a, self.mean(a)?)?, g, eps)?;
                self.sub(dz, self.mean(dz)?)
            })?;
            return Ok(true);
        }
        let Op::RmsNorm { eps, w, .. } = n.op else { return Ok(false) };
        let a = n.x[0];
        match w {
            None => out.put(0, || self.rms_norm_back(a, g, eps))?,
            Some(_) => {
                let w = n.x[1];
                out.put(0, || self.rms_norm_back(a, self.mul(g, w)?, eps))?;
                out.put(1, || self.sum_to(self.mul(g, self.rms_norm(a, eps)?)?, w))?
            }
        }
        Ok(true)
    }
}

/// What the rules above read besides the gradient: the input and the weight.
pub(super) fn saved(n: &GradNode) -> Option<Vec<TensorId>> {
    matches!(n.op, Op::RmsNorm { .. } | Op::Norm { .. }).then(|| n.x.to_vec())
}
