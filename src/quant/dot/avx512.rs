//! AVX-512 F/BW/VL + VNNI kernels: 512-bit vectors (with masked tails) for the
//! float types, the quantized kernels of [`super::x86_int`] on 256-bit vectors
//! with `vpdpbusd`/`vpdpwssd` (the form ggml uses with AVX-512 VNNI).

use std::arch::x86_64::*;

/// The kernel of this level for weights of type `w`.
pub(super) fn kernel(w: crate::dtype::DType) -> Option<DotFn> {
    use crate::dtype::DType;
    match w {
        DType::F32 => Some(f32_f32),
        DType::F16 => Some(f16_f16),
        DType::BF16 => Some(bf16_bf16),
        _ => int_kernel(w).or_else(|| iq_kernel(w)),
    }
}

/// Per i32 lane, `Σ` of 4 products `u8 · i8`, exact.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn udot(u: __m256i, s: __m256i) -> __m256i {
    _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s)
}

/// Per i32 lane, `Σ` of 4 products `(u - off) · s`, exact.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn udot_off(u: __m256i, off: __m256i, s: __m256i) -> __m256i {
    _mm256_sub_epi32(udot(u, s), udot(off, s))
}

/// Per i32 lane, `Σ` of 4 products `i8 · i8`, exact: `(x + 128) · s - 128 · s`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn sdot(x: __m256i, s: __m256i) -> __m256i {
    let bias = _mm256_set1_epi8(-128);
    udot_off(_mm256_xor_si256(x, bias), bias, s)
}

/// `acc + vpmaddwd(a, b)`, fused.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn madd_acc(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
    _mm256_dpwssd_epi32(acc, a, b)
}

int_kernels!("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni");
iq_kernels!("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni");

/// A float kernel `$name` over values of `$w` bytes: `$load(mask, p)` widens
/// the 16 values at `p` picked by `mask` (the others read as 0) to an `__m512`.
macro_rules! float_kernel {
    ($name:ident, $inner:ident, $w:literal, $load:ident) => {
        fn $name(n: usize, w: &[u8], a: &[u8]) -> f32 {
            let n = blocks(n, w, a, 1, $w, $w);
            // SAFETY: `blocks` checked that both slices hold `n` values, which is all
            // `$inner` reads; this kernel is only handed out when the CPU has this level.
            unsafe { $inner(n, w.as_ptr(), a.as_ptr()) }
        }

        /// # Safety
        /// `x` and `y` must point to `n` values each; the CPU must have AVX-512 F/BW/VL.
        #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
        unsafe fn $inner(n: usize, x: *const u8, y: *const u8) -> f32 {
            const ALL: __mmask16 = 0xffff;
            let mut acc = [_mm512_setzero_ps(); 4];
            let mut i = 0;
            while i + 64 <= n {
                for (k, s) in acc.iter_mut().enumerate() {
                    let o = (i + 16 * k) * $w;
                    *s = _mm512_fmadd_ps($load(ALL, x.add(o)), $load(ALL, y.add(o)), *s);
                }
                i += 64;
            }
            while i + 16 <= n {
                acc[0] = _mm512_fmadd_ps($load(ALL, x.add(i * $w)), $load(ALL, y.add(i * $w)), acc[0]);
                i += 16;
            }
            if i < n {
                // masked-off lanes are neither read nor faulted on
                let m: __mmask16 = (1 << (n - i)) - 1;
                acc[1] = _mm512_fmadd_ps($load(m, x.add(i * $w)), $load(m, y.add(i * $w)), acc[1]);
            }
            _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])))
        }
    };
}

/// The f32 at `p` picked by `m`.
///
/// # Safety
/// The picked values must be readable.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn ld_f32(m: __mmask16, p: *const u8) -> __m512 {
    _mm512_maskz_loadu_ps(m, p.cast())
}

/// The f16 at `p` picked by `m`, widened.
///
/// # Safety
/// The picked values must be readable.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn ld_f16(m: __mmask16, p: *const u8) -> __m512 {
    _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p.cast()))
}

float_kernel!(f32_f32, f32_inner, 4, ld_f32);
float_kernel!(f16_f16, f16_inner, 2, ld_f16);

fn bf16_bf16(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let n = blocks(n, w, a, 1, 2, 2);
    // SAFETY: `blocks` checked that both slices hold `n` values, which is all
    // `bf16_inner` reads; this kernel is only handed out when the CPU has this level.
    unsafe { bf16_inner(n, w.as_ptr(), a.as_ptr()) }
}

/// `(even, odd)` accumulators plus the products of the 32 bf16 in `x` and `y`
/// (even ones shifted up into f32, odd ones with the low half masked off).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn bf16_fma(x: __m512i, y: __m512i, acc: (__m512, __m512)) -> (__m512, __m512) {
    let high = _mm512_set1_epi32(-0x1_0000);
    let even = |v: __m512i| _mm512_castsi512_ps(_mm512_slli_epi32::<16>(v));
    let odd = |v: __m512i| _mm512_castsi512_ps(_mm512_and_si512(v, high));
    (_mm512_fmadd_ps(even(x), even(y), acc.0), _mm512_fmadd_ps(odd(x), odd(y), acc.1))
}

/// # Safety
/// `x` and `y` must point to `n` bf16 each; the CPU must have AVX-512 F/BW/VL.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn bf16_inner(n: usize, x: *const u8, y: *const u8) -> f32 {
    let zero = _mm512_setzero_ps();
    let (mut a, mut b) = ((zero, zero), (zero, zero));
    let ld = |m: __mmask32, p: *const u8| _mm512_maskz_loadu_epi16(m, p.cast());
    let mut i = 0;
    while i + 64 <= n {
        a = bf16_fma(ld(!0, x.add(2 * i)), ld(!0, y.add(2 * i)), a);
        b = bf16_fma(ld(!0, x.add(2 * i + 64)), ld(!0, y.add(2 * i + 64)), b);
        i += 64;
    }
    if i + 32 <= n {
        a = bf16_fma(ld(!0, x.add(2 * i)), ld(!0, y.add(2 * i)), a);
        i += 32;
    }
    if i < n {
        // masked-off lanes are neither read nor faulted on
        let m: __mmask32 = (1 << (n - i)) - 1;
        b = bf16_fma(ld(m, x.add(2 * i)), ld(m, y.add(2 * i)), b);
    }
    _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a.0, a.1), _mm512_add_ps(b.0, b.1)))
}
