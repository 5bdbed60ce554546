//! Tensor headers: a layout, the op that produces the tensor, its sources and
//! the storage it may borrow. Headers are metadata; data lives elsewhere.

use std::fmt;

use crate::layout::Layout;

/// Handle of a tensor in its [`Context`](crate::Context): the arena index plus the
/// context's id, so a handle used with the wrong context is an error, not a wrong tensor;
/// and the context's epoch when the tensor was made, so a handle to a tensor that
/// [`Context::truncate`](crate::Context::truncate) removed is an error, not the tensor
/// that later took its index. Handles order by creation (program order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorId {
    pub(crate) ctx: u32,
    pub(crate) idx: u32,
    pub(crate) epoch: u32,
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
    /// ggml's `get_rows`: rows of `src[0]` picked by the I32 indices in `src[1]`.
    GetRows,
    /// ggml's `set_rows`: rows of `src[1]` written into `src[0]`'s storage at
    /// the I32 indices in `src[2]` (the result is a view of `src[0]`).
    SetRows,
    /// ggml's `rms_norm`: each row divided by `sqrt(mean(x²) + eps)`.
    RmsNorm {
        /// Added to the mean square before the square root.
        eps: f32,
    },
    /// ggml's `norm`: each row centred and divided by `sqrt(var + eps)`.
    Norm {
        /// Added to the variance before the square root.
        eps: f32,
    },
    /// ggml's `soft_max_ext`: row softmax of `src[0]*scale + slope*src[1]` (mask optional).
    SoftMax {
        /// Factor applied to the input before the mask is added.
        scale: f32,
        /// ALiBi maximum bias (0: no ALiBi, slope 1).
        max_bias: f32,
    },
    /// ggml's `diag_mask_inf`: elements with `i0 > n_past + i1` set to `-inf`.
    DiagMaskInf {
        /// Number of past positions every row may see beyond the diagonal.
        n_past: i32,
    },
    /// ggml's `rope_ext`: rotary position embedding of `src[0]` at the I32
    /// positions `src[1]` (optional frequency factors `src[2]`).
    Rope(RopeParams),
    /// ggml's `concat`: `src[0]` and `src[1]` joined along `dim`.
    Concat {
        /// The dim along which the inputs are joined (0..4).
        dim: usize,
    },
    /// ggml's `repeat`: `src[0]` tiled to the result's shape.
    Repeat,
}

/// Parameters of [`Op::Rope`], ggml's `rope_ext` arguments.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeParams {
    /// Number of leading values of each row that are rotated (even, at most `ne0`);
    /// the rest pass through unchanged.
    pub n_dims: i32,
    /// [`RopeParams::NORMAL`] (rotate adjacent pairs) or [`RopeParams::NEOX`]
    /// (rotate `x[i]` with `x[i + n_dims/2]`).
    pub mode: i32,
    /// The training context length YaRN's correction dims are computed for.
    pub n_ctx_orig: i32,
    /// Base of the frequencies: pair `i` turns at `freq_base^(-2i/n_dims)` per position.
    pub freq_base: f32,
    /// Position interpolation factor (1: none).
    pub freq_scale: f32,
    /// YaRN's extrapolation mix (0: plain interpolation, no YaRN).
    pub ext_factor: f32,
    /// Magnitude scale of the rotated values.
    pub attn_factor: f32,
    /// YaRN's fast correction boundary (in rotations).
    pub beta_fast: f32,
    /// YaRN's slow correction boundary (in rotations).
    pub beta_slow: f32,
}

impl RopeParams {
    /// ggml's `GGML_ROPE_TYPE_NORMAL`: rotate `(x[2i], x[2i+1])`.
    pub const NORMAL: i32 = 0;
    /// ggml's `GGML_ROPE_TYPE_NEOX`: rotate `(x[i], x[i + n_dims/2])`.
    pub const NEOX: i32 = 2;

    /// `n_dims` and `mode` with the defaults of `ggml_rope`: `freq_base` 10000,
    /// `freq_scale` 1, `ext_factor` 0, `attn_factor` 1, `beta_fast` 32,
    /// `beta_slow` 1, `n_ctx_orig` 0 (the betas only matter when `ext_factor != 0`).
    pub fn new(n_dims: i32, mode: i32) -> RopeParams {
        RopeParams {
            n_dims,
            mode,
            n_ctx_orig: 0,
            freq_base: 10000.0,
            freq_scale: 1.0,
            ext_factor: 0.0,
            attn_factor: 1.0,
            beta_fast: 32.0,
            beta_slow: 1.0,
        }
    }
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
            Op::GetRows => "get_rows",
            Op::SetRows => "set_rows",
            Op::RmsNorm { .. } => "rms_norm",
            Op::Norm { .. } => "norm",
            Op::SoftMax { .. } => "soft_max",
            Op::DiagMaskInf { .. } => "diag_mask_inf",
            Op::Rope(_) => "rope",
            Op::Concat { .. } => "concat",
            Op::Repeat => "repeat",
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
