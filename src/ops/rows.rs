//! Row gathers.

use super::grad_node::{GradNode, Grads};
use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{Op, TensorId};

impl Context {
    /// ggml's `get_rows(a, b)`: `out[:, i1, i2, i3] = a[:, b[i1, i2, i3], i2, i3]`.
    /// `a` is `[ne0, n_rows, ne2, ne3]` of any type (block types dequantized);
    /// `b` holds I32 row indices, `[n, ne2, ne3]`. The result is F32 (I32 for an
    /// I32 `a`) with `ne = [a.ne0, b.ne0, b.ne1, b.ne2]`. An index outside
    /// `0..n_rows` is an error when the graph runs.
    pub fn get_rows(&self, a: TensorId, b: TensorId) -> Result<TensorId> {
        let (la, lb) = (self.layout(a)?, self.layout(b)?);
        if lb.dtype != DType::I32 {
            return Err(Error::DTypeMismatch {
                what: "get_rows indices".into(),
                expected: DType::I32,
                found: lb.dtype,
            });
        }
        if la.ne[2] != lb.ne[1] || la.ne[3] != lb.ne[2] || lb.ne[3] != 1 {
            return Err(Error::shape(
                "get_rows",
                format!("indices ne={:?} must be [n, a.ne2, a.ne3, 1] for a ne={:?}", lb.ne, la.ne),
            ));
        }
        if la.dtype.is_quantized() && la.block_dim != 0 {
            return Err(Error::NotContiguous { op: "get_rows", ne: la.ne, nb: la.nb, dtype: la.dtype });
        }
        let dtype = if la.dtype == DType::I32 { DType::I32 } else { DType::F32 };
        self.new_result(Op::GetRows { table: a, index: b }, dtype, [la.ne[0], lb.ne[0], lb.ne[1], lb.ne[2]])
    }

    /// ggml's `set_rows(a, b, idx)`: `a[:, idx[i1, i2, i3], i2, i3] = b[:, i1, i2, i3]`,
    /// converting to `a`'s type (quantizing for block types). Writes into `a`'s
    /// storage and returns a view of `a` — the way to store new keys and values
    /// in a KV cache at positions given by a tensor, so that one graph serves
    /// every position. `b` is `[a.ne0, n, a.ne2, a.ne3]`, `idx` I32 `[n, a.ne2, a.ne3]`;
    /// an index outside `0..a.ne1` is an error when the graph runs.
    pub fn set_rows(&self, a: TensorId, b: TensorId, idx: TensorId) -> Result<TensorId> {
        let (la, lb, li) = (self.layout(a)?, self.layout(b)?, self.layout(idx)?);
        if li.dtype != DType::I32 {
            return Err(Error::DTypeMismatch {
                what: "set_rows indices".into(),
                expected: DType::I32,
                found: li.dtype,
            });
        }
        if lb.ne[0] != la.ne[0]
            || lb.ne[2] != la.ne[2]
            || lb.ne[3] != la.ne[3]
            || li.ne[0] != lb.ne[1]
            || li.ne[1] != lb.ne[2]
            || li.ne[2] != lb.ne[3]
            || li.ne[3] != 1
        {
            return Err(Error::shape(
                "set_rows",
                format!("rows ne={:?} and indices ne={:?} do not fit destination ne={:?}", lb.ne, li.ne, la.ne),
            ));
        }
        if la.dtype.is_quantized() && la.block_dim != 0 {
            return Err(Error::NotContiguous { op: "set_rows", ne: la.ne, nb: la.nb, dtype: la.dtype });
        }
        if la.dtype != lb.dtype && la.dtype.is_quantized() && !crate::quant::has_quantizer(la.dtype) {
            // the i-quants have no quantizer
            return Err(Error::Unsupported { op: "set_rows", dtype: la.dtype });
        }
        self.in_place_result(Op::SetRows { dst: a, rows: b, index: idx }, a)
    }
}

impl Context {
    /// The gradient rule of `get_rows` (see [`Context::operand_grads`]).
    pub(super) fn grad_rows(&self, n: &GradNode, g: TensorId, out: &mut Grads) -> Result<bool> {
        let Op::GetRows { .. } = n.op else { return Ok(false) };
        let table = self.layout(n.x[0])?;
        if table.ne[2] != 1 || table.ne[3] != 1 {
            return Err(self.no_gradient(n.id, "a table of more than two dims"));
        }
        out.put(0, || self.get_rows_back(self.packed(g)?, n.x[1], table.ne[1]))?;
        Ok(true)
    }
}

/// What the rule above reads besides the gradient: the indices.
pub(super) fn saved(n: &GradNode) -> Option<Vec<TensorId>> {
    matches!(n.op, Op::GetRows { .. }).then(|| vec![n.x[1]])
}
