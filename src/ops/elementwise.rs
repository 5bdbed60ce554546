//! Elementwise ops: binary (`add`, `sub`, `mul`, `div` with ggml's tiling
//! broadcast), `scale`, and the unary functions; each with an `_inplace` twin
//! that writes into its first input and returns a view of it.

use super::grad_node::{GradNode, Grads};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::tensor::{BinaryOp, Op, TensorId, UnaryOp};

impl Context {
    /// `a op b` with `b` tiled over `a`: in every dim `a.ne[i] % b.ne[i] == 0`,
    /// and `b` is read at index `i % b.ne[i]`. The result has `a`'s shape and
    /// type, or with [`Context::promote`] on the two types' promoted one.
    pub fn binary(&self, op: BinaryOp, a: TensorId, b: TensorId, inplace: bool) -> Result<TensorId> {
        let (a, b) = self.promoted_pair(op.name(), a, b, inplace)?;
        let la = self.require_float(op.name(), a)?;
        let lb = self.require_float(op.name(), b)?;
        if !lb.can_repeat(&la) {
            return Err(Error::shape(
                op.name(),
                format!(
                    "b (ne={:?}) does not tile a (ne={:?}): each a.ne[i] must be a multiple of b.ne[i]",
                    lb.ne, la.ne
                ),
            ));
        }
        if inplace {
            self.in_place_result(Op::Binary { op, a, b }, a)
        } else {
            self.new_result(Op::Binary { op, a, b }, la.dtype, la.ne)
        }
    }
    /// `a + b` (b broadcast by tiling).
    pub fn add(&self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(BinaryOp::Add, a, b, false)
    }
    /// `a += b`, returns a view of `a`.
    pub fn add_inplace(&self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(BinaryOp::Add, a, b, true)
    }
    /// `a - b` (b broadcast by tiling).
    pub fn sub(&self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(BinaryOp::Sub, a, b, false)
    }
    /// `a -= b`, returns a view of `a`.
    pub fn sub_inplace(&self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(BinaryOp::Sub, a, b, true)
    }
    /// `a * b` (b broadcast by tiling).
    pub fn mul(&self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(BinaryOp::Mul, a, b, false)
    }
    /// `a *= b`, returns a view of `a`.
    pub fn mul_inplace(&self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(BinaryOp::Mul, a, b, true)
    }
    /// `a / b` (b broadcast by tiling).
    pub fn div(&self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(BinaryOp::Div, a, b, false)
    }
    /// `a /= b`, returns a view of `a`.
    pub fn div_inplace(&self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(BinaryOp::Div, a, b, true)
    }

    /// `a * s`.
    pub fn scale(&self, a: TensorId, s: f32) -> Result<TensorId> {
        let a = self.promoted_single(a, false)?;
        let l = self.require_float("scale", a)?;
        self.new_result(Op::Scale { a, s }, l.dtype, l.ne)
    }
    /// `a *= s`, returns a view of `a`.
    pub fn scale_inplace(&self, a: TensorId, s: f32) -> Result<TensorId> {
        self.require_float("scale", a)?;
        self.in_place_result(Op::Scale { a, s }, a)
    }

    /// `f(a)` elementwise.
    pub fn unary(&self, op: UnaryOp, a: TensorId, inplace: bool) -> Result<TensorId> {
        let a = self.promoted_single(a, inplace)?;
        let l = self.require_float(op.name(), a)?;
        if inplace {
            self.in_place_result(Op::Unary { op, a }, a)
        } else {
            self.new_result(Op::Unary { op, a }, l.dtype, l.ne)
        }
    }
}

macro_rules! unary_ops {
    ($($name:ident, $inplace:ident, $op:ident, $doc:literal;)*) => {
        impl Context {
            $(
                #[doc = $doc]
                pub fn $name(&self, a: TensorId) -> Result<TensorId> {
                    self.unary(UnaryOp::$op, a, false)
                }
                #[doc = concat!($doc, " In place: returns a view of `a`.")]
                pub fn $inplace(&self, a: TensorId) -> Result<TensorId> {
                    self.unary(UnaryOp::$op, a, true)
                }
            )*
        }
    };
}

unary_ops! {
    relu, relu_inplace, Relu, "`max(a, 0)`.";
    gelu, gelu_inplace, Gelu, "GELU (tanh approximation, as ggml).";
    silu, silu_inplace, Silu, "`a * sigmoid(a)`.";
    neg, neg_inplace, Neg, "`-a`.";
    sqr, sqr_inplace, Sqr, "`a * a`.";
    sqrt, sqrt_inplace, Sqrt, "`sqrt(a)`.";
    exp, exp_inplace, Exp, "`exp(a)`.";
    sigmoid, sigmoid_inplace, Sigmoid, "`1 / (1 + exp(-a))`.";
}

impl Context {
    /// The gradient rules of the binary, scale and unary ops (see [`Context::operand_grads`]).
    pub(super) fn grad_elementwise(&self, n: &GradNode, g: TensorId, out: &mut Grads) -> Result<bool> {
        let y = n.id;
        match n.op {
            Op::Binary { op, .. } => {
                let (a, b) = (n.x[0], n.x[1]);
                match op {
                    BinaryOp::Add => {
                        out.put(0, || Ok(g))?;
                        out.put(1, || self.sum_to(g, b))?
                    }
                    BinaryOp::Sub => {
                        out.put(0, || Ok(g))?;
                        out.put(1, || self.sum_to(self.neg(g)?, b))?
                    }
                    BinaryOp::Mul => {
                        out.put(0, || self.mul(g, b))?;
                        out.put(1, || self.sum_to(self.mul(g, a)?, b))?
                    }
                    BinaryOp::Div => {
                        out.put(0, || self.div(g, b))?;
                        out.put(1, || self.sum_to(self.neg(self.div(self.mul(g, y)?, b)?)?, b))?
                    }
                }
            }
            Op::Scale { s, .. } => out.put(0, || self.scale(g, s))?,
            Op::Unary { op, .. } => out.put(0, || match op {
                // relu' is 1 where the output is positive: read the output, so relu_inplace keeps a gradient
                UnaryOp::Relu => self.unary_back(op, y, g),
                UnaryOp::Gelu | UnaryOp::Silu | UnaryOp::Sqr | UnaryOp::Sigmoid => self.unary_back(op, n.x[0], g),
                UnaryOp::Neg => self.neg(g),
                UnaryOp::Sqrt => self.div(self.scale(g, 0.5)?, y),
                UnaryOp::Exp => self.mul(g, y),
            })?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// What the rules above read besides the gradient (see [`Context::saved_for_backward`]).
pub(super) fn saved(n: &GradNode) -> Option<Vec<TensorId>> {
    Some(match n.op {
        Op::Binary { op: BinaryOp::Mul, .. } => n.x.to_vec(),
        Op::Binary { op: BinaryOp::Div, .. } => vec![n.x[1], n.id],
        Op::Unary { op: UnaryOp::Gelu | UnaryOp::Silu | UnaryOp::Sqr | UnaryOp::Sigmoid, .. } => vec![n.x[0]],
        Op::Unary { op: UnaryOp::Relu | UnaryOp::Sqrt | UnaryOp::Exp, .. } => vec![n.id],
        _ => return None,
    })
}
