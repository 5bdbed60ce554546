//! AVX2 + FMA + F16C kernels (256-bit vectors).

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

/// Per i32 lane, `Σ` of 4 products `u8 · i8` (`vpmaddubsw` saturates a pair
/// past `i16::MAX`; callers keep `u ≤ 127` with `|s| ≤ 128`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn udot(u: __m256i, s: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
}

/// Per i32 lane, `Σ` of 4 products `(u - off) · s`; exact for `u, off ≤ 31`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn udot_off(u: __m256i, off: __m256i, s: __m256i) -> __m256i {
    let p = _mm256_sub_epi16(_mm256_maddubs_epi16(u, s), _mm256_maddubs_epi16(off, s));
    _mm256_madd_epi16(p, _mm256_set1_epi16(1))
}

/// Per i32 lane, `Σ` of 4 products `i8 · i8`, as `|x| · (s with x's sign)`
/// (wrong for a `-128` in `s` against a negative `x`, or `-128` in both).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn sdot(x: __m256i, s: __m256i) -> __m256i {
    udot(_mm256_sign_epi8(x, x), _mm256_sign_epi8(s, x))
}

/// `acc + vpmaddwd(a, b)`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn madd_acc(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
    _mm256_add_epi32(acc, _mm256_madd_epi16(a, b))
}

int_kernels!("avx2,fma,f16c");
iq_kernels!("avx2,fma,f16c");

/// A float kernel `$name` over values of `$w` bytes: `$load` widens 8 of them
/// (from a pointer) to an `__m256`, `$one` one of them to f32.
macro_rules! float_kernel {
    ($name:ident, $inner:ident, $w:literal, $load:ident, $one:ident) => {
        fn $name(n: usize, w: &[u8], a: &[u8]) -> f32 {
            let n = blocks(n, w, a, 1, $w, $w);
            // SAFETY: `blocks` checked that both slices hold `n` values, which is all
            // `$inner` reads; this kernel is only handed out when the CPU has AVX2+FMA+F16C.
            unsafe { $inner(n, w.as_ptr(), a.as_ptr()) }
        }

        /// # Safety
        /// `x` and `y` must point to `n` values each; the CPU must have AVX2+FMA+F16C.
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn $inner(n: usize, x: *const u8, y: *const u8) -> f32 {
            let mut acc = [_mm256_setzero_ps(); 4];
            let mut i = 0;
            while i + 32 <= n {
                for (k, s) in acc.iter_mut().enumerate() {
                    let o = (i + 8 * k) * $w;
                    *s = _mm256_fmadd_ps($load(x.add(o)), $load(y.add(o)), *s);
                }
                i += 32;
            }
            while i + 8 <= n {
                acc[0] = _mm256_fmadd_ps($load(x.add(i * $w)), $load(y.add(i * $w)), acc[0]);
                i += 8;
            }
            let mut sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
            while i < n {
                sum += $one(x.add(i * $w)) * $one(y.add(i * $w));
                i += 1;
            }
            sum
        }
    };
}

/// 8 f32.
///
/// # Safety
/// `p..p + 32` must be readable.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn ld_f32(p: *const u8) -> __m256 {
    _mm256_loadu_ps(p.cast())
}

/// 8 f16 widened.
///
/// # Safety
/// `p..p + 16` must be readable.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn ld_f16(p: *const u8) -> __m256 {
    _mm256_cvtph_ps(ld128(p))
}

/// One f16 widened.
///
/// # Safety
/// `p..p + 2` must be readable.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn one_f16(p: *const u8) -> f32 {
    f16t(rd16(p))
}

float_kernel!(f32_f32, f32_inner, 4, ld_f32, rdf32);
float_kernel!(f16_f16, f16_inner, 2, ld_f16, one_f16);

fn bf16_bf16(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let n = blocks(n, w, a, 1, 2, 2);
    // SAFETY: `blocks` checked that both slices hold `n` values, which is all
    // `bf16_inner` reads; this kernel is only handed out when the CPU has AVX2+FMA+F16C.
    unsafe { bf16_inner(n, w.as_ptr(), a.as_ptr()) }
}

/// `(even, odd)` accumulators plus the products of the 16 bf16 in `x` and `y`:
/// a bf16 is the top half of an f32, so the even ones are their dword shifted
/// up by 16 and the odd ones their dword with the low half masked off (no
/// widening shuffle).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn bf16_fma(x: __m256i, y: __m256i, acc: (__m256, __m256)) -> (__m256, __m256) {
    let high = _mm256_set1_epi32(-0x1_0000);
    let even = |v: __m256i| _mm256_castsi256_ps(_mm256_slli_epi32::<16>(v));
    let odd = |v: __m256i| _mm256_castsi256_ps(_mm256_and_si256(v, high));
    (_mm256_fmadd_ps(even(x), even(y), acc.0), _mm256_fmadd_ps(odd(x), odd(y), acc.1))
}

/// # Safety
/// `x` and `y` must point to `n` bf16 each; the CPU must have AVX2+FMA+F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bf16_inner(n: usize, x: *const u8, y: *const u8) -> f32 {
    let zero = _mm256_setzero_ps();
    let (mut a, mut b) = ((zero, zero), (zero, zero));
    let mut i = 0;
    while i + 32 <= n {
        a = bf16_fma(ld256(x.add(2 * i)), ld256(y.add(2 * i)), a);
        b = bf16_fma(ld256(x.add(2 * i + 32)), ld256(y.add(2 * i + 32)), b);
        i += 32;
    }
    if i + 16 <= n {
        a = bf16_fma(ld256(x.add(2 * i)), ld256(y.add(2 * i)), a);
        i += 16;
    }
    let mut sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(a.0, a.1), _mm256_add_ps(b.0, b.1)));
    while i < n {
        let one = |p: *const u8| f32::from_bits(u32::from(rd16(p)) << 16);
        sum += one(x.add(2 * i)) * one(y.add(2 * i));
        i += 1;
    }
    sum
}
