//! Backward graphs: [`Context::backward`] adds to the context the nodes that
//! compute the gradient of a scalar loss with respect to parameter tensors,
//! as ggml's `ggml_build_backward_expand` does, and [`optim`] the optimizer
//! steps that use them. The gradient nodes are ordinary ops (the forward ops
//! and the gradient ops of [`crate::op::BackOp`]), so one graph holds forward,
//! backward and step, and the planner places them together.
//!
//! Program order makes in-place ops well defined on a static graph; it also
//! means a gradient node built after an in-place write reads the written
//! value. The `hazard` module refuses, when the backward graph is built, every graph
//! where that would give a wrong gradient (see `docs/DESIGN.md`).

mod hazard;
pub mod optim;
mod versions;

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::TensorId;
use versions::{Node, Versions};

/// The gradient nodes of one [`Context::backward`] call.
#[derive(Clone, Debug)]
pub struct Gradients {
    /// The gradient of the loss with respect to itself: a one-element F32
    /// leaf. In a context that allocates it holds 1; in a `no_alloc` context
    /// it is an input the caller sets to 1 before each run.
    pub seed: TensorId,
    grads: HashMap<TensorId, TensorId>,
}

impl Gradients {
    /// The gradient of the loss with respect to `param` (`param`'s shape,
    /// F32), or `None` when the loss does not depend on it.
    pub fn get(&self, param: TensorId) -> Option<TensorId> {
        self.grads.get(&param).copied()
    }
}

impl Context {
    /// Builds the gradient of the scalar F32 `loss` with respect to each of
    /// `params` (F32 tensors, usually leaves marked with
    /// [`Context::set_param`]): the nodes are added to this context, and
    /// [`Gradients::get`] names each parameter's gradient. A tensor used
    /// several times gets the sum of its uses' gradients.
    ///
    /// Errors, before adding anything that runs, with
    /// [`Error::InPlaceHazard`] when an in-place op makes a gradient wrong
    /// (an in-place write to a parameter; to a value the backward pass reads
    /// after the write; a partial in-place write on the path to the loss), and
    /// with [`Error::Invalid`] for an op on the path without a gradient rule.
    pub fn backward(&mut self, loss: TensorId, params: &[TensorId]) -> Result<Gradients> {
        let l = self.layout(loss)?;
        if l.dtype != DType::F32 || l.nelements() != 1 {
            return Err(Error::Invalid(format!(
                "backward: the loss {} must be one F32 value (ne={:?}, {:?})",
                self.label(loss),
                l.ne,
                l.dtype
            )));
        }
        for &p in params {
            let lp = self.layout(p)?;
            if lp.dtype != DType::F32 {
                return Err(Error::Invalid(format!(
                    "backward: parameter {} is {:?}; gradients are F32 (freeze it, or keep an F32 copy)",
                    self.label(p),
                    lp.dtype
                )));
            }
        }
        let versions = Versions::new(self);
        let nodes = path(self, &versions, loss, params)?;
        hazard::check(self, &versions, &nodes, loss, params)?;
        let seed = if self.is_no_alloc() {
            let seed = self.new_tensor(DType::F32, &[1])?;
            self.set_input(seed)?;
            seed
        } else {
            self.new_f32(&[1], &[1.0])?
        };
        let grads = self.accumulate(&nodes, loss, seed)?;
        let grads = params.iter().filter_map(|&p| grads.get(&p).map(|&g| (p, g))).collect();
        Ok(Gradients { seed, grads })
    }

    /// Walks `nodes` from the loss back, adding each node's operand gradients
    /// (summed where an operand is used more than once).
    fn accumulate(
        &self,
        nodes: &BTreeMap<usize, Node>,
        loss: TensorId,
        seed: TensorId,
    ) -> Result<HashMap<TensorId, TensorId>> {
        let mut grads: HashMap<TensorId, TensorId> = HashMap::from([(loss, seed)]);
        let on_path: HashSet<TensorId> = nodes.values().map(|n| n.id).collect();
        for node in nodes.values().rev() {
            let Some(&g) = grads.get(&node.id) else { continue };
            let wants = |slot: usize| node.operands.get(slot).is_some_and(|o| on_path.contains(o));
            let t = self.tensor(node.id)?;
            if t.op().is_leaf() {
                continue;
            }
            let n = crate::ops::GradNode { id: node.id, op: t.op(), x: &node.operands };
            for (slot, dg) in self.operand_grads(&n, g, &wants)? {
                let operand = node.operands[slot];
                let sum = match grads.get(&operand) {
                    Some(&prev) => self.add(prev, dg)?,
                    None => dg,
                };
                grads.insert(operand, sum);
            }
        }
        Ok(grads)
    }
}

/// The nodes on a path from a parameter to the loss, by index, their operands
/// resolved to the values they read. Errors if a parameter is not in the
/// context or comes after the loss.
fn path(ctx: &Context, versions: &Versions, loss: TensorId, params: &[TensorId]) -> Result<BTreeMap<usize, Node>> {
    // every node the loss reads, with resolved operands
    let mut reached: BTreeMap<usize, Node> = BTreeMap::new();
    let mut stack = vec![loss];
    while let Some(id) = stack.pop() {
        if reached.contains_key(&id.index()) {
            continue;
        }
        let t = ctx.tensor(id)?;
        let operands = t.src().iter().map(|&s| versions.resolve(ctx, s, id)).collect::<Result<Vec<_>>>()?;
        stack.extend(operands.iter().copied());
        reached.insert(id.index(), Node { id, operands });
    }
    // those that depend on a parameter, in program order
    let mut depends: HashSet<TensorId> = params.iter().copied().collect();
    for n in reached.values() {
        if n.operands.iter().any(|o| depends.contains(o)) {
            depends.insert(n.id);
        }
    }
    Ok(reached.into_iter().filter(|(_, n)| depends.contains(&n.id)).collect())
}
