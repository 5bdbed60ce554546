//! The operands of a binary, `scale` or unary op under type promotion
//! ([`Context::promote`]): each operand the kernel would otherwise convert
//! implicitly becomes an explicit `cast` node, so the conversion is priced
//! in the graph and the result's type does not depend on operand order.

use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::TensorId;

impl Context {
    /// `(a, b)` as the binary op `op` reads them under promotion: unchanged
    /// with promotion off; else `a` cast to the promoted type (unless in place:
    /// the destination keeps its type) and `b` cast to it when it is not a
    /// float the kernel reads (a quantized or integer `b`).
    pub(super) fn promoted_pair(
        &self,
        op: &'static str,
        a: TensorId,
        b: TensorId,
        inplace: bool,
    ) -> Result<(TensorId, TensorId)> {
        if !self.promotes() {
            return Ok((a, b));
        }
        let (ta, tb) = (self.layout(a)?.dtype, self.layout(b)?.dtype);
        let to = computable(op, ta.promote(tb))?;
        let a = if inplace || ta == to { a } else { self.cast(a, to)? };
        let b = if tb.is_float() { b } else { self.cast(b, to)? };
        Ok((a, b))
    }

    /// `a` as `scale` or a unary op reads it under promotion: cast to F32
    /// when it is not a float (a scalar never raises a type, but an integer
    /// or quantized tensor computes as F32, PyTorch's default float).
    pub(super) fn promoted_single(&self, a: TensorId, inplace: bool) -> Result<TensorId> {
        let t = self.layout(a)?.dtype;
        if !self.promotes() || t.is_float() || inplace {
            return Ok(a);
        }
        self.cast(a, DType::F32)
    }
}

/// `to`, or the error for a promoted type rgml's f32 kernels cannot compute in.
fn computable(op: &'static str, to: DType) -> Result<DType> {
    if to.is_float() {
        Ok(to)
    } else {
        Err(Error::Unsupported { op, dtype: to })
    }
}
