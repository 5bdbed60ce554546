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
}
