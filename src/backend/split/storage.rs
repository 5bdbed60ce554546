//! [`SplitStorage`]: a storage per backend of a split graph, and where each
//! shared root's latest bytes are.

use std::sync::Arc;

use super::partition::{partition, LeafHome, Partition};
use crate::backend::traits::{Backend, BackendStorage, PinnedBuffer};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::transfers::Transfer;
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
/// storage per backend, bound to that backend's stage (all its parts), kept
/// across rebinds so a KV cache stays where it is.
pub struct SplitStorage<B: Backend> {
    inner: Arc<Inner<B>>,
    plan: Plan,
    capacity: usize,
    current: Arc<Partition>,
    kept: Vec<Arc<Partition>>,
    /// The storage of each backend, made when a stage first needs it.
    slots: Vec<Option<B::Storage>>,
    /// Root → the backend holding its latest bytes (what one part writes and
    /// another may read, written leaves).
    holder: IdMap<usize>,
    /// The copies between backends of the last compute.
    crossed: Vec<Transfer>,
    /// Pinned host memory the crossings are staged through, from the first
    /// backend of a crossing that has some (none between two CPUs).
    staging: Option<(Box<dyn PinnedBuffer>, usize)>,
}

impl<B: Backend> std::fmt::Debug for SplitStorage<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SplitStorage")
            .field("parts (backend, nodes)", &self.parts())
            .field("buffers (backend, bytes)", &self.buffers())
            .finish()
    }
}

impl<B: Backend> SplitStorage<B> {
    pub(super) fn new(inner: Arc<Inner<B>>, ctx: &Context, graph: &Graph, plan: Plan) -> Result<SplitStorage<B>> {
        plan.check_graph(graph)?;
        let current = Arc::new(partition(ctx, graph, &inner.backends, &*inner.home)?);
        let slots = inner.backends.iter().map(|_| None).collect();
        let mut st = SplitStorage {
            inner,
            capacity: plan.buffer_size(),
            plan,
            current: current.clone(),
            kept: Vec::new(),
            slots,
            holder: IdMap::default(),
            crossed: Vec::new(),
            staging: None,
        };
        st.bind(ctx, current)?;
        Ok(st)
    }

    /// The parts of the bound graph: (backend index, compute nodes) each, in order.
    pub fn parts(&self) -> Vec<(usize, usize)> {
        self.current.parts.iter().map(|p| (p.backend, p.steps.len())).collect()
    }
    /// The plan buffer of each backend that has a storage: (backend index,
    /// bytes), one buffer per backend however many parts it runs.
    pub fn buffers(&self) -> Vec<(usize, usize)> {
        self.slots.iter().enumerate().filter_map(|(b, s)| Some((b, s.as_ref()?.capacity()))).collect()
    }
    /// Bytes copied between backends by the last compute (the roots a part
    /// reads or writes whose latest bytes another backend held).
    pub fn crossing_bytes(&self) -> usize {
        self.crossed.iter().map(|t| t.bytes as usize).sum()
    }
    /// The copies between backends of the last compute, in order: each root
    /// copied in before a part, with its bytes, its devices and whether it
    /// went through pinned host memory (when a backend of the crossing has
    /// some, [`Backend::pinned_buffer`]).
    pub fn transfers(&self) -> &[Transfer] {
        &self.crossed
    }

    /// Binds each backend's storage to its stage of `p` (made or rebound),
    /// moving written leaves whose owner changes backend.
    fn bind(&mut self, ctx: &Context, p: Arc<Partition>) -> Result<()> {
        // the state of a written leaf whose owner moves to another backend
        let mut moved = Vec::new();
        for (&leaf, &owner) in &p.owners {
            if let Some(&from) = self.holder.get(&leaf) {
                if from != owner {
                    moved.push((leaf, owner, self.slot(from)?.read_bytes(ctx, leaf)?));
                }
            }
        }
        // computed roots' holders end with their graph (an id may come back
        // as another tensor after a truncate); written leaves carry over
        self.holder.retain(|r, _| p.owners.contains_key(r));
        for (b, stage) in p.stages.iter().enumerate() {
            let Some(stage) = stage else { continue };
            match &mut self.slots[b] {
                Some(st) => {
                    st.grow(stage.plan.buffer_size())?;
                    st.rebind(ctx, &stage.graph, stage.plan.clone())?;
                }
                slot @ None => {
                    *slot = Some(self.inner.backends[b].alloc(ctx, &stage.graph, stage.plan.clone())?);
                }
            }
        }
        for (&leaf, &owner) in &p.owners {
            self.holder.entry(leaf).or_insert(owner);
        }
        for (leaf, to, bytes) in moved {
            self.slot_mut(to)?.set_bytes(ctx, leaf, &bytes)?;
            self.holder.insert(leaf, to);
        }
        self.current = p;
        Ok(())
    }

    fn slot(&self, b: usize) -> Result<&B::Storage> {
        self.slots.get(b).and_then(Option::as_ref).ok_or_else(|| Error::internal("a backend without its storage"))
    }
    fn slot_mut(&mut self, b: usize) -> Result<&mut B::Storage> {
        self.slots.get_mut(b).and_then(Option::as_mut).ok_or_else(|| Error::internal("a backend without its storage"))
    }

    /// Runs the parts in order, each after the roots it needs from other
    /// backends are copied in.
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
        self.crossed.clear();
        for part in &current.parts {
            let b = part.backend;
            for &r in &part.receive {
                match self.holder.get(&r) {
                    Some(&h) if h == b => {}
                    Some(&h) => {
                        let n = ctx.layout(r)?.nbytes();
                        let pinned = self.cross(inner, ctx, r, h, b, n)?;
                        let (from, to) = (inner.backends[h].device(), inner.backends[b].device());
                        self.crossed.push(Transfer { tensor: r, bytes: n as u64, from, to, pinned });
                    }
                    None => return Err(Error::internal(format!("no backend holds {}", ctx.label(r)))),
                }
            }
            let stage = current.stages[b].as_ref().ok_or_else(|| Error::internal("a part without its stage"))?;
            let st = self.slots[b].as_mut().ok_or_else(|| Error::internal("a backend without its storage"))?;
            inner.backends[b].compute_steps(ctx, &stage.graph, st, part.steps.clone())?;
            for &r in &part.writes {
                self.holder.insert(r, b);
            }
        }
        Ok(())
    }

    /// Copies root `r` (`n` bytes) from backend `h`'s storage into `b`'s:
    /// through the pinned staging buffer when either backend has pinned
    /// memory (grown to fit; if it cannot be had, through pageable memory);
    /// true when it went pinned.
    fn cross(&mut self, inner: &Inner<B>, ctx: &Context, r: TensorId, h: usize, b: usize, n: usize) -> Result<bool> {
        let have = self.staging.as_ref().map_or(0, |s| s.1);
        if n > have {
            // at least doubled, so a graph's crossings settle on one buffer
            let want = n.max(2 * have);
            if let Some(p) = [h, b].into_iter().find_map(|x| inner.backends[x].pinned_buffer(want)).and_then(Result::ok)
            {
                self.staging = Some((p, want));
            }
        }
        match self.staging.as_mut() {
            Some((pin, len)) if n > 0 && n <= *len => {
                let buf = &mut pin.bytes_mut()?[..n];
                let src = self.slots[h].as_ref().ok_or_else(|| Error::internal("a backend without its storage"))?;
                src.read_bytes_into(ctx, r, buf)?;
                let dst = self.slots[b].as_mut().ok_or_else(|| Error::internal("a backend without its storage"))?;
                dst.set_bytes(ctx, r, buf)?;
                Ok(true)
            }
            _ => {
                let bytes = self.slot(h)?.read_bytes(ctx, r)?;
                self.slot_mut(b)?.set_bytes(ctx, r, &bytes)?;
                Ok(false)
            }
        }
    }

    /// The backend holding `id`'s root: its latest writer, else the first
    /// whose stage places it.
    fn holder_of(&self, ctx: &Context, id: TensorId) -> Result<usize> {
        let root = ctx.storage_root(id)?;
        if let Some(&b) = self.holder.get(&root) {
            return Ok(b);
        }
        self.placing(root)
            .next()
            .ok_or_else(|| Error::Mismatch(format!("{} is not in this storage's graph", ctx.label(id))))
    }

    /// The backends whose bound stage places `root`.
    fn placing(&self, root: TensorId) -> impl Iterator<Item = usize> + '_ {
        self.current
            .stages
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.as_ref().is_some_and(|s| s.plan.place(root).is_some()))
            .map(|(b, _)| b)
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
        let b =
            self.holder.get(&id).copied().ok_or_else(|| {
                Error::Invalid(format!("{} is not a leaf this storage keeps a copy of", ctx.label(id)))
            })?;
        let bytes = ctx.leaf_bytes(id).ok_or_else(|| Error::NoData(ctx.label(id)))?;
        self.slot_mut(b)?.set_bytes(ctx, id, bytes)
    }
    /// Sets a written leaf's state where it is held, an input placed in the
    /// buffers in every backend that reads it.
    fn set_bytes(&mut self, ctx: &Context, id: TensorId, bytes: &[u8]) -> Result<()> {
        if let Some(&b) = self.holder.get(&id) {
            return self.slot_mut(b)?.set_bytes(ctx, id, bytes);
        }
        let mut set = false;
        for b in self.placing(id).collect::<Vec<_>>() {
            let st = self.slot_mut(b)?;
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
        self.slot(self.holder_of(ctx, id)?)?.read_f32(ctx, id)
    }
    fn read_bytes(&self, ctx: &Context, id: TensorId) -> Result<Vec<u8>> {
        self.slot(self.holder_of(ctx, id)?)?.read_bytes(ctx, id)
    }
}
