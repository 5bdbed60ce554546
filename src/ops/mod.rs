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
mod grad_node;
mod matmul;
mod norm;
mod promote;
mod reduce;
mod rope;
mod rows;
mod shape;
mod softmax;
mod sort;
mod transfer;
mod view;

use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::tensor::{Op, Tensor, TensorId};
pub(crate) use grad_node::{GradNode, Grads};

/// A family's gradient rules: true when the family owns the node's op.
type GradRule = fn(&Context, &GradNode, TensorId, &mut Grads) -> Result<bool>;

impl Context {
    /// The gradients of `n`'s operands given `g`, the gradient of its output:
    /// `(operand slot, gradient)` for every slot `wants` names. Each op's rule
    /// lives beside its constructor; an op no family claims has no gradient.
    pub(crate) fn operand_grads(
        &self,
        n: &GradNode,
        g: TensorId,
        wants: &dyn Fn(usize) -> bool,
    ) -> Result<Vec<(usize, TensorId)>> {
        const RULES: [GradRule; 11] = [
            Context::grad_view,
            Context::grad_shape,
            Context::grad_copy,
            Context::grad_elementwise,
            Context::grad_glu,
            Context::grad_reduce,
            Context::grad_mul_mat,
            Context::grad_rows,
            Context::grad_norm,
            Context::grad_softmax,
            Context::grad_rope,
        ];
        let mut out = Grads::new(wants);
        for rule in RULES {
            if rule(self, n, g, &mut out)? {
                return Ok(out.into_grads());
            }
        }
        Err(self.no_gradient(n.id, "no gradient rule yet"))
    }

    /// The values `n`'s gradient rule reads besides the gradient (operands or
    /// the output): what an in-place write must not overwrite before the
    /// backward pass runs.
    pub(crate) fn saved_for_backward(&self, n: &GradNode) -> Vec<TensorId> {
        let families = [elementwise::saved, glu::saved, reduce::saved, matmul::saved, rows::saved, norm::saved]
            .into_iter()
            .chain([softmax::saved, rope::saved]);
        families.into_iter().find_map(|saved| saved(n)).unwrap_or_default()
    }

    /// `d` (the gradient of `like`'s broadcast) summed into `like`'s shape,
    /// or `d` itself when the shapes agree.
    fn sum_to(&self, d: TensorId, like: TensorId) -> Result<TensorId> {
        let (ld, ll) = (self.layout(d)?, self.layout(like)?);
        if ld.ne == ll.ne {
            Ok(d)
        } else {
            self.repeat_back(d, ll.ne)
        }
    }

    /// `g`, copied into a packed tensor unless it is one.
    fn packed(&self, g: TensorId) -> Result<TensorId> {
        if self.layout(g)?.is_contiguous() {
            Ok(g)
        } else {
            self.cont(g)
        }
    }

    /// The error for node `id`, whose op has no gradient (`why`).
    fn no_gradient(&self, id: TensorId, why: &str) -> Error {
        let op = self.tensor(id).map(|t| t.op().name()).unwrap_or("?");
        Error::Invalid(format!("backward: {op} ({}) has no gradient: {why}", self.label(id)))
    }

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

    /// The layout of `a`, which must be of type `dtype` with `b`'s shape and type.
    fn same_shape_of(&self, op: &'static str, dtype: DType, a: TensorId, b: TensorId) -> Result<Layout> {
        let (la, lb) = (self.layout(a)?, self.layout(b)?);
        if let Some(l) = [&la, &lb].into_iter().find(|l| l.dtype != dtype) {
            return Err(Error::Unsupported { op, dtype: l.dtype });
        }
        if la.ne != lb.ne {
            return Err(Error::shape(op, format!("{:?} against {:?}", la.ne, lb.ne)));
        }
        Ok(la)
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
