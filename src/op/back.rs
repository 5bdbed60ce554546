//! [`BackOp`]: the training ops (gradients that do not compose from forward
//! ops, and the optimizer's fused steps).

use super::{RopeParams, UnaryOp};
use crate::error::Result;
use crate::id::TensorId;
use crate::layout::Layout;

/// The training ops: the backward passes of forward ops that do not compose
/// from others (built by [`crate::grad`]), and the optimizer's fused steps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BackOp {
    /// `a` summed into the result's smaller shape: each result element
    /// collects the elements of `a` that `repeat` would have copied from it
    /// (ggml's `repeat_back`): the gradient of a broadcast.
    RepeatBack {
        /// The gradient of the broadcast result.
        a: TensorId,
    },
    /// `g · f'(x)` elementwise (ggml's `silu_back` and kin).
    UnaryBack {
        /// The function whose derivative is taken.
        op: UnaryOp,
        /// The function's input.
        x: TensorId,
        /// The gradient of its output (`x`'s shape).
        g: TensorId,
    },
    /// The rows of `g` added into a zero table at the I32 `index` (ggml's
    /// `get_rows_back`): the gradient of `get_rows`' table.
    GetRowsBack {
        /// The gradient of the picked rows.
        g: TensorId,
        /// The I32 row numbers `get_rows` read.
        index: TensorId,
    },
    /// The gradient of `rope_ext` given `g`: each pair rotated back by its
    /// angle (ggml's `rope_back`).
    RopeBack {
        /// The gradient of the rotated tensor.
        g: TensorId,
        /// The forward op's I32 positions.
        pos: TensorId,
        /// The forward op's frequency factors.
        freq: Option<TensorId>,
        /// The forward op's parameters.
        p: RopeParams,
    },
    /// `g` written into a zero tensor at the places a view took its elements
    /// from: the gradient of a view's source. The result is packed F32 (the
    /// source's shape); element `i` of `g` goes to byte `offset + Σ i_k·nb[k]`
    /// of it.
    ViewBack {
        /// The gradient of the view.
        g: TensorId,
        /// The view's strides in the source (bytes).
        nb: [usize; 4],
        /// The view's first byte in the source.
        offset: usize,
    },
    /// One of AdamW's moments updated in place: `h[0]·m + h[1]·g` (the first
    /// moment) or `h[0]·m + h[1]·g²` (the second), each product and sum
    /// rounded to F32 as the elementwise ops round them.
    AdamwMoment {
        /// The moment (the destination's bytes).
        m: TensorId,
        /// The gradient (`m`'s shape).
        g: TensorId,
        /// The two factors (F32, packed).
        h: TensorId,
        /// `g²` instead of `g`: the second moment.
        square: bool,
    },
    /// AdamW's update of the parameter `p` in place from its updated moments:
    /// `h[0]·p − (h[1]·m) / (sqrt(h[2]·v) + h[3])`, rounded to F32 step by step.
    AdamwUpdate {
        /// The parameter (the destination's bytes).
        p: TensorId,
        /// The first moment.
        m: TensorId,
        /// The second moment.
        v: TensorId,
        /// The four factors (F32, packed).
        h: TensorId,
    },
    /// The gradient of `rms_norm(x)` (no weight) given the gradient `g` of
    /// its output (ggml's `rms_norm_back`).
    RmsNormBack {
        /// The normalised input.
        x: TensorId,
        /// The gradient of the normalised rows (`x`'s shape).
        g: TensorId,
        /// The forward op's epsilon.
        eps: f32,
    },
}

impl BackOp {
    /// ggml's name.
    pub fn name(&self) -> &'static str {
        match self {
            BackOp::RepeatBack { .. } => "repeat_back",
            BackOp::UnaryBack { .. } => "unary_back",
            BackOp::GetRowsBack { .. } => "get_rows_back",
            BackOp::RmsNormBack { .. } => "rms_norm_back",
            BackOp::ViewBack { .. } => "view_back",
            BackOp::RopeBack { .. } => "rope_back",
            BackOp::AdamwMoment { .. } => "adamw_moment",
            BackOp::AdamwUpdate { .. } => "adamw_update",
        }
    }
    /// Floating-point operations of the op producing `out` (see [`super::Op::flops`]).
    pub fn flops(&self, layout: impl Fn(TensorId) -> Result<Layout>, out: &Layout) -> Result<u64> {
        let n = out.nelements() as u64;
        Ok(match *self {
            BackOp::UnaryBack { .. } | BackOp::AdamwMoment { .. } => 4 * n,
            BackOp::RmsNormBack { .. } | BackOp::AdamwUpdate { .. } => 6 * n,
            BackOp::RepeatBack { a } => layout(a)?.nelements() as u64,
            BackOp::RopeBack { p, .. } => p.flops(out),
            BackOp::GetRowsBack { .. } | BackOp::ViewBack { .. } => 0,
        })
    }
    /// The operands in source order.
    pub fn operands(&self) -> Vec<TensorId> {
        match *self {
            BackOp::RepeatBack { a } | BackOp::ViewBack { g: a, .. } => vec![a],
            BackOp::UnaryBack { x, g, .. } | BackOp::RmsNormBack { x, g, .. } => vec![x, g],
            BackOp::GetRowsBack { g, index } => vec![g, index],
            BackOp::RopeBack { g, pos, freq, .. } => [g, pos].into_iter().chain(freq).collect(),
            BackOp::AdamwMoment { m, g, h, .. } => vec![m, g, h],
            BackOp::AdamwUpdate { p, m, v, h } => vec![p, m, v, h],
        }
    }
}
