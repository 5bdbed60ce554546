//! How a graph is cut for a split run: each compute node is given a backend,
//! runs of consecutive nodes on one backend become parts, all the parts of
//! a backend one stage graph ([`Graph::part`]) with one plan, and each part
//! learns which roots it may have to receive before it runs.

use std::ops::Range;

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
    /// Its positions in its backend's stage graph.
    pub(crate) steps: Range<usize>,
    /// Roots it reads or writes whose latest bytes may be on another backend
    /// (computed or written there, written leaves), copied in before it runs
    /// unless its backend holds them.
    pub(crate) receive: Vec<TensorId>,
    /// Roots the part computes or writes.
    pub(crate) writes: Vec<TensorId>,
}

/// All the parts on one backend, as one graph with one plan: one buffer
/// per backend, where roots passed between its parts stay in place.
#[derive(Debug)]
pub(crate) struct Stage {
    pub(crate) graph: Graph,
    pub(crate) plan: Plan,
}

/// A graph cut into parts, in execution order.
#[derive(Debug)]
pub(crate) struct Partition {
    pub(crate) graph_id: u64,
    pub(crate) graph_revision: u32,
    pub(crate) parts: Vec<Part>,
    /// The stage of each backend (`None` for a backend that runs nothing).
    pub(crate) stages: Vec<Option<Stage>>,
    /// Written leaves: the backend whose storage keeps the leaf's state (its
    /// first writer's).
    pub(crate) owners: IdMap<usize>,
}

/// The backend of each compute node of `graph`, in order: for a transfer
/// node the backend of its device; else the home of the
/// first leaf it reads or writes that has one (weights pull their products,
/// a cache its writes), else that of the root it writes in place, else the
/// one its computed operands would cost the fewest bytes to reach
/// ([`cheapest`]; a tie goes to the backend the node before it wanted, the
/// first node's being backend 0); a backend that cannot run the node hands
/// it to the next one that can.
fn assign<B: Backend>(ctx: &Context, graph: &Graph, backends: &[B], home: &LeafHome) -> Result<Vec<(TensorId, usize)>> {
    let mut of_root: IdMap<usize> = IdMap::default();
    // the backend that last wrote each computed root: where its bytes are
    let mut latest: IdMap<usize> = IdMap::default();
    let mut out = Vec::with_capacity(graph.nodes().len());
    let mut prev = 0;
    for &id in graph.nodes() {
        let t = ctx.tensor(id)?;
        if !t.op().is_compute() {
            continue;
        }
        if let Some(to) = t.op().transfer_to() {
            // a transfer runs where its copy lives, and what follows goes with it
            let b = backends.iter().position(|b| b.device() == to).ok_or_else(|| {
                Error::Invalid(format!("{} moves to {to}, and no backend of the split computes there", ctx.label(id)))
            })?;
            out.push((id, b));
            latest.insert(id, b);
            prev = b;
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
        let want = match want.or_else(|| t.view_src().and_then(|r| of_root.get(&r).copied())) {
            Some(w) => w,
            None => cheapest(ctx, t.src(), &latest, prev)?,
        };
        let b =
            (want..backends.len()).chain(0..want).find(|&b| backends[b].supports_node(ctx, id)).ok_or_else(|| {
                Error::Invalid(format!("no backend of the split runs {} ({})", ctx.label(id), t.op().name()))
            })?;
        of_root.entry(t.view_src().unwrap_or(id)).or_insert(b);
        latest.insert(t.view_src().unwrap_or(id), b);
        out.push((id, b));
        // a node handed on does not take its successors along
        prev = want;
    }
    Ok(out)
}

/// The backend whose memory already holds most of the bytes of `operands`'
/// computed roots (`latest`: where each was last written), so the fewest
/// bytes cross to run the node there: the transfers' price deciding where a
/// node with no home of its own runs. Leaves are not counted (a backend
/// reads or uploads them once, not per run); a tie goes to `prev`.
fn cheapest(ctx: &Context, operands: &[TensorId], latest: &IdMap<usize>, prev: usize) -> Result<usize> {
    let mut held: Vec<(usize, u64)> = vec![(prev, 0)];
    for &s in operands {
        let r = ctx.storage_root(s)?;
        if let Some(&b) = latest.get(&r) {
            let bytes = ctx.layout(r)?.nbytes() as u64;
            match held.iter_mut().find(|(x, _)| *x == b) {
                Some(h) => h.1 += bytes,
                None => held.push((b, bytes)),
            }
        }
    }
    // the first of the largest: `prev` unless another holds strictly more
    let mut best = held[0];
    for &h in &held[1..] {
        if h.1 > best.1 {
            best = h;
        }
    }
    Ok(best.0)
}

/// The roots each run of nodes touches, computes and writes.
struct Uses {
    touched: IdSet,
    computed: IdSet,
    written: Vec<TensorId>,
}

fn uses(ctx: &Context, nodes: &[TensorId]) -> Result<Uses> {
    let mut u = Uses { touched: IdSet::default(), computed: IdSet::default(), written: Vec::new() };
    for &id in nodes {
        let t = ctx.tensor(id)?;
        let root = t.view_src().unwrap_or(id);
        if t.view_src().is_none() {
            u.computed.insert(id);
        }
        if !u.written.contains(&root) {
            u.written.push(root);
        }
        u.touched.insert(root);
        for &s in t.src() {
            u.touched.insert(ctx.storage_root(s)?);
        }
    }
    Ok(u)
}

/// A graph's runs of nodes and who writes what, before the stages are made.
struct Cut {
    /// (backend, nodes) of each run, in order.
    runs: Vec<(usize, Vec<TensorId>)>,
    used: Vec<Uses>,
    /// The backends writing each root.
    writers: IdMap<Vec<usize>>,
    /// Written leaves: their first writer's backend.
    owners: IdMap<usize>,
    /// The roots of the graph's outputs.
    out_roots: IdSet,
}

impl Cut {
    fn new(ctx: &Context, graph: &Graph, runs: Vec<(usize, Vec<TensorId>)>) -> Result<Cut> {
        let used: Vec<Uses> = runs.iter().map(|(_, nodes)| uses(ctx, nodes)).collect::<Result<_>>()?;
        let mut writers: IdMap<Vec<usize>> = IdMap::default();
        let mut owners: IdMap<usize> = IdMap::default();
        for ((b, _), u) in runs.iter().zip(&used) {
            for &r in &u.written {
                let w = writers.entry(r).or_default();
                if !w.contains(b) {
                    w.push(*b);
                }
                if ctx.tensor(r)?.op().is_leaf() {
                    owners.entry(r).or_insert(*b);
                }
            }
        }
        let out_roots = graph.outputs().iter().map(|&o| ctx.storage_root(o)).collect::<Result<_>>()?;
        Ok(Cut { runs, used, writers, owners, out_roots })
    }

    /// Backend `b`'s stage graph (`None` if it runs nothing), and the steps
    /// of each of its runs in it (into `steps`). Its external roots: those it
    /// touches and does not compute but for plain leaves, leaves another
    /// backend owns, and those it computes that another backend writes.
    /// Its outputs: what it writes that the graph returns or another backend touches.
    fn stage(&self, ctx: &Context, b: usize, steps: &mut [Range<usize>]) -> Result<Option<Graph>> {
        let mine: Vec<usize> = (0..self.runs.len()).filter(|&p| self.runs[p].0 == b).collect();
        if mine.is_empty() {
            return Ok(None);
        }
        let computed: IdSet = mine.iter().flat_map(|&p| self.used[p].computed.iter().copied()).collect();
        let touched: IdSet = mine.iter().flat_map(|&p| self.used[p].touched.iter().copied()).collect();
        let mut external = Vec::new();
        for &r in &touched {
            let ext = if computed.contains(&r) {
                self.writers.get(&r).is_some_and(|w| w.iter().any(|&x| x != b))
            } else if ctx.tensor(r)?.op().is_leaf() {
                self.owners.get(&r).is_some_and(|&o| o != b)
            } else {
                true
            };
            if ext {
                external.push(r);
            }
        }
        external.sort_unstable();
        let elsewhere =
            |r: &TensorId| self.runs.iter().zip(&self.used).any(|((rb, _), u)| *rb != b && u.touched.contains(r));
        let (mut outputs, mut nodes) = (Vec::new(), Vec::new());
        for &p in &mine {
            for &r in &self.used[p].written {
                if !outputs.contains(&r) && (self.out_roots.contains(&r) || elsewhere(&r)) {
                    outputs.push(r);
                }
            }
            steps[p] = nodes.len()..nodes.len() + self.runs[p].1.len();
            nodes.extend_from_slice(&self.runs[p].1);
        }
        Graph::part(ctx, nodes, &external, outputs).map(Some)
    }
}

/// Cuts `graph` for `backends` and plans each backend's stage.
pub(crate) fn partition<B: Backend>(
    ctx: &Context,
    graph: &Graph,
    backends: &[B],
    home: &LeafHome,
) -> Result<Partition> {
    let mut runs: Vec<(usize, Vec<TensorId>)> = Vec::new();
    for (id, b) in assign(ctx, graph, backends, home)? {
        match runs.last_mut() {
            Some((rb, nodes)) if *rb == b => nodes.push(id),
            _ => runs.push((b, vec![id])),
        }
    }
    let cut = Cut::new(ctx, graph, runs)?;
    let mut steps = vec![0..0; cut.runs.len()];
    let mut stages = Vec::with_capacity(backends.len());
    for (b, backend) in backends.iter().enumerate() {
        let stage = match cut.stage(ctx, b, &mut steps)? {
            Some(g) => Some(Stage { plan: backend.plan(ctx, &g)?, graph: g }),
            None => None,
        };
        stages.push(stage);
    }
    let mut parts = Vec::with_capacity(cut.runs.len());
    for (p, ((b, _), u)) in cut.runs.iter().zip(cut.used).enumerate() {
        let stage = stages[*b].as_ref().ok_or_else(|| Error::internal("a part without its stage"))?;
        let mut receive: Vec<TensorId> = u
            .touched
            .iter()
            .copied()
            .filter(|r| !u.computed.contains(r) && (stage.graph.is_external(*r) || cut.owners.contains_key(r)))
            .collect();
        receive.sort_unstable();
        parts.push(Part { backend: *b, steps: steps[p].clone(), receive, writes: u.written });
    }
    Ok(Partition { graph_id: graph.id(), graph_revision: graph.revision(), parts, stages, owners: cut.owners })
}
