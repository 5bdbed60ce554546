//! Device memory of one planned graph: the plan buffer and device copies of
//! the graph's leaves (uploaded once, at [`CudaBackend::alloc`]).

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};

use super::exec::{cuda_err, to_f32_rows};
use super::{CudaBackend, CudaRules, Device};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::plan::{Allocator, Place, Plan};
use crate::tensor::{Op, TensorId};

/// The memory of one planned graph on a CUDA device: the plan buffer, and
/// device copies of every data-holding leaf the graph reads or writes. Holds
/// the plan it was made for; reads results back with [`CudaStorage::read_f32`].
pub struct CudaStorage {
    pub(crate) dev: Arc<Device>,
    pub(crate) plan: Plan,
    buffer: CudaSlice<u8>,
    leaves: HashMap<TensorId, CudaSlice<u8>>,
}

impl std::fmt::Debug for CudaStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaStorage({} buffer bytes, {} leaves)", self.buffer.len(), self.leaves.len())
    }
}

/// Where one storage root's bytes are on the device, for one compute.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Region {
    pub base: u64,
    pub len: usize,
    pub writable: bool,
}

impl CudaBackend {
    /// Device memory for `graph` placed by `plan` (made with [`CudaRules`] or
    /// any rules with 256-byte alignment): a zeroed plan buffer, and every
    /// data-holding leaf uploaded now, once.
    pub fn alloc(&self, ctx: &Context, graph: &Graph, plan: Plan) -> Result<CudaStorage> {
        graph.check_context(ctx)?;
        plan.check_graph(graph)?;
        let stream = &self.dev.stream;
        let buffer = stream.alloc_zeros::<u8>(plan.buffer_size().max(1)).map_err(cuda_err("alloc plan buffer"))?;
        let mut leaves = HashMap::new();
        for (root, place) in plan.places() {
            if matches!(place, Place::Leaf | Place::LeafCopy) {
                let bytes = ctx.leaf_bytes(root).ok_or_else(|| Error::NoData(ctx.label(root)))?;
                let dev = if bytes.is_empty() { stream.alloc_zeros::<u8>(1) } else { stream.clone_htod(bytes) }
                    .map_err(cuda_err("upload leaf"))?;
                leaves.insert(root, dev);
            }
        }
        Ok(CudaStorage { dev: self.dev.clone(), plan, buffer, leaves })
    }

    /// Plans `graph` with [`CudaRules`], allocates and computes it: the
    /// one-call way. Only leaves, inputs and outputs can be read afterwards.
    pub fn run(&self, ctx: &Context, graph: &Graph) -> Result<CudaStorage> {
        let plan = Allocator::new(CudaRules).plan(ctx, graph)?;
        let mut storage = self.alloc(ctx, graph, plan)?;
        self.compute(ctx, graph, &mut storage)?;
        Ok(storage)
    }
}

impl CudaStorage {
    /// The plan this storage follows.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Writes `bytes` into the device storage of an input leaf `id` that the
    /// plan placed (in the plan buffer, or the device copy of a leaf).
    pub fn set_bytes(&mut self, ctx: &Context, id: TensorId, bytes: &[u8]) -> Result<()> {
        let t = ctx.tensor(id)?;
        if t.op() != Op::Leaf {
            return Err(Error::Invalid(format!("{} is not a leaf", ctx.label(id))));
        }
        let size = t.layout().nbytes();
        if bytes.len() != size {
            return Err(Error::DataSize { name: ctx.label(id), expected: size, found: bytes.len() });
        }
        if size == 0 {
            return Ok(());
        }
        let stream = self.dev.stream.clone();
        let r = match self.plan.place(id) {
            Some(Place::Buffer { offset }) if offset + size <= self.buffer.len() => {
                stream.memcpy_htod(bytes, &mut self.buffer.slice_mut(offset..offset + size))
            }
            Some(Place::Leaf | Place::LeafCopy) => match self.leaves.get_mut(&id) {
                Some(b) if b.len() >= size => stream.memcpy_htod(bytes, &mut b.slice_mut(0..size)),
                _ => return Err(Error::NoData(ctx.label(id))),
            },
            Some(Place::Buffer { .. }) => return Err(Error::Mismatch("plan offset outside buffer".into())),
            None => return Err(Error::Mismatch(format!("{} is not in this storage's graph", ctx.label(id)))),
        };
        r.map_err(cuda_err("upload input"))
    }
    /// [`CudaStorage::set_bytes`] with typed values.
    pub fn set_data<T: crate::host::Element>(&mut self, ctx: &Context, id: TensorId, values: &[T]) -> Result<()> {
        let dtype = ctx.layout(id)?.dtype;
        if dtype != T::DTYPE {
            return Err(Error::DTypeMismatch {
                what: format!("set_data({})", ctx.label(id)),
                expected: dtype,
                found: T::DTYPE,
            });
        }
        self.set_bytes(ctx, id, bytemuck::cast_slice(values))
    }

    /// Device base and length of every storage root the graph touches.
    pub(crate) fn regions(&mut self, ctx: &Context, graph: &Graph) -> Result<HashMap<TensorId, Region>> {
        let stream = self.dev.stream.clone();
        let buf_len = self.buffer.len();
        let buf_base = {
            let (p, _sync) = self.buffer.device_ptr_mut(&stream);
            p
        };
        let mut out = HashMap::new();
        for &id in graph.leafs().iter().chain(graph.nodes()) {
            let t = ctx.tensor(id)?;
            if t.view_src().is_some() {
                continue;
            }
            let size = t.layout().nbytes();
            let region = match self.plan.place(id) {
                Some(p @ (Place::Leaf | Place::LeafCopy)) => {
                    let b = self.leaves.get_mut(&id).ok_or_else(|| Error::NoData(ctx.label(id)))?;
                    let len = b.len();
                    let (base, _sync) = b.device_ptr_mut(&stream);
                    Region { base, len, writable: p == Place::LeafCopy }
                }
                Some(Place::Buffer { offset }) if offset.checked_add(size).is_some_and(|e| e <= buf_len) => {
                    Region { base: buf_base + offset as u64, len: size, writable: true }
                }
                Some(Place::Buffer { offset }) => {
                    return Err(Error::Mismatch(format!(
                        "{} placed at {offset}+{size} outside the {buf_len}-byte buffer",
                        ctx.label(id)
                    )))
                }
                None => return Err(Error::Mismatch(format!("{} has no place in the plan", ctx.label(id)))),
            };
            out.insert(id, region);
        }
        Ok(out)
    }

    /// The values of tensor `id` (any layout, views included; F32/F16/BF16/I32
    /// and the 12 block types, dequantized on the device bit-identically to
    /// the CPU, transposed quantized views included) as f32 in logical order,
    /// as they are after the last compute.
    pub fn read_f32(&self, ctx: &Context, id: TensorId) -> Result<Vec<f32>> {
        let t = ctx.tensor(id)?;
        let root = ctx.storage_root(id)?;
        if !self.plan.is_retained(root) {
            return Err(Error::Invalid(format!(
                "{} is an intermediate whose memory the plan reuses: mark it as an output to read it",
                ctx.label(id)
            )));
        }
        let stream = &self.dev.stream;
        let (base, len) = match self.plan.place(root) {
            Some(Place::Leaf | Place::LeafCopy) => {
                let b = self.leaves.get(&root).ok_or_else(|| Error::NoData(ctx.label(root)))?;
                (b.device_ptr(stream).0, b.len())
            }
            Some(Place::Buffer { offset }) => {
                let size = ctx.tensor(root)?.layout().nbytes();
                if offset + size > self.buffer.len() {
                    return Err(Error::Mismatch("plan offset outside buffer".into()));
                }
                (self.buffer.device_ptr(stream).0 + offset as u64, size)
            }
            None => return Err(Error::Mismatch(format!("{} is not in this storage's graph", ctx.label(id)))),
        };
        let src = super::exec::Bound::new(base, len, t.view_offs(), *t.layout())?;
        if src.l.is_empty() {
            return Ok(Vec::new());
        }
        let (scratch, _) = to_f32_rows(&self.dev, &src)?;
        stream.clone_dtoh(&scratch).map_err(cuda_err("download"))
    }
}
