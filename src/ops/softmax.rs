//! `soft_max_ext` (scale, broadcast mask, ALiBi) and `diag_mask_inf`.

use super::grad_node::{GradNode, Grads};
use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{Op, TensorId};

impl Context {
    /// ggml's `soft_max`: softmax over every row (dim 0) of `a`.
    /// Same as [`Context::soft_max_ext`] with no mask, scale 1 and no ALiBi.
    pub fn soft_max(&self, a: TensorId) -> Result<TensorId> {
        self.soft_max_ext(a, None, 1.0, 0.0)
    }

    /// ggml's `soft_max_ext`: `y = softmax(a*scale + slope*mask)` over every row.
    ///
    /// - `a`: F32, F16 or BF16, any strides; the result is a new contiguous F32
    ///   tensor of `a`'s shape.
    /// - `mask` (optional): F32 or F16, any strides, `[a.ne0, m1, m2, m3]` with
    ///   `m1 >= a.ne1` (row `i1` of `a` uses mask row `i1`; extra rows are
    ///   ignored) and `a.ne2 % m2 == 0`, `a.ne3 % m3 == 0` (mask dims 2 and 3
    ///   broadcast by `i2 % m2`, `i3 % m3`).
    /// - `max_bias > 0` turns on ALiBi (needs a mask): head `h = i2` of
    ///   `n_head = a.ne2` gets `slope = m0^(h+1)` for `h < n_head_log2`, else
    ///   `m1^(2(h - n_head_log2) + 1)`, where `n_head_log2` is the largest power
    ///   of two `<= n_head`, `m0 = 2^(-max_bias/n_head_log2)` and
    ///   `m1 = 2^(-max_bias/2/n_head_log2)`; otherwise the slope is 1.
    ///
    /// A row whose values are all `-inf` (e.g. fully masked) gives zeros, where
    /// ggml's CPU kernel would give NaN.
    pub fn soft_max_ext(&self, a: TensorId, mask: Option<TensorId>, scale: f32, max_bias: f32) -> Result<TensorId> {
        let la = self.require_float("soft_max", a)?;
        if let Some(m) = mask {
            let lm = self.layout(m)?;
            if !matches!(lm.dtype, DType::F32 | DType::F16) {
                return Err(Error::Unsupported { op: "soft_max mask", dtype: lm.dtype });
            }
            let (a_ne, m_ne) = (la.ne, lm.ne);
            let broadcast = |i: usize| if m_ne[i] == 0 { a_ne[i] == 0 } else { a_ne[i] % m_ne[i] == 0 };
            if m_ne[0] != a_ne[0] || m_ne[1] < a_ne[1] || !broadcast(2) || !broadcast(3) {
                return Err(Error::shape(
                    "soft_max",
                    format!(
                        "mask ne={m_ne:?} does not fit a ne={a_ne:?}: need mask.ne0 == a.ne0, mask.ne1 >= a.ne1, \
                         a.ne2 % mask.ne2 == 0 and a.ne3 % mask.ne3 == 0"
                    ),
                ));
            }
        }
        if max_bias.is_nan() || max_bias < 0.0 {
            return Err(Error::Invalid(format!("soft_max: max_bias must be >= 0, got {max_bias}")));
        }
        if max_bias > 0.0 && mask.is_none() {
            return Err(Error::Invalid("soft_max: ALiBi (max_bias > 0) needs a mask".into()));
        }
        self.new_result(Op::SoftMax { a, mask, scale, max_bias, sinks: None }, DType::F32, la.ne)
    }

    /// ggml's `soft_max_add_sinks`: the softmax node `sm` (made by
    /// [`Context::soft_max_ext`]) again with attention sinks: an F32 logit per head
    /// `sinks[h]` (`[a.ne2]`, packed) counted in the denominator of every row of
    /// head `h = i2`, `y = exp(v - m) / (Σ exp(v - m) + exp(sinks[h] - m))` with
    /// `m` the larger of the row's maximum and the sink. A new node: `sm` itself
    /// is unchanged.
    pub fn soft_max_add_sinks(&self, sm: TensorId, sinks: TensorId) -> Result<TensorId> {
        let Op::SoftMax { a, mask, scale, max_bias, sinks: None } = self.tensor(sm)?.op() else {
            return Err(Error::Invalid(format!(
                "soft_max_add_sinks: {} is not a soft_max without sinks",
                self.label(sm)
            )));
        };
        self.check_sinks("soft_max", sinks, self.layout(a)?.ne[2])?;
        self.new_result(Op::SoftMax { a, mask, scale, max_bias, sinks: Some(sinks) }, DType::F32, self.layout(a)?.ne)
    }

    /// Errors unless `sinks` is packed F32 `[n_head]`.
    pub(super) fn check_sinks(&self, op: &'static str, sinks: TensorId, n_head: i64) -> Result<()> {
        let l = self.layout(sinks)?;
        if l.dtype != DType::F32 {
            return Err(Error::DTypeMismatch { what: format!("{op} sinks"), expected: DType::F32, found: l.dtype });
        }
        if l.ne != [n_head, 1, 1, 1] || !l.is_contiguous() {
            return Err(Error::shape(
                op,
                format!("sinks ne={:?} nb={:?}: need one packed F32 per head ({n_head})", l.ne, l.nb),
            ));
        }
        Ok(())
    }

    /// ggml's `diag_mask_inf`: a copy of `a` with every element whose column is
    /// past the causal diagonal, `i0 > n_past + i1`, set to `-inf` (in every
    /// matrix `i2, i3`). `a` may be F32, F16 or BF16 with any strides; the
    /// result is contiguous with `a`'s type. `n_past` must be `>= 0`.
    pub fn diag_mask_inf(&self, a: TensorId, n_past: i32) -> Result<TensorId> {
        let l = self.diag_mask_input(a, n_past)?;
        self.new_result(Op::DiagMaskInf { a, n_past }, l.dtype, l.ne)
    }

    /// [`Context::diag_mask_inf`] written into `a`'s storage; returns a view of `a`.
    pub fn diag_mask_inf_inplace(&self, a: TensorId, n_past: i32) -> Result<TensorId> {
        self.diag_mask_input(a, n_past)?;
        self.in_place_result(Op::DiagMaskInf { a, n_past }, a)
    }

    fn diag_mask_input(&self, a: TensorId, n_past: i32) -> Result<crate::layout::Layout> {
        let l = self.require_float("diag_mask_inf", a)?;
        if n_past < 0 {
            return Err(Error::Invalid(format!("diag_mask_inf: n_past must be >= 0, got {n_past}")));
        }
        Ok(l)
    }
}

impl Context {
    /// The gradient rule of `soft_max_ext` (see [`Context::operand_grads`]):
    /// `dx = scale · y ⊙ (g − Σ_row g ⊙ y)`; the mask gets none.
    pub(super) fn grad_softmax(&self, n: &GradNode, g: TensorId, out: &mut Grads) -> Result<bool> {
        if let Op::DiagMaskInf { n_past, .. } = n.op {
            // the gradient passes where the mask kept the value: g · exp(diag_mask_inf(0)), a 1 or a 0
            out.put(0, || self.mul(g, self.exp(self.diag_mask_inf(self.scale(g, 0.0)?, n_past)?)?))?;
            return Ok(true);
        }
        let Op::SoftMax { scale, max_bias, sinks, .. } = n.op else { return Ok(false) };
        if max_bias != 0.0 {
            return Err(self.no_gradient(n.id, "ALiBi (max_bias != 0)"));
        }
        if sinks.is_some() {
            return Err(self.no_gradient(n.id, "attention sinks"));
        }
        if out.wants(1) {
            return Err(self.no_gradient(n.id, "a mask that needs a gradient"));
        }
        let y = n.id;
        out.put(0, || {
            let dot = self.sum_rows(self.mul(g, y)?)?;
            self.scale(self.mul(y, self.sub(self.packed(g)?, dot)?)?, scale)
        })?;
        Ok(true)
    }
}

/// What the rule above reads besides the gradient: the output.
pub(super) fn saved(n: &GradNode) -> Option<Vec<TensorId>> {
    matches!(n.op, Op::SoftMax { .. }).then(|| vec![n.id])
}
