//! Op constructors: each is a small method on [`Context`] that
//! checks its inputs, sets the result's shape, strides and sources, and nothing
//! else. No op touches data here. They take `&self` (the context's arena is
//! append-only), so ops nest: `ctx.cont(ctx.transpose(a)?)?`; the arguments
//! are made first, which is program order.

mod attention;
mod back;
mod copy;
mod elementwise;
mod glu;
mod matmul;
mod norm;
mod reduce;
mod rope;
mod rows;
mod shape;
mod softmax;
mod view;

use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::tensor::{Op, Tensor, TensorId};

impl Context {
    /// A new contiguous result of `op` with type `dtype` and shape `ne`.
    fn new_result(&self, op: Op, dtype: DType, ne: [i64; 4]) -> Result<TensorId> {
        let layout = Layout::contiguous(dtype, ne)?;
        self.push(Tensor::new(layout, op))
    }

    /// The result of `op` written into `target`'s bytes (same layout): the
    /// `_inplace` ops and `cpy`. Returns a view of `target`.
    fn in_place_result(&self, op: Op, target: TensorId) -> Result<TensorId> {
        let t = self.tensor(target)?;
        let (layout, root, offs) = (t.layout, t.view_src.unwrap_or(target), t.view_offs);
        let mut r = Tensor::new(layout, op);
        r.view_src = Some(root);
        r.view_offs = offs;
        self.push(r)
    }

    /// Errors unless `dtype` is F32, F16 or BF16.
    fn require_float(&self, op: &'static str, id: TensorId) -> Result<Layout> {
        let l = self.layout(id)?;
        if l.dtype.is_float() {
            Ok(l)
        } else {
            Err(Error::Unsupported { op, dtype: l.dtype })
        }
    }
}
