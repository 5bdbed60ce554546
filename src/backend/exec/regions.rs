//! Where each storage root's bytes are during a compute: the regions table
//! the executor binds operands against.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::plan::{Place, Plan};
use crate::tensor::TensorId;

/// Where one storage root's bytes are during a compute: a backend address
/// (`B`), their length, and whether the compute may write them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Region<B> {
    pub base: B,
    pub len: usize,
    pub writable: bool,
}

/// The region of each storage root of a compute, by arena index: a dense
/// table, since the loop looks up every operand of every node.
#[derive(Debug)]
pub(crate) struct Regions<B> {
    slots: Vec<Option<(TensorId, Region<B>)>>,
    /// Distinct for every table of the process and every change to one:
    /// what [`Bindings`](super::bindings::Bindings) made from it are valid for.
    revision: u64,
}

/// The next [`Regions::revision`].
fn next_revision() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl<B: Copy + PartialEq> Regions<B> {
    fn new() -> Self {
        Regions { slots: Vec::new(), revision: next_revision() }
    }
    /// Sets root `id`'s region (a new revision if that changes it).
    pub fn insert(&mut self, id: TensorId, r: Region<B>) {
        let i = id.index();
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        if self.slots[i] != Some((id, r)) {
            self.slots[i] = Some((id, r));
            self.revision = next_revision();
        }
    }
}

impl<B> Regions<B> {
    /// This table's revision: a new one for every table and every change.
    pub fn revision(&self) -> u64 {
        self.revision
    }
    /// The region of root `id`.
    pub fn get(&self, id: &TensorId) -> Option<&Region<B>> {
        match self.slots.get(id.index()) {
            Some(Some((k, r))) if k == id => Some(r),
            _ => None,
        }
    }
    /// Every root and its region, in arena order.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))] // a CUDA graph's key
    pub fn iter(&self) -> impl Iterator<Item = (&TensorId, &Region<B>)> {
        self.slots.iter().flatten().map(|(k, r)| (k, r))
    }
}

/// The region of every storage root `graph` touches: a leaf's from
/// `leaf(id, place)` (`Place::Leaf` or `Place::LeafCopy`), a buffer root's at
/// `buffer(offset)`, checked to lie in the `buf_len`-byte plan buffer.
pub(crate) fn regions<B: Copy + PartialEq>(
    ctx: &Context,
    graph: &Graph,
    plan: &Plan,
    buf_len: usize,
    mut leaf: impl FnMut(TensorId, Place) -> Result<Region<B>>,
    buffer: impl Fn(usize) -> B,
) -> Result<Regions<B>> {
    let mut out = Regions::new();
    for &id in graph.leafs().iter().chain(graph.nodes()) {
        let t = ctx.tensor(id)?;
        if t.view_src().is_some() {
            continue;
        }
        let size = t.layout().nbytes();
        let region = match plan.place(id) {
            Some(p @ (Place::Leaf | Place::LeafCopy)) => leaf(id, p)?,
            Some(Place::Buffer { offset }) if offset.checked_add(size).is_some_and(|e| e <= buf_len) => {
                Region { base: buffer(offset), len: size, writable: true }
            }
            Some(Place::Buffer { offset }) => {
                return Err(Error::internal(format!(
                    "{} placed at {offset}+{size} outside the {buf_len}-byte buffer",
                    ctx.label(id)
                )))
            }
            None => return Err(Error::internal(format!("{} has no place in the plan", ctx.label(id)))),
        };
        out.insert(id, region);
    }
    Ok(out)
}
