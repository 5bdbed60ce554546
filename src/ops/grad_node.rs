//! What a gradient rule (beside each op's constructor) reads and builds.

use crate::error::Result;
use crate::tensor::{Op, TensorId};

/// A node of the forward graph as its gradient rule sees it: its id (the
/// output), its op, and its operands resolved to the values they read.
pub(crate) struct GradNode<'a> {
    /// The node (its output).
    pub id: TensorId,
    /// Its op.
    pub op: Op,
    /// Its operands, in source order.
    pub x: &'a [TensorId],
}

/// The operand gradients a rule builds, for the slots the backward pass wants.
pub(crate) struct Grads<'a> {
    wants: &'a dyn Fn(usize) -> bool,
    out: Vec<(usize, TensorId)>,
}

impl<'a> Grads<'a> {
    /// No gradients yet, for the slots `wants` names.
    pub(crate) fn new(wants: &'a dyn Fn(usize) -> bool) -> Grads<'a> {
        Grads { wants, out: Vec::new() }
    }
    /// `(operand slot, gradient)` of every slot built.
    pub(crate) fn into_grads(self) -> Vec<(usize, TensorId)> {
        self.out
    }
    /// Whether operand `slot` needs a gradient.
    pub(crate) fn wants(&self, slot: usize) -> bool {
        (self.wants)(slot)
    }
    /// Builds operand `slot`'s gradient with `f` if it needs one.
    pub(crate) fn put(&mut self, slot: usize, f: impl FnOnce() -> Result<TensorId>) -> Result<()> {
        if self.wants(slot) {
            self.out.push((slot, f()?));
        }
        Ok(())
    }
}
