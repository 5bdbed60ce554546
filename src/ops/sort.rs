//! Sorting: `argsort`, and `top_k` composed from it.

use super::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{Op, TensorId};

impl Context {
    /// ggml's `argsort(a, order)`: the I32 indices of each row's elements in
    /// ascending (or, with `descending`, descending) order of value; equal values
    /// keep their index order. `a` is F32, F16 or BF16; the result has its shape.
    pub fn argsort(&self, a: TensorId, descending: bool) -> Result<TensorId> {
        let l = self.require_float("argsort", a)?;
        if l.ne[0] > i64::from(i32::MAX) {
            return Err(Error::shape("argsort", format!("rows of {} elements exceed I32 indices", l.ne[0])));
        }
        self.new_result(Op::Argsort { a, descending }, DType::I32, l.ne)
    }

    /// ggml's `top_k(a, k)`: the I32 indices of each row's `k` largest values,
    /// largest first — a view of the first `k` columns of the descending
    /// [`Context::argsort`] (the rest of the sort is computed too, as in ggml).
    pub fn top_k(&self, a: TensorId, k: i64) -> Result<TensorId> {
        let l = self.layout(a)?;
        if k < 1 || k > l.ne[0] {
            return Err(Error::shape("top_k", format!("k={k} outside 1..={} (a ne={:?})", l.ne[0], l.ne)));
        }
        let sorted = self.argsort(a, true)?;
        let s = self.layout(sorted)?;
        self.view_4d(sorted, [k, s.ne[1], s.ne[2], s.ne[3]], [s.nb[1], s.nb[2], s.nb[3]], 0)
    }
}
