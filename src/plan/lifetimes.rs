//! When each storage root of a graph is first and last touched, in execution
//! order, and which roots must survive the run.

use std::collections::{HashMap, HashSet};

use crate::context::Context;
use crate::error::Result;
use crate::graph::Graph;
use crate::tensor::TensorId;

/// Uses of every storage root of a graph.
pub(crate) struct Lifetimes {
    /// Position of each node in `graph.nodes()`.
    pub(crate) pos: HashMap<TensorId, usize>,
    /// Last step that reads or writes each root (through any view).
    pub(crate) last_use: HashMap<TensorId, usize>,
    /// Roots that are never freed nor overwritten: outputs (and the roots of
    /// output views), inputs, leaves and external roots.
    pub(crate) protected: HashSet<TensorId>,
}

impl Lifetimes {
    pub(crate) fn of(ctx: &Context, graph: &Graph) -> Result<Lifetimes> {
        let root = |id: TensorId| ctx.storage_root(id);
        let mut pos = HashMap::with_capacity(graph.nodes().len());
        let mut last_use = HashMap::new();
        for (i, &id) in graph.nodes().iter().enumerate() {
            pos.insert(id, i);
            let t = ctx.tensor(id)?;
            if t.op().is_metadata() {
                continue; // a view reads no bytes; its readers keep the root alive
            }
            for &s in t.src() {
                last_use.insert(root(s)?, i);
            }
            last_use.insert(root(id)?, i);
        }
        let mut protected = HashSet::new();
        for &o in graph.outputs() {
            protected.insert(root(o)?);
        }
        for &id in graph.nodes().iter().chain(graph.leafs()) {
            let t = ctx.tensor(id)?;
            if t.flags().output || t.flags().input || t.op().is_leaf() || graph.is_external(id) {
                protected.insert(root(id)?);
            }
        }
        Ok(Lifetimes { pos, last_use, protected })
    }
}
