//! Reductions.

use super::grad_node::{GradNode, Grads};
use crate::context::Context;
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::{Op, TensorId};

impl Context {
    /// Sum over dim 0: result `ne = [1, ne1, ne2, ne3]`, `a`'s type (summed in f32).
    pub fn sum_rows(&self, a: TensorId) -> Result<TensorId> {
        let l = self.require_float("sum_rows", a)?;
        self.new_result(Op::SumRows { a }, l.dtype, [1, l.ne[1], l.ne[2], l.ne[3]])
    }

    /// Mean over dim 0 (ggml's `mean`): result `ne = [1, ne1, ne2, ne3]`,
    /// `a`'s type; each row summed in f64 and divided by `ne0` there.
    pub fn mean(&self, a: TensorId) -> Result<TensorId> {
        let l = self.require_float("mean", a)?;
        self.new_result(Op::Mean { a }, l.dtype, [1, l.ne[1], l.ne[2], l.ne[3]])
    }

    /// The index of each row's largest value, the first of equal ones (ggml's
    /// `argmax`; NaNs are passed over unless a row starts with one): `a` a
    /// float matrix (`ne2 = ne3 = 1`, as ggml requires), result I32 `ne = [ne1]`.
    pub fn argmax(&self, a: TensorId) -> Result<TensorId> {
        let l = self.require_float("argmax", a)?;
        if l.ne[2] != 1 || l.ne[3] != 1 {
            return Err(crate::error::Error::shape("argmax", format!("{:?} is not a matrix", l.ne)));
        }
        if l.ne[0] > i64::from(i32::MAX) {
            return Err(crate::error::Error::shape("argmax", format!("rows of {} values pass I32", l.ne[0])));
        }
        self.new_result(Op::Argmax { a }, DType::I32, [l.ne[1], 1, 1, 1])
    }

    /// How many elements of the I32 tensors `a` and `b` (one shape, any
    /// layout) are equal (ggml's `count_equal`): result I64 `ne = [1, 1, 1, 1]`.
    pub fn count_equal(&self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.same_shape_of("count_equal", DType::I32, a, b)?;
        self.new_result(Op::CountEqual { a, b }, DType::I64, [1, 1, 1, 1])
    }

    /// `-(1/rows) Σ_rows Σ_i labels[i] · log(softmax(logits)[i])` (ggml's
    /// `cross_entropy_loss`): `logits` and `labels` F32 of one shape, each row
    /// a sample (any layout); result F32 `ne = [1, 1, 1, 1]`, computed in f64.
    pub fn cross_entropy_loss(&self, logits: TensorId, labels: TensorId) -> Result<TensorId> {
        self.same_shape_of("cross_entropy_loss", DType::F32, logits, labels)?;
        self.new_result(Op::CrossEntropyLoss { logits, labels }, DType::F32, [1, 1, 1, 1])
    }

    /// The sum of every element of `a` (ggml's `sum`): result `ne = [1, 1, 1,
    /// 1]`, `a`'s type, accumulated in f64 in a fixed order (the same bits on
    /// any thread count).
    pub fn sum(&self, a: TensorId) -> Result<TensorId> {
        let l = self.require_float("sum", a)?;
        self.new_result(Op::Sum { a }, l.dtype, [1, 1, 1, 1])
    }
}

impl Context {
    /// The gradient rules of the reductions and the loss (see [`Context::operand_grads`]).
    pub(super) fn grad_reduce(&self, n: &GradNode, g: TensorId, out: &mut Grads) -> Result<bool> {
        let a = n.x[0];
        match n.op {
            Op::SumRows { .. } | Op::Sum { .. } => out.put(0, || self.repeat(g, a))?,
            Op::Mean { .. } => {
                let rows = self.layout(a)?.ne[0].max(1) as f32;
                out.put(0, || self.scale(self.repeat(g, a)?, 1.0 / rows))?
            }
            Op::CrossEntropyLoss { .. } => {
                if out.wants(1) {
                    return Err(self.no_gradient(n.id, "labels that need a gradient"));
                }
                let rows = self.layout(a)?.nrows().max(1) as f32;
                // d/dlogits = (softmax(logits) − labels) · g / rows
                out.put(0, || self.mul(self.scale(self.sub(self.soft_max(a)?, n.x[1])?, 1.0 / rows)?, g))?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// What the rules above read besides the gradient: the loss's logits and labels.
pub(super) fn saved(n: &GradNode) -> Option<Vec<TensorId>> {
    matches!(n.op, Op::CrossEntropyLoss { .. }).then(|| n.x.to_vec())
}
