//! The op registry: every op rgml knows, defined once. A variant names its
//! operands by role; the methods below give each op's name, operands in
//! source order, what its kernel may overwrite in place, and its cost. The
//! constructors in [`crate::ops`] give the shape and type rules; each backend
//! supplies one kernel per op family through the executor loop
//! (`backend/exec.rs`), the only other place that matches on ops.

use crate::error::Result;
use crate::id::TensorId;
use crate::layout::Layout;

mod back;
mod kinds;

pub use back::BackOp;
pub use kinds::{BinaryOp, GluOp, RopeParams, UnaryOp};

/// What produces a tensor, with its operands by role. Metadata-only ops
/// ([`Op::is_metadata`]) move no bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    /// A leaf: data set by the user (or none, in a `no_alloc` context).
    Leaf,
    /// `view_1d..4d`: a strided window into `src`'s storage.
    View {
        /// The viewed tensor.
        src: TensorId,
    },
    /// `reshape_1d..4d` of a contiguous `src`.
    Reshape {
        /// The reshaped tensor.
        src: TensorId,
    },
    /// Swap dims 0 and 1 of `src`.
    Transpose {
        /// The transposed tensor.
        src: TensorId,
    },
    /// Dim `i` of `src` moves to position `axes[i]`.
    Permute {
        /// The permuted tensor.
        src: TensorId,
        /// Where each source dim goes.
        axes: [usize; 4],
    },
    /// Stride-0 broadcast of the size-1 dims of `src`.
    Expand {
        /// The broadcast tensor.
        src: TensorId,
    },
    /// Copy of `src` into a new contiguous tensor of the same type.
    Cont {
        /// The copied tensor.
        src: TensorId,
    },
    /// Copy of `src` into `dst`'s storage, converting the type (a view of `dst`).
    Cpy {
        /// The copied tensor.
        src: TensorId,
        /// The tensor written.
        dst: TensorId,
    },
    /// Copy of `src` into a new contiguous tensor with its shape.
    Dup {
        /// The copied tensor.
        src: TensorId,
    },
    /// Copy of `src` into a new contiguous tensor on device `to` (the seeds'
    /// `.to(device)`): a split run computes it on the backend of `to`; a
    /// single backend, whose memory is the only one, runs it as `cont`.
    Transfer {
        /// The moved tensor.
        src: TensorId,
        /// Where its copy lives.
        to: crate::device::Device,
    },
    /// Elementwise `a op b`, `b` broadcast by tiling.
    Binary {
        /// The function.
        op: BinaryOp,
        /// The left operand (the result's shape).
        a: TensorId,
        /// The right operand, tiled over `a`.
        b: TensorId,
    },
    /// `a * s`.
    Scale {
        /// The input.
        a: TensorId,
        /// The factor.
        s: f32,
    },
    /// Elementwise function of `a`.
    Unary {
        /// The function.
        op: UnaryOp,
        /// The input.
        a: TensorId,
    },
    /// Gated linear unit `f(a) * b` (same shapes).
    Glu {
        /// The gate function.
        op: GluOp,
        /// The gate input.
        a: TensorId,
        /// The values gated.
        b: TensorId,
    },
    /// Sum over dim 0 of `a`.
    SumRows {
        /// The input.
        a: TensorId,
    },
    /// Mean over dim 0 of `a` (ggml's `mean`).
    Mean {
        /// The input.
        a: TensorId,
    },
    /// The index of each row's first largest value (ggml's `argmax`): I32.
    Argmax {
        /// The input (a matrix of values).
        a: TensorId,
    },
    /// How many elements of `a` and `b` are equal (ggml's `count_equal`): one I64.
    CountEqual {
        /// One operand (I32).
        a: TensorId,
        /// The other (I32, `a`'s shape).
        b: TensorId,
    },
    /// The mean over rows of the cross entropy of `softmax(logits)` against
    /// the target distribution `labels` (ggml's `cross_entropy_loss`): one value.
    CrossEntropyLoss {
        /// The logits, a row per sample.
        logits: TensorId,
        /// The target probabilities (`logits`' shape).
        labels: TensorId,
    },
    /// Sum of every element of `a` (ggml's `sum`): one value.
    Sum {
        /// The input.
        a: TensorId,
    },
    /// ggml's `mul_mat`: `out[i3,i2,i1,i0] = Σ_k a[.., i0, k] * b[i3, i2, i1, k]`.
    MulMat {
        /// The weights (any type), broadcast over `b`'s dims 2 and 3.
        a: TensorId,
        /// The activations.
        b: TensorId,
    },
    /// ggml's `mul_mat_id`: for each token `t` and slot `s`, the product of
    /// expert matrix `ids[s, t]` of `a` with row `(s mod b.ne1, t)` of `b`.
    MulMatId {
        /// The experts' weights `[K, M, n_expert]` (any `mul_mat` weight type).
        a: TensorId,
        /// The activations `[K, n_b, n_tokens]`, `n_b` 1 (shared by every slot) or `n_used`.
        b: TensorId,
        /// I32 expert numbers `[n_used, n_tokens]`.
        ids: TensorId,
    },
    /// ggml's `argsort`: each row's element indices in value order (I32).
    Argsort {
        /// The values.
        a: TensorId,
        /// Largest first (else smallest first); equal values keep index order.
        descending: bool,
    },
    /// ggml's `get_rows`: rows of `table` picked by the I32 `index`.
    GetRows {
        /// The rows picked from (any type).
        table: TensorId,
        /// I32 row numbers.
        index: TensorId,
    },
    /// ggml's `set_rows`: `rows` written into `dst`'s storage at the I32
    /// `index` (the result is a view of `dst`).
    SetRows {
        /// The tensor written.
        dst: TensorId,
        /// The new rows.
        rows: TensorId,
        /// I32 row numbers in `dst`.
        index: TensorId,
    },
    /// ggml's `rms_norm`: each row divided by `sqrt(mean(x²) + eps)`.
    RmsNorm {
        /// The input.
        a: TensorId,
        /// Added to the mean square before the square root.
        eps: f32,
        /// A weight the normed rows are multiplied by, broadcast as `mul`'s
        /// second operand (`rms_norm` then `mul`, fused).
        w: Option<TensorId>,
    },
    /// ggml's `norm`: each row centred and divided by `sqrt(var + eps)`.
    Norm {
        /// The input.
        a: TensorId,
        /// Added to the variance before the square root.
        eps: f32,
    },
    /// ggml's `soft_max_ext`: row softmax of `a*scale + slope*mask`.
    SoftMax {
        /// The input.
        a: TensorId,
        /// The optional additive mask, broadcast over `a`'s dims 2 and 3.
        mask: Option<TensorId>,
        /// Factor applied to the input before the mask is added.
        scale: f32,
        /// ALiBi maximum bias (0: no ALiBi, slope 1).
        max_bias: f32,
        /// Optional F32 attention sinks, one logit per head (`a.ne2`), each in
        /// its head's rows' denominators (ggml's `soft_max_add_sinks`).
        sinks: Option<TensorId>,
    },
    /// ggml's `diag_mask_inf`: elements with `i0 > n_past + i1` set to `-inf`.
    DiagMaskInf {
        /// The input.
        a: TensorId,
        /// Number of past positions every row may see beyond the diagonal.
        n_past: i32,
    },
    /// ggml's `rope_ext`: rotary position embedding of `a` at the I32 positions `pos`.
    Rope {
        /// The input.
        a: TensorId,
        /// I32 positions, one per `a.ne[2]`.
        pos: TensorId,
        /// Optional F32 frequency factors (one per rotated pair).
        freq: Option<TensorId>,
        /// The `rope_ext` arguments.
        p: RopeParams,
    },
    /// ggml's `concat`: `a` and `b` joined along `dim`.
    Concat {
        /// The first part.
        a: TensorId,
        /// The second part.
        b: TensorId,
        /// The dim along which the inputs are joined (0..4).
        dim: usize,
    },
    /// ggml's `repeat`: `a` tiled to the result's shape.
    Repeat {
        /// The tiled tensor.
        a: TensorId,
    },
    /// ggml's `flash_attn_ext`: per query row and head, `softmax(q·kᵀ·scale +
    /// slope·mask)·v` without a scores tensor.
    FlashAttn {
        /// Queries `[d, n_q, n_head, n_seq]`.
        q: TensorId,
        /// Keys `[d, n_kv, n_head_kv, n_seq]`.
        k: TensorId,
        /// Values `[d_v, n_kv, n_head_kv, n_seq]`.
        v: TensorId,
        /// The optional additive mask `[n_kv, >= n_q, ..]`, broadcast over heads.
        mask: Option<TensorId>,
        /// Factor applied to the scores before the mask is added.
        scale: f32,
        /// ALiBi maximum bias (0: no ALiBi, slope 1).
        max_bias: f32,
        /// Optional F32 attention sinks, one logit per query head (ggml's
        /// `flash_attn_ext_add_sinks`).
        sinks: Option<TensorId>,
    },
    /// A gradient or optimizer op (see [`BackOp`]).
    Back(BackOp),
}

/// Bytes a node reads and writes, counting each logical element once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Bytes read from sources.
    pub read: u64,
    /// Bytes written to the destination.
    pub written: u64,
}

impl Traffic {
    /// Read plus written.
    pub fn total(&self) -> u64 {
        self.read + self.written
    }
}

/// Logical bytes of a tensor: its elements at their type's size (a stride-0
/// broadcast counts each stored element once).
fn stored_bytes(l: &Layout) -> u64 {
    let distinct: i64 = (0..4).map(|i| if l.nb[i] == 0 { 1 } else { l.ne[i] }).product();
    (distinct as u64 / l.dtype.block_size() as u64) * l.dtype.type_size() as u64
}

impl Op {
    /// ggml's name of the op.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Leaf => "none",
            Op::View { .. } => "view",
            Op::Reshape { .. } => "reshape",
            Op::Transpose { .. } => "transpose",
            Op::Permute { .. } => "permute",
            Op::Expand { .. } => "expand",
            Op::Cont { .. } => "cont",
            Op::Cpy { .. } => "cpy",
            Op::Dup { .. } => "dup",
            Op::Transfer { .. } => "transfer",
            Op::Binary { op, .. } => op.name(),
            Op::Scale { .. } => "scale",
            Op::Unary { op, .. } => op.name(),
            Op::Glu { op, .. } => op.name(),
            Op::SumRows { .. } => "sum_rows",
            Op::Sum { .. } => "sum",
            Op::Mean { .. } => "mean",
            Op::Argmax { .. } => "argmax",
            Op::CountEqual { .. } => "count_equal",
            Op::CrossEntropyLoss { .. } => "cross_entropy_loss",
            Op::MulMat { .. } => "mul_mat",
            Op::MulMatId { .. } => "mul_mat_id",
            Op::Argsort { .. } => "argsort",
            Op::GetRows { .. } => "get_rows",
            Op::SetRows { .. } => "set_rows",
            Op::RmsNorm { .. } => "rms_norm",
            Op::Norm { .. } => "norm",
            Op::SoftMax { .. } => "soft_max",
            Op::DiagMaskInf { .. } => "diag_mask_inf",
            Op::Rope { .. } => "rope",
            Op::Concat { .. } => "concat",
            Op::Repeat { .. } => "repeat",
            Op::FlashAttn { .. } => "flash_attn_ext",
            Op::Back(b) => b.name(),
        }
    }

    /// The operands in source order (ggml's `src[0..]`): the graph's edges.
    pub fn operands(&self) -> Vec<TensorId> {
        match *self {
            Op::Leaf => vec![],
            Op::View { src }
            | Op::Reshape { src }
            | Op::Transpose { src }
            | Op::Permute { src, .. }
            | Op::Expand { src }
            | Op::Cont { src }
            | Op::Transfer { src, .. }
            | Op::Dup { src } => vec![src],
            Op::Cpy { src, dst } => vec![src, dst],
            Op::Scale { a, .. }
            | Op::Unary { a, .. }
            | Op::SumRows { a }
            | Op::Sum { a }
            | Op::Mean { a }
            | Op::Argmax { a }
            | Op::Argsort { a, .. }
            | Op::RmsNorm { a, w: None, .. }
            | Op::Norm { a, .. }
            | Op::DiagMaskInf { a, .. }
            | Op::Repeat { a } => vec![a],
            Op::Binary { a, b, .. }
            | Op::Glu { a, b, .. }
            | Op::MulMat { a, b }
            | Op::Concat { a, b, .. }
            | Op::CountEqual { a, b }
            | Op::CrossEntropyLoss { logits: a, labels: b } => {
                vec![a, b]
            }
            Op::GetRows { table, index } => vec![table, index],
            Op::MulMatId { a, b, ids } => vec![a, b, ids],
            Op::SetRows { dst, rows, index } => vec![dst, rows, index],
            Op::SoftMax { a, mask, sinks, .. } => std::iter::once(a).chain(mask).chain(sinks).collect(),
            Op::Rope { a, pos, freq, .. } => [a, pos].into_iter().chain(freq).collect(),
            Op::RmsNorm { a, w: Some(w), .. } => vec![a, w],
            Op::FlashAttn { q, k, v, mask, sinks, .. } => [q, k, v].into_iter().chain(mask).chain(sinks).collect(),
            Op::Back(ref b) => b.operands(),
        }
    }

    /// The operands of another type than the result that it combines element
    /// by element in its own type (the binary ops: a GLU's halves have one
    /// type): where an operand of a wider type is rounded ([`crate::Graph::lint`]).
    pub fn elementwise_operands(&self) -> Vec<TensorId> {
        match *self {
            Op::Binary { a, b, .. } => vec![a, b],
            _ => vec![],
        }
    }

    /// True for a leaf (no producing op).
    pub fn is_leaf(&self) -> bool {
        matches!(self, Op::Leaf)
    }

    /// True for ops that only make a new header over existing bytes.
    pub fn is_metadata(&self) -> bool {
        matches!(
            self,
            Op::View { .. } | Op::Reshape { .. } | Op::Transpose { .. } | Op::Permute { .. } | Op::Expand { .. }
        )
    }

    /// True for the copies: each destination element takes a source element,
    /// converted to the destination's type (`cont`, `dup`, `cpy`, `set_rows`),
    /// so a quantized destination needs a quantizer.
    pub fn is_copy(&self) -> bool {
        matches!(self, Op::Cont { .. } | Op::Dup { .. } | Op::Cpy { .. } | Op::SetRows { .. } | Op::Transfer { .. })
    }

    /// The device a transfer node puts its copy on (`None` for other ops).
    pub fn transfer_to(&self) -> Option<crate::device::Device> {
        match *self {
            Op::Transfer { to, .. } => Some(to),
            _ => None,
        }
    }

    /// The keys of an attention node (`flash_attn_ext`), whose type decides
    /// whether a backend's fused kernel can read them; `None` for other ops.
    pub fn attention_keys(&self) -> Option<TensorId> {
        match *self {
            Op::FlashAttn { k, .. } => Some(k),
            _ => None,
        }
    }

    /// True for ops a backend runs a kernel for (neither leaves nor metadata).
    pub fn is_compute(&self) -> bool {
        !self.is_leaf() && !self.is_metadata()
    }

    /// True if the op's kernel stays correct when its destination is the same
    /// bytes, in the same layout, as operand `slot`: the single-pass kernels,
    /// which read each element right before writing it (a copy onto an
    /// identical layout is a no-op). `mul_mat`, reductions and row ops never.
    pub fn may_overwrite(&self, slot: usize) -> bool {
        match self {
            Op::Binary { .. } | Op::Glu { .. } => slot <= 1,
            Op::Scale { .. } | Op::Unary { .. } | Op::Cont { .. } | Op::Dup { .. } | Op::DiagMaskInf { .. } => {
                slot == 0
            }
            _ => false,
        }
    }

    /// The operand a matrix product reads as its weights (`mul_mat`'s `a`).
    pub fn weight(&self) -> Option<TensorId> {
        match *self {
            Op::MulMat { a, .. } | Op::MulMatId { a, .. } => Some(a),
            _ => None,
        }
    }

    /// For the ops that read I32 indices (`get_rows`, `set_rows`,
    /// `mul_mat_id`'s expert ids), which a device checks as it runs: how many
    /// destination rows they claim, which it checks for duplicates
    /// (`set_rows`: each row of `out` written at most once; the others: 0).
    pub fn index_claims(&self, out: &Layout) -> Option<usize> {
        match self {
            Op::GetRows { .. } | Op::MulMatId { .. } => Some(0),
            Op::SetRows { .. } => Some(usize::try_from(out.nrows()).unwrap_or(0)),
            _ => None,
        }
    }

    /// The least memory traffic of the op producing `out`: zero for leaves
    /// and metadata ops; for compute ops every source element read once and
    /// every result element written once (`cpy` does not read its
    /// destination; `get_rows` reads the picked rows, `set_rows` writes them;
    /// `mul_mat_id` at most as many expert matrices as it has picks).
    pub fn traffic(&self, layout: impl Fn(TensorId) -> Result<Layout>, out: &Layout) -> Result<Traffic> {
        let written = stored_bytes(out);
        let read = match *self {
            _ if !self.is_compute() => return Ok(Traffic::default()),
            Op::Cpy { src, .. } => stored_bytes(&layout(src)?),
            Op::GetRows { table, index } => {
                stored_bytes(&layout(index)?) + out.nrows() as u64 * layout(table)?.row_size() as u64
            }
            Op::MulMatId { a, b, ids } => {
                let (la, li) = (layout(a)?, layout(ids)?);
                let experts = (li.nelements() as u64).min(la.ne[2] as u64);
                let matrix = stored_bytes(&la) / (la.ne[2].max(1) as u64);
                experts * matrix + stored_bytes(&layout(b)?) + stored_bytes(&li)
            }
            Op::SetRows { rows, index, .. } => {
                let rows = layout(rows)?;
                let written = rows.nrows() as u64 * out.row_size() as u64;
                return Ok(Traffic { read: stored_bytes(&rows) + stored_bytes(&layout(index)?), written });
            }
            _ => self.operands().into_iter().map(|s| layout(s).map(|l| stored_bytes(&l))).sum::<Result<u64>>()?,
        };
        Ok(Traffic { read, written })
    }

    /// Floating-point operations of the op producing `out` (2·M·N·K for
    /// `mul_mat`, one per element for elementwise ops, 0 for copies and views).
    pub fn flops(&self, layout: impl Fn(TensorId) -> Result<Layout>, out: &Layout) -> Result<u64> {
        let n = out.nelements() as u64;
        Ok(match *self {
            Op::MulMat { a, .. } | Op::MulMatId { a, .. } => 2 * n * layout(a)?.ne[0] as u64,
            Op::Binary { .. } | Op::Scale { .. } | Op::Unary { .. } => n,
            Op::Back(ref b) => b.flops(layout, out)?,
            Op::Glu { .. } => 2 * n,
            Op::SumRows { a } | Op::Sum { a } | Op::Mean { a } | Op::Argmax { a } | Op::CountEqual { a, .. } => {
                layout(a)?.nelements() as u64
            }
            // a comparison sort of each row: n log2 n comparisons
            Op::Argsort { a, .. } => {
                let ne0 = layout(a)?.ne[0].max(1) as u64;
                n * (64 - ne0.leading_zeros() as u64)
            }
            // a max, an exp, a sum and a product per element
            Op::CrossEntropyLoss { logits, .. } => 4 * layout(logits)?.nelements() as u64,
            Op::RmsNorm { w, .. } => (3 + u64::from(w.is_some())) * n,
            Op::Norm { .. } | Op::SoftMax { .. } => 5 * n,
            Op::Rope { p, .. } => p.flops(out),
            // a score and a weighted value row per query row, head and key
            Op::FlashAttn { k, .. } => {
                let k = layout(k)?;
                let rows = (out.nelements() / out.ne[0].max(1)) as u64;
                2 * rows * k.ne[1] as u64 * (k.ne[0] + out.ne[0]) as u64
            }
            _ => 0,
        })
    }
}
