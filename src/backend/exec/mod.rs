//! The one executor loop: every backend runs a planned graph through it.
//!
//! The loop owns what is the same on every device: the graph's order (program
//! order restricted to the outputs), binding each operand to the region of its
//! storage root, the refusal to write read-only storage, poison mode, and the
//! count of index claims. A backend implements [`Kernels`], one method per op
//! family, and nothing of the loop.

mod bindings;
mod kernels;
mod regions;

use std::time::Instant;

use super::profile::{OpKind, Profile};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::op::{BackOp, Op};
use crate::plan::{Place, Plan};
use crate::tensor::TensorId;
use bindings::{fresh_dst, Bound, Fresh, Operands, Slot};

pub(crate) use bindings::{Bindings, Run};
pub(crate) use kernels::{Extra, Kernels, SoftMax};
pub(crate) use regions::{regions, Region, Regions};

/// `steps` checked against `graph`'s node list.
pub(crate) fn check_steps(graph: &Graph, steps: &std::ops::Range<usize>) -> Result<()> {
    if steps.start > steps.end || steps.end > graph.nodes().len() {
        return Err(Error::Invalid(format!(
            "steps {}..{} of a graph of {} nodes",
            steps.start,
            steps.end,
            graph.nodes().len()
        )));
    }
    Ok(())
}

/// Runs the graph's nodes at `run.steps`, in order, on `k`, binding every
/// operand to its region as its node runs.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))] // the CPU keeps its bindings (`run_bound`)
pub(crate) fn run<K: Kernels>(k: &mut K, run: &Run<'_, K::Base>) -> Result<()> {
    check_steps(run.graph, &run.steps)?;
    let nodes = run.graph.nodes();
    run_with(k, run, |k, step| run_fresh(k, run, nodes[step]))
}

/// [`run`] with the nodes bound once, in `b`, and reused by later computes
/// while `run.regions` stays the same.
pub(crate) fn run_bound<K: Kernels>(k: &mut K, run: &Run<'_, K::Base>, b: &mut Bindings<K::Src, K::Dst>) -> Result<()>
where
    K::Dst: Copy,
{
    check_steps(run.graph, &run.steps)?;
    b.bind::<K>(run)?;
    let b = &*b;
    let nodes = run.graph.nodes();
    run_with(k, run, |k, step| match b.slot(step) {
        Slot::Bound(s) => {
            node(k, &s.op, s.dst, &Bound::<K> { run, b, step: s })?;
            Ok(true)
        }
        Slot::Idle => Ok(false),
        Slot::Fresh | Slot::Unbound => run_fresh(k, run, nodes[step]),
    })
}

/// Node `id` run with its operands bound now; false if it runs no kernel.
#[inline(always)]
fn run_fresh<K: Kernels>(k: &mut K, run: &Run<'_, K::Base>, id: TensorId) -> Result<bool> {
    let t = run.ctx.tensor(id)?;
    if !t.op.is_compute() {
        return Ok(false);
    }
    node(k, &t.op, fresh_dst::<K>(run, id, t)?, &Fresh::<K> { run })?;
    Ok(true)
}

/// The loop of [`run`]: `one(k, step)` runs the node at `step` of the graph's
/// list and says whether it ran a kernel; around it, the profile and poison mode.
#[inline(always)]
fn run_with<K: Kernels>(
    k: &mut K,
    run: &Run<'_, K::Base>,
    mut one: impl FnMut(&mut K, usize) -> Result<bool>,
) -> Result<()> {
    let mut profile = run.profile.map(|_| Profile::default());
    let nodes = run.graph.nodes();
    for step in run.steps.clone() {
        let start = profile.as_ref().map(|_| Instant::now());
        if one(k, step)? {
            k.node_done()?;
            if let (Some(p), Some(start)) = (profile.as_mut(), start) {
                let op = run.ctx.tensor(nodes[step])?.op;
                let weight = op.weight().and_then(|w| run.ctx.tensor(w).ok()).map(|w| w.layout().dtype);
                p.add(OpKind { op: op.name(), weight }, start.elapsed());
            }
        }
        if let Some(plan) = run.poison {
            for &(offset, len) in plan.freed_after(step) {
                k.fill_nan(offset, len)?;
            }
        }
    }
    if let (Some(into), Some(p)) = (run.profile, profile) {
        into.lock().unwrap_or_else(|e| e.into_inner()).merge(&p);
    }
    Ok(())
}

/// One node's kernel: its operands bound by role.
#[inline(always)]
fn node<K: Kernels>(k: &mut K, op: &Op, dst: K::Dst, o: &impl Operands<K::Src>) -> Result<()> {
    let opt = |id: Option<TensorId>| id.map(|i| o.src(i)).transpose();
    match *op {
        Op::Cont { src: a } | Op::Dup { src: a } | Op::Cpy { src: a, .. } | Op::Transfer { src: a, .. } => {
            k.copy(op.name(), dst, o.src(a)?)
        }
        Op::Binary { op, a, b } => k.binary(op, dst, o.src(a)?, o.src(b)?),
        Op::Scale { a, s } => k.scale(s, dst, o.src(a)?),
        Op::Unary { op, a } => k.unary(op, dst, o.src(a)?),
        Op::Glu { op, a, b } => k.glu(op, dst, o.src(a)?, o.src(b)?),
        Op::SumRows { a } => k.sum_rows(dst, o.src(a)?),
        Op::Sum { a } => k.sum(dst, o.src(a)?),
        Op::Mean { a } => k.mean(dst, o.src(a)?),
        Op::Argmax { a } => k.argmax(dst, o.src(a)?),
        Op::CountEqual { a, b } => k.count_equal(dst, o.src(a)?, o.src(b)?),
        Op::CrossEntropyLoss { logits, labels } => k.cross_entropy_loss(dst, o.src(logits)?, o.src(labels)?),
        Op::MulMat { a, b } => k.mul_mat(dst, o.src(a)?, o.src(b)?, a),
        Op::MulMatId { a, b, ids } => k.mul_mat_id(dst, o.src(a)?, o.src(b)?, o.src(ids)?, a),
        Op::Argsort { a, descending } => k.argsort(descending, dst, o.src(a)?),
        Op::GetRows { table, index } => k.get_rows(dst, o.src(table)?, o.src(index)?),
        Op::SetRows { rows, index, .. } => k.set_rows(dst, o.src(rows)?, o.src(index)?),
        Op::RmsNorm { a, eps, w } => k.rms_norm(eps, dst, o.src(a)?, opt(w)?),
        Op::Norm { a, eps } => k.norm(eps, dst, o.src(a)?),
        Op::SoftMax { a, mask, scale, max_bias, sinks } => {
            k.soft_max(SoftMax { scale, max_bias }, dst, o.src(a)?, Extra { mask: opt(mask)?, sinks: opt(sinks)? })
        }
        Op::DiagMaskInf { a, n_past } => k.diag_mask_inf(n_past, dst, o.src(a)?),
        Op::Rope { a, pos, freq, ref p } => k.rope(p, false, dst, o.src(a)?, o.src(pos)?, opt(freq)?),
        Op::Back(BackOp::RopeBack { g, pos, freq, ref p }) => k.rope(p, true, dst, o.src(g)?, o.src(pos)?, opt(freq)?),
        Op::Concat { a, b, dim } => k.concat(dim, dst, o.src(a)?, o.src(b)?),
        Op::Repeat { a } => k.repeat(dst, o.src(a)?),
        Op::FlashAttn { q, k: keys, v, mask, scale, max_bias, sinks } => {
            let extra = Extra { mask: opt(mask)?, sinks: opt(sinks)? };
            k.flash_attn(SoftMax { scale, max_bias }, dst, [o.src(q)?, o.src(keys)?, o.src(v)?], extra)
        }
        Op::Back(BackOp::RepeatBack { a }) => k.repeat_back(dst, o.src(a)?),
        Op::Back(BackOp::UnaryBack { op, x, g }) => k.unary_back(op, dst, o.src(x)?, o.src(g)?),
        Op::Back(BackOp::GetRowsBack { g, index }) => k.get_rows_back(dst, o.src(g)?, o.src(index)?),
        Op::Back(BackOp::RmsNormBack { x, g, eps }) => k.rms_norm_back(eps, dst, o.src(x)?, o.src(g)?),
        Op::Back(BackOp::AdamwMoment { m, g, h, square }) => {
            k.adamw_moment(square, dst, o.src(m)?, o.src(g)?, o.src(h)?)
        }
        Op::Back(BackOp::AdamwUpdate { p, m, v, h }) => {
            k.adamw_update(dst, [o.src(p)?, o.src(m)?, o.src(v)?], o.src(h)?)
        }
        Op::Back(BackOp::ViewBack { g, nb, offset }) => k.view_back(nb, offset, dst, o.src(g)?),
        Op::Leaf
        | Op::View { .. }
        | Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Permute { .. }
        | Op::Expand { .. } => Err(Error::internal(format!("{} has no kernel", op.name()))),
    }
}

/// Poison mode before a run: NaN bytes over the whole plan buffer of
/// `capacity` bytes except the inputs placed in it.
pub(crate) fn poison_all<K: Kernels>(
    k: &mut K,
    ctx: &Context,
    graph: &Graph,
    plan: &Plan,
    capacity: usize,
) -> Result<()> {
    let mut keep: Vec<(usize, usize)> = Vec::new();
    for &leaf in graph.leafs() {
        if let Some(Place::Buffer { offset }) = plan.place(leaf) {
            keep.push((offset, ctx.tensor(leaf)?.layout().nbytes()));
        }
    }
    keep.sort_unstable();
    let mut at = 0;
    for (o, n) in keep.into_iter().chain([(capacity, 0)]) {
        if o > at {
            k.fill_nan(at, o.min(capacity) - at)?;
        }
        at = at.max(o + n);
    }
    Ok(())
}

/// The rows of destination the graph's index ops claim (`None`: no node reads
/// indices), for a device that checks them after the run ([`Op::index_claims`]).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))] // only a device checks claims afterwards
pub(crate) fn index_claims(ctx: &Context, graph: &Graph) -> Result<Option<usize>> {
    let mut claims = None;
    for &id in graph.nodes() {
        let t = ctx.tensor(id)?;
        if let Some(n) = t.op().index_claims(t.layout()) {
            claims = Some(claims.unwrap_or(0) + n);
        }
    }
    Ok(claims)
}
