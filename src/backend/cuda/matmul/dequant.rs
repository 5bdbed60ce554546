//! Block-type weights against a batch of activation rows (a prompt, not a
//! decode step): the weights dequantized to F16 a chunk of rows at a time,
//! the activations rounded to F16, and cuBLAS with F32 accumulation on the
//! tensor cores, as ggml's CUDA backend does for large batches. Reading and
//! converting the weights costs about as much as one matrix-vector product,
//! while the dot kernels' cost grows with every tile of activation rows.
//!
//! Results differ from the CPU's (and the dot kernels') by the rounding of
//! the activations to F16 instead of to the CPU's Q8 blocks, and of the
//! dequantized weights to F16: within the tolerance `tests/cuda_matmul.rs`
//! states, not bit for bit. [`CudaBackend::with_dequant_gemm`] sets the
//! smallest batch that takes this path, or turns it off.
//!
//! [`CudaBackend::with_dequant_gemm`]: super::super::CudaBackend::with_dequant_gemm

use super::super::copy::copy;
use super::super::device::Device;
use super::super::launch::{Bound, BoundMut};
use super::gemm::{Gemm, GemmType};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;

/// The most bytes of dequantized F16 weights in scratch memory at once.
pub(crate) const CHUNK_BYTES: i64 = 64 << 20;

/// Whether `dst = a · bᵀ` takes this path: a 2-D weight matrix, a packed
/// F32 destination, plain float activations, at least `from` activation rows.
pub(crate) fn applies(dst: &BoundMut, a: &Bound, b: &Bound, from: Option<i64>) -> bool {
    from.is_some_and(|min| b.l.nrows() >= min)
        && a.l.ne[2] == 1
        && a.l.ne[3] == 1
        && dst.l.is_contiguous()
        && matches!(b.l.dtype, DType::F32 | DType::F16 | DType::BF16)
}

/// `dst = a · bᵀ` through F16 (see the module docs); [`applies`] must hold.
pub(crate) fn mul_mat(dev: &Device, dst: BoundMut, a: Bound, b: Bound) -> Result<()> {
    mul_mat_chunked(dev, dst, a, b, CHUNK_BYTES)
}

/// [`mul_mat`] with at most `chunk_bytes` of F16 weights converted at once.
fn mul_mat_chunked(dev: &Device, dst: BoundMut, a: Bound, b: Bound, chunk_bytes: i64) -> Result<()> {
    let (k, m, n) = (a.l.ne[0], a.l.ne[1], b.l.nrows());
    if b.l.ne[0] != k || dst.l.ne[0] != m || dst.l.nrows() != n {
        return Err(Error::internal(format!("mul_mat of {:?} by {:?} into {:?}", a.l.ne, b.l.ne, dst.l.ne)));
    }
    let half = DType::F16.type_size() as i64;
    let acts = dev.scratch.take(&dev.stream, (k * n * half) as usize)?;
    copy(dev, Bound::at(acts, Layout::contiguous(DType::F16, b.l.ne)?), b)?;
    let rows = (chunk_bytes / (k * half).max(1)).clamp(1, m.max(1));
    let weights = dev.scratch.take(&dev.stream, (rows * k * half) as usize)?;
    let mut r0 = 0;
    while r0 < m {
        let rc = rows.min(m - r0);
        let mut chunk = a.l;
        chunk.ne[1] = rc;
        let src = Bound::at(a.ptr + (r0 as usize * a.l.nb[1]) as u64, chunk);
        copy(dev, Bound::at(weights, Layout::contiguous(DType::F16, [k, rc, 1, 1])?), src)?;
        // the stream orders the next chunk's conversion after this GEMM
        let c = dst.ptr + (r0 as u64) * 4;
        let (ld, ldc) = (k.max(1), m.max(1));
        let g = Gemm { t: GemmType::F16, m: rc, n, k, a: (weights, ld, 0), b: (acts, ld, 0), c: (c, ldc, 0), batch: 1 };
        g.run(dev)?;
        r0 += rc;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use cudarc::driver::DevicePtr;

    use super::*;
    use crate::quant;
    use crate::CudaBackend;

    /// Weights converted 3 rows at a time (chunks of 3, 3, 3 and 1 rows)
    /// against the exact product, on a device when there is one.
    #[test]
    fn chunks_of_weight_rows_land_in_their_rows() {
        let be = match CudaBackend::new(0) {
            Ok(b) => b,
            Err(e) => {
                assert!(std::env::var("RGML_REQUIRE_CUDA").map_or(true, |v| v != "1"), "{e}");
                println!("SKIP: {e}");
                return;
            }
        };
        let dev = &*be.dev;
        let (k, m, n) = (64usize, 10usize, 5usize);
        let w: Vec<f32> = (0..k * m).map(|i| ((i * 37 % 101) as f32 - 50.0) / 40.0).collect();
        let x: Vec<f32> = (0..k * n).map(|i| ((i * 53 % 89) as f32 - 44.0) / 30.0).collect();
        let rs = DType::Q4_0.row_size(k as i64).unwrap();
        let (mut qw, mut back) = (vec![0u8; rs * m], vec![0f32; k * m]);
        for ((src, q), d) in w.chunks(k).zip(qw.chunks_mut(rs)).zip(back.chunks_mut(k)) {
            quant::quantize_row(DType::Q4_0, src, q).unwrap();
            quant::dequantize_row(DType::Q4_0, q, d).unwrap();
        }
        let s = &dev.stream;
        let (qa, xb, out) =
            (s.clone_htod(&qw).unwrap(), s.clone_htod(&x).unwrap(), s.alloc_zeros::<f32>(m * n).unwrap());
        let a = Bound::at(qa.device_ptr(s).0, Layout::contiguous(DType::Q4_0, [k as i64, m as i64, 1, 1]).unwrap());
        let b = Bound::at(xb.device_ptr(s).0, Layout::contiguous(DType::F32, [k as i64, n as i64, 1, 1]).unwrap());
        let d = Bound::at(out.device_ptr(s).0, Layout::contiguous(DType::F32, [m as i64, n as i64, 1, 1]).unwrap());
        assert!(applies(&d, &a, &b, Some(1)) && !applies(&d, &a, &b, Some(6)) && !applies(&d, &a, &b, None));
        mul_mat_chunked(dev, d, a, b, 3 * k as i64 * 2).unwrap();
        let got = s.clone_dtoh(&out).unwrap();
        for j in 0..n {
            for i in 0..m {
                let terms = back[i * k..][..k].iter().zip(&x[j * k..][..k]);
                let (exact, mag) = terms.fold((0f64, 0f64), |(e, g), (&w, &v)| {
                    (e + f64::from(w) * f64::from(v), g + f64::from((w * v).abs()))
                });
                let err = (f64::from(got[j * m + i]) - exact).abs();
                assert!(err <= 2e-3 * mag, "[{i}, {j}]: {} vs {exact}", got[j * m + i]);
            }
        }
    }
}
