//! The memory of one planned graph on the CPU: the plan buffer, the copies
//! of the leaves the graph writes, repacked weights, and reading results back.

use crate::id::IdMap;

use super::copy;
use super::mem::{Bytes, Strided, StridedMut};
use crate::backend::exec::{self, Bindings, Region, Regions};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::host::HostBuffer;
use crate::plan::{Place, Plan};
use crate::tensor::TensorId;

/// The memory of one planned graph on the CPU: the plan buffer and the
/// backend's copies of leaves the graph writes into. Holds the plan it was
/// made for; reads results back with [`CpuStorage::read_f32`].
#[derive(Debug)]
pub struct CpuStorage {
    pub(super) plan: Plan,
    pub(super) buffer: HostBuffer,
    leaf_copies: IdMap<HostBuffer>,
    /// Repacked weight matrices by leaf ([`CpuBackend::with_repacked_weights`](crate::CpuBackend::with_repacked_weights));
    /// `None` for a leaf that does not qualify.
    pub(super) packed: IdMap<Option<HostBuffer>>,
    /// The regions of the last compute, kept while the plan and the buffer stay
    /// (a node's region depends on nothing else); leaves' are refreshed each time.
    pub(super) regions: Option<Regions<Bytes>>,
    /// The operands bound against `regions`, for the computes that follow.
    pub(super) bindings: Bindings<Strided, StridedMut>,
}

/// The backend's copies of the leaves `plan` says the graph writes: those in
/// `held` are kept as they are (and so are the rest of `held`), the others are
/// taken from the context.
fn leaf_copies(ctx: &Context, graph: &Graph, plan: &Plan, mut held: IdMap<HostBuffer>) -> Result<IdMap<HostBuffer>> {
    graph.check_context(ctx)?;
    plan.check_graph(graph)?;
    let mut copies = IdMap::default();
    for (root, place) in plan.places() {
        if place == Place::LeafCopy {
            let copy = match held.remove(&root) {
                Some(c) => c,
                None => HostBuffer::from_bytes(ctx.leaf_bytes(root).ok_or_else(|| Error::NoData(ctx.label(root)))?)?,
            };
            copies.insert(root, copy);
        }
    }
    // copies the new plan does not use are kept for a later rebind
    copies.extend(held);
    Ok(copies)
}

impl CpuStorage {
    /// Memory for `graph` placed by `plan`: a zeroed plan buffer of at least
    /// `capacity` bytes, and copies of the leaves the graph writes, taken from
    /// the context now.
    pub(super) fn new(ctx: &Context, graph: &Graph, plan: Plan, capacity: usize) -> Result<CpuStorage> {
        let leaf_copies = leaf_copies(ctx, graph, &plan, IdMap::default())?;
        let buffer = HostBuffer::zeroed(plan.buffer_size().max(capacity))?;
        Ok(CpuStorage {
            buffer,
            plan,
            leaf_copies,
            packed: IdMap::default(),
            regions: None,
            bindings: Bindings::default(),
        })
    }
    /// The plan this storage follows.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }
    /// Bytes of the plan buffer this storage holds (at least the plan's size).
    pub fn capacity(&self) -> usize {
        self.buffer.len()
    }
    /// Switches this storage to `plan` (of another graph over the same
    /// context), keeping its buffer; errors if the plan does not fit. Leaf
    /// copies this storage already holds are kept as they are (state such as a
    /// KV cache carries over from graph to graph); new ones are taken from the
    /// context.
    pub fn rebind(&mut self, ctx: &Context, graph: &Graph, plan: Plan) -> Result<()> {
        if plan.buffer_size() > self.buffer.len() {
            return Err(Error::Invalid(format!(
                "plan needs a {}-byte buffer but this storage holds {} bytes",
                plan.buffer_size(),
                self.buffer.len()
            )));
        }
        self.leaf_copies = leaf_copies(ctx, graph, &plan, std::mem::take(&mut self.leaf_copies))?;
        // repacked weights stay for later graphs; those of dropped tensors go
        self.packed.retain(|&id, _| ctx.tensor(id).is_ok());
        self.plan = plan;
        self.regions = None;
        Ok(())
    }
    /// Grows the plan buffer to at least `capacity` bytes (its contents are not
    /// kept: the next compute rewrites them; inputs placed in it must be set again).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], the old buffer kept.
    pub fn grow(&mut self, capacity: usize) -> Result<()> {
        if capacity > self.buffer.len() {
            self.buffer = HostBuffer::zeroed(capacity)?;
            self.regions = None;
        }
        Ok(())
    }
    /// Sets the backend's copy of leaf `id` back to the context's data (e.g. to
    /// clear a KV cache).
    pub fn reset_leaf(&mut self, ctx: &Context, id: TensorId) -> Result<()> {
        let bytes = ctx.leaf_bytes(id).ok_or_else(|| Error::NoData(ctx.label(id)))?;
        match self.leaf_copies.get_mut(&id) {
            Some(copy) => {
                copy.as_bytes_mut().copy_from_slice(bytes);
                Ok(())
            }
            None => Err(Error::Invalid(format!("{} is not a leaf this storage keeps a copy of", ctx.label(id)))),
        }
    }

    /// Writes `bytes` into the storage of an input `id` that the plan placed
    /// (a leaf without data in the context, e.g. from a `no_alloc` context).
    pub fn set_bytes(&mut self, ctx: &Context, id: TensorId, bytes: &[u8]) -> Result<()> {
        let t = ctx.tensor(id)?;
        if !t.op().is_leaf() && !self.plan.is_external(id) {
            return Err(Error::Invalid(format!("{} is not a leaf nor an external root", ctx.label(id))));
        }
        let size = t.layout().nbytes();
        if bytes.len() != size {
            return Err(Error::DataSize { name: ctx.label(id), expected: size, found: bytes.len() });
        }
        let dst = match self.plan.place(id) {
            Some(Place::Buffer { offset }) => &mut self.buffer.as_bytes_mut()[offset..offset + size],
            Some(Place::LeafCopy) => match self.leaf_copies.get_mut(&id) {
                Some(b) => b.as_bytes_mut(),
                None => return Err(Error::NoData(ctx.label(id))),
            },
            Some(Place::Leaf) => {
                return Err(Error::Invalid(format!("{} holds its data in the context: set it there", ctx.label(id))))
            }
            None => return Err(Error::Mismatch(format!("{} is not in this storage's graph", ctx.label(id)))),
        };
        dst.copy_from_slice(bytes);
        Ok(())
    }
    /// [`CpuStorage::set_bytes`] with typed values (checked against the dtype).
    pub fn set_data<T: crate::host::Element>(&mut self, ctx: &Context, id: TensorId, values: &[T]) -> Result<()> {
        crate::backend::traits::BackendStorage::set_data(self, ctx, id, values)
    }

    /// Base and length of every storage root the graph touches (the plan
    /// buffer's bytes are at `buf_base`), made once per plan and buffer, the
    /// leaves' refreshed every call.
    pub(super) fn regions(&mut self, ctx: &Context, graph: &Graph, buf_base: *mut u8) -> Result<&Regions<Bytes>> {
        let copies = &mut self.leaf_copies;
        // a leaf's bytes may move between computes (new data set in the context)
        let mut leaf = |id: TensorId, place: Place| match place {
            Place::LeafCopy => {
                let b = copies.get_mut(&id).ok_or_else(|| Error::NoData(ctx.label(id)))?;
                Ok(Region { base: Bytes::Write(b.as_bytes_mut().as_mut_ptr()), len: b.len(), writable: true })
            }
            _ => {
                let b = ctx.leaf_bytes(id).ok_or_else(|| Error::NoData(ctx.label(id)))?;
                Ok(Region { base: Bytes::Read(b.as_ptr()), len: b.len(), writable: false })
            }
        };
        match &mut self.regions {
            Some(r) => {
                for &id in graph.leafs() {
                    if let Some(p @ (Place::Leaf | Place::LeafCopy)) = self.plan.place(id) {
                        r.insert(id, leaf(id, p)?);
                    }
                }
                Ok(r)
            }
            slot @ None => {
                let r = exec::regions(ctx, graph, &self.plan, self.buffer.len(), leaf, |offset| {
                    Bytes::Write(buf_base.wrapping_add(offset))
                })?;
                Ok(slot.insert(r))
            }
        }
    }

    /// Bytes this storage holds in repacked weights
    /// ([`CpuBackend::with_repacked_weights`](crate::CpuBackend::with_repacked_weights); 0 when off or nothing qualified).
    pub fn repacked_bytes(&self) -> usize {
        self.packed.values().flatten().map(HostBuffer::len).sum()
    }

    /// The bytes of the storage under `id` (its root's), after the last compute.
    pub(crate) fn root_bytes<'a>(&'a self, ctx: &'a Context, id: TensorId) -> Result<&'a [u8]> {
        let root = ctx.storage_root(id)?;
        if !self.plan.is_retained(root) {
            return Err(Error::Invalid(format!(
                "{} is an intermediate whose memory the plan reuses: mark it as an output (Context::set_output or build_forward_expand) to read it",
                ctx.label(id)
            )));
        }
        match self.plan.place(root) {
            Some(Place::Leaf) => ctx.leaf_bytes(root).ok_or_else(|| Error::NoData(ctx.label(root))),
            Some(Place::LeafCopy) => {
                self.leaf_copies.get(&root).map(HostBuffer::as_bytes).ok_or_else(|| Error::NoData(ctx.label(root)))
            }
            Some(Place::Buffer { offset }) => {
                let size = ctx.tensor(root)?.layout().nbytes();
                self.buffer
                    .as_bytes()
                    .get(offset..offset + size)
                    .ok_or_else(|| Error::internal("plan offset outside the buffer"))
            }
            None => Err(Error::Mismatch(format!("{} is not in this storage's graph", ctx.label(id)))),
        }
    }

    /// The values of tensor `id` (any type, any layout, views included; block
    /// types dequantized) as f32 in logical order, as they are after the last compute.
    pub fn read_f32(&self, ctx: &Context, id: TensorId) -> Result<Vec<f32>> {
        let t = ctx.tensor(id)?;
        let bytes = self.root_bytes(ctx, id)?;
        let src = Strided::new(bytes.as_ptr(), bytes.len(), t.view_offs(), *t.layout())?;
        copy::read_f32(src)
    }

    /// The raw bytes of a contiguous tensor `id` (e.g. a quantized result), after the last compute.
    pub fn read_bytes(&self, ctx: &Context, id: TensorId) -> Result<Vec<u8>> {
        let t = ctx.tensor(id)?;
        let l = t.layout();
        if !l.is_contiguous() {
            return Err(Error::NotContiguous { op: "read_bytes", ne: l.ne, nb: l.nb, dtype: l.dtype });
        }
        let bytes = self.root_bytes(ctx, id)?;
        bytes
            .get(t.view_offs()..t.view_offs() + l.nbytes())
            .map(<[u8]>::to_vec)
            .ok_or_else(|| Error::internal("view outside its storage"))
    }
}
