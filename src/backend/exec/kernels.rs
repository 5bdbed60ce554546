//! What a backend supplies to the executor loop: one kernel method per op family.

use super::regions::Region;
use crate::error::Result;
use crate::layout::Layout;
use crate::op::{BinaryOp, GluOp, RopeParams, UnaryOp};
use crate::tensor::TensorId;

/// One backend's kernels, one method per op family. `Src` is a read-only
/// operand, `Dst` the node's destination; both are checked to lie inside
/// their region when bound ([`Kernels::src`], [`Kernels::dst`]).
pub(crate) trait Kernels {
    /// A region's address.
    type Base: Copy;
    /// A bound read-only operand.
    type Src: Copy;
    /// A bound destination.
    type Dst;

    /// The tensor `l` at byte `offs` of `r`, to be read.
    fn src(r: &Region<Self::Base>, offs: usize, l: Layout) -> Result<Self::Src>;
    /// The tensor `l` at byte `offs` of `r` (a writable region), to be written.
    fn dst(r: &Region<Self::Base>, offs: usize, l: Layout) -> Result<Self::Dst>;
    /// Poison mode: NaN bytes (0xFF) over `len` bytes of the plan buffer from
    /// `offset` (ranges outside the buffer are ignored).
    fn fill_nan(&mut self, offset: usize, len: usize) -> Result<()>;
    /// After each computed node (a device may recycle its scratch memory).
    fn node_done(&mut self) -> Result<()> {
        Ok(())
    }

    /// `cont`, `dup`, `cpy` (`op` names which): element `i` of `dst` in
    /// logical order takes element `i` of `src`, converting the type.
    fn copy(&mut self, op: &'static str, dst: Self::Dst, src: Self::Src) -> Result<()>;
    /// `dst = a op b`, `b` tiled over `a`.
    fn binary(&mut self, op: BinaryOp, dst: Self::Dst, a: Self::Src, b: Self::Src) -> Result<()>;
    /// `dst = a * s`.
    fn scale(&mut self, s: f32, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// `dst = f(a)`.
    fn unary(&mut self, op: UnaryOp, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// `dst = f(a) * b`.
    fn glu(&mut self, op: GluOp, dst: Self::Dst, a: Self::Src, b: Self::Src) -> Result<()>;
    /// `dst[.., 0] = Σ a[.., i0]`.
    fn sum_rows(&mut self, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// `dst[.., 0] = Σ a[.., i0] / ne0`.
    fn mean(&mut self, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// `dst[i1] = argmax_i0 a[i0, i1]` (the first of equal values).
    fn argmax(&mut self, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// `dst[0] = #{i : a[i] == b[i]}`.
    fn count_equal(&mut self, dst: Self::Dst, a: Self::Src, b: Self::Src) -> Result<()>;
    /// `dst[0] = -(1/rows) Σ labels · log softmax(logits)`.
    fn cross_entropy_loss(&mut self, dst: Self::Dst, logits: Self::Src, labels: Self::Src) -> Result<()>;
    /// `dst[0] = Σ a` (every element).
    fn sum(&mut self, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// ggml's `mul_mat` with weights `a` (the leaf or node `weights`).
    fn mul_mat(&mut self, dst: Self::Dst, a: Self::Src, b: Self::Src, weights: TensorId) -> Result<()>;
    /// ggml's `mul_mat_id`: expert `ids[s, t]` of `a` (the leaf or node
    /// `weights`) times row `(s mod b.ne1, t)` of `b`.
    fn mul_mat_id(
        &mut self,
        dst: Self::Dst,
        a: Self::Src,
        b: Self::Src,
        ids: Self::Src,
        weights: TensorId,
    ) -> Result<()>;
    /// Each row's I32 element indices in value order (ties in index order).
    fn argsort(&mut self, descending: bool, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// Rows of `table` at the I32 `index`.
    fn get_rows(&mut self, dst: Self::Dst, table: Self::Src, index: Self::Src) -> Result<()>;
    /// `rows` into `dst` at the I32 `index`.
    fn set_rows(&mut self, dst: Self::Dst, rows: Self::Src, index: Self::Src) -> Result<()>;
    /// Each row over its root mean square, times the broadcast weight `w` if given.
    fn rms_norm(&mut self, eps: f32, dst: Self::Dst, a: Self::Src, w: Option<Self::Src>) -> Result<()>;
    /// Each row centred and scaled to unit variance.
    fn norm(&mut self, eps: f32, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// Row softmax of `a*scale + slope*mask`, with a head's sink in its rows' denominators.
    fn soft_max(&mut self, p: SoftMax, dst: Self::Dst, a: Self::Src, extra: Extra<Self::Src>) -> Result<()>;
    /// Elements past the causal diagonal set to `-inf`.
    fn diag_mask_inf(&mut self, n_past: i32, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// Rotary embedding at `pos`, with optional frequency factors; `back`:
    /// rotated the other way (the gradient, `rope_back`).
    fn rope(
        &mut self,
        p: &RopeParams,
        back: bool,
        dst: Self::Dst,
        a: Self::Src,
        pos: Self::Src,
        freq: Option<Self::Src>,
    ) -> Result<()>;
    /// `a` and `b` joined along `dim`.
    fn concat(&mut self, dim: usize, dst: Self::Dst, a: Self::Src, b: Self::Src) -> Result<()>;
    /// `a` tiled to `dst`'s shape.
    fn repeat(&mut self, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// Attention of queries over keys and values (`[q, k, v]`), fused.
    fn flash_attn(&mut self, p: SoftMax, dst: Self::Dst, qkv: [Self::Src; 3], extra: Extra<Self::Src>) -> Result<()>;
    /// `a` summed into `dst`'s smaller shape (the elements `repeat` copies from each).
    fn repeat_back(&mut self, dst: Self::Dst, a: Self::Src) -> Result<()>;
    /// `dst = g · f'(x)`.
    fn unary_back(&mut self, op: UnaryOp, dst: Self::Dst, x: Self::Src, g: Self::Src) -> Result<()>;
    /// `dst = 0`, then row `i` of `g` added into row `index[i]`.
    fn get_rows_back(&mut self, dst: Self::Dst, g: Self::Src, index: Self::Src) -> Result<()>;
    /// `dst = 0`, then element `i` of `g` at byte `offset + Σ i_k·nb[k]` of `dst`.
    fn view_back(&mut self, nb: [usize; 4], offset: usize, dst: Self::Dst, g: Self::Src) -> Result<()>;
    /// The gradient of `rms_norm(x, eps)` given `g`.
    fn rms_norm_back(&mut self, eps: f32, dst: Self::Dst, x: Self::Src, g: Self::Src) -> Result<()>;
    /// `dst = h0·m + h1·g` (or `g²` with `square`), in F32 steps.
    fn adamw_moment(&mut self, square: bool, dst: Self::Dst, m: Self::Src, g: Self::Src, h: Self::Src) -> Result<()>;
    /// `dst = h0·p − (h1·m) / (sqrt(h2·v) + h3)`, in F32 steps.
    fn adamw_update(&mut self, dst: Self::Dst, pmv: [Self::Src; 3], h: Self::Src) -> Result<()>;
}

/// The optional operands of a softmax (and of attention's): the additive mask and
/// the per-head sinks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Extra<S> {
    pub mask: Option<S>,
    pub sinks: Option<S>,
}

/// `soft_max_ext`'s two parameters.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SoftMax {
    pub scale: f32,
    pub max_bias: f32,
}
