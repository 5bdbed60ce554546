//! Ops that rearrange values into a new contiguous tensor: `concat`, `repeat`.

use super::grad_node::{GradNode, Grads};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::tensor::{Op, TensorId};

impl Context {
    /// ggml's `concat`: `a` and `b` joined along `dim` (0..4). Both must have
    /// the same type (any plain type: F32, F16, BF16, I8, I16, I32; values are
    /// copied bit for bit) and the same size in every other dim; any strides.
    /// The result is contiguous with `a`'s type and
    /// `ne[dim] = a.ne[dim] + b.ne[dim]`.
    pub fn concat(&self, a: TensorId, b: TensorId, dim: usize) -> Result<TensorId> {
        let (la, lb) = (self.layout(a)?, self.layout(b)?);
        if dim >= 4 {
            return Err(Error::Invalid(format!("concat: dim must be 0..4, got {dim}")));
        }
        if la.dtype != lb.dtype {
            return Err(Error::DTypeMismatch { what: "concat: b".into(), expected: la.dtype, found: lb.dtype });
        }
        if la.dtype.is_quantized() {
            return Err(Error::Unsupported { op: "concat", dtype: la.dtype });
        }
        if (0..4).any(|d| d != dim && la.ne[d] != lb.ne[d]) {
            return Err(Error::shape(
                "concat",
                format!("a ne={:?} and b ne={:?} must agree in every dim but {dim}", la.ne, lb.ne),
            ));
        }
        let mut ne = la.ne;
        ne[dim] =
            la.ne[dim].checked_add(lb.ne[dim]).ok_or_else(|| Error::shape("concat", format!("ne[{dim}] overflows")))?;
        self.new_result(Op::Concat { a, b, dim }, la.dtype, ne)
    }

    /// ggml's `repeat`: `a` tiled to `b`'s shape (only `b`'s shape is used, `b`
    /// is not a source). Needs ggml's `can_repeat(a, b)`: every `b.ne[i]` a
    /// multiple of `a.ne[i]`. `a` may be any plain type with any strides
    /// (values copied bit for bit); the result is contiguous with `a`'s type.
    pub fn repeat(&self, a: TensorId, b: TensorId) -> Result<TensorId> {
        let (la, lb) = (self.layout(a)?, self.layout(b)?);
        if la.dtype.is_quantized() {
            return Err(Error::Unsupported { op: "repeat", dtype: la.dtype });
        }
        if !la.can_repeat(&lb) {
            return Err(Error::shape(
                "repeat",
                format!("a ne={:?} does not tile b ne={:?}: each b.ne[i] must be a multiple of a.ne[i]", la.ne, lb.ne),
            ));
        }
        self.new_result(Op::Repeat { a }, la.dtype, lb.ne)
    }
}

impl Context {
    /// The gradient rules of `repeat` and `concat` (see [`Context::operand_grads`]).
    pub(super) fn grad_shape(&self, n: &GradNode, g: TensorId, out: &mut Grads) -> Result<bool> {
        match n.op {
            Op::Repeat { .. } => out.put(0, || self.repeat_back(g, self.layout(n.x[0])?.ne))?,
            Op::Concat { dim, .. } => {
                let (la, lg) = (self.layout(n.x[0])?, self.layout(g)?);
                let nb = [lg.nb[1], lg.nb[2], lg.nb[3]];
                let mut ne_b = lg.ne;
                ne_b[dim] -= la.ne[dim];
                out.put(0, || self.view_4d(g, la.ne, nb, 0))?;
                out.put(1, || self.view_4d(g, ne_b, nb, la.ne[dim] as usize * lg.nb[dim]))?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}
