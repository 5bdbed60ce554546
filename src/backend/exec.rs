//! The one executor loop: every backend runs a planned graph through it.
//!
//! The loop owns what is the same on every device: the graph's order (program
//! order restricted to the outputs), binding each operand to the region of its
//! storage root, the refusal to write read-only storage, poison mode, and the
//! count of index claims. A backend implements [`Kernels`], one method per op
//! family, and nothing of the loop.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use super::profile::{OpKind, Profile};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::layout::Layout;
use crate::op::{BackOp, BinaryOp, GluOp, Op, RopeParams, UnaryOp};
use crate::plan::{Place, Plan};
use crate::tensor::{Tensor, TensorId};

/// Where one storage root's bytes are during a compute: a backend address
/// (`B`), their length, and whether the compute may write them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Region<B> {
    pub base: B,
    pub len: usize,
    pub writable: bool,
}

/// The region of each storage root of a compute, by arena index: a dense
/// table, since the loop looks up every operand of every node.
#[derive(Debug)]
pub(crate) struct Regions<B> {
    slots: Vec<Option<(TensorId, Region<B>)>>,
    /// Distinct for every table of the process and every change to one:
    /// what [`Bindings`] made from it are valid for.
    revision: u64,
}

/// The next [`Regions::revision`].
fn next_revision() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl<B: Copy + PartialEq> Regions<B> {
    fn new() -> Self {
        Regions { slots: Vec::new(), revision: next_revision() }
    }
    /// Sets root `id`'s region (a new revision if that changes it).
    pub fn insert(&mut self, id: TensorId, r: Region<B>) {
        let i = id.index();
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        if self.slots[i] != Some((id, r)) {
            self.slots[i] = Some((id, r));
            self.revision = next_revision();
        }
    }
}

impl<B> Regions<B> {
    /// This table's revision: a new one for every table and every change.
    pub fn revision(&self) -> u64 {
        self.revision
    }
    /// The region of root `id`.
    pub fn get(&self, id: &TensorId) -> Option<&Region<B>> {
        match self.slots.get(id.index()) {
            Some(Some((k, r))) if k == id => Some(r),
            _ => None,
        }
    }
    /// Every root and its region, in arena order.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))] // a CUDA graph's key
    pub fn iter(&self) -> impl Iterator<Item = (&TensorId, &Region<B>)> {
        self.slots.iter().flatten().map(|(k, r)| (k, r))
    }
}

/// One backend's kernels, one method per op family. `Src` is a read-only
/// operand, `Dst` the node's destination; both are checked to lie inside
/// their region when bound ([`Kernels::src`], [`Kernels::dst`]).
pub(crate) trait Kernels {
    /// A region's address.
    type Base: Copy;
    /// A bound read-only operand.
    type Src: Copy;
    /// A bound destination.
    type Dst;

    /// The tensor `l` at byte `offs` of `r`, to be read.
    fn src(r: &Region<Self::Base>, offs: usize, l: Layout) -> Result<Self::Src>;
    /// The tensor `l` at byte `offs` of `r` (a writable region), to be written.
    fn dst(r: &Region<Self::Base>, offs: usize, l: Layout) -> Result<Self::Dst>;
    /// Poison mode: NaN bytes (0xFF) over `len` bytes of the plan buffer from
    /// `offset` (ranges outside the buffer are ignored).
    fn fill_nan(&mut self, offset: usize, len: usize) -> Result<()>;
    /// After each computed node (a device may recycle its scratch memory).
    fn node_done(&mut self) -> Result<()> {
        Ok(())
    }

    /// `cont`, `dup`, `cpy` (`op` names which): element `i` of `dst` in
    /// logical order takes element `i` of `src`, converting the type.
    fn copy(&mut self, op: &'static str, dst: Self::Dst, src: Self::Src) -> Result<()>;
    /// `dst = a op b`, `b` tiled over `a`.
    fn binary(&mut self, op: BinaryOp, dst: Self::Dst, a: Self::Src, b: Self::Src) -> Result<()>;
    /// `dst = a * s`.
    fn scale(&mut self, s: f32, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// `dst = f(a)`.
    fn unary(&mut self, op: UnaryOp, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// `dst = f(a) * b`.
    fn glu(&mut self, op: GluOp, dst: Self::Dst, a: Self::Src, b: Self::Src) -> Result<()>;
    /// `dst[.., 0] = Σ a[.., i0]`.
    fn sum_rows(&mut self, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// `dst[.., 0] = Σ a[.., i0] / ne0`.
    fn mean(&mut self, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// `dst[i1] = argmax_i0 a[i0, i1]` (the first of equal values).
    fn argmax(&mut self, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// `dst[0] = #{i : a[i] == b[i]}`.
    fn count_equal(&mut self, dst: Self::Dst, a: Self::Src, b: Self::Src) -> Result<()>;
    /// `dst[0] = -(1/rows) Σ labels · log softmax(logits)`.
    fn cross_entropy_loss(&mut self, dst: Self::Dst, logits: Self::Src, labels: Self::Src) -> Result<()>;
    /// `dst[0] = Σ a` (every element).
    fn sum(&mut self, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// ggml's `mul_mat` with weights `a` (the leaf or node `weights`).
    fn mul_mat(&mut self, dst: Self::Dst, a: Self::Src, b: Self::Src, weights: TensorId) -> Result<()>;
    /// ggml's `mul_mat_id`: expert `ids[s, t]` of `a` (the leaf or node
    /// `weights`) times row `(s mod b.ne1, t)` of `b`.
    fn mul_mat_id(
        &mut self,
        dst: Self::Dst,
        a: Self::Src,
        b: Self::Src,
        ids: Self::Src,
        weights: TensorId,
    ) -> Result<()>;
    /// Each row's I32 element indices in value order (ties in index order).
    fn argsort(&mut self, descending: bool, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// Rows of `table` at the I32 `index`.
    fn get_rows(&mut self, dst: Self::Dst, table: Self::Src, index: Self::Src) -> Result<()>;
    /// `rows` into `dst` at the I32 `index`.
    fn set_rows(&mut self, dst: Self::Dst, rows: Self::Src, index: Self::Src) -> Result<()>;
    /// Each row over its root mean square, times the broadcast weight `w` if given.
    fn rms_norm(&mut self, eps: f32, dst: Self::Dst, a: Self::Src, w: Option<Self::Src>) -> Result<()>;
    /// Each row centred and scaled to unit variance.
    fn norm(&mut self, eps: f32, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// Row softmax of `a*scale + slope*mask`, with a head's sink in its rows' denominators.
    fn soft_max(&mut self, p: SoftMax, dst: Self::Dst, a: Self::Src, extra: Extra<Self::Src>) -> Result<()>;
    /// Elements past the causal diagonal set to `-inf`.
    fn diag_mask_inf(&mut self, n_past: i32, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// Rotary embedding at `pos`, with optional frequency factors; `back`:
    /// rotated the other way (the gradient, `rope_back`).
    fn rope(
        &mut self,
        p: &RopeParams,
        back: bool,
        dst: Self::Dst,
        a: Self::Src,
        pos: Self::Src,
        freq: Option<Self::Src>,
    ) -> Result<()>;
    /// `a` and `b` joined along `dim`.
    fn concat(&mut self, dim: usize, dst: Self::Dst, a: Self::Src, b: Self::Src) -> Result<()>;
    /// `a` tiled to `dst`'s shape.
    fn repeat(&mut self, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// Attention of queries over keys and values (`[q, k, v]`), fused.
    fn flash_attn(&mut self, p: SoftMax, dst: Self::Dst, qkv: [Self::Src; 3], extra: Extra<Self::Src>) -> Result<()>;
    /// `a` summed into `dst`'s smaller shape (the elements `repeat` copies from each).
    fn repeat_back(&mut self, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// `dst = g · f'(x)`.
    fn unary_back(&mut self, op: UnaryOp, dst: Self::Dst, x: Self::Src, g: Self::Src) -> Result<()>;
    /// `dst = 0`, then row `i` of `g` added into row `index[i]`.
    fn get_rows_back(&mut self, dst: Self::Dst, g: Self::Src, index: Self::Src) -> Result<()>;
    /// `dst = 0`, then element `i` of `g` at byte `offset + Σ i_k·nb[k]` of `dst`.
    fn view_back(&mut self, nb: [usize; 4], offset: usize, dst: Self::Dst, g: Self::Src) -> Result<()>;
    /// The gradient of `rms_norm(x, eps)` given `g`.
    fn rms_norm_back(&mut self, eps: f32, dst: Self::Dst, x: Self::Src, g: Self::Src) -> Result<()>;
    /// `dst = h0·m + h1·g` (or `g²` with `square`), in F32 steps.
    fn adamw_moment(&mut self, square: bool, dst: Self::Dst, m: Self::Src, g: Self::Src, h: Self::Src) -> Result<()>;
    /// `dst = h0·p − (h1·m) / (sqrt(h2·v) + h3)`, in F32 steps.
    fn adamw_update(&mut self, dst: Self::Dst, pmv: [Self::Src; 3], h: Self::Src) -> Result<()>;
}

/// The optional operands of a softmax (and of attention's): the additive mask and
/// the per-head sinks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Extra<S> {
    pub mask: Option<S>,
    pub sinks: Option<S>,
}

/// `soft_max_ext`'s two parameters.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SoftMax {
    pub scale: f32,
    pub max_bias: f32,
}

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
    pub steps: std::ops::Range<usize>,
}

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
    run_with(k, run, |id, t| fresh_dst::<K>(run, id, t), |id| fresh_src::<K>(run, id))
}

/// [`run`] with the operands bound once, in `b`, and reused by later
/// computes while `run.regions` stays the same.
pub(crate) fn run_bound<K: Kernels>(k: &mut K, run: &Run<'_, K::Base>, b: &mut Bindings<K::Src, K::Dst>) -> Result<()>
where
    K::Dst: Copy,
{
    check_steps(run.graph, &run.steps)?;
    b.bind::<K>(run)?;
    let b = &*b;
    run_with(
        k,
        run,
        |id, t| match b.dst(id) {
            Some(&d) => Ok(d),
            None => fresh_dst::<K>(run, id, t),
        },
        |id| match b.src(id) {
            Some(&s) => Ok(s),
            None => fresh_src::<K>(run, id),
        },
    )
}

/// The loop of [`run`]: each compute node's destination from `dst`, its
/// sources from `src`.
#[inline(always)]
fn run_with<K: Kernels>(
    k: &mut K,
    run: &Run<'_, K::Base>,
    dst: impl Fn(TensorId, &Tensor) -> Result<K::Dst>,
    src: impl Fn(TensorId) -> Result<K::Src>,
) -> Result<()> {
    let mut profile = run.profile.map(|_| Profile::default());
    for (step, &id) in run.graph.nodes().iter().enumerate().take(run.steps.end).skip(run.steps.start) {
        let t = run.ctx.tensor(id)?;
        // by reference: an `Op` is large (rope's parameters), and this runs per node
        let op = &t.op;
        if op.is_compute() {
            let start = profile.as_ref().map(|_| Instant::now());
            node(k, op, dst(id, t)?, &src)?;
            k.node_done()?;
            if let (Some(p), Some(start)) = (profile.as_mut(), start) {
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

/// Node `id` (header `t`) bound as a destination.
#[inline(always)]
fn fresh_dst<K: Kernels>(run: &Run<'_, K::Base>, id: TensorId, t: &Tensor) -> Result<K::Dst> {
    bind(run, id, t, true).and_then(|(r, offs, l)| K::dst(r, offs, l))
}

/// Tensor `id` bound as a source.
#[inline(always)]
fn fresh_src<K: Kernels>(run: &Run<'_, K::Base>, id: TensorId) -> Result<K::Src> {
    bind(run, id, run.ctx.tensor(id)?, false).and_then(|(r, offs, l)| K::src(r, offs, l))
}

/// The operands of the nodes run so far, bound to their regions
/// ([`Kernels::src`], [`Kernels::dst`]) once for every compute while the
/// regions table stays the same: a node's region, offset and layout depend on
/// nothing else (its plan and graph are fixed for the table's life). Tables by
/// arena index; an operand that did not bind is bound again as its node runs,
/// so errors come where [`run`] gives them.
#[derive(Debug)]
pub(crate) struct Bindings<S, D> {
    /// The [`Regions::revision`] these were bound against.
    revision: u64,
    /// By arena index: the position of a tensor's source binding in `srcs`.
    src_at: Vec<u32>,
    srcs: Vec<S>,
    /// By arena index: the position of a node's destination binding in `dsts`.
    dst_at: Vec<u32>,
    dsts: Vec<D>,
    /// By step: whether that node's operands were bound.
    bound: Vec<bool>,
}

impl<S, D> Default for Bindings<S, D> {
    fn default() -> Self {
        Bindings {
            revision: 0,
            src_at: Vec::new(),
            srcs: Vec::new(),
            dst_at: Vec::new(),
            dsts: Vec::new(),
            bound: Vec::new(),
        }
    }
}

/// No binding at this arena index.
const UNBOUND: u32 = u32::MAX;

impl<S: Copy, D: Copy> Bindings<S, D> {
    /// Binds the operands of the nodes at `run.steps` not bound yet (all of
    /// them again if the regions changed).
    fn bind<K: Kernels<Src = S, Dst = D>>(&mut self, run: &Run<'_, K::Base>) -> Result<()> {
        if self.revision != run.regions.revision() {
            *self = Bindings { revision: run.regions.revision(), ..Bindings::default() };
        }
        let nodes = run.graph.nodes();
        self.bound.resize(nodes.len(), false);
        for step in run.steps.clone() {
            if std::mem::replace(&mut self.bound[step], true) {
                continue;
            }
            let id = nodes[step];
            let t = run.ctx.tensor(id)?;
            if !t.op.is_compute() {
                continue;
            }
            if let Ok(d) = fresh_dst::<K>(run, id, t) {
                put(&mut self.dst_at, &mut self.dsts, id, d);
            }
            for &s in t.src() {
                if lookup(&self.src_at, &self.srcs, s).is_none() {
                    if let Ok(b) = fresh_src::<K>(run, s) {
                        put(&mut self.src_at, &mut self.srcs, s, b);
                    }
                }
            }
        }
        Ok(())
    }
    /// Tensor `id` bound as a source, if it was.
    #[inline(always)]
    fn src(&self, id: TensorId) -> Option<&S> {
        lookup(&self.src_at, &self.srcs, id)
    }
    /// Node `id` bound as a destination, if it was.
    #[inline(always)]
    fn dst(&self, id: TensorId) -> Option<&D> {
        lookup(&self.dst_at, &self.dsts, id)
    }
}

/// The binding of `id` in a table of [`Bindings`].
#[inline(always)]
fn lookup<'a, T>(at: &[u32], v: &'a [T], id: TensorId) -> Option<&'a T> {
    at.get(id.index()).and_then(|&i| v.get(i as usize))
}

/// Records `b` as the binding of `id` in a table of [`Bindings`].
fn put<T>(at: &mut Vec<u32>, v: &mut Vec<T>, id: TensorId, b: T) {
    let Ok(pos) = u32::try_from(v.len()) else { return };
    if at.len() <= id.index() {
        at.resize(id.index() + 1, UNBOUND);
    }
    at[id.index()] = pos;
    v.push(b);
}

/// One node's kernel: its operands bound by role.
#[inline(always)]
fn node<K: Kernels>(k: &mut K, op: &Op, dst: K::Dst, src: &impl Fn(TensorId) -> Result<K::Src>) -> Result<()> {
    let opt = |id: Option<TensorId>| id.map(src).transpose();
    match *op {
        Op::Cont { src: a } | Op::Dup { src: a } | Op::Cpy { src: a, .. } | Op::Transfer { src: a, .. } => {
            k.copy(op.name(), dst, src(a)?)
        }
        Op::Binary { op, a, b } => k.binary(op, dst, src(a)?, src(b)?),
        Op::Scale { a, s } => k.scale(s, dst, src(a)?),
        Op::Unary { op, a } => k.unary(op, dst, src(a)?),
        Op::Glu { op, a, b } => k.glu(op, dst, src(a)?, src(b)?),
        Op::SumRows { a } => k.sum_rows(dst, src(a)?),
        Op::Sum { a } => k.sum(dst, src(a)?),
        Op::Mean { a } => k.mean(dst, src(a)?),
        Op::Argmax { a } => k.argmax(dst, src(a)?),
        Op::CountEqual { a, b } => k.count_equal(dst, src(a)?, src(b)?),
        Op::CrossEntropyLoss { logits, labels } => k.cross_entropy_loss(dst, src(logits)?, src(labels)?),
        Op::MulMat { a, b } => k.mul_mat(dst, src(a)?, src(b)?, a),
        Op::MulMatId { a, b, ids } => k.mul_mat_id(dst, src(a)?, src(b)?, src(ids)?, a),
        Op::Argsort { a, descending } => k.argsort(descending, dst, src(a)?),
        Op::GetRows { table, index } => k.get_rows(dst, src(table)?, src(index)?),
        Op::SetRows { rows, index, .. } => k.set_rows(dst, src(rows)?, src(index)?),
        Op::RmsNorm { a, eps, w } => k.rms_norm(eps, dst, src(a)?, opt(w)?),
        Op::Norm { a, eps } => k.norm(eps, dst, src(a)?),
        Op::SoftMax { a, mask, scale, max_bias, sinks } => {
            k.soft_max(SoftMax { scale, max_bias }, dst, src(a)?, Extra { mask: opt(mask)?, sinks: opt(sinks)? })
        }
        Op::DiagMaskInf { a, n_past } => k.diag_mask_inf(n_past, dst, src(a)?),
        Op::Rope { a, pos, freq, ref p } => k.rope(p, false, dst, src(a)?, src(pos)?, opt(freq)?),
        Op::Back(BackOp::RopeBack { g, pos, freq, ref p }) => k.rope(p, true, dst, src(g)?, src(pos)?, opt(freq)?),
        Op::Concat { a, b, dim } => k.concat(dim, dst, src(a)?, src(b)?),
        Op::Repeat { a } => k.repeat(dst, src(a)?),
        Op::FlashAttn { q, k: keys, v, mask, scale, max_bias, sinks } => {
            let extra = Extra { mask: opt(mask)?, sinks: opt(sinks)? };
            k.flash_attn(SoftMax { scale, max_bias }, dst, [src(q)?, src(keys)?, src(v)?], extra)
        }
        Op::Back(BackOp::RepeatBack { a }) => k.repeat_back(dst, src(a)?),
        Op::Back(BackOp::UnaryBack { op, x, g }) => k.unary_back(op, dst, src(x)?, src(g)?),
        Op::Back(BackOp::GetRowsBack { g, index }) => k.get_rows_back(dst, src(g)?, src(index)?),
        Op::Back(BackOp::RmsNormBack { x, g, eps }) => k.rms_norm_back(eps, dst, src(x)?, src(g)?),
        Op::Back(BackOp::AdamwMoment { m, g, h, square }) => k.adamw_moment(square, dst, src(m)?, src(g)?, src(h)?),
        Op::Back(BackOp::AdamwUpdate { p, m, v, h }) => k.adamw_update(dst, [src(p)?, src(m)?, src(v)?], src(h)?),
        Op::Back(BackOp::ViewBack { g, nb, offset }) => k.view_back(nb, offset, dst, src(g)?),
        Op::Leaf
        | Op::View { .. }
        | Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Permute { .. }
        | Op::Expand { .. } => Err(Error::internal(format!("{} has no kernel", op.name()))),
    }
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

/// The region of every storage root `graph` touches: a leaf's from
/// `leaf(id, place)` (`Place::Leaf` or `Place::LeafCopy`), a buffer root's at
/// `buffer(offset)`, checked to lie in the `buf_len`-byte plan buffer.
pub(crate) fn regions<B: Copy + PartialEq>(
    ctx: &Context,
    graph: &Graph,
    plan: &Plan,
    buf_len: usize,
    mut leaf: impl FnMut(TensorId, Place) -> Result<Region<B>>,
    buffer: impl Fn(usize) -> B,
) -> Result<Regions<B>> {
    let mut out = Regions::new();
    for &id in graph.leafs().iter().chain(graph.nodes()) {
        let t = ctx.tensor(id)?;
        if t.view_src().is_some() {
            continue;
        }
        let size = t.layout().nbytes();
        let region = match plan.place(id) {
            Some(p @ (Place::Leaf | Place::LeafCopy)) => leaf(id, p)?,
            Some(Place::Buffer { offset }) if offset.checked_add(size).is_some_and(|e| e <= buf_len) => {
                Region { base: buffer(offset), len: size, writable: true }
            }
            Some(Place::Buffer { offset }) => {
                return Err(Error::internal(format!(
                    "{} placed at {offset}+{size} outside the {buf_len}-byte buffer",
                    ctx.label(id)
                )))
            }
            None => return Err(Error::internal(format!("{} has no place in the plan", ctx.label(id)))),
        };
        out.insert(id, region);
    }
    Ok(out)
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
