//! Reductions.

use crate::context::Context;
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

    /// The sum of every element of `a` (ggml's `sum`): result `ne = [1, 1, 1,
    /// 1]`, `a`'s type, accumulated in f64 in a fixed order (the same bits on
    /// any thread count).
    pub fn sum(&self, a: TensorId) -> Result<TensorId> {
        let l = self.require_float("sum", a)?;
        self.new_result(Op::Sum { a }, l.dtype, [1, 1, 1, 1])
    }
}
