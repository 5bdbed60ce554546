//! Copies: `cont`, `dup` (new contiguous tensors) and `cpy` (into an existing
//! tensor, converting the type). These are the priced data movements.

use super::grad_node::{GradNode, Grads};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::tensor::{Op, TensorId};

impl Context {
    /// A contiguous copy of `a` (same type and shape). This is the explicit,
    /// priced copy that turns a strided view into packed rows.
    pub fn cont(&self, a: TensorId) -> Result<TensorId> {
        let l = self.copyable("cont", a)?;
        self.new_result(Op::Cont { src: a }, l.dtype, l.ne)
    }
    /// A contiguous copy of `a` with a new shape of the same element count
    /// (ggml's `cont_4d`): the copy runs in `a`'s logical order.
    pub fn cont_reshape(&self, a: TensorId, ne: &[i64]) -> Result<TensorId> {
        let l = self.copyable("cont", a)?;
        if ne.is_empty() || ne.len() > 4 {
            return Err(Error::shape("cont", format!("1 to 4 dims, got {}", ne.len())));
        }
        let mut ne4 = [1i64; 4];
        ne4[..ne.len()].copy_from_slice(ne);
        if ne4.iter().try_fold(1i64, |acc, &n| if n < 0 { None } else { acc.checked_mul(n) }) != Some(l.nelements()) {
            return Err(Error::shape("cont", format!("cannot copy ne={:?} into shape {ne:?}", l.ne)));
        }
        self.new_result(Op::Cont { src: a }, l.dtype, ne4)
    }
    /// A new contiguous copy of `a` converted to `dtype` (ggml's `cast`):
    /// F32, F16, BF16 or a block type with a quantizer, dequantizing out of
    /// a block type. The copy runs in `a`'s logical order, as [`Context::cpy`].
    pub fn cast(&self, a: TensorId, dtype: crate::dtype::DType) -> Result<TensorId> {
        let l = self.copyable("cast", a)?;
        if dtype.is_quantized() && !crate::quant::has_quantizer(dtype) || !(dtype.is_float() || dtype.is_quantized()) {
            return Err(Error::Unsupported { op: "cast", dtype });
        }
        if dtype.is_quantized() && l.ne[0] % dtype.block_size() as i64 != 0 {
            return Err(Error::shape(
                "cast",
                format!("rows of {} values into blocks of {}", l.ne[0], dtype.block_size()),
            ));
        }
        self.new_result(Op::Cont { src: a }, dtype, l.ne)
    }
    /// A new contiguous copy of `a` (ggml's `dup`).
    pub fn dup(&self, a: TensorId) -> Result<TensorId> {
        let l = self.copyable("dup", a)?;
        self.new_result(Op::Dup { src: a }, l.dtype, l.ne)
    }
    /// Copies `a` into `b`'s bytes, converting between F32, F16, BF16 and the
    /// block types (quantizing into a quantized `b`, dequantizing out of a
    /// quantized `a`), and returns a view of `b`. Both must hold the same number of elements; values
    /// go across in logical (row-major, `ne[0]` fastest) order, so the shapes may
    /// differ. `b` may be any non-overlapping strided view (e.g. a KV-cache slot).
    /// Converting into a type without a quantizer (the i-quants IQ1_S … IQ3_S,
    /// see [`crate::quant::has_quantizer`]) is [`Error::Unsupported`].
    pub fn cpy(&self, a: TensorId, b: TensorId) -> Result<TensorId> {
        let la = self.copyable("cpy", a)?;
        let lb = self.copyable("cpy", b)?;
        if la.dtype != lb.dtype && lb.dtype.is_quantized() && !crate::quant::has_quantizer(lb.dtype) {
            return Err(Error::Unsupported { op: "cpy", dtype: lb.dtype });
        }
        if la.nelements() != lb.nelements() {
            return Err(Error::shape(
                "cpy",
                format!("{} elements (ne={:?}) into {} (ne={:?})", la.nelements(), la.ne, lb.nelements(), lb.ne),
            ));
        }
        self.in_place_result(Op::Cpy { src: a, dst: b }, b)
    }

    /// Copies take every type: values convert through f32 (quantized on the
    /// way into a block type, dequantized on the way out, integers rounded).
    fn copyable(&self, _op: &'static str, a: TensorId) -> Result<crate::layout::Layout> {
        self.layout(a)
    }
}

impl Context {
    /// The gradient rules of the copies: the gradient passes to the source, in its
    /// shape (see [`Context::operand_grads`]).
    pub(super) fn grad_copy(&self, n: &GradNode, g: TensorId, out: &mut Grads) -> Result<bool> {
        if !matches!(n.op, Op::Cont { .. } | Op::Dup { .. } | Op::Cpy { .. }) {
            return Ok(false);
        }
        // a copy into another shape (`cont_reshape`, `cpy`) runs in logical order: the
        // gradient goes back reshaped
        let ne = self.layout(n.x[0])?.ne;
        out.put(0, || if self.layout(g)?.ne == ne { Ok(g) } else { self.reshape(self.packed(g)?, &ne) })?;
        Ok(true)
    }
}
