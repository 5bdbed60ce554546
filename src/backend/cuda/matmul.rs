//! `mul_mat` through cuBLAS: `dst[i3,i2,i1,i0] = Σ_k a[i3/r3, i2/r2, i0, k] · b[i3, i2, i1, k]`
//! (ggml's broadcast of `a` over dims 2 and 3). Operands that are not F32
//! with unit-stride rows are first converted to packed F32 on the device
//! (F16, BF16, Q4_0, Q8_0 or strided F32; with F16/BF16 weights the activations
//! are first rounded to that type, as ggml and the CPU backend do); then one strided-batched SGEMM per
//! `i3` (per `(i3, a's i2)` when `a` is broadcast).

use std::ffi::c_int;

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::driver::CudaSlice;

use super::exec::{copy, to_f32_rows, Bound};
use super::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};

/// True if `l` is F32 with packed rows whose strides cuBLAS can take.
fn gemm_ready(b: &Bound) -> bool {
    let l = &b.l;
    l.dtype == DType::F32
        && l.nb[0] == 4
        && l.nb.iter().all(|n| n.is_multiple_of(4))
        && (l.ne[1] <= 1 || l.nb[1] >= 4 * l.ne[0] as usize)
        && b.ptr.is_multiple_of(4)
}

/// `b` itself if cuBLAS can read it, else a packed F32 copy (kept alive by the returned buffer).
fn as_gemm_operand(dev: &Device, b: Bound) -> Result<(Bound, Option<CudaSlice<f32>>)> {
    if gemm_ready(&b) {
        return Ok((b, None));
    }
    let (buf, l) = to_f32_rows(dev, &b)?;
    let ptr = {
        use cudarc::driver::DevicePtr;
        buf.device_ptr(&dev.stream).0
    };
    Ok((Bound { ptr, l }, Some(buf)))
}

fn int(v: i64, what: &str) -> Result<c_int> {
    c_int::try_from(v).map_err(|_| Error::Invalid(format!("mul_mat: {what} = {v} exceeds cuBLAS's int range")))
}

/// Leading dimension (in f32 elements) of a matrix with `rows` rows of `cols` values at byte stride `nb1`.
fn ld(rows: i64, cols: i64, nb1: usize) -> i64 {
    if rows <= 1 {
        cols.max(1)
    } else {
        (nb1 / 4) as i64
    }
}

pub(crate) fn mul_mat(dev: &Device, dst: Bound, a: Bound, b: Bound) -> Result<()> {
    let d = dst.l;
    if d.dtype != DType::F32 || !gemm_ready(&dst) {
        return Err(Error::Unsupported { op: "mul_mat", dtype: d.dtype });
    }
    if d.is_empty() {
        return Ok(());
    }
    // like ggml (and the CPU backend), F16/BF16 weights meet activations rounded to their type
    let _keep_rounded;
    let b = if matches!(a.l.dtype, DType::F16 | DType::BF16) && b.l.dtype != a.l.dtype {
        let n = b.l.nelements().max(1) as usize;
        let buf = dev.stream.alloc_zeros::<u16>(n).map_err(|e| Error::Invalid(format!("cuda alloc: {e:?}")))?;
        let ptr = {
            use cudarc::driver::DevicePtr;
            buf.device_ptr(&dev.stream).0
        };
        let rounded = Bound { ptr, l: crate::layout::Layout::contiguous(a.l.dtype, b.l.ne)? };
        copy(dev, rounded, b)?;
        _keep_rounded = Some(buf);
        rounded
    } else {
        _keep_rounded = None;
        b
    };
    let (a, _keep_a) = as_gemm_operand(dev, a)?;
    let (b, _keep_b) = as_gemm_operand(dev, b)?;
    let (al, bl) = (a.l, b.l);
    if al.ne[2] == 0 || al.ne[3] == 0 || bl.ne[2] % al.ne[2] != 0 || bl.ne[3] % al.ne[3] != 0 {
        return Err(Error::Mismatch(format!("internal: mul_mat of {:?} by {:?}", al.ne, bl.ne)));
    }
    let (r2, r3) = (bl.ne[2] / al.ne[2], bl.ne[3] / al.ne[3]);
    let (m, n, k) = (int(d.ne[0], "m")?, int(d.ne[1], "n")?, int(al.ne[0], "k")?);
    let lda = int(ld(al.ne[1], al.ne[0], al.nb[1]), "lda")?;
    let ldb = int(ld(bl.ne[1], bl.ne[0], bl.nb[1]), "ldb")?;
    let ldc = int(ld(d.ne[1], d.ne[0], d.nb[1]), "ldc")?;
    let (alpha, beta) = (1.0f32, 0.0f32);
    let handle = *dev.blas.handle();
    let gemm = |pa: u64, sa: i64, pb: u64, sb: i64, pc: u64, sc: i64, batch: i64| -> Result<()> {
        // SAFETY: every pointer addresses an F32 operand checked to lie in
        // device memory with the leading dimensions and batch strides given
        // (rows of k values for a and b, of m values for dst); cuBLAS runs on
        // the backend's stream, ordered with the kernels.
        unsafe {
            cudarc::cublas::result::sgemm_strided_batched(
                handle,
                cublasOperation_t::CUBLAS_OP_T,
                cublasOperation_t::CUBLAS_OP_N,
                m,
                n,
                k,
                &alpha,
                pa as *const f32,
                lda,
                sa,
                pb as *const f32,
                ldb,
                sb,
                &beta,
                pc as *mut f32,
                ldc,
                sc,
                int(batch, "batch")?,
            )
        }
        .map_err(|e| Error::Invalid(format!("cuBLAS SGEMM: {e:?}")))
    };
    let (a2, b2, c2) = ((al.nb[2] / 4) as i64, (bl.nb[2] / 4) as i64, (d.nb[2] / 4) as i64);
    for i3 in 0..d.ne[3] {
        let pa3 = a.ptr + ((i3 / r3) as usize * al.nb[3]) as u64;
        let pb3 = b.ptr + (i3 as usize * bl.nb[3]) as u64;
        let pc3 = dst.ptr + (i3 as usize * d.nb[3]) as u64;
        if r2 == 1 {
            gemm(pa3, a2, pb3, b2, pc3, c2, d.ne[2])?;
        } else {
            // one a matrix against r2 consecutive b matrices: a's batch stride 0
            for ia2 in 0..al.ne[2] {
                let i2 = (ia2 * r2) as usize;
                let pa = pa3 + (ia2 as usize * al.nb[2]) as u64;
                gemm(pa, 0, pb3 + (i2 * bl.nb[2]) as u64, b2, pc3 + (i2 * d.nb[2]) as u64, c2, r2)?;
            }
        }
    }
    Ok(())
}
