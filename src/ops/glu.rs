//! Gated linear units (ggml's `glu` ops): `f(a) * b` elementwise, the gated
//! FFN of Llama-style (`swiglu`) and Gemma (`geglu`) models, in one kernel.

use super::grad_node::{GradNode, Grads};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::op::{GluOp, Op};
use crate::tensor::TensorId;
use crate::tensor::UnaryOp;

impl Context {
    /// ggml's `glu_split`: `f(a) * b` for `f` = [`GluOp`]'s function. `a` and
    /// `b` are F32, F16 or BF16 of one shape and type, any strides; the result
    /// is a new contiguous tensor of `a`'s shape and type.
    pub fn glu_split(&self, op: GluOp, a: TensorId, b: TensorId) -> Result<TensorId> {
        let la = self.require_float(op.name(), a)?;
        let lb = self.require_float(op.name(), b)?;
        if la.ne != lb.ne {
            return Err(Error::shape(
                op.name(),
                format!("a ne={:?} and b ne={:?} must be the same shape", la.ne, lb.ne),
            ));
        }
        if la.dtype != lb.dtype {
            return Err(Error::DTypeMismatch { what: format!("{} b", op.name()), expected: la.dtype, found: lb.dtype });
        }
        self.new_result(Op::Glu { op, a, b }, la.dtype, la.ne)
    }

    /// ggml's `glu`: each row of `a` (an even `ne0`) split in halves, `f` of
    /// the first half times the second (`swapped`: `f` of the second times
    /// the first). The halves are views of `a` (no copy); the result has
    /// `ne0 / 2` values per row.
    pub fn glu(&self, op: GluOp, a: TensorId, swapped: bool) -> Result<TensorId> {
        let l = self.require_float(op.name(), a)?;
        if l.ne[0] % 2 != 0 {
            return Err(Error::shape(op.name(), format!("ne0 of a ne={:?} must be even to split it in halves", l.ne)));
        }
        let half = [l.ne[0] / 2, l.ne[1], l.ne[2], l.ne[3]];
        let nb = [l.nb[1], l.nb[2], l.nb[3]];
        let first = self.view_4d(a, half, nb, 0)?;
        let second = self.view_4d(a, half, nb, half[0] as usize * l.nb[0])?;
        let (gate, up) = if swapped { (second, first) } else { (first, second) };
        self.glu_split(op, gate, up)
    }

    /// `silu(a) * b` (ggml's `swiglu_split`).
    pub fn swiglu_split(&self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.glu_split(GluOp::Swiglu, a, b)
    }
    /// `gelu(a) * b`, the f16-rounded tanh GELU of [`Context::gelu`] (ggml's `geglu_split`).
    pub fn geglu_split(&self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.glu_split(GluOp::Geglu, a, b)
    }
    /// [`Context::glu`] with `silu` (ggml's `swiglu`).
    pub fn swiglu(&self, a: TensorId) -> Result<TensorId> {
        self.glu(GluOp::Swiglu, a, false)
    }
    /// [`Context::glu`] with `gelu` (ggml's `geglu`).
    pub fn geglu(&self, a: TensorId) -> Result<TensorId> {
        self.glu(GluOp::Geglu, a, false)
    }
}

impl Context {
    /// The gradient rule of the gated linear units (see [`Context::operand_grads`]).
    pub(super) fn grad_glu(&self, n: &GradNode, g: TensorId, out: &mut Grads) -> Result<bool> {
        let Op::Glu { op, .. } = n.op else { return Ok(false) };
        let (a, b) = (n.x[0], n.x[1]);
        let f = match op {
            GluOp::Swiglu => UnaryOp::Silu,
            GluOp::Geglu => UnaryOp::Gelu,
            GluOp::SwigluOai => return Err(self.no_gradient(n.id, "swiglu_oai")),
        };
        out.put(0, || self.unary_back(f, a, self.mul(g, b)?))?;
        out.put(1, || self.mul(g, self.unary(f, a, false)?))?;
        Ok(true)
    }
}

/// What the rule above reads besides the gradient: both inputs.
pub(super) fn saved(n: &GradNode) -> Option<Vec<TensorId>> {
    matches!(n.op, Op::Glu { .. }).then(|| n.x.to_vec())
}
