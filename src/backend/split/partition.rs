//! How a graph is cut for a split run: each compute node is given a backend,
//! runs of consecutive nodes on one backend become parts ([`Graph::part`]),
//! and each part learns which roots it must receive before it runs and which
//! it leaves for later parts.

use crate::backend::traits::Backend;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::id::{IdMap, IdSet};
use crate::plan::Plan;
use crate::tensor::TensorId;

/// Where a leaf's home is: the index of a backend, or no preference.
pub type LeafHome = dyn Fn(&Context, TensorId) -> Option<usize> + Send + Sync;

/// One part of a split graph: consecutive compute nodes on one backend.
#[derive(Debug)]
pub(crate) struct Part {
    /// Index of the backend that runs it.
    pub(crate) backend: usize,
    /// Its nodes, as a graph of their own.
    pub(crate) graph: Graph,
    /// Its plan on its backend.
    pub(crate) plan: Plan,
    /// Roots computed or written by other parts (or leaves another part
    /// owns), copied in before the part runs.
    pub(crate) external: Vec<TensorId>,
    /// Roots the part computes or writes.
    pub(crate) writes: Vec<TensorId>,
}

/// A graph cut into parts, in execution order.
#[derive(Debug)]
pub(crate) struct Partition {
    pub(crate) graph_id: u64,
    pub(crate) graph_revision: u32,
    pub(crate) parts: Vec<Part>,
    /// Written leaves: the part whose storage keeps the leaf's state (its
    /// first writer).
    pub(crate) owners: IdMap<usize>,
}

/// The backend of each compute node of `graph`, in order: the home of the
/// first leaf it reads or writes that has one (weights pull their products,
/// a cache its writes), else that of the root it writes in place, else that
/// wanted by the node before it (the first: backend 0); a backend that cannot
/// run the node hands it to the next one that can.
fn assign<B: Backend>(ctx: &Context, graph: &Graph, backends: &[B], home: &LeafHome) -> Result<Vec<(TensorId, usize)>> {
    let mut of_root: IdMap<usize> = IdMap::default();
    let mut out = Vec::with_capacity(graph.nodes().len());
    let mut prev = 0;
    for &id in graph.nodes() {
        let t = ctx.tensor(id)?;
        if !t.op().is_compute() {
            continue;
        }
        let mut want = None;
        for r in t.view_src().into_iter().chain(t.src().iter().copied()) {
            let r = ctx.storage_root(r)?;
            if ctx.tensor(r)?.op().is_leaf() {
                if let Some(b) = home(ctx, r).filter(|&b| b < backends.len()) {
                    want = Some(b);
                    break;
                }
            }
        }
        let want = want.or_else(|| t.view_src().and_then(|r| of_root.get(&r).copied())).unwrap_or(prev);
        let b =
            (want..backends.len()).chain(0..want).find(|&b| backends[b].supports_node(ctx, id)).ok_or_else(|| {
                Error::Invalid(format!("no backend of the split runs {} ({})", ctx.label(id), t.op().name()))
            })?;
        of_root.entry(t.view_src().unwrap_or(id)).or_insert(b);
        out.push((id, b));
        // a node handed on does not take its successors along
        prev = want;
    }
    Ok(out)
}

/// Cuts `graph` for `backends` and plans every part on its backend.
pub(crate) fn partition<B: Backend>(
    ctx: &Context,
    graph: &Graph,
    backends: &[B],
    home: &LeafHome,
) -> Result<Partition> {
    let assigned = assign(ctx, graph, backends, home)?;
    let mut runs: Vec<(usize, Vec<TensorId>)> = Vec::new();
    for (id, b) in assigned {
        match runs.last_mut() {
            Some((rb, nodes)) if *rb == b => nodes.push(id),
            _ => runs.push((b, vec![id])),
        }
    }
    // per part: the roots it touches, computes, and writes
    let mut touched: Vec<IdSet> = Vec::with_capacity(runs.len());
    let mut computed: Vec<IdSet> = Vec::with_capacity(runs.len());
    let mut written: Vec<Vec<TensorId>> = Vec::with_capacity(runs.len());
    let mut owners: IdMap<usize> = IdMap::default();
    for (p, (_, nodes)) in runs.iter().enumerate() {
        let (mut tp, mut cp, mut wp) = (IdSet::default(), IdSet::default(), Vec::new());
        for &id in nodes {
            let t = ctx.tensor(id)?;
            let root = t.view_src().unwrap_or(id);
            if t.view_src().is_none() {
                cp.insert(id);
            } else if ctx.tensor(root)?.op().is_leaf() {
                owners.entry(root).or_insert(p);
            }
            if !wp.contains(&root) {
                wp.push(root);
            }
            tp.insert(root);
            for &s in t.src() {
                tp.insert(ctx.storage_root(s)?);
            }
        }
        touched.push(tp);
        computed.push(cp);
        written.push(wp);
    }
    let out_roots: IdSet = graph.outputs().iter().map(|&o| ctx.storage_root(o)).collect::<Result<_>>()?;
    let mut parts = Vec::with_capacity(runs.len());
    for (p, (b, nodes)) in runs.into_iter().enumerate() {
        let mut external = Vec::new();
        for &r in &touched[p] {
            if computed[p].contains(&r) {
                continue;
            }
            let leaf = ctx.tensor(r)?.op().is_leaf();
            if !leaf || owners.get(&r).is_some_and(|&o| o != p) {
                external.push(r);
            }
        }
        external.sort_unstable();
        let outputs: Vec<TensorId> = written[p]
            .iter()
            .copied()
            .filter(|r| out_roots.contains(r) || touched[p + 1..].iter().any(|t| t.contains(r)))
            .collect();
        let part_graph = Graph::part(ctx, nodes, &external, outputs)?;
        let plan = backends[b].plan(ctx, &part_graph)?;
        parts.push(Part { backend: b, graph: part_graph, plan, external, writes: written[p].clone() });
    }
    Ok(Partition { graph_id: graph.id(), graph_revision: graph.revision(), parts, owners })
}
