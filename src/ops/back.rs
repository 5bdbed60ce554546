//! The training ops ([`BackOp`]): F32 in, F32 out, each the backward pass
//! of a forward op that does not compose from others, and AdamW's fused steps.

use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::tensor::{BackOp, Op, RopeParams, TensorId, UnaryOp};

impl Context {
    /// `a` summed into shape `ne`, which must tile `a` (every `a.ne[i]` a
    /// multiple of `ne[i]`): element `j` of the result is the sum of the
    /// elements `i` of `a` with `i % ne == j` (ggml's `repeat_back`, the
    /// gradient of `repeat` and of a broadcast). F32; summed in f64.
    pub fn repeat_back(&self, a: TensorId, ne: [i64; 4]) -> Result<TensorId> {
        let la = self.require_f32("repeat_back", a)?;
        let target = Layout::contiguous(DType::F32, ne)?;
        if !target.can_repeat(&la) {
            return Err(Error::shape("repeat_back", format!("{ne:?} does not tile a (ne={:?})", la.ne)));
        }
        self.new_result(Op::Back(BackOp::RepeatBack { a }), DType::F32, ne)
    }

    /// `g · f'(x)` elementwise, `x` and `g` F32 of one shape: the gradient
    /// of `f(x)` given `g`, the gradient of its output. GELU's derivative is
    /// that of the tanh approximation (the forward's f16 rounding is not
    /// differentiated).
    pub fn unary_back(&self, op: UnaryOp, x: TensorId, g: TensorId) -> Result<TensorId> {
        let lx = self.same_shape_of("unary_back", DType::F32, x, g)?;
        self.new_result(Op::Back(BackOp::UnaryBack { op, x, g }), DType::F32, lx.ne)
    }

    /// The rows of `g` added into a zero table of `n_rows` rows at the I32
    /// `index` (ggml's `get_rows_back`): the gradient of `get_rows(table,
    /// index)`'s table, given `g` of the picked rows' shape. Rows picked
    /// twice add up. An index outside `0..n_rows` is an error when the node
    /// runs.
    pub fn get_rows_back(&self, g: TensorId, index: TensorId, n_rows: i64) -> Result<TensorId> {
        let (lg, li) = (self.require_f32("get_rows_back", g)?, self.layout(index)?);
        if li.dtype != DType::I32 {
            return Err(Error::Unsupported { op: "get_rows_back", dtype: li.dtype });
        }
        if lg.ne[2] != 1 || lg.ne[3] != 1 || li.ne[1..] != [1, 1, 1] || li.ne[0] != lg.ne[1] || n_rows < 0 {
            return Err(Error::shape(
                "get_rows_back",
                format!("g ne={:?} (rows of a matrix), index ne={:?} (one per row), {n_rows} rows", lg.ne, li.ne),
            ));
        }
        self.new_result(Op::Back(BackOp::GetRowsBack { g, index }), DType::F32, [lg.ne[0], n_rows, 1, 1])
    }

    /// The gradient of `rms_norm(x, eps)` given `g`, the gradient of its
    /// output: per row, `(g - y · mean(g · y)) / rms` with `y` the normed row
    /// and `rms = sqrt(mean(x²) + eps)` (ggml's `rms_norm_back`). F32, one shape.
    pub fn rms_norm_back(&self, x: TensorId, g: TensorId, eps: f32) -> Result<TensorId> {
        let lx = self.same_shape_of("rms_norm_back", DType::F32, x, g)?;
        if !(eps >= 0.0 && eps.is_finite()) {
            return Err(Error::Invalid(format!("rms_norm_back: eps {eps} is not a finite value >= 0")));
        }
        self.new_result(Op::Back(BackOp::RmsNormBack { x, g, eps }), DType::F32, lx.ne)
    }

    /// `g`, the gradient of a view with strides `nb` at byte `offset` of a
    /// packed F32 source of shape `ne`, written into zeros of that shape (the
    /// gradient of the source). The view must lie inside the source and map
    /// no two elements to one place.
    pub fn view_back(&self, g: TensorId, ne: [i64; 4], nb: [usize; 4], offset: usize) -> Result<TensorId> {
        let lg = self.require_f32("view_back", g)?;
        let src = Layout::contiguous(DType::F32, ne)?;
        let view = Layout { nb, ..Layout::contiguous(DType::F32, lg.ne)? };
        let end = (0..4).try_fold(offset, |end, i| {
            (lg.ne[i] as usize).checked_sub(1).map_or(Some(end), |n| n.checked_mul(nb[i])?.checked_add(end))
        });
        let aligned = offset.is_multiple_of(4) && nb.iter().all(|b| b.is_multiple_of(4));
        if lg.is_empty() || !aligned || end.is_none_or(|e| e + 4 > src.nbytes()) || view.self_overlaps() {
            return Err(Error::shape(
                "view_back",
                format!("a view ne={:?} nb={nb:?} at byte {offset} of an F32 tensor ne={ne:?}", lg.ne),
            ));
        }
        self.new_result(Op::Back(BackOp::ViewBack { g, nb, offset }), DType::F32, ne)
    }

    /// The gradient of [`Context::rope_with`]`(a, pos, freq_factors, p)`
    /// given `g`, the gradient of its output (F32): every pair rotated back by
    /// its angle (the rotation's transpose, the same magnitude).
    pub fn rope_back(
        &self,
        g: TensorId,
        pos: TensorId,
        freq_factors: Option<TensorId>,
        p: RopeParams,
    ) -> Result<TensorId> {
        let lg = self.check_rope(g, pos, freq_factors, &p)?;
        if lg.dtype != DType::F32 {
            return Err(Error::Unsupported { op: "rope_back", dtype: lg.dtype });
        }
        self.new_result(Op::Back(BackOp::RopeBack { g, pos, freq: freq_factors, p }), DType::F32, lg.ne)
    }

    /// `id`'s layout, which must be F32.
    fn require_f32(&self, op: &'static str, id: TensorId) -> Result<Layout> {
        let l = self.layout(id)?;
        if l.dtype == DType::F32 {
            Ok(l)
        } else {
            Err(Error::Unsupported { op, dtype: l.dtype })
        }
    }

    /// AdamW's first (`square` false) or second moment `m` updated in place
    /// with the gradient `g` and the factors `h` (2 packed F32 values): see
    /// [`BackOp::AdamwMoment`]. Returns a view of `m`.
    pub(crate) fn adamw_moment(&self, m: TensorId, g: TensorId, h: TensorId, square: bool) -> Result<TensorId> {
        self.in_place_result(Op::Back(BackOp::AdamwMoment { m, g, h, square }), m)
    }

    /// AdamW's update of `p` in place from the updated moments `m`, `v` and
    /// the factors `h` (4 packed F32 values): see [`BackOp::AdamwUpdate`].
    /// Returns a view of `p`.
    pub(crate) fn adamw_update(&self, p: TensorId, m: TensorId, v: TensorId, h: TensorId) -> Result<TensorId> {
        self.in_place_result(Op::Back(BackOp::AdamwUpdate { p, m, v, h }), p)
    }
}
