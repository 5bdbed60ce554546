//! Binding a node's operands to the regions of their storage roots: as the
//! node runs ([`fresh_dst`], [`fresh_src`]), or once for every compute while
//! the regions stay the same ([`Bindings`]).

use std::ops::Range;
use std::sync::Mutex;

use super::kernels::Kernels;
use super::regions::{Region, Regions};
use crate::backend::profile::Profile;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::layout::Layout;
use crate::op::Op;
use crate::plan::Plan;
use crate::tensor::{Tensor, TensorId};

/// One compute's nodes and where their storage roots are.
pub(crate) struct Run<'a, B> {
    pub ctx: &'a Context,
    pub graph: &'a Graph,
    pub regions: &'a Regions<B>,
    /// Poison mode: the plan whose freed ranges are refilled with NaN after each step.
    pub poison: Option<&'a Plan>,
    /// Where to add each node's wall time, if profiling.
    pub profile: Option<&'a Mutex<Profile>>,
    /// The positions in the graph's node list to run.
    pub steps: Range<usize>,
}

/// Node `id` (header `t`) bound as a destination.
#[inline(always)]
pub(super) fn fresh_dst<K: Kernels>(run: &Run<'_, K::Base>, id: TensorId, t: &Tensor) -> Result<K::Dst> {
    bind(run, id, t, true).and_then(|(r, offs, l)| K::dst(r, offs, l))
}

/// Tensor `id` bound as a source.
#[inline(always)]
pub(super) fn fresh_src<K: Kernels>(run: &Run<'_, K::Base>, id: TensorId) -> Result<K::Src> {
    bind(run, id, run.ctx.tensor(id)?, false).and_then(|(r, offs, l)| K::src(r, offs, l))
}

/// The region, byte offset and layout of tensor `id` (header `t`) during a compute.
#[inline(always)]
fn bind<'a, B>(run: &Run<'a, B>, id: TensorId, t: &Tensor, write: bool) -> Result<(&'a Region<B>, usize, Layout)> {
    let root = t.view_src().unwrap_or(id);
    let r = run
        .regions
        .get(&root)
        .ok_or_else(|| Error::internal(format!("{} has no place in the plan", run.ctx.label(root))))?;
    if write && !r.writable {
        return Err(Error::internal(format!(
            "{} would write the read-only storage of {}",
            run.ctx.label(id),
            run.ctx.label(root)
        )));
    }
    Ok((r, t.view_offs(), *t.layout()))
}

/// Where a running node's kernel takes its sources from.
pub(super) trait Operands<S> {
    /// Source `id` bound.
    fn src(&self, id: TensorId) -> Result<S>;
}

/// Sources bound as their node runs.
pub(super) struct Fresh<'r, 'a, K: Kernels> {
    pub run: &'r Run<'a, K::Base>,
}

impl<K: Kernels> Operands<K::Src> for Fresh<'_, '_, K> {
    #[inline(always)]
    fn src(&self, id: TensorId) -> Result<K::Src> {
        fresh_src::<K>(self.run, id)
    }
}

/// The sources of a bound step.
pub(super) struct Bound<'r, 'a, K: Kernels> {
    pub run: &'r Run<'a, K::Base>,
    pub b: &'r Bindings<K::Src, K::Dst>,
    pub step: &'r Step<K::Dst>,
}

// Inlined into every role of every op (the executor's `node`): a source
// returned through memory by a call is reloaded wider than it was stored,
// which stalls on store forwarding, once per operand of every node.
impl<K: Kernels> Operands<K::Src> for Bound<'_, '_, K> {
    #[inline(always)]
    fn src(&self, id: TensorId) -> Result<K::Src> {
        let (lo, hi) = self.step.srcs;
        let ops = self.b.operands.get(lo as usize..hi as usize).unwrap_or_default();
        match ops.iter().find(|(i, _)| *i == id) {
            Some(&(_, s)) => Ok(s),
            None => unlisted::<K>(self.run, id),
        }
    }
}

/// A source its step did not list, bound now (never, for ops whose operands
/// are their sources).
#[cold]
#[inline(never)]
fn unlisted<K: Kernels>(run: &Run<'_, K::Base>, id: TensorId) -> Result<K::Src> {
    fresh_src::<K>(run, id)
}

/// A compute node bound once: a copy of its op (ops never change once built)
/// and its operands, so that running it reads this table alone, in step order,
/// and not the node's header in the context.
#[derive(Clone, Copy, Debug)]
pub(super) struct Step<D> {
    pub op: Op,
    pub dst: D,
    /// Its sources' bindings in [`Bindings::operands`].
    pub srcs: (u32, u32),
}

/// What [`Bindings`] knows of one step.
#[derive(Clone, Copy, Debug)]
pub(super) enum Slot<D> {
    /// Not bound yet.
    Unbound,
    /// A node that runs no kernel (a view, a leaf).
    Idle,
    /// An operand did not bind: bound again as the node runs, so that its error
    /// comes where an unbound run gives it.
    Fresh,
    /// Bound.
    Bound(Step<D>),
}

/// The nodes run so far, bound to their regions ([`Kernels::src`],
/// [`Kernels::dst`]) once for every compute while the regions table stays the
/// same: a node's region, offset and layout depend on nothing else (its plan
/// and graph are fixed for the table's life).
#[derive(Debug)]
pub(crate) struct Bindings<S, D> {
    /// The [`Regions::revision`] these were bound against.
    revision: u64,
    /// By step.
    slots: Vec<Slot<D>>,
    /// Every bound step's sources, a step's side by side.
    operands: Vec<(TensorId, S)>,
}

impl<S, D> Default for Bindings<S, D> {
    fn default() -> Self {
        Bindings { revision: 0, slots: Vec::new(), operands: Vec::new() }
    }
}

impl<S: Copy, D: Copy> Bindings<S, D> {
    /// Binds the nodes at `run.steps` not bound yet (all of them again if the
    /// regions changed).
    pub(super) fn bind<K: Kernels<Src = S, Dst = D>>(&mut self, run: &Run<'_, K::Base>) -> Result<()> {
        if self.revision != run.regions.revision() {
            *self = Bindings { revision: run.regions.revision(), ..Bindings::default() };
        }
        let nodes = run.graph.nodes();
        self.slots.resize(nodes.len(), Slot::Unbound);
        for step in run.steps.clone() {
            if matches!(self.slots[step], Slot::Unbound) {
                self.slots[step] = self.bind_step::<K>(run, nodes[step])?;
            }
        }
        Ok(())
    }

    /// The slot of node `id`, its sources added to `operands` if it binds.
    fn bind_step<K: Kernels<Src = S, Dst = D>>(&mut self, run: &Run<'_, K::Base>, id: TensorId) -> Result<Slot<D>> {
        let t = run.ctx.tensor(id)?;
        if !t.op.is_compute() {
            return Ok(Slot::Idle);
        }
        let first = self.operands.len();
        let pushed = self.push_sources::<K>(run, t);
        let (Ok(()), Ok(dst), Ok(start), Ok(end)) =
            (pushed, fresh_dst::<K>(run, id, t), u32::try_from(first), u32::try_from(self.operands.len()))
        else {
            self.operands.truncate(first);
            return Ok(Slot::Fresh);
        };
        Ok(Slot::Bound(Step { op: t.op, dst, srcs: (start, end) }))
    }

    /// Node `t`'s sources bound, appended to `operands` (up to the first that
    /// does not bind).
    fn push_sources<K: Kernels<Src = S, Dst = D>>(&mut self, run: &Run<'_, K::Base>, t: &Tensor) -> Result<()> {
        for &s in t.src() {
            self.operands.push((s, fresh_src::<K>(run, s)?));
        }
        Ok(())
    }

    /// What is known of step `step` (bound by [`Bindings::bind`] first).
    #[inline(always)]
    pub(super) fn slot(&self, step: usize) -> &Slot<D> {
        self.slots.get(step).unwrap_or(&Slot::Unbound)
    }
}
