//! `flash_attn_ext`: attention of query rows over key and value rows in one op.

use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::tensor::{Op, TensorId};

impl Context {
    /// ggml's `flash_attn_ext`: for each query row `i`, head `h` and sequence `s`,
    /// `softmax(scale·q[:, i, h, s]·k[:, j, h/g, s] + slope_h·mask[j, i])` over the
    /// keys `j`, then the values weighted by it, `Σ_j p_j·v[:, j, h/g, s]`, where
    /// `g = n_head / n_head_kv` (grouped-query attention). No scores tensor is made.
    ///
    /// - `q`: F32 `[d, n_q, n_head, n_seq]`, packed rows, any other strides.
    /// - `k`: `[d, n_kv, n_head_kv, n_seq]` of a type with a dot kernel (F32, F16,
    ///   BF16, Q8_0 and the other block types), packed rows; `n_head % n_head_kv == 0`.
    /// - `v`: `[d_v, n_kv, n_head_kv, n_seq]`, a type that dequantizes, packed rows.
    /// - `mask` (optional): F32 or F16 `[n_kv, >= n_q, m2, m3]`, broadcast over
    ///   heads and sequences (`n_head % m2 == 0`, `n_seq % m3 == 0`), as
    ///   [`Context::soft_max_ext`]'s.
    /// - `max_bias > 0`: ALiBi slopes by head, as [`Context::soft_max_ext`].
    ///
    /// The result is a new contiguous F32 `[d_v, n_head, n_q, n_seq]` (ggml's
    /// permuted layout: the heads of a query row side by side). Scores are the dot
    /// products of `k` with `q` converted to `k`'s dot partner, as `mul_mat`
    /// computes them; the softmax and the value sum are in f32. A query row whose
    /// keys are all masked gives zeros.
    pub fn flash_attn_ext(
        &self,
        q: TensorId,
        k: TensorId,
        v: TensorId,
        mask: Option<TensorId>,
        scale: f32,
        max_bias: f32,
    ) -> Result<TensorId> {
        const OP: &str = "flash_attn_ext";
        let (lq, lk, lv) = (self.layout(q)?, self.layout(k)?, self.layout(v)?);
        if lq.dtype != DType::F32 {
            return Err(Error::Unsupported { op: OP, dtype: lq.dtype });
        }
        crate::quant::dot::dot_fn(lk.dtype).map_err(|_| Error::Unsupported { op: OP, dtype: lk.dtype })?;
        if !(lv.dtype.is_float() || lv.dtype.is_quantized()) {
            return Err(Error::Unsupported { op: OP, dtype: lv.dtype });
        }
        for (name, l) in [("q", &lq), ("k", &lk), ("v", &lv)] {
            if !rows_packed(l) {
                return Err(Error::shape(OP, format!("{name} ne={:?} nb={:?} needs packed rows", l.ne, l.nb)));
            }
        }
        let (qn, kn, vn) = (lq.ne, lk.ne, lv.ne);
        let fits = qn[0] == kn[0]
            && kn[1] == vn[1]
            && kn[2] == vn[2]
            && kn[3] == vn[3]
            && kn[3] == qn[3]
            && kn[2] > 0
            && qn[2] % kn[2] == 0;
        if !fits {
            return Err(Error::shape(
                OP,
                format!(
                    "q ne={qn:?}, k ne={kn:?}, v ne={vn:?}: need q.ne0 == k.ne0, k and v alike in dims 1..3, \
                     q.ne3 == k.ne3 and n_head (q.ne2) a multiple of n_head_kv (k.ne2 > 0)"
                ),
            ));
        }
        if let Some(m) = mask {
            let lm = self.layout(m)?;
            if !matches!(lm.dtype, DType::F32 | DType::F16) {
                return Err(Error::Unsupported { op: "flash_attn_ext mask", dtype: lm.dtype });
            }
            let mn = lm.ne;
            let broadcast = |i: usize| mn[i] > 0 && qn[i] % mn[i] == 0;
            if mn[0] != kn[1] || mn[1] < qn[1] || !broadcast(2) || !broadcast(3) {
                return Err(Error::shape(
                    OP,
                    format!(
                        "mask ne={mn:?} for q ne={qn:?} and {} keys: need mask.ne0 == n_kv, mask.ne1 >= n_q, \
                         n_head % mask.ne2 == 0 and n_seq % mask.ne3 == 0",
                        kn[1]
                    ),
                ));
            }
        }
        if !scale.is_finite() {
            return Err(Error::Invalid(format!("{OP}: scale must be finite, got {scale}")));
        }
        if max_bias.is_nan() || max_bias < 0.0 {
            return Err(Error::Invalid(format!("{OP}: max_bias must be >= 0, got {max_bias}")));
        }
        if max_bias > 0.0 && mask.is_none() {
            return Err(Error::Invalid(format!("{OP}: ALiBi (max_bias > 0) needs a mask")));
        }
        let op = Op::FlashAttn { q, k, v, mask, scale, max_bias, sinks: None };
        self.new_result(op, DType::F32, [vn[0], qn[2], qn[1], qn[3]])
    }

    /// ggml's `flash_attn_ext_add_sinks`: the attention node `fa` (made by
    /// [`Context::flash_attn_ext`]) again with attention sinks, an F32 logit per
    /// query head (`[q.ne2]`, packed) counted in each row's softmax denominator,
    /// as [`Context::soft_max_add_sinks`]. A new node: `fa` itself is unchanged.
    pub fn flash_attn_ext_add_sinks(&self, fa: TensorId, sinks: TensorId) -> Result<TensorId> {
        let Op::FlashAttn { q, k, v, mask, scale, max_bias, sinks: None } = self.tensor(fa)?.op() else {
            return Err(Error::Invalid(format!(
                "flash_attn_ext_add_sinks: {} is not a flash_attn_ext without sinks",
                self.label(fa)
            )));
        };
        self.check_sinks("flash_attn_ext", sinks, self.layout(q)?.ne[2])?;
        let op = Op::FlashAttn { q, k, v, mask, scale, max_bias, sinks: Some(sinks) };
        self.new_result(op, DType::F32, self.layout(fa)?.ne)
    }
}

/// Each row along dim 0 is packed (whole blocks along dim 0 for block types).
fn rows_packed(l: &Layout) -> bool {
    l.is_contiguous_rows() && (!l.dtype.is_quantized() || l.block_dim == 0)
}
