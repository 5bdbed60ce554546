//! `Plan`: where every tensor of a graph lives for one backend. The executor
//! reads placements from a plan and knows nothing of how it was made.
//!
//! This is the placement interface; [`Plan::naive`] gives every computed
//! tensor its own range. (The liveness-based planner fills the same structure.)

use std::collections::HashMap;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::tensor::{Op, TensorId};

/// Byte alignment of CPU plan buffers.
pub const CPU_ALIGNMENT: usize = 64;

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

/// Placement of a graph's storages in one backend buffer.
#[derive(Clone, Debug)]
pub struct Plan {
    graph_id: u64,
    graph_revision: u32,
    alignment: usize,
    buffer_size: usize,
    places: HashMap<TensorId, Place>,
}

impl Plan {
    /// Every computed (non-view) tensor of `graph` gets its own aligned range,
    /// one after the other; nothing is reused.
    pub fn naive(ctx: &Context, graph: &Graph, alignment: usize) -> Result<Plan> {
        graph.check_context(ctx)?;
        if !alignment.is_power_of_two() {
            return Err(Error::Invalid(format!("alignment {alignment} is not a power of two")));
        }
        let mut places = HashMap::new();
        for &id in graph.leafs() {
            places.insert(id, Place::Leaf);
        }
        let mut size = 0usize;
        for &id in graph.nodes() {
            let t = ctx.tensor(id)?;
            if let (true, Some(root)) = (t.writes_in_place(), t.view_src()) {
                if ctx.tensor(root)?.op() == Op::Leaf {
                    places.insert(root, Place::LeafCopy);
                }
            }
            if t.view_src().is_some() {
                continue;
            }
            let offset = size.next_multiple_of(alignment);
            size = offset
                .checked_add(t.layout().nbytes())
                .ok_or_else(|| Error::Invalid("plan buffer size overflows".into()))?;
            places.insert(id, Place::Buffer { offset });
        }
        Ok(Plan { graph_id: graph.id(), graph_revision: graph.revision(), alignment, buffer_size: size, places })
    }

    /// Bytes of the plan buffer.
    pub fn buffer_size(&self) -> usize {
        self.buffer_size
    }
    /// Alignment of every placed offset.
    pub fn alignment(&self) -> usize {
        self.alignment
    }
    /// Where the storage root `root` lives (`None` if it is not in the plan).
    pub fn place(&self, root: TensorId) -> Option<Place> {
        self.places.get(&root).copied()
    }
    /// All placed storage roots.
    pub fn places(&self) -> impl Iterator<Item = (TensorId, Place)> + '_ {
        self.places.iter().map(|(&id, &p)| (id, p))
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
