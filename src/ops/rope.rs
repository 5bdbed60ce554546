//! Rotary position embedding: ggml's `rope_ext` (normal and NeoX modes, YaRN,
//! frequency factors) and the `rope` shorthand.

use super::grad_node::{GradNode, Grads};
use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::tensor::{Op, RopeParams, TensorId};

impl Context {
    /// ggml's `rope` shorthand: [`Context::rope_ext`] with no frequency factors
    /// and the defaults of [`RopeParams::new`] (`freq_base` 10000, `freq_scale` 1,
    /// no YaRN, `attn_factor` 1).
    pub fn rope(&self, a: TensorId, pos: TensorId, n_dims: i32, mode: i32) -> Result<TensorId> {
        self.rope_with(a, pos, None, RopeParams::new(n_dims, mode))
    }

    /// ggml's `rope_ext`, argument for argument; see [`Context::rope_with`].
    #[allow(clippy::too_many_arguments)]
    pub fn rope_ext(
        &self,
        a: TensorId,
        pos: TensorId,
        freq_factors: Option<TensorId>,
        n_dims: i32,
        mode: i32,
        n_ctx_orig: i32,
        freq_base: f32,
        freq_scale: f32,
        ext_factor: f32,
        attn_factor: f32,
        beta_fast: f32,
        beta_slow: f32,
    ) -> Result<TensorId> {
        let p = RopeParams {
            n_dims,
            mode,
            n_ctx_orig,
            freq_base,
            freq_scale,
            ext_factor,
            attn_factor,
            beta_fast,
            beta_slow,
        };
        self.rope_with(a, pos, freq_factors, p)
    }

    /// Rotary position embedding of `a = [head_dim, n_head, n_tokens, ne3]` at
    /// the positions `pos` (I32, a vector of `n_tokens` values, any stride):
    /// token `i2` is rotated by `pos[i2]`.
    ///
    /// In every row the first `p.n_dims` values are rotated in pairs — adjacent
    /// pairs `(x[2i], x[2i+1])` in [`RopeParams::NORMAL`] mode, `(x[i],
    /// x[i + n_dims/2])` in [`RopeParams::NEOX`] mode — by the angle `theta_i`
    /// of pair `i`; the other values pass through unchanged. As in ggml,
    /// `theta_i = pos * freq_base^(-2i/n_dims) / ff[i]` (`ff` the optional F32
    /// `freq_factors`, at least `n_dims/2` values), then YaRN: with
    /// `t = freq_scale * theta_i`, if `ext_factor != 0` the angle is
    /// `t*(1-mix) + theta_i*mix` with `mix = ext_factor * ramp(i)` over the
    /// correction dims of `n_ctx_orig`, `beta_fast`, `beta_slow`, and the
    /// magnitude `attn_factor` grows by `1 + 0.1 ln(1/freq_scale)`. Computed in
    /// f32 the way ggml does (the angle advances by repeated multiplication).
    ///
    /// `a` may be F32, F16 or BF16 with any strides; the result is contiguous
    /// with `a`'s type and shape. Errors: `n_dims` odd, `< 2` or `> head_dim`;
    /// a mode other than NORMAL or NEOX (ggml's multi-section and vision modes
    /// are not supported); `pos` not I32, not a vector, or not `n_tokens` long;
    /// `freq_factors` not F32 or too short.
    pub fn rope_with(
        &self,
        a: TensorId,
        pos: TensorId,
        freq_factors: Option<TensorId>,
        p: RopeParams,
    ) -> Result<TensorId> {
        let la = self.check_rope(a, pos, freq_factors, &p)?;
        self.new_result(Op::Rope { a, pos, freq: freq_factors, p }, la.dtype, la.ne)
    }

    /// `a`'s layout, after the checks [`Context::rope_with`] documents.
    pub(super) fn check_rope(
        &self,
        a: TensorId,
        pos: TensorId,
        freq_factors: Option<TensorId>,
        p: &RopeParams,
    ) -> Result<Layout> {
        let la = self.require_float("rope", a)?;
        let lp = self.layout(pos)?;
        if p.mode != RopeParams::NORMAL && p.mode != RopeParams::NEOX {
            return Err(Error::Invalid(format!(
                "rope: mode {} is not supported (0: normal, 2: neox; ggml's mrope/vision modes are not implemented)",
                p.mode
            )));
        }
        if p.n_dims < 2 || p.n_dims % 2 != 0 || i64::from(p.n_dims) > la.ne[0] {
            return Err(Error::shape(
                "rope",
                format!("n_dims={} must be even, >= 2 and <= ne0 of a ne={:?}", p.n_dims, la.ne),
            ));
        }
        if lp.dtype != DType::I32 {
            return Err(Error::DTypeMismatch { what: "rope positions".into(), expected: DType::I32, found: lp.dtype });
        }
        if lp.ne[1] != 1 || lp.ne[2] != 1 || lp.ne[3] != 1 || lp.ne[0] != la.ne[2] {
            return Err(Error::shape(
                "rope",
                format!("positions ne={:?} must be a vector of a.ne2={} values (a ne={:?})", lp.ne, la.ne[2], la.ne),
            ));
        }
        if let Some(f) = freq_factors {
            let lf = self.layout(f)?;
            if lf.dtype != DType::F32 {
                return Err(Error::DTypeMismatch {
                    what: "rope freq_factors".into(),
                    expected: DType::F32,
                    found: lf.dtype,
                });
            }
            if lf.ne[0] < i64::from(p.n_dims / 2) {
                return Err(Error::shape(
                    "rope",
                    format!("freq_factors ne={:?} must hold at least n_dims/2={} values", lf.ne, p.n_dims / 2),
                ));
            }
        }
        Ok(la)
    }
}

impl Context {
    /// The gradient rule of `rope` (see [`Context::operand_grads`]).
    pub(super) fn grad_rope(&self, n: &GradNode, g: TensorId, out: &mut Grads) -> Result<bool> {
        let Op::Rope { p, freq, .. } = n.op else { return Ok(false) };
        let freq = freq.map(|_| n.x[2]);
        out.put(0, || self.rope_back(g, n.x[1], freq, p))?;
        Ok(true)
    }
}

/// What the rule above reads besides the gradient: the positions and factors.
pub(super) fn saved(n: &GradNode) -> Option<Vec<TensorId>> {
    matches!(n.op, Op::Rope { .. }).then(|| n.x[1..].to_vec())
}
