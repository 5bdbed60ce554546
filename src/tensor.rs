//! Tensor headers: a layout, the op that produces the tensor, its sources and
//! the storage it may borrow. Headers are metadata; data lives elsewhere.

use std::fmt;

use crate::layout::Layout;

/// Handle of a tensor in its [`Context`](crate::Context): the arena index plus the
/// context's id, so a handle used with the wrong context is an error, not a wrong tensor.
/// Handles order by creation (program order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorId {
    pub(crate) ctx: u32,
    pub(crate) idx: u32,
}

impl TensorId {
    /// The arena index (creation order).
    pub fn index(self) -> usize {
        self.idx as usize
    }
}

impl fmt::Display for TensorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.idx)
    }
}

/// Elementwise functions of one input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `max(x, 0)`.
    Relu,
    /// GELU, tanh approximation (ggml's `gelu`).
    Gelu,
    /// `x * sigmoid(x)`.
    Silu,
    /// `-x`.
    Neg,
    /// `x * x`.
    Sqr,
    /// `sqrt(x)`.
    Sqrt,
    /// `exp(x)`.
    Exp,
}

impl UnaryOp {
    /// Every unary op.
    pub const ALL: [UnaryOp; 7] =
        [UnaryOp::Relu, UnaryOp::Gelu, UnaryOp::Silu, UnaryOp::Neg, UnaryOp::Sqr, UnaryOp::Sqrt, UnaryOp::Exp];

    /// ggml's name.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Relu => "relu",
            UnaryOp::Gelu => "gelu",
            UnaryOp::Silu => "silu",
            UnaryOp::Neg => "neg",
            UnaryOp::Sqr => "sqr",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Exp => "exp",
        }
    }
}

/// Elementwise functions of two inputs (the second broadcast into the first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
}

impl BinaryOp {
    /// ggml's name.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
        }
    }
}

/// What produces a tensor. Metadata-only ops ([`Op::is_metadata`]) move no bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    /// A leaf: data set by the user (or none, in a `no_alloc` context).
    Leaf,
    /// `view_1d..4d`: a strided window into the source's storage.
    View,
    /// `reshape_1d..4d` of a contiguous tensor.
    Reshape,
    /// Swap dims 0 and 1.
    Transpose,
    /// Source dim `i` moves to position `axes[i]`.
    Permute([usize; 4]),
    /// Stride-0 broadcast of size-1 dims.
    Expand,
    /// Copy into a new contiguous tensor of the same type.
    Cont,
    /// Copy `src[0]` into `src[1]`'s storage, converting the type.
    Cpy,
    /// Copy into a new contiguous tensor with the source's shape.
    Dup,
    /// Elementwise `src[0] op src[1]`, `src[1]` broadcast by tiling.
    Binary(BinaryOp),
    /// `src[0] * s`.
    Scale(f32),
    /// Elementwise function.
    Unary(UnaryOp),
    /// Sum over dim 0.
    SumRows,
    /// ggml's `mul_mat`: `out[i3,i2,i1,i0] = Σ_k a[.., i0, k] * b[i3, i2, i1, k]`.
    MulMat,
}

impl Op {
    /// True for ops that only make a new header over existing bytes.
    pub fn is_metadata(&self) -> bool {
        matches!(self, Op::View | Op::Reshape | Op::Transpose | Op::Permute(_) | Op::Expand)
    }
    /// ggml's name of the op.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Leaf => "none",
            Op::View => "view",
            Op::Reshape => "reshape",
            Op::Transpose => "transpose",
            Op::Permute(_) => "permute",
            Op::Expand => "expand",
            Op::Cont => "cont",
            Op::Cpy => "cpy",
            Op::Dup => "dup",
            Op::Binary(b) => b.name(),
            Op::Scale(_) => "scale",
            Op::Unary(u) => u.name(),
            Op::SumRows => "sum_rows",
            Op::MulMat => "mul_mat",
        }
    }
}

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
        self.view_src.is_some() && !self.op.is_metadata() && self.op != Op::Leaf
    }
    /// Nodes that must run before this one besides its sources (program-order
    /// edges of the aliasing rules).
    pub fn order_after(&self) -> impl Iterator<Item = TensorId> + '_ {
        self.after.iter().chain(self.after_readers.iter()).copied()
    }
}
