//! `mul_mat`, ggml's matrix product.

use super::grad_node::{GradNode, Grads};
use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{Op, TensorId};

impl Context {
    /// ggml's `mul_mat(a, b)`: both hold rows of `K = ne[0]` values; the F32
    /// result has `ne = [a.ne1, b.ne1, b.ne2, b.ne3]` and
    /// `out[i3,i2,i1,i0] = Σ_k a[i3/r3, i2/r2, i0, k] · b[i3, i2, i1, k]` with
    /// `r2 = b.ne2/a.ne2`, `r3 = b.ne3/a.ne3`: each matrix of `a` serves
    /// consecutive matrices of `b` (integer-division broadcast, unlike `add`).
    /// Any strides are accepted. `a` may be F32, F16, BF16 or a block type with a
    /// dot kernel (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K…Q6_K); `b` is F32, F16 or
    /// BF16. Like ggml, each row of `b` is first converted to `a`'s dot partner
    /// (Q8_0/Q8_1/Q8_K for block types, `a`'s own type for floats).
    pub fn mul_mat(&self, a: TensorId, b: TensorId) -> Result<TensorId> {
        let la = self.layout(a)?;
        let weight_ok = crate::quant::dot::WEIGHT_TYPES.contains(&la.dtype);
        if !weight_ok {
            return Err(Error::Unsupported { op: "mul_mat", dtype: la.dtype });
        }
        let lb = self.require_float("mul_mat", b)?;
        if la.ne[0] != lb.ne[0] {
            return Err(Error::shape(
                "mul_mat",
                format!("a.ne[0]={} != b.ne[0]={} (a ne={:?}, b ne={:?})", la.ne[0], lb.ne[0], la.ne, lb.ne),
            ));
        }
        for d in 2..4 {
            if la.ne[d] == 0 || lb.ne[d] % la.ne[d] != 0 {
                return Err(Error::shape(
                    "mul_mat",
                    format!(
                        "b.ne[{d}]={} is not a multiple of a.ne[{d}]={} (a ne={:?}, b ne={:?})",
                        lb.ne[d], la.ne[d], la.ne, lb.ne
                    ),
                ));
            }
        }
        self.new_result(Op::MulMat { a, b }, DType::F32, [la.ne[1], lb.ne[1], lb.ne[2], lb.ne[3]])
    }

    /// ggml's `mul_mat_id(as, b, ids)`: a product choosing its weight matrix
    /// per token, the experts of a mixture-of-experts layer. `as` holds
    /// `n_expert` matrices `[K, M, n_expert]` (the weight types of
    /// [`Context::mul_mat`]); `ids` is I32 `[n_used, n_tokens]`; `b` is
    /// `[K, n_b, n_tokens]` with `n_b` 1 (every slot reads the token's one row) or
    /// `n_used`. The F32 result is `[M, n_used, n_tokens]` with
    /// `out[:, s, t] = as[:, :, ids[s, t]] · b[:, s mod n_b, t]`. An expert number
    /// outside `0..n_expert` is an error when the graph runs.
    pub fn mul_mat_id(&self, experts: TensorId, b: TensorId, ids: TensorId) -> Result<TensorId> {
        let (la, li) = (self.layout(experts)?, self.layout(ids)?);
        if !crate::quant::dot::WEIGHT_TYPES.contains(&la.dtype) {
            return Err(Error::Unsupported { op: "mul_mat_id", dtype: la.dtype });
        }
        let lb = self.require_float("mul_mat_id", b)?;
        if li.dtype != DType::I32 {
            return Err(Error::DTypeMismatch {
                what: "mul_mat_id expert ids".into(),
                expected: DType::I32,
                found: li.dtype,
            });
        }
        let (n_used, n_tokens) = (li.ne[0], li.ne[1]);
        let fits = la.ne[0] == lb.ne[0]
            && la.ne[3] == 1
            && li.ne[2] == 1
            && li.ne[3] == 1
            && lb.ne[2] == n_tokens
            && lb.ne[3] == 1
            && (lb.ne[1] == 1 || lb.ne[1] == n_used);
        if !fits {
            return Err(Error::shape(
                "mul_mat_id",
                format!(
                    "experts ne={:?}, activations ne={:?} and ids ne={:?} do not fit [K, M, n_expert], \
                     [K, 1 or n_used, n_tokens] and [n_used, n_tokens]",
                    la.ne, lb.ne, li.ne
                ),
            ));
        }
        self.new_result(Op::MulMatId { a: experts, b, ids }, DType::F32, [la.ne[1], n_used, n_tokens, 1])
    }
}

impl Context {
    /// The gradient rule of `mul_mat` (see [`Context::operand_grads`]): with
    /// `out[m, n] = Σ_k a[k, m] b[k, n]`, `∂a[k, m] = Σ_n b[k, n] g[m, n]` and
    /// `∂b[k, n] = Σ_m a[k, m] g[m, n]`, two products of transposed copies (a
    /// block-type `a`, a frozen quantized weight, is dequantized first: its
    /// blocks run along `k`).
    pub(super) fn grad_mul_mat(&self, n: &GradNode, g: TensorId, out: &mut Grads) -> Result<bool> {
        let Op::MulMat { .. } = n.op else { return Ok(false) };
        let (a, b) = (n.x[0], n.x[1]);
        out.put(0, || self.sum_to(self.mul_mat(self.cont(self.transpose(b)?)?, self.cont(self.transpose(g)?)?)?, a))?;
        out.put(1, || {
            let a = if self.layout(a)?.dtype.is_quantized() { self.cast(a, crate::dtype::DType::F32)? } else { a };
            self.mul_mat(self.cont(self.transpose(a)?)?, g)
        })?;
        Ok(true)
    }
}

/// What the rule above reads besides the gradient: both operands.
pub(super) fn saved(n: &GradNode) -> Option<Vec<TensorId>> {
    matches!(n.op, Op::MulMat { .. }).then(|| n.x.to_vec())
}
