//! The values a node of the forward graph reads, as the backward pass sees
//! them: operands resolved through in-place writes.

use std::collections::HashMap;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::tensor::TensorId;

/// A node of the forward graph as the backward pass sees it: its operands
/// resolved to the values they read ([`Versions`]).
pub(crate) struct Node {
    pub id: TensorId,
    pub operands: Vec<TensorId>,
}

/// Which node produced the value an operand reads. An operand is a tensor id,
/// but its storage may have been written in place after that id was made: a
/// node built later reads the written value (program order). The value is then
/// the latest in-place write that covers the same bytes; a write that covers
/// part of them has no gradient rule and is refused.
pub(crate) struct Versions {
    /// In-place writers per storage root, in program order.
    writers: HashMap<TensorId, Vec<TensorId>>,
}

impl Versions {
    pub(crate) fn new(ctx: &Context) -> Versions {
        let mut writers: HashMap<TensorId, Vec<TensorId>> = HashMap::new();
        for (id, t) in ctx.tensors() {
            if let (true, Some(root)) = (t.writes_in_place(), t.view_src()) {
                writers.entry(root).or_default().push(id);
            }
        }
        Versions { writers }
    }

    /// The in-place writers of `id`'s storage built after `id` and before
    /// index `before` whose bytes overlap `id`'s, in program order.
    pub(crate) fn writes_between(&self, ctx: &Context, id: TensorId, before: usize) -> Result<Vec<TensorId>> {
        let t = ctx.tensor(id)?;
        let root = t.view_src().unwrap_or(id);
        let mut out = Vec::new();
        for &w in self.writers.get(&root).into_iter().flatten() {
            if w.index() <= id.index() || w.index() >= before {
                continue;
            }
            let wt = ctx.tensor(w)?;
            if wt.layout().overlap(wt.view_offs(), t.layout(), t.view_offs()) != crate::layout::Overlap::None {
                out.push(w);
            }
        }
        Ok(out)
    }

    /// The node whose value `operand` holds when `reader` reads it.
    pub(crate) fn resolve(&self, ctx: &Context, operand: TensorId, reader: TensorId) -> Result<TensorId> {
        let Some(&w) = self.writes_between(ctx, operand, reader.index())?.last() else { return Ok(operand) };
        let (wt, t) = (ctx.tensor(w)?, ctx.tensor(operand)?);
        if wt.layout().overlap(wt.view_offs(), t.layout(), t.view_offs()) == crate::layout::Overlap::Same {
            Ok(w)
        } else {
            Err(Error::InPlaceHazard(format!(
                "{} ({}) reads {}, which the in-place {} ({}) wrote in part before it: no gradient flows \
                 through a partial in-place write",
                ctx.tensor(reader)?.op().name(),
                ctx.label(reader),
                ctx.label(operand),
                wt.op().name(),
                ctx.label(w)
            )))
        }
    }
}
