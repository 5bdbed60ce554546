//! A [`Plan`]: where each storage root of one graph lives ([`Place`]), the
//! live range of each buffer root, and what the plan reports.

use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::id::{IdMap, IdSet};
use crate::tensor::TensorId;

/// Where a storage root lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// A leaf read in place from the context's host data (never written).
    Leaf,
    /// A leaf the graph writes into: the backend keeps its own copy,
    /// initialised from the context's data when its storage is created.
    LeafCopy,
    /// `offset` bytes into the plan buffer.
    Buffer {
        /// Byte offset.
        offset: usize,
    },
}

/// Sizes a plan reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanStats {
    /// Bytes if every planned root had its own buffer (inputs included).
    pub naive: usize,
    /// Bytes of the plan buffer (its high-water mark).
    pub planned: usize,
    /// The largest total of planned roots live at one step: no placement of
    /// this schedule (with the same in-place reuses) can use less.
    pub lower_bound: usize,
    /// Bytes of data-holding leaves the graph reads in place (outside the plan).
    pub external: usize,
}

/// Placement of one graph's storages in one backend buffer.
#[derive(Clone, Debug)]
pub struct Plan {
    pub(super) graph_id: u64,
    pub(super) graph_revision: u32,
    pub(super) alignment: usize,
    pub(super) buffer_size: usize,
    pub(super) places: IdMap<Place>,
    /// Steps (node positions) each buffer root is live: `[first, last]`.
    pub(super) lifetimes: IdMap<(usize, usize)>,
    /// Node → the source root whose block it took over.
    pub(super) reused: IdMap<TensorId>,
    /// Ranges given back to the free list after each step.
    pub(super) frees: Vec<Vec<(usize, usize)>>,
    /// Roots whose bytes survive the whole run (leaves, inputs, outputs).
    pub(super) retained: IdSet,
    /// Roots computed or written by another part of a split graph ([`Graph::part`]).
    pub(super) external: IdSet,
    pub(super) stats: PlanStats,
}

impl Plan {
    /// Bytes of the plan buffer.
    pub fn buffer_size(&self) -> usize {
        self.buffer_size
    }
    /// Alignment of every placed offset.
    pub fn alignment(&self) -> usize {
        self.alignment
    }
    /// Naive size, planned size, lower bound.
    pub fn stats(&self) -> PlanStats {
        self.stats
    }
    /// Where the storage root `root` lives (`None` if it is not in the plan).
    pub fn place(&self, root: TensorId) -> Option<Place> {
        self.places.get(&root).copied()
    }
    /// All placed storage roots.
    pub fn places(&self) -> impl Iterator<Item = (TensorId, Place)> + '_ {
        self.places.iter().map(|(&id, &p)| (id, p))
    }
    /// Byte ranges of the buffer freed after step `step` (a node position).
    pub fn freed_after(&self, step: usize) -> &[(usize, usize)] {
        self.frees.get(step).map_or(&[], Vec::as_slice)
    }
    /// True if `root`'s bytes hold its final values after a run (leaves,
    /// inputs, outputs and what they view); other roots may be reused.
    pub fn is_retained(&self, root: TensorId) -> bool {
        self.retained.contains(&root)
    }
    /// True if `root` is computed or written by another part of a split
    /// graph and may be set between runs, like an input ([`Graph::part`]).
    pub fn is_external(&self, root: TensorId) -> bool {
        self.external.contains(&root)
    }
    /// The source root whose block `node` writes over, if the planner reused one.
    pub fn reused_source(&self, node: TensorId) -> Option<TensorId> {
        self.reused.get(&node).copied()
    }
    /// A label per tensor for [`Graph::to_dot`]: its buffer range and lifetime.
    pub fn annotation(&self, ctx: &Context, id: TensorId) -> Option<String> {
        let t = ctx.tensor(id).ok()?;
        let root = t.view_src().unwrap_or(id);
        match self.place(root)? {
            Place::Buffer { offset } => {
                let at = offset + t.view_offs();
                let life = self.lifetimes.get(&root).map_or(String::new(), |(a, b)| format!(" live {a}..{b}"));
                Some(format!("@{at}+{}{life}", t.layout().nbytes()))
            }
            p => Some(format!("{p:?}")),
        }
    }
    /// Errors unless this plan was made for exactly this graph (same graph, same revision).
    pub fn check_graph(&self, graph: &Graph) -> Result<()> {
        if self.graph_id == graph.id() && self.graph_revision == graph.revision() {
            Ok(())
        } else {
            Err(Error::Mismatch(format!(
                "plan was made for graph {} (revision {}), not graph {} (revision {})",
                self.graph_id,
                self.graph_revision,
                graph.id(),
                graph.revision()
            )))
        }
    }
}
