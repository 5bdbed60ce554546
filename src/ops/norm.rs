//! Row normalisations: `rms_norm` and `norm` (ggml semantics, any strides).

use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{Op, TensorId};

impl Context {
    /// ggml's `rms_norm`: every row (dim 0) divided by its root mean square,
    /// `y = x / sqrt(mean(x²) + eps)`. The sum of squares is accumulated in f64
    /// like ggml. `a` may be F32, F16 or BF16 with any strides; the result is
    /// a new contiguous F32 tensor of `a`'s shape. `eps` must be `>= 0`.
    pub fn rms_norm(&self, a: TensorId, eps: f32) -> Result<TensorId> {
        let l = self.norm_input("rms_norm", a, eps)?;
        self.new_result(Op::RmsNorm { a, eps, w: None }, DType::F32, l.ne)
    }

    /// `mul(rms_norm(a, eps), w)` in one op (the norm with its weight, as
    /// llama.cpp's backends fuse them): the same bits as the two ops. `w` is
    /// F32, F16 or BF16 with any strides, broadcast over `a` as `mul`'s second
    /// operand (`a.ne[i] % w.ne[i] == 0`).
    pub fn rms_norm_mul(&self, a: TensorId, w: TensorId, eps: f32) -> Result<TensorId> {
        let l = self.norm_input("rms_norm", a, eps)?;
        let lw = self.require_float("rms_norm", w)?;
        if (0..4).any(|i| lw.ne[i] == 0 || l.ne[i] % lw.ne[i] != 0) {
            return Err(Error::shape(
                "rms_norm",
                format!("weight ne={:?} does not broadcast over ne={:?}: need a.ne[i] % w.ne[i] == 0", lw.ne, l.ne),
            ));
        }
        self.new_result(Op::RmsNorm { a, eps, w: Some(w) }, DType::F32, l.ne)
    }

    /// ggml's `norm`: every row (dim 0) centred and scaled to unit variance,
    /// `y = (x - mean) / sqrt(var + eps)` with the biased variance. Sums are
    /// accumulated in f64 (ggml's contiguous path). `a` may be F32, F16 or BF16
    /// with any strides; the result is a new contiguous F32 tensor of `a`'s
    /// shape. `eps` must be `>= 0`.
    pub fn norm(&self, a: TensorId, eps: f32) -> Result<TensorId> {
        let l = self.norm_input("norm", a, eps)?;
        self.new_result(Op::Norm { a, eps }, DType::F32, l.ne)
    }

    fn norm_input(&self, op: &'static str, a: TensorId, eps: f32) -> Result<crate::layout::Layout> {
        let l = self.require_float(op, a)?;
        // ggml asserts eps >= 0; NaN is refused too
        if eps.is_nan() || eps < 0.0 {
            return Err(Error::Invalid(format!("{op}: eps must be >= 0, got {eps}")));
        }
        Ok(l)
    }
}
