//! Dot products of one weight row with one activation row: the inner loop of
//! `mul_mat`, with ggml-cpu's semantics.
//!
//! ggml never multiplies a quantized weight by f32 directly. Each weight type
//! has a *dot partner* ([`vec_dot_type`]): the activation row (a row of
//! `mul_mat`'s second operand) is first converted to that type with
//! [`quantize_activations`], once per row, and every weight row is then dotted
//! with it by the kernel [`dot_fn`] returns:
//!
//! | weight | partner | kernel |
//! |---|---|---|
//! | F32, F16, BF16 | the same type | f32 products (exact for F16 and BF16), summed in f32 |
//! | Q4_0, Q5_0, Q8_0 | Q8_0 | `Σ_blocks d_w·d_a·Σ q_w·q_a` |
//! | Q4_1, Q5_1 | Q8_1 | `Σ_blocks d_w·d_a·Σ q_w·q_a + m_w·s_a` (Q8_1's stored sum `s`) |
//! | Q2_K … Q6_K | Q8_K | integer dots per sub-block times the sub-block scales; the mins (and Q6_K's offset in SIMD code) through Q8_K's `bsums` |
//! | IQ4_NL, MXFP4 | Q8_0 | `Σ_blocks d_w·d_a·Σ table[i_w]·q_a` (MXFP4's `d_w` a power of two) |
//! | IQ4_XS | Q8_K | table lookups per 32-value group times its 6-bit scale |
//! | IQ1_S … IQ3_S | Q8_K | grid points (8 or 4 values) times signs, summed per scale group; IQ1's shifts through `bsums` (IQ1_S) or the quants' sums (IQ1_M) |
//! | TQ1_0, TQ2_0 | Q8_K | `Σ (t - 1)·q_a` over the ternary values |
//!
//! The integer part of every quantized kernel is exact; only the f32 scaling
//! and summing of the per-block results can round differently between the
//! scalar reference ([`dot_fn_scalar`]) and the SIMD kernels (AVX2+FMA+F16C;
//! AVX-512 F/BW/VL with VNNI), chosen once per process by [`SimdLevel::detect`].
//! The scalar kernels of the types added with IQ4_NL do their f32 arithmetic
//! exactly as ggml's `ggml_vec_dot_*_generic`. IQ4_NL, IQ4_XS and MXFP4 have
//! AVX2 and AVX-512 kernels; the i-quants and the ternary types run their
//! scalar kernels at every level (see [`kernel_level`]).
//!
//! # The length contract
//! [`DotKernel::dot`]`(n, w, a)` needs `w` to hold exactly `n` values of the
//! weight type (`w_type.row_size(n)` bytes, whole blocks) and `a` exactly `n`
//! values of its partner type; anything else is [`Error::Shape`]. `mul_mat`
//! checks the lengths once per matmul and calls the raw kernels, which still
//! assert (one cheap comparison per slice) that the slices are long enough, so
//! a crate bug panics instead of reading out of bounds. The slices may start at
//! any address.
//!
//! # Quant values ggml never produces
//! Q8_0/Q8_1/Q8_K quants of `-128` lie outside what any ggml quantizer writes
//! (they produce `-127..=127`). With them only the AVX2 Q8_0·Q8_0, IQ4_NL,
//! IQ4_XS and MXFP4 kernels (and the AVX-512 IQ4_XS one) may differ from the
//! scalar ones, as ggml's do: their `abs`/`sign` trick wraps on `-128`, and
//! `vpmaddubsw` saturates at `2·128·128`. Every other kernel
//! (AVX-512's Q8_0·Q8_0 uses an exact `(x + 128)·y - 128·y` form) is exact in
//! its integer part for any byte values. The k-quant kernels trust Q8_K's
//! `bsums` to be the sums of its quants, as every Q8_K quantizer writes them
//! (the SIMD Q3_K and Q6_K kernels read them where the scalar ones do not).
//!
//! # Scales
//! f16 scales are widened through a 256 KiB table (like ggml-cpu's on x86),
//! exact bit for bit.

use crate::dtype::DType;
use crate::error::{Error, Result};

mod act;
mod common;
pub(crate) mod f32_block;
mod scalar;
#[cfg(target_arch = "x86_64")]
mod x86;
#[cfg(target_arch = "x86_64")]
#[macro_use]
mod x86_int;
#[cfg(target_arch = "x86_64")]
#[macro_use]
mod x86_iq;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

pub use act::quantize_activations;
pub(crate) use common::DotFn;
pub use common::{vec_dot_type, SimdLevel};

/// The weight types `mul_mat` takes, each with a dot kernel for its partner:
/// F32, F16, BF16 and the block types but the activation-only Q8_1 and Q8_K,
/// in table order.
pub const WEIGHT_TYPES: [DType; 25] = {
    let mut w = [DType::F32; 25];
    let (mut i, mut n) = (0, 0);
    while i < DType::ALL.len() {
        let d = DType::ALL[i];
        let plain = matches!(d, DType::F64 | DType::I8 | DType::I16 | DType::I32 | DType::I64);
        if !plain && !matches!(d, DType::Q8_1 | DType::Q8_K) {
            w[n] = d; // a 26th type is a compile error: the length above must change with it
            n += 1;
        }
        i += 1;
    }
    assert!(n == w.len(), "WEIGHT_TYPES misses a type");
    w
};

/// The dot-product kernel for one weight type at one [`SimdLevel`].
#[derive(Clone, Copy, Debug)]
pub struct DotKernel {
    f: DotFn,
    w: DType,
    level: SimdLevel,
}

impl DotKernel {
    /// The dot product of the `n` values in `w` (rows of the weight type) with
    /// the `n` values in `a` (its [`vec_dot_type`]). Errors with
    /// [`Error::Shape`] unless `n` is whole blocks and the slices hold exactly
    /// `n` values each.
    pub fn dot(&self, n: usize, w: &[u8], a: &[u8]) -> Result<f32> {
        let sizes = i64::try_from(n).ok().and_then(|n| Some((self.w.row_size(n)?, vec_dot_type(self.w).row_size(n)?)));
        match sizes {
            Some((wb, ab)) if wb == w.len() && ab == a.len() => Ok((self.f)(n, w, a)),
            _ => Err(Error::shape(
                "dot",
                format!(
                    "{n} values of {} need whole blocks and slices of exactly their size, got {} + {} bytes",
                    self.w,
                    w.len(),
                    a.len()
                ),
            )),
        }
    }
    /// The weight type.
    pub fn weight_type(&self) -> DType {
        self.w
    }
    /// The level the kernel was written for (see [`kernel_level`]).
    pub fn level(&self) -> SimdLevel {
        self.level
    }
    /// The unchecked kernel, for callers that have checked the lengths once.
    pub(crate) fn raw(&self) -> DotFn {
        self.f
    }
}

/// The fastest kernel this CPU runs for weights of type `w` (see
/// [`SimdLevel::detect`]). Look it up once per matmul, not per row.
///
/// Errors with [`Error::Unsupported`] for types without a kernel (Q8_1, Q8_K,
/// the integer types).
pub fn dot_fn(w: DType) -> Result<DotKernel> {
    dot_fn_for(w, SimdLevel::detect()).ok_or(Error::Unsupported { op: "mul_mat", dtype: w })
}

/// The portable scalar kernel for weights of type `w`, the reference the SIMD
/// kernels are tested against.
///
/// Errors with [`Error::Unsupported`] for types without a kernel.
pub fn dot_fn_scalar(w: DType) -> Result<DotKernel> {
    scalar::kernel(w)
        .map(|f| DotKernel { f, w, level: SimdLevel::Scalar })
        .ok_or(Error::Unsupported { op: "mul_mat", dtype: w })
}

/// The kernel [`dot_fn`] would choose on a CPU whose best level is `level`:
/// the kernel written for `level`, or for the best lower level where a pair
/// has none (see [`kernel_level`]).
///
/// `None` when this CPU does not support `level` or `w` has no kernel.
pub fn dot_fn_for(w: DType, level: SimdLevel) -> Option<DotKernel> {
    if !level.is_supported() {
        return None;
    }
    let at = kernel_level(w, level)?;
    let f = match at {
        SimdLevel::Scalar => scalar::kernel(w),
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 => avx2::kernel(w),
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512 => avx512::kernel(w),
        #[cfg(not(target_arch = "x86_64"))]
        _ => None,
    }?;
    Some(DotKernel { f, w, level: at })
}

/// The level of the kernel [`dot_fn_for`]`(w, level)` returns, regardless of
/// whether this CPU supports `level`; `None` when `w` has no kernel.
///
/// On x86-64 the float, legacy, k-quant, IQ4_NL, IQ4_XS and MXFP4 weights
/// have an AVX2 and an AVX-512 kernel; the i-quants and ternary types only
/// the scalar one; elsewhere only the scalar ones exist.
pub fn kernel_level(w: DType, level: SimdLevel) -> Option<SimdLevel> {
    scalar::kernel(w)?;
    #[cfg(target_arch = "x86_64")]
    {
        let has = |l: SimdLevel| match l {
            SimdLevel::Scalar => true,
            SimdLevel::Avx2 => avx2::kernel(w).is_some(),
            SimdLevel::Avx512 => avx512::kernel(w).is_some(),
        };
        Some(SimdLevel::ALL.into_iter().rev().filter(|&l| l <= level).find(|&l| has(l)).unwrap_or(SimdLevel::Scalar))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = level;
        Some(SimdLevel::Scalar)
    }
}

/// Asks for the cache lines of the `len` bytes at `p` (a hint: a weight
/// stream's next rows, ahead of their dots), where this CPU gains by it
/// ([`super::prefetch::enabled`]). A prefetch never faults, so `p`
/// may point anywhere (form it with `wrapping_add`).
#[inline(always)]
pub(crate) fn prefetch(p: *const u8, len: usize) {
    if !super::prefetch::enabled() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    for line in 0..len.div_ceil(64) {
        // SAFETY: a prefetch is a hint; it reads nothing and never faults.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.wrapping_add(64 * line).cast())
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}
