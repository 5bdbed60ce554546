//! `mul_mat` on the device: `dst[i3,i2,i1,i0] = Σ_k a[i3/r3, i2/r2, i0, k] · b[i3, i2, i1, k]`
//! (ggml's broadcast of `a`, the weights, over dims 2 and 3), computing the
//! function the CPU backend computes, by weight type:
//!
//! - **F32**: cuBLAS SGEMM on F32 operands (strided activations, or F16/BF16
//!   ones, are first copied to packed F32 by the copy kernels).
//! - **F16, BF16**: the activations are rounded to the weight type (as ggml
//!   and the CPU do; a copy kernel, which also packs strided rows), then
//!   `cublasGemmStridedBatchedEx` with 16-bit inputs, F32 accumulation
//!   (`CUBLAS_COMPUTE_32F`) and F32 output. The products of two 16-bit values
//!   are exact in f32, so only the summation order differs from the CPU.
//! - **Q4_0 … Q6_K**: [`mmvq`]: the activations quantized on the device to the
//!   weight type's dot partner (Q8_0, Q8_1 or Q8_K, the CPU's bytes), then block
//!   dot products with the CPU's integer-sum-then-scale arithmetic (the CPU's
//!   function); from a batch size on (32 activation rows by default), [`dequant`]:
//!   weights dequantized to F16 and a cuBLAS GEMM on the tensor cores, within
//!   F16 rounding of the CPU's results.
//! - **IQ4_NL, IQ4_XS, MXFP4, the grid i-quants, TQ1_0, TQ2_0**: no dot
//!   kernels yet: [`dequant`] at every batch size (2-D weights, plain float
//!   activations).
//!
//! The GEMMs run once per `i3` as one strided batch over `i2` (per `(i3, a's
//! i2)` when `a` is broadcast over dim 2); the dot kernels take the broadcast
//! in their grid. [`moe`] is `mul_mat_id`, through the same dot kernels.

pub(crate) mod dequant;
pub(crate) mod gemm;
pub(crate) mod mmvq;
pub(crate) mod moe;

use super::copy::{copy, to_f32_into};
use super::device::Device;
use super::launch::{Bound, BoundMut};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;
pub(crate) use gemm::{gemm_ready, ld, Gemm, GemmType};

/// `b` itself if cuBLAS can read it as type `t`, else a packed copy of it
/// converted (rounded) to `t` in the device's scratch memory.
fn as_gemm_operand(dev: &Device, b: Bound, t: GemmType) -> Result<Bound> {
    if gemm_ready(&b, t.dtype()) {
        return Ok(b);
    }
    let n = b.l.nelements().max(1) as usize;
    let ptr = dev.scratch.take(&dev.stream, n * t.dtype().type_size())?;
    if t == GemmType::F32 && b.l.dtype.is_quantized() {
        let l = to_f32_into(dev, ptr, &b)?;
        return Ok(Bound::at(ptr, l));
    }
    // plain sources go through `copy`, which has the packed, converting and
    // tiled transposing fast paths (a transposed V view is read coalesced)
    let packed = BoundMut::at(ptr, Layout::contiguous(t.dtype(), b.l.ne)?);
    copy(dev, packed, b)?;
    Ok(packed.as_src())
}

/// How `mul_mat` with block-type weights runs (the backend's settings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QuantPath {
    /// The staged dot kernels where the rows are aligned for them.
    pub staged: bool,
    /// Batches of at least this many activation rows go through
    /// [`dequant`] (F16 and cuBLAS); `None`: never.
    pub dequant_from: Option<i64>,
}

/// `dst = a · bᵀ` (see the module docs), block-type weights as `q` says.
pub(crate) fn mul_mat(dev: &Device, dst: BoundMut, a: Bound, b: Bound, q: QuantPath) -> Result<()> {
    let d = dst.l;
    if d.dtype != DType::F32 || !gemm_ready(&dst, DType::F32) {
        return Err(Error::Unsupported { op: "mul_mat", dtype: d.dtype });
    }
    if d.is_empty() {
        return Ok(());
    }
    match GemmType::of(a.l.dtype) {
        Some(t) => gemm(dev, dst, a, b, t),
        None if mmvq::QSpec::of(a.l.dtype).is_some() => {
            if dequant::applies(&dst, &a, &b, q.dequant_from) {
                dequant::mul_mat(dev, dst, a, b)
            } else {
                mmvq::mul_mat_q(dev, dst, a, b, q.staged)
            }
        }
        // no dot kernels (the i-quants, the ternary types): through F16 at every batch size
        None if a.l.dtype.is_quantized() && dequant::applies(&dst, &a, &b, Some(0)) => dequant::mul_mat(dev, dst, a, b),
        None => Err(Error::Unsupported { op: "mul_mat", dtype: a.l.dtype }),
    }
}

/// Float weights: one cuBLAS strided-batched GEMM per `i3` (per `(i3, a's
/// i2)` under broadcast), inputs of type `t`, F32 accumulation and output.
fn gemm(dev: &Device, dst: BoundMut, a: Bound, b: Bound, t: GemmType) -> Result<()> {
    let d = dst.l;
    // F16/BF16 weights meet activations rounded to their type (as ggml and the CPU)
    let a = as_gemm_operand(dev, a, t)?;
    let b = as_gemm_operand(dev, b, t)?;
    let (al, bl) = (a.l, b.l);
    if al.ne[2] == 0 || al.ne[3] == 0 || bl.ne[2] % al.ne[2] != 0 || bl.ne[3] % al.ne[3] != 0 {
        return Err(Error::internal(format!("mul_mat of {:?} by {:?}", al.ne, bl.ne)));
    }
    let size = t.dtype().type_size();
    let (r2, r3) = (bl.ne[2] / al.ne[2], bl.ne[3] / al.ne[3]);
    let (m, n, k) = (d.ne[0], d.ne[1], al.ne[0]);
    let lda = ld(al.ne[1], al.ne[0], al.nb[1], size);
    let ldb = ld(bl.ne[1], bl.ne[0], bl.nb[1], size);
    let ldc = ld(d.ne[1], d.ne[0], d.nb[1], 4);
    let (a2, b2, c2) = ((al.nb[2] / size) as i64, (bl.nb[2] / size) as i64, (d.nb[2] / 4) as i64);
    for i3 in 0..d.ne[3] {
        let pa3 = a.ptr + ((i3 / r3) as usize * al.nb[3]) as u64;
        let pb3 = b.ptr + (i3 as usize * bl.nb[3]) as u64;
        let pc3 = dst.ptr + (i3 as usize * d.nb[3]) as u64;
        if r2 == 1 {
            let g = Gemm { t, m, n, k, a: (pa3, lda, a2), b: (pb3, ldb, b2), c: (pc3, ldc, c2), batch: d.ne[2] };
            g.run(dev)?;
        } else {
            // one a matrix against r2 consecutive b matrices: a's batch stride 0
            for ia2 in 0..al.ne[2] {
                let i2 = (ia2 * r2) as usize;
                let pa = pa3 + (ia2 as usize * al.nb[2]) as u64;
                let (pb, pc) = (pb3 + (i2 * bl.nb[2]) as u64, pc3 + (i2 * d.nb[2]) as u64);
                Gemm { t, m, n, k, a: (pa, lda, 0), b: (pb, ldb, b2), c: (pc, ldc, c2), batch: r2 }.run(dev)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::launch::Read;
    use super::*;

    #[test]
    fn gemm_types() {
        assert_eq!(GemmType::of(DType::F16), Some(GemmType::F16));
        assert_eq!(GemmType::of(DType::BF16).map(GemmType::dtype), Some(DType::BF16));
        assert_eq!(GemmType::of(DType::Q4_0), None);
    }

    #[test]
    fn gemm_ready_and_leading_dimensions() {
        let l = Layout::contiguous(DType::F16, [6, 3, 2, 1]).unwrap();
        assert!(gemm_ready(&Bound::<Read>::at(256, l), DType::F16));
        assert!(!gemm_ready(&Bound::<Read>::at(256, l), DType::F32));
        assert!(!gemm_ready(&Bound::<Read>::at(257, l), DType::F16));
        let mut t = l;
        t.nb.swap(0, 1); // transposed
        assert!(!gemm_ready(&Bound::<Read>::at(256, t), DType::F16));
        assert_eq!(ld(3, 6, 12, 2), 6);
        assert_eq!(ld(1, 6, 999, 2), 6);
        assert_eq!(ld(3, 6, 64, 4), 16);
        assert_eq!(ld(0, 0, 0, 4), 1);
        // K = 0: packed rows of no values have nb1 = 0; cuBLAS rejects ld < 1
        let empty = Layout::contiguous(DType::F32, [0, 5, 1, 1]).unwrap();
        assert_eq!(ld(empty.ne[1], empty.ne[0], empty.nb[1], 4), 1);
    }
}
