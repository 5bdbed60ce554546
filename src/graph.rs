//! `Graph`: the tensors needed for a set of outputs, in execution order.
//!
//! Order is **program order** (creation order), restricted to what the outputs
//! need. Every dependency, data or aliasing, points from an earlier tensor to a
//! later one, so program order is always a valid schedule, and it gives eager
//! semantics: a node that reads a storage sees exactly the writes built before it.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use petgraph::graph::{DiGraph, NodeIndex};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::tensor::TensorId;

pub mod lint;
pub mod transfers;

static NEXT_GRAPH_ID: AtomicU64 = AtomicU64::new(1);

/// Kind of an edge in [`Graph::dependencies`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dep {
    /// The node reads this source (slot in `src`).
    Data(usize),
    /// Aliasing order: the node writes a storage this earlier node touches
    /// (or reads a storage this earlier node wrote).
    Order,
}

/// The nodes and leafs that compute a set of outputs.
#[derive(Clone, Debug)]
pub struct Graph {
    id: u64,
    revision: u32,
    ctx: u32,
    /// The context's epoch when the graph last changed.
    epoch: u32,
    nodes: Vec<TensorId>,
    leafs: Vec<TensorId>,
    outputs: Vec<TensorId>,
    members: crate::id::IdSet,
    /// Roots computed outside this graph (a part of a graph split across
    /// backends, [`Graph::part`]): listed with the leafs, placed in the buffer
    /// and set before each run, never computed here.
    external: crate::id::IdSet,
}

impl Graph {
    /// An empty graph over `ctx`'s tensors.
    pub fn new(ctx: &Context) -> Graph {
        Graph {
            id: NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed),
            revision: 0,
            ctx: ctx.id(),
            epoch: ctx.epoch(),
            nodes: Vec::new(),
            leafs: Vec::new(),
            outputs: Vec::new(),
            members: Default::default(),
            external: Default::default(),
        }
    }

    /// A graph of some of another graph's compute `nodes` (in its order), for
    /// one backend of a split run: the roots they touch that these nodes do
    /// not compute are leafs, plain ones read as usual, those in `external`
    /// (roots computed or written elsewhere) placed in the plan buffer like
    /// inputs, whose bytes the caller sets between runs
    /// ([`BackendStorage::set_bytes`](crate::BackendStorage::set_bytes)). A
    /// node listed in `external` (computed here, written in place elsewhere)
    /// is computed as usual and kept for the whole run, so it too can be set.
    /// `outputs` are the roots other parts read: they survive the run.
    ///
    /// # Errors
    /// [`Error::Invalid`] if a node is not a compute node, or a touched root is
    /// neither computed here, a leaf, nor external.
    pub fn part(ctx: &Context, nodes: Vec<TensorId>, external: &[TensorId], outputs: Vec<TensorId>) -> Result<Graph> {
        let mut g = Graph::new(ctx);
        let external: crate::id::IdSet = external.iter().copied().collect();
        let mut members: crate::id::IdSet = nodes.iter().copied().collect();
        let mut leafs = Vec::new();
        for &id in &nodes {
            let t = ctx.tensor(id)?;
            if !t.op().is_compute() {
                return Err(Error::Invalid(format!("{} is not a compute node", ctx.label(id))));
            }
            for r in t.src().iter().copied().chain(t.view_src()) {
                let r = ctx.storage_root(r)?;
                if members.contains(&r) {
                    continue;
                }
                if !external.contains(&r) && !ctx.tensor(r)?.op().is_leaf() {
                    return Err(Error::Invalid(format!(
                        "{} reads {}, computed outside the part and not external",
                        ctx.label(id),
                        ctx.label(r)
                    )));
                }
                members.insert(r);
                leafs.push(r);
            }
        }
        leafs.sort_unstable();
        g.nodes = nodes;
        g.leafs = leafs;
        g.outputs = outputs;
        g.members = members;
        g.external = external;
        g.revision = 1;
        Ok(g)
    }

    /// True for a root this graph reads but another graph computes ([`Graph::part`]).
    pub fn is_external(&self, id: TensorId) -> bool {
        self.external.contains(&id)
    }
    /// A graph computing `outputs`.
    pub fn build(ctx: &Context, outputs: &[TensorId]) -> Result<Graph> {
        let mut g = Graph::new(ctx);
        for &o in outputs {
            g.build_forward_expand(ctx, o)?;
        }
        Ok(g)
    }

    /// Adds `out` and everything it needs: its sources, recursively, and every
    /// earlier write to a storage read on the way (program order). `out` becomes
    /// an output: its value after the run is the state of its storage at the end.
    /// Iterative, so graphs of any depth work.
    pub fn build_forward_expand(&mut self, ctx: &Context, out: TensorId) -> Result<()> {
        if ctx.id() != self.ctx {
            return Err(Error::Mismatch(format!("graph of context {} used with context {}", self.ctx, ctx.id())));
        }
        ctx.tensor(out)?;
        let mut stack = vec![out];
        // the output is read "now": writes to its storage built so far count
        stack.extend(ctx.last_write(out));
        let mut added = Vec::new();
        while let Some(id) = stack.pop() {
            if !self.members.insert(id) {
                continue;
            }
            added.push(id);
            let t = ctx.tensor(id)?;
            stack.extend(t.src.iter().copied());
            stack.extend(t.after.iter().copied());
            if let Some(root) = t.view_src {
                stack.push(root);
            }
        }
        added.sort_unstable();
        let (leafs, nodes): (Vec<TensorId>, Vec<TensorId>) =
            added.into_iter().partition(|&id| ctx.tensor(id).map(|t| t.op.is_leaf()).unwrap_or(false));
        merge_sorted(&mut self.nodes, nodes);
        merge_sorted(&mut self.leafs, leafs);
        if !self.outputs.contains(&out) {
            self.outputs.push(out);
        }
        self.revision += 1;
        Ok(())
    }

    /// Unique id of this graph (plans are tied to it).
    pub fn id(&self) -> u64 {
        self.id
    }
    /// Bumped by every `build_forward_expand` (plans are tied to it too).
    pub fn revision(&self) -> u32 {
        self.revision
    }
    /// The context this graph was built over.
    pub fn context_id(&self) -> u32 {
        self.ctx
    }
    /// Non-leaf tensors (compute and metadata nodes) in execution order.
    pub fn nodes(&self) -> &[TensorId] {
        &self.nodes
    }
    /// Leaf tensors in creation order.
    pub fn leafs(&self) -> &[TensorId] {
        &self.leafs
    }
    /// The tensors passed to `build_forward_expand`.
    pub fn outputs(&self) -> &[TensorId] {
        &self.outputs
    }
    /// True if `id` is a node or leaf of this graph.
    pub fn contains(&self, id: TensorId) -> bool {
        self.members.contains(&id)
    }
    /// Checks that `ctx` is the context this graph was built over, and (after a
    /// [`Context::truncate`]) that every tensor of the graph still exists.
    pub fn check_context(&self, ctx: &Context) -> Result<()> {
        if ctx.id() != self.ctx {
            return Err(Error::Mismatch(format!("graph of context {} used with context {}", self.ctx, ctx.id())));
        }
        if ctx.epoch() != self.epoch {
            for &id in self.leafs.iter().chain(&self.nodes) {
                ctx.tensor(id)?;
            }
        }
        Ok(())
    }

    /// The dependency graph (petgraph): one vertex per leaf and node, an edge
    /// from each source to its consumer ([`Dep::Data`]) and from each earlier
    /// access of a storage to a later write or read that must follow it ([`Dep::Order`]).
    pub fn dependencies(&self, ctx: &Context) -> Result<DiGraph<TensorId, Dep>> {
        self.check_context(ctx)?;
        let mut g = DiGraph::with_capacity(self.members.len(), self.members.len() * 2);
        let mut index = std::collections::HashMap::with_capacity(self.members.len());
        let mut all: Vec<TensorId> = self.members.iter().copied().collect();
        all.sort_unstable();
        for &id in &all {
            index.insert(id, g.add_node(id));
        }
        let idx = |id: &TensorId| -> Option<NodeIndex> { index.get(id).copied() };
        for &id in &all {
            let t = ctx.tensor(id)?;
            let to = index[&id];
            for (slot, s) in t.src.iter().enumerate() {
                if let Some(from) = idx(s) {
                    g.add_edge(from, to, Dep::Data(slot));
                }
            }
            for s in t.order_after() {
                if let Some(from) = idx(&s) {
                    if !t.src.contains(&s) {
                        g.add_edge(from, to, Dep::Order);
                    }
                }
            }
        }
        Ok(g)
    }

    /// Graphviz DOT of the graph: leafs as boxes, views dashed, in-place writes
    /// marked, aliasing order edges dotted. `annotate` may add a line per tensor
    /// (e.g. planned offsets).
    pub fn to_dot(&self, ctx: &Context, annotate: Option<&dyn Fn(TensorId) -> Option<String>>) -> Result<String> {
        let deps = self.dependencies(ctx)?;
        let mut s = String::from("digraph rgml {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n");
        for ni in deps.node_indices() {
            let id = deps[ni];
            let t = ctx.tensor(id)?;
            let l = t.layout();
            let mut label = format!("{} {}\\n{} {:?}", ctx.label(id), t.op().name(), l.dtype, l.ne);
            let mut style = Vec::new();
            if t.op().is_metadata() {
                style.push("dashed");
                label.push_str("\\nview");
            }
            if let Some(to) = t.op().transfer_to() {
                style.push("bold");
                label.push_str(&format!("\\n-> {to}, {} B", l.nbytes()));
            }
            if t.writes_in_place() {
                style.push("bold");
                label.push_str(&format!("\\ninplace -> {}", ctx.label(t.view_src().unwrap_or(id))));
            }
            if let Some(extra) = annotate.and_then(|f| f(id)) {
                label.push_str("\\n");
                label.push_str(&extra.replace('"', "'"));
            }
            let shape = if t.op().is_leaf() { "box" } else { "ellipse" };
            let color = if t.writes_in_place() { ", color=red" } else { "" };
            let _ = writeln!(
                s,
                "  n{} [label=\"{}\", shape={shape}, style=\"{}\"{color}];",
                id.index(),
                label.replace('"', "'"),
                style.join(",")
            );
        }
        for e in deps.edge_indices() {
            let Some((a, b)) = deps.edge_endpoints(e) else { continue };
            let attr = match deps[e] {
                Dep::Data(_) if ctx.tensor(deps[b])?.op().is_metadata() => " [style=dashed]",
                Dep::Data(_) => "",
                Dep::Order => " [style=dotted, color=gray, label=\"order\"]",
            };
            let _ = writeln!(s, "  n{} -> n{}{attr};", deps[a].index(), deps[b].index());
        }
        s.push_str("}\n");
        Ok(s)
    }
}

/// Merges sorted `new` into sorted `v` (appends when it can).
fn merge_sorted(v: &mut Vec<TensorId>, mut new: Vec<TensorId>) {
    if new.is_empty() {
        return;
    }
    if v.last().is_none_or(|last| *last < new[0]) {
        v.append(&mut new);
        return;
    }
    v.append(&mut new);
    v.sort_unstable();
}
