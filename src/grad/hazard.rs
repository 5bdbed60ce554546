//! In-place hazards, refused when the backward graph is built. A gradient
//! node runs after every node built before it, so it reads each saved value
//! as the last write left it. Three cases would give a wrong gradient:
//!
//! 1. an in-place write to a parameter (a leaf that needs a gradient) built
//!    before the loss: the forward pass would not compute the function of the
//!    parameter the gradient is taken for (PyTorch refuses it too);
//! 2. an in-place write, built after a node, to a value that node's gradient
//!    reads (saved for backward: `y = silu(x); x += 1`);
//! 3. an in-place node whose own gradient reads the value it overwrites
//!    (`sqr_inplace(x)` needs the old `x`).
//!
//! In-place ops on values nothing saves stay allowed, as in PyTorch. Writes
//! by the optimizer steps of [`super::optim`], built after the backward graph,
//! are not in the forward pass.

use std::collections::BTreeMap;

use super::versions::{Node, Versions};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::tensor::TensorId;

/// Errors with [`Error::InPlaceHazard`] on the first hazard of `nodes`.
pub(crate) fn check(
    ctx: &Context,
    versions: &Versions,
    nodes: &BTreeMap<usize, Node>,
    loss: TensorId,
    params: &[TensorId],
) -> Result<()> {
    for &p in params {
        if let Some(&w) = versions.writes_between(ctx, p, loss.index())?.first() {
            return Err(Error::InPlaceHazard(format!(
                "the in-place {} ({}) writes {}, a parameter that needs a gradient; write a copy, or update \
                 it in an optimizer step after the backward graph",
                ctx.tensor(w)?.op().name(),
                ctx.label(w),
                ctx.label(p)
            )));
        }
    }
    for n in nodes.values() {
        let t = ctx.tensor(n.id)?;
        for saved in ctx.saved_for_backward(&crate::ops::GradNode { id: n.id, op: t.op(), x: &n.operands }) {
            // the node's own write counts for its operands, not for its output
            let counts = |w: &TensorId| w.index() > n.id.index() || (w.index() == n.id.index() && saved != n.id);
            let Some(w) = versions.writes_between(ctx, saved, usize::MAX)?.into_iter().find(counts) else {
                continue;
            };
            let (op, w_op) = (ctx.tensor(n.id)?.op().name(), ctx.tensor(w)?.op().name());
            let why = if w == n.id {
                format!(
                    "the in-place {op} ({}) overwrites {}, which its own gradient reads",
                    ctx.label(w),
                    ctx.label(saved)
                )
            } else {
                format!(
                    "the in-place {w_op} ({}) overwrites {}, which {op} ({}) saved for the backward pass",
                    ctx.label(w),
                    ctx.label(saved),
                    ctx.label(n.id)
                )
            };
            return Err(Error::InPlaceHazard(why));
        }
    }
    Ok(())
}
