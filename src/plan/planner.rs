//! The planner: walks the graph in execution order, gives each new storage
//! root a block from a best-fit free list (or its source's block, in place),
//! and frees each root after its last use. Deterministic.

use std::collections::HashMap;

use crate::id::{IdMap, IdSet};

use super::free_list::FreeList;
use super::lifetimes::Lifetimes;
use super::placement::{Place, Plan, PlanStats};
use super::rules::{NoReuse, ReuseRules};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::tensor::{Tensor, TensorId};

/// Plans graphs into one backend buffer: `reserve` sizes the buffer for the
/// largest graph it is shown (measure mode: no memory is touched), and
/// `alloc_graph` places a graph, refusing one that does not fit.
#[derive(Debug)]
pub struct Allocator<R: ReuseRules> {
    rules: R,
    reserved: usize,
}

impl<R: ReuseRules> Allocator<R> {
    /// An allocator following the backend's `rules`, with nothing reserved.
    pub fn new(rules: R) -> Allocator<R> {
        Allocator { rules, reserved: 0 }
    }
    /// Plans `graph` and grows the reservation to fit it; returns the bytes it needs.
    pub fn reserve(&mut self, ctx: &Context, graph: &Graph) -> Result<usize> {
        let need = self.plan(ctx, graph)?.buffer_size();
        self.reserved = self.reserved.max(need);
        Ok(need)
    }
    /// Bytes reserved so far (the largest graph reserved).
    pub fn reserved(&self) -> usize {
        self.reserved
    }
    /// Places `graph` in the reserved buffer; errors if it needs more than was reserved.
    pub fn alloc_graph(&self, ctx: &Context, graph: &Graph) -> Result<Plan> {
        let plan = self.plan(ctx, graph)?;
        if plan.buffer_size() > self.reserved {
            return Err(Error::Invalid(format!(
                "graph needs a {}-byte buffer but {} bytes are reserved: reserve with this graph (or the largest one) first",
                plan.buffer_size(),
                self.reserved
            )));
        }
        Ok(plan)
    }
    /// Plans `graph` without looking at the reservation.
    pub fn plan(&self, ctx: &Context, graph: &Graph) -> Result<Plan> {
        plan(ctx, graph, &self.rules, true)
    }
    /// The backend rules this allocator follows.
    pub fn rules(&self) -> &R {
        &self.rules
    }
}

impl Plan {
    /// Every computed root of `graph` gets its own aligned range; nothing is
    /// reused or freed.
    pub fn naive(ctx: &Context, graph: &Graph, alignment: usize) -> Result<Plan> {
        plan(ctx, graph, &NoReuse { alignment }, false)
    }
}

/// Plans `graph`. With `reuse` false every root keeps its own range for the whole run.
pub(crate) fn plan(ctx: &Context, graph: &Graph, rules: &dyn ReuseRules, reuse: bool) -> Result<Plan> {
    graph.check_context(ctx)?;
    let align = rules.alignment();
    if !align.is_power_of_two() {
        return Err(Error::Invalid(format!("alignment {align} is not a power of two")));
    }
    let aligned = |t: &Tensor| -> Result<usize> {
        t.layout()
            .nbytes()
            .checked_next_multiple_of(align)
            .ok_or_else(|| Error::Invalid("plan buffer size overflows".into()))
    };
    let lt = Lifetimes::of(ctx, graph)?;
    let n = graph.nodes().len();
    let mut free = FreeList::default();
    let mut places = IdMap::default();
    let mut lifetimes = IdMap::default();
    let mut reused = IdMap::default();
    let mut frees = vec![Vec::new(); n];
    let mut live: IdMap<(usize, usize)> = IdMap::default();
    let mut stats = PlanStats::default();
    let last_step = n.saturating_sub(1);

    for &leaf in graph.leafs() {
        let t = ctx.tensor(leaf)?;
        if ctx.leaf_bytes(leaf).is_some() && !graph.is_external(leaf) {
            places.insert(leaf, Place::Leaf);
            stats.external += t.layout().nbytes();
            if t.flags().input {
                stats.naive += aligned(t)?;
            }
        } else {
            // no data in the context (or computed by another part): an input the caller sets
            let size = aligned(t)?;
            let offset = free.alloc(size);
            places.insert(leaf, Place::Buffer { offset });
            lifetimes.insert(leaf, (0, last_step));
            stats.naive += size;
        }
    }

    for (i, &id) in graph.nodes().iter().enumerate() {
        let t = ctx.tensor(id)?;
        if t.writes_in_place() {
            if let Some(root) = t.view_src() {
                if places.get(&root) == Some(&Place::Leaf) {
                    places.insert(root, Place::LeafCopy);
                }
            }
        }
        if !t.op().is_compute() {
            continue;
        }
        if t.view_src().is_none() {
            let size = aligned(t)?;
            stats.naive += size;
            let taken = if reuse { reusable_source(ctx, rules, &lt, &live, i, t, size)? } else { None };
            let offset = match taken {
                Some(parent) => {
                    let (offset, _) = live.remove(&parent).unwrap_or_default();
                    reused.insert(id, parent);
                    offset
                }
                None => free.alloc(size),
            };
            places.insert(id, Place::Buffer { offset });
            live.insert(id, (offset, size));
            let end = if lt.protected.contains(&id) { last_step } else { lt.last_use.get(&id).copied().unwrap_or(i) };
            lifetimes.insert(id, (i, end));
        }
        if !reuse {
            continue;
        }
        // give back every root whose last use was this step
        let mut touched: Vec<TensorId> = t.src().iter().map(|&s| ctx.storage_root(s)).collect::<Result<_>>()?;
        touched.push(t.view_src().unwrap_or(id));
        touched.sort_unstable();
        touched.dedup();
        for r in touched {
            if lt.last_use.get(&r) == Some(&i) && !lt.protected.contains(&r) {
                if let Some((offset, size)) = live.remove(&r) {
                    free.free(offset, size);
                    frees[i].push((offset, size));
                }
            }
        }
    }
    stats.planned = free.peak();
    stats.lower_bound = lower_bound(n, &lifetimes, &reused, &lt, &places, ctx, align)?;
    let mut retained: IdSet = lt.protected.iter().copied().collect();
    retained.extend(places.iter().filter(|(_, p)| !matches!(p, Place::Buffer { .. })).map(|(&id, _)| id));
    if !reuse {
        retained.extend(places.keys().copied());
    }
    Ok(Plan {
        graph_id: graph.id(),
        graph_revision: graph.revision(),
        alignment: align,
        buffer_size: free.peak(),
        places,
        lifetimes,
        reused,
        frees,
        retained,
        external: graph.leafs().iter().chain(graph.nodes()).copied().filter(|&r| graph.is_external(r)).collect(),
        stats,
    })
}

/// The source root whose block node `id` (step `i`) may take over: the kernel
/// allows it for that slot, the source has `id`'s exact layout over the whole
/// block, this is its last use, it is not protected, and no other source of
/// `id` views the same storage differently.
#[allow(clippy::too_many_arguments)]
fn reusable_source(
    ctx: &Context,
    rules: &dyn ReuseRules,
    lt: &Lifetimes,
    live: &IdMap<(usize, usize)>,
    i: usize,
    t: &Tensor,
    size: usize,
) -> Result<Option<TensorId>> {
    for (slot, &s) in t.src().iter().enumerate() {
        if !rules.may_overwrite_source(&t.op(), slot) {
            continue;
        }
        let st = ctx.tensor(s)?;
        let r = st.view_src().unwrap_or(s);
        let ok = live.get(&r).is_some_and(|&(_, sz)| sz == size)
            && !lt.protected.contains(&r)
            && lt.last_use.get(&r) == Some(&i)
            && st.layout().same_places(t.layout())
            && st.view_offs() == 0;
        if !ok {
            continue;
        }
        let mut others_agree = true;
        for &o in t.src() {
            let ot = ctx.tensor(o)?;
            if ot.view_src().unwrap_or(o) == r
                && !(ot.layout().same_places(st.layout()) && ot.view_offs() == st.view_offs())
            {
                others_agree = false;
            }
        }
        if others_agree {
            return Ok(Some(r));
        }
    }
    Ok(None)
}

/// The most bytes of buffer roots live at one step; a root handed over in
/// place ends the step before its taker starts.
fn lower_bound(
    n: usize,
    lifetimes: &IdMap<(usize, usize)>,
    reused: &IdMap<TensorId>,
    lt: &Lifetimes,
    places: &IdMap<Place>,
    ctx: &Context,
    align: usize,
) -> Result<usize> {
    let handed: HashMap<TensorId, usize> = reused.iter().map(|(node, parent)| (*parent, lt.pos[node])).collect();
    let mut delta = vec![0i64; n + 2];
    for (&root, &(a, b)) in lifetimes {
        if !matches!(places.get(&root), Some(Place::Buffer { .. })) {
            continue;
        }
        let size = ctx.tensor(root)?.layout().nbytes().next_multiple_of(align) as i64;
        let end = handed.get(&root).map_or(b, |&p| p.saturating_sub(1).max(a));
        delta[a] += size;
        delta[end + 1] -= size;
    }
    let (mut cur, mut best) = (0i64, 0i64);
    for d in delta {
        cur += d;
        best = best.max(cur);
    }
    Ok(best as usize)
}
