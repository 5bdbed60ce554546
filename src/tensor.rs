//! Tensor headers: a layout, the op that produces the tensor, its sources and
//! the storage it may borrow. Headers are metadata; data lives elsewhere.

use crate::layout::Layout;

pub use crate::id::TensorId;
pub use crate::op::{BackOp, BinaryOp, GluOp, Op, RopeParams, UnaryOp};

/// User-set roles of a tensor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    /// Set by the user before each run (never overwritten by the planner).
    pub input: bool,
    /// Read by the user after a run (never overwritten or freed by the planner).
    pub output: bool,
    /// A trainable parameter (kept like an input).
    pub param: bool,
}

/// A tensor header.
#[derive(Clone, Debug)]
pub struct Tensor {
    pub(crate) layout: Layout,
    pub(crate) op: Op,
    pub(crate) src: Vec<TensorId>,
    pub(crate) view_src: Option<TensorId>,
    pub(crate) view_offs: usize,
    pub(crate) name: String,
    pub(crate) flags: Flags,
    /// Writes to the storages this node touches that were built before it: they
    /// must run first (program order), and are pulled into any graph holding it.
    pub(crate) after: Vec<TensorId>,
    /// For a node that writes an existing storage: the nodes built before it that
    /// read that storage. Ordering only: they run first when they are in the graph.
    pub(crate) after_readers: Vec<TensorId>,
}

impl Tensor {
    /// The header of `op`'s result: its sources are the op's operands.
    pub(crate) fn new(layout: Layout, op: Op) -> Tensor {
        Tensor {
            layout,
            src: op.operands(),
            op,
            view_src: None,
            view_offs: 0,
            name: String::new(),
            flags: Flags::default(),
            after: Vec::new(),
            after_readers: Vec::new(),
        }
    }
    /// Type, shape and strides.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    /// The producing op.
    pub fn op(&self) -> Op {
        self.op
    }
    /// Source tensors, in the op's order.
    pub fn src(&self) -> &[TensorId] {
        &self.src
    }
    /// The tensor whose storage this one borrows (the root, never a view).
    pub fn view_src(&self) -> Option<TensorId> {
        self.view_src
    }
    /// Byte offset into the borrowed storage.
    pub fn view_offs(&self) -> usize {
        self.view_offs
    }
    /// Name (may be empty).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// User-set roles.
    pub fn flags(&self) -> Flags {
        self.flags
    }
    /// True for a compute op that writes into another tensor's storage
    /// (`*_inplace` ops and `cpy`).
    pub fn writes_in_place(&self) -> bool {
        self.view_src.is_some() && self.op.is_compute()
    }
    /// Nodes that must run before this one besides its sources (program-order
    /// edges of the aliasing rules).
    pub fn order_after(&self) -> impl Iterator<Item = TensorId> + '_ {
        self.after.iter().chain(self.after_readers.iter()).copied()
    }
}
