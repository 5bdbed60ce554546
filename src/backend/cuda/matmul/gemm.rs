//! One cuBLAS strided-batched GEMM ([`Gemm`]) and what its operands need:
//! the input type ([`GemmType`]), cuBLAS-ready strides, leading dimensions.

use std::ffi::{c_int, c_void};

use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType};

use super::super::device::Device;
use super::super::launch::{cuda_err, Bound};
use crate::dtype::DType;
use crate::error::{Error, Result};

/// The element type of a GEMM's inputs (the output is always F32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GemmType {
    /// F32 inputs (SGEMM).
    F32,
    /// IEEE half inputs, F32 accumulation.
    F16,
    /// bfloat16 inputs, F32 accumulation.
    BF16,
}

impl GemmType {
    /// The GEMM that weights of type `w` go through, if any.
    pub(crate) fn of(w: DType) -> Option<GemmType> {
        match w {
            DType::F32 => Some(GemmType::F32),
            DType::F16 => Some(GemmType::F16),
            DType::BF16 => Some(GemmType::BF16),
            _ => None,
        }
    }
    pub(crate) fn dtype(self) -> DType {
        match self {
            GemmType::F32 => DType::F32,
            GemmType::F16 => DType::F16,
            GemmType::BF16 => DType::BF16,
        }
    }
    pub(crate) fn cuda(self) -> cudaDataType {
        match self {
            GemmType::F32 => cudaDataType::CUDA_R_32F,
            GemmType::F16 => cudaDataType::CUDA_R_16F,
            GemmType::BF16 => cudaDataType::CUDA_R_16BF,
        }
    }
}

/// True if `l` is of type `t` with packed rows whose strides cuBLAS can take
/// (every stride a whole number of elements).
pub(crate) fn gemm_ready<A>(b: &Bound<A>, t: DType) -> bool {
    let (l, size) = (&b.l, t.type_size());
    l.dtype == t
        && l.nb[0] == size
        && l.nb.iter().all(|n| n.is_multiple_of(size))
        && (l.ne[1] <= 1 || l.nb[1] >= size * l.ne[0] as usize)
        && b.ptr.is_multiple_of(size as u64)
}

/// `v` as cuBLAS's `int`, or an error naming it.
fn int(v: i64, what: &str) -> Result<c_int> {
    c_int::try_from(v).map_err(|_| Error::Invalid(format!("mul_mat: {what} = {v} exceeds cuBLAS's int range")))
}

/// Leading dimension (in elements of `size` bytes) of a matrix with `rows`
/// rows of `cols` values at byte stride `nb1`: at least 1, as cuBLAS requires
/// even of empty rows (`K = 0`, where packed rows have `nb1 = 0`).
pub(crate) fn ld(rows: i64, cols: i64, nb1: usize, size: usize) -> i64 {
    if rows <= 1 {
        cols.max(1)
    } else {
        ((nb1 / size) as i64).max(1)
    }
}

/// One cuBLAS call: `C[i] = A[i]ᵀ · B[i]` for `batch` matrices, A `k`×`m`,
/// B `k`×`n`, C `m`×`n` (column-major: rows of `k` inputs of type `t`, rows
/// of `m` F32 outputs), each operand `(address, leading dimension, batch
/// stride)` in elements.
pub(crate) struct Gemm {
    pub t: GemmType,
    pub m: i64,
    pub n: i64,
    pub k: i64,
    pub a: (u64, i64, i64),
    pub b: (u64, i64, i64),
    pub c: (u64, i64, i64),
    pub batch: i64,
}

impl Gemm {
    pub(crate) fn run(&self, dev: &Device) -> Result<()> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        let t = self.t;
        let (m, n, k, batch) = (int(self.m, "m")?, int(self.n, "n")?, int(self.k, "k")?, int(self.batch, "batch")?);
        let (lda, ldb, ldc) = (int(self.a.1, "lda")?, int(self.b.1, "ldb")?, int(self.c.1, "ldc")?);
        // cuBLAS works in the calling thread's current context, and unlike cudarc's
        // launches and copies nothing here makes ours current: on a thread that has
        // not touched the device yet (operands already GEMM-ready, so no copy kernel
        // ran) the runtime would pick device 0's primary context.
        dev.ctx.bind_to_thread().map_err(cuda_err("bind context"))?;
        // SAFETY: every pointer addresses an operand of the stated type checked
        // to lie in device memory with the leading dimensions and batch strides
        // given (by the caller: rows of k values for a and b, of m f32 values
        // for c); alpha/beta are host f32 (COMPUTE_32F); cuBLAS runs on the
        // backend's stream, ordered with the kernels.
        unsafe {
            cudarc::cublas::result::gemm_strided_batched_ex(
                *dev.blas.handle(),
                cublasOperation_t::CUBLAS_OP_T,
                cublasOperation_t::CUBLAS_OP_N,
                m,
                n,
                k,
                (&alpha as *const f32).cast::<c_void>(),
                self.a.0 as *const c_void,
                t.cuda(),
                lda,
                self.a.2,
                self.b.0 as *const c_void,
                t.cuda(),
                ldb,
                self.b.2,
                (&beta as *const f32).cast::<c_void>(),
                self.c.0 as *mut c_void,
                cudaDataType::CUDA_R_32F,
                ldc,
                self.c.2,
                batch,
                cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|e| Error::Cuda { what: format!("cuBLAS GEMM ({t:?})"), source: Box::new(e) })
    }
}
