//! [`SplitStorage`]: a storage per part of a split graph, and where each
//! shared root's latest bytes are.

use std::sync::Arc;

use super::partition::{partition, LeafHome, Partition};
use crate::backend::traits::{Backend, BackendStorage};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::id::IdMap;
use crate::plan::{Place, Plan};
use crate::tensor::TensorId;

/// What a split backend and its storages share.
pub(super) struct Inner<B> {
    pub(super) backends: Vec<B>,
    pub(super) home: Box<LeafHome>,
}

/// Partitions kept for graphs bound before (a model switches between a few).
const KEPT_PARTITIONS: usize = 16;

/// The memory of one graph on a [`SplitBackend`](super::SplitBackend): one
/// storage per part (the k-th part on a backend reuses that backend's k-th
/// storage across rebinds, so a KV cache stays where it is).
pub struct SplitStorage<B: Backend> {
    inner: Arc<Inner<B>>,
    plan: Plan,
    capacity: usize,
    current: Arc<Partition>,
    kept: Vec<Arc<Partition>>,
    slots: Vec<Slot<B::Storage>>,
    /// The slot of each part of `current`.
    part_slot: Vec<usize>,
    /// Root → the slot holding its latest bytes (roots one part writes and
    /// another reads, written leaves).
    holder: IdMap<usize>,
}

/// One backend storage.
struct Slot<S> {
    backend: usize,
    storage: S,
}

impl<B: Backend> std::fmt::Debug for SplitStorage<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<(usize, usize)> =
            self.current.parts.iter().map(|p| (p.backend, p.graph.nodes().len())).collect();
        f.debug_struct("SplitStorage")
            .field("parts (backend, nodes)", &parts)
            .field("slots", &self.slots.len())
            .finish()
    }
}

impl<B: Backend> SplitStorage<B> {
    pub(super) fn new(inner: Arc<Inner<B>>, ctx: &Context, graph: &Graph, plan: Plan) -> Result<SplitStorage<B>> {
        plan.check_graph(graph)?;
        let current = Arc::new(partition(ctx, graph, &inner.backends, &*inner.home)?);
        let mut st = SplitStorage {
            inner,
            capacity: plan.buffer_size(),
            plan,
            current: current.clone(),
            kept: Vec::new(),
            slots: Vec::new(),
            part_slot: Vec::new(),
            holder: IdMap::default(),
        };
        st.bind(ctx, current)?;
        Ok(st)
    }

    /// The parts of the bound graph: (backend index, compute nodes) each, in order.
    pub fn parts(&self) -> Vec<(usize, usize)> {
        self.current.parts.iter().map(|p| (p.backend, p.graph.nodes().len())).collect()
    }
    /// Bytes copied between parts per compute of the bound graph (the roots
    /// each part receives, counted whether or not they are already in place).
    pub fn crossing_bytes(&self, ctx: &Context) -> Result<usize> {
        let mut n = 0;
        for p in &self.current.parts {
            for &r in &p.external {
                n += ctx.tensor(r)?.layout().nbytes();
            }
        }
        Ok(n)
    }

    /// Gives each part of `p` its slot (a new storage, or the backend's next
    /// one rebound), moving written leaves whose owner changes slot.
    fn bind(&mut self, ctx: &Context, p: Arc<Partition>) -> Result<()> {
        let mut part_slot = Vec::with_capacity(p.parts.len());
        let mut used = vec![0usize; self.inner.backends.len()];
        let mut fresh = Vec::new();
        for (i, part) in p.parts.iter().enumerate() {
            let k = used[part.backend];
            used[part.backend] += 1;
            match self.slots.iter().enumerate().filter(|(_, s)| s.backend == part.backend).nth(k) {
                Some((s, _)) => part_slot.push(s),
                None => {
                    part_slot.push(self.slots.len() + fresh.len());
                    fresh.push(i);
                }
            }
        }
        // the state of a written leaf whose owner moves to another slot
        let mut moved = Vec::new();
        for (&leaf, &owner) in &p.owners {
            let to = part_slot[owner];
            if let Some(&from) = self.holder.get(&leaf) {
                if from != to {
                    moved.push((leaf, to, self.slots[from].storage.read_bytes(ctx, leaf)?));
                }
            }
        }
        // computed roots' holders end with their graph (an id may come back
        // as another tensor after a truncate); written leaves carry over
        self.holder.retain(|r, _| p.owners.contains_key(r));
        for (i, part) in p.parts.iter().enumerate() {
            let s = part_slot[i];
            if s < self.slots.len() {
                let st = &mut self.slots[s].storage;
                st.grow(part.plan.buffer_size())?;
                st.rebind(ctx, &part.graph, part.plan.clone())?;
            }
        }
        for i in fresh {
            let part = &p.parts[i];
            let storage = self.inner.backends[part.backend].alloc(ctx, &part.graph, part.plan.clone())?;
            self.slots.push(Slot { backend: part.backend, storage });
        }
        for (&leaf, &owner) in &p.owners {
            self.holder.entry(leaf).or_insert(part_slot[owner]);
        }
        for (leaf, to, bytes) in moved {
            self.slots[to].storage.set_bytes(ctx, leaf, &bytes)?;
            self.holder.insert(leaf, to);
        }
        self.part_slot = part_slot;
        self.current = p;
        Ok(())
    }

    /// Runs the parts in order, each after the roots it reads from others
    /// are copied in.
    pub(super) fn compute(&mut self, inner: &Inner<B>, ctx: &Context, graph: &Graph) -> Result<()> {
        if (self.current.graph_id, self.current.graph_revision) != (graph.id(), graph.revision()) {
            return Err(Error::Mismatch(format!(
                "split storage is bound to graph {} (revision {}), not graph {} (revision {})",
                self.current.graph_id,
                self.current.graph_revision,
                graph.id(),
                graph.revision()
            )));
        }
        let current = self.current.clone();
        for (i, part) in current.parts.iter().enumerate() {
            let s = self.part_slot[i];
            for &r in &part.external {
                match self.holder.get(&r) {
                    Some(&h) if h == s => {}
                    Some(&h) => {
                        let bytes = self.slots[h].storage.read_bytes(ctx, r)?;
                        self.slots[s].storage.set_bytes(ctx, r, &bytes)?;
                    }
                    None => return Err(Error::internal(format!("no part holds {}", ctx.label(r)))),
                }
            }
            inner.backends[part.backend].compute(ctx, &part.graph, &mut self.slots[s].storage)?;
            for &r in &part.writes {
                self.holder.insert(r, s);
            }
        }
        Ok(())
    }

    /// The slot holding `id`'s root: its latest writer's, else the first part
    /// placing it.
    fn slot_of(&self, ctx: &Context, id: TensorId) -> Result<usize> {
        let root = ctx.storage_root(id)?;
        if let Some(&s) = self.holder.get(&root) {
            return Ok(s);
        }
        self.part_slot
            .iter()
            .copied()
            .find(|&s| self.slots[s].storage.plan().place(root).is_some())
            .ok_or_else(|| Error::Mismatch(format!("{} is not in this storage's graph", ctx.label(id))))
    }
}

impl<B: Backend> BackendStorage for SplitStorage<B> {
    /// The whole graph's plan (each part has its own, on its backend).
    fn plan(&self) -> &Plan {
        &self.plan
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
    fn rebind(&mut self, ctx: &Context, graph: &Graph, plan: Plan) -> Result<()> {
        plan.check_graph(graph)?;
        let key = (graph.id(), graph.revision());
        let p = match self.kept.iter().find(|p| (p.graph_id, p.graph_revision) == key) {
            Some(p) => p.clone(),
            None => {
                let p = Arc::new(partition(ctx, graph, &self.inner.backends, &*self.inner.home)?);
                if self.kept.len() >= KEPT_PARTITIONS {
                    self.kept.remove(0);
                }
                self.kept.push(p.clone());
                p
            }
        };
        self.bind(ctx, p)?;
        self.capacity = self.capacity.max(plan.buffer_size());
        self.plan = plan;
        Ok(())
    }
    /// Records `capacity`: each part's storage grows to its own plan when bound.
    fn grow(&mut self, capacity: usize) -> Result<()> {
        self.capacity = self.capacity.max(capacity);
        Ok(())
    }
    fn reset_leaf(&mut self, ctx: &Context, id: TensorId) -> Result<()> {
        let s =
            self.holder.get(&id).copied().ok_or_else(|| {
                Error::Invalid(format!("{} is not a leaf this storage keeps a copy of", ctx.label(id)))
            })?;
        let bytes = ctx.leaf_bytes(id).ok_or_else(|| Error::NoData(ctx.label(id)))?;
        self.slots[s].storage.set_bytes(ctx, id, bytes)
    }
    /// Sets a written leaf's state where it is held, an input placed in the
    /// buffers in every part that reads it.
    fn set_bytes(&mut self, ctx: &Context, id: TensorId, bytes: &[u8]) -> Result<()> {
        if let Some(&s) = self.holder.get(&id) {
            return self.slots[s].storage.set_bytes(ctx, id, bytes);
        }
        let mut set = false;
        for &s in &self.part_slot {
            let st = &mut self.slots[s].storage;
            if matches!(st.plan().place(id), Some(Place::Buffer { .. })) && !st.plan().is_external(id) {
                st.set_bytes(ctx, id, bytes)?;
                set = true;
            }
        }
        if set {
            Ok(())
        } else {
            Err(Error::Mismatch(format!("{} is not an input of this storage's graph", ctx.label(id))))
        }
    }
    fn read_f32(&self, ctx: &Context, id: TensorId) -> Result<Vec<f32>> {
        self.slots[self.slot_of(ctx, id)?].storage.read_f32(ctx, id)
    }
    fn read_bytes(&self, ctx: &Context, id: TensorId) -> Result<Vec<u8>> {
        self.slots[self.slot_of(ctx, id)?].storage.read_bytes(ctx, id)
    }
}
