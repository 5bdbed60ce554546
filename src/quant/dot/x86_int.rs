//! The quantized x86-64 kernels, written once and instantiated per level.
//!
//! `int_kernels!` expands, inside a level's module, to one kernel per
//! quantized weight type, built with that level's target features. The module
//! supplies the integer primitives the kernels are written against, which is
//! where the levels differ (`vpmaddubsw`+`vpmaddwd` on AVX2,
//! `vpdpbusd`/`vpdpwssd` with AVX-512 VNNI):
//!
//! - `udot(u, s)`: per i32 lane, `Σ` of 4 products `u8 · i8`; exact when no
//!   adjacent pair of products passes `i16::MAX` (the kernels keep `u ≤ 63`);
//! - `udot_off(u, off, s)`: the same for `(u - off) · s`, exact for `u, off ≤ 31`;
//! - `sdot(x, s)`: the same for `i8 · i8` (see the module docs of
//!   [`super`] for the `-128` caveat);
//! - `madd_acc(acc, a, b)`: `acc + vpmaddwd(a, b)` (i16 pairs into i32).
//!
//! Every kernel walks whole blocks, keeps its partial sums in vector registers
//! and reduces them once at the end. Per block, the integer dot is exact; it is
//! scaled by `d_w · d_a` and accumulated in f32 with FMA.

/// Defines `kernel(w)` and the quantized kernels for target features `$feat`
/// (which must include `avx2,fma,f16c`) in the invoking module, which must
/// provide `udot`, `udot_off`, `sdot` and `madd_acc` (see the module docs) and
/// have `std::arch::x86_64::*` in scope.
macro_rules! int_kernels {
    ($feat:literal) => {
        use super::super::blocks::QK_K;
        use super::common::{blocks, DotFn};
        use super::x86::{
            bytes_from_bits, f16t, hsum_ps, hsum_ps128, k4_scales_mins, ld128, ld256, nibbles, pick_words, q3_scales,
            rd16, rd32, rdf32, scale2,
        };

        /// The quantized kernel of this level for weights of type `w`.
        fn int_kernel(w: crate::dtype::DType) -> Option<DotFn> {
            use crate::dtype::DType;
            Some(match w {
                DType::Q4_0 => q4_0_q8_0,
                DType::Q4_1 => q4_1_q8_1,
                DType::Q5_0 => q5_0_q8_0,
                DType::Q5_1 => q5_1_q8_1,
                DType::Q8_0 => q8_0_q8_0,
                DType::Q2_K => q2_k_q8_k,
                DType::Q3_K => q3_k_q8_k,
                DType::Q4_K => q4_k_q8_k,
                DType::Q5_K => q5_k_q8_k,
                DType::Q6_K => q6_k_q8_k,
                _ => return None,
            })
        }

        /// A safe kernel `$name` over blocks of `$bs` values, `$wb`/`$ab` bytes,
        /// calling the unsafe block walker `$inner(nb, w, a)`.
        macro_rules! wrap {
            ($name:ident, $inner:ident, $bs:expr, $wb:expr, $ab:expr) => {
                fn $name(n: usize, w: &[u8], a: &[u8]) -> f32 {
                    let nb = blocks(n, w, a, $bs, $wb, $ab);
                    // SAFETY: `blocks` checked that `w` and `a` hold `nb` blocks each, which is
                    // all `$inner` reads; this kernel is only handed out by `kernel` when the
                    // CPU supports this level's target features.
                    unsafe { $inner(nb, w.as_ptr(), a.as_ptr()) }
                }
            };
        }

        wrap!(q4_0_q8_0, q4_0_inner, 32, 18, 34);
        wrap!(q4_1_q8_1, q4_1_inner, 32, 20, 36);
        wrap!(q5_0_q8_0, q5_0_inner, 32, 22, 34);
        wrap!(q5_1_q8_1, q5_1_inner, 32, 24, 36);
        wrap!(q8_0_q8_0, q8_0_inner, 32, 34, 34);
        wrap!(q2_k_q8_k, q2_k_inner, QK_K, 84, 292);
        wrap!(q3_k_q8_k, q3_k_inner, QK_K, 110, 292);
        wrap!(q4_k_q8_k, q4_k_inner, QK_K, 144, 292);
        wrap!(q5_k_q8_k, q5_k_inner, QK_K, 176, 292);
        wrap!(q6_k_q8_k, q6_k_inner, QK_K, 210, 292);

        /// Runs `$body` (an `__m256` accumulator update for block `$i`) over
        /// `$nb` blocks, alternating two accumulators; returns their sum.
        macro_rules! two_acc {
            ($nb:expr, |$i:ident, $acc:ident| $body:expr) => {{
                let (mut a0, mut a1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
                let mut k = 0;
                while k + 2 <= $nb {
                    a0 = {
                        let ($i, $acc) = (k, a0);
                        $body
                    };
                    a1 = {
                        let ($i, $acc) = (k + 1, a1);
                        $body
                    };
                    k += 2;
                }
                if k < $nb {
                    a0 = {
                        let ($i, $acc) = (k, a0);
                        $body
                    };
                }
                _mm256_add_ps(a0, a1)
            }};
        }

        /// # Safety
        /// `x` and `y` must point to `nb` Q4_0 and Q8_0 blocks; the CPU must have `$feat`.
        #[target_feature(enable = $feat)]
        unsafe fn q4_0_inner(nb: usize, x: *const u8, y: *const u8) -> f32 {
            let eight = _mm256_set1_epi8(8);
            let acc = two_acc!(nb, |i, acc| {
                let (bx, by) = (x.add(18 * i), y.add(34 * i));
                let sum = udot_off(nibbles(bx.add(2)), eight, ld256(by.add(2)));
                _mm256_fmadd_ps(scale2(rd16(bx), rd16(by)), _mm256_cvtepi32_ps(sum), acc)
            });
            hsum_ps(acc)
        }

        /// `acc + d_w·d_a·sum + m_w·s_a` for a Q4_1/Q5_1 block at `bx` and a
        /// Q8_1 block at `by` (both start with two f16: `d, m` and `d, s`); the
        /// `m·s` term is spread over the 8 lanes as `m·s/8` (exact scaling).
        ///
        /// # Safety
        /// `bx` and `by` must point to such blocks.
        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn affine_block(acc: __m256, sum: __m256i, bx: *const u8, by: *const u8) -> __m256 {
            let d = _mm256_set1_ps(f16t(rd16(bx)) * f16t(rd16(by)));
            let ms = _mm256_set1_ps(f16t(rd16(bx.add(2))) * f16t(rd16(by.add(2))) * 0.125);
            _mm256_add_ps(acc, _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), ms))
        }

        /// # Safety
        /// `x` and `y` must point to `nb` Q4_1 and Q8_1 blocks; the CPU must have `$feat`.
        #[target_feature(enable = $feat)]
        unsafe fn q4_1_inner(nb: usize, x: *const u8, y: *const u8) -> f32 {
            let acc = two_acc!(nb, |i, acc| {
                let (bx, by) = (x.add(20 * i), y.add(36 * i));
                let sum = udot(nibbles(bx.add(4)), ld256(by.add(4)));
                affine_block(acc, sum, bx, by)
            });
            hsum_ps(acc)
        }

        /// # Safety
        /// `x` and `y` must point to `nb` Q5_0 and Q8_0 blocks; the CPU must have `$feat`.
        #[target_feature(enable = $feat)]
        unsafe fn q5_0_inner(nb: usize, x: *const u8, y: *const u8) -> f32 {
            let (sixteen, bit4) = (_mm256_set1_epi8(16), _mm256_set1_epi8(0x10));
            let acc = two_acc!(nb, |i, acc| {
                let (bx, by) = (x.add(22 * i), y.add(34 * i));
                let high = _mm256_and_si256(bytes_from_bits(rd32(bx.add(2))), bit4);
                let q = _mm256_or_si256(nibbles(bx.add(6)), high);
                let sum = udot_off(q, sixteen, ld256(by.add(2)));
                _mm256_fmadd_ps(scale2(rd16(bx), rd16(by)), _mm256_cvtepi32_ps(sum), acc)
            });
            hsum_ps(acc)
        }

        /// # Safety
        /// `x` and `y` must point to `nb` Q5_1 and Q8_1 blocks; the CPU must have `$feat`.
        #[target_feature(enable = $feat)]
        unsafe fn q5_1_inner(nb: usize, x: *const u8, y: *const u8) -> f32 {
            let bit4 = _mm256_set1_epi8(0x10);
            let acc = two_acc!(nb, |i, acc| {
                let (bx, by) = (x.add(24 * i), y.add(36 * i));
                let high = _mm256_and_si256(bytes_from_bits(rd32(bx.add(4))), bit4);
                let q = _mm256_or_si256(nibbles(bx.add(8)), high);
                let sum = udot(q, ld256(by.add(4)));
                affine_block(acc, sum, bx, by)
            });
            hsum_ps(acc)
        }

        /// # Safety
        /// `x` and `y` must point to `nb` Q8_0 blocks each; the CPU must have `$feat`.
        #[target_feature(enable = $feat)]
        unsafe fn q8_0_inner(nb: usize, x: *const u8, y: *const u8) -> f32 {
            let acc = two_acc!(nb, |i, acc| {
                let (bx, by) = (x.add(34 * i), y.add(34 * i));
                let sum = sdot(ld256(bx.add(2)), ld256(by.add(2)));
                _mm256_fmadd_ps(scale2(rd16(bx), rd16(by)), _mm256_cvtepi32_ps(sum), acc)
            });
            hsum_ps(acc)
        }

        /// The i16 scales of the 16-value groups `8h + 2k` (low 128 bits) and
        /// `8h + 2k + 1` (high), from the 16 scales `s16` in order.
        #[inline]
        #[target_feature(enable = $feat)]
        fn group16_scales(s16: __m256i, h: usize, k: usize) -> __m256i {
            let half = if h == 0 {
                _mm256_permute2x128_si256::<0x00>(s16, s16)
            } else {
                _mm256_permute2x128_si256::<0x11>(s16, s16)
            };
            pick_words(half, 2 * k, 2 * k + 1)
        }

        /// Q8_K's 16 block sums, i16.
        ///
        /// # Safety
        /// `by` must point to a Q8_K block.
        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn bsums(by: *const u8) -> __m256i {
            ld256(by.add(260))
        }

        /// # Safety
        /// `x` and `y` must point to `nb` Q2_K and Q8_K blocks; the CPU must have `$feat`.
        #[target_feature(enable = $feat)]
        unsafe fn q2_k_inner(nb: usize, x: *const u8, y: *const u8) -> f32 {
            let (m3, m4) = (_mm256_set1_epi8(3), _mm_set1_epi8(0x0f));
            let (mut acc, mut acc_m) = (_mm256_setzero_ps(), _mm256_setzero_ps());
            for i in 0..nb {
                let (bx, by) = (x.add(84 * i), y.add(292 * i));
                let yd = rdf32(by);
                let sc = ld128(bx);
                // the mins: Σ_g bsum_g · (scale_g >> 4)
                let mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16::<4>(sc), m4));
                let dmin = _mm256_set1_ps(yd * f16t(rd16(bx.add(82))));
                acc_m = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(_mm256_madd_epi16(bsums(by), mins)), acc_m);
                let s16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc, m4));
                let mut sum = _mm256_setzero_si256();
                for h in 0..2 {
                    let mut q2 = ld256(bx.add(16 + 32 * h));
                    for k in 0..4 {
                        let p = _mm256_maddubs_epi16(_mm256_and_si256(q2, m3), ld256(by.add(4 + 128 * h + 32 * k)));
                        sum = madd_acc(sum, p, group16_scales(s16, h, k));
                        q2 = _mm256_srli_epi16::<2>(q2);
                    }
                }
                let d = _mm256_set1_ps(yd * f16t(rd16(bx.add(80))));
                acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), acc);
            }
            hsum_ps(_mm256_sub_ps(acc, acc_m))
        }

        /// # Safety
        /// `x` and `y` must point to `nb` Q3_K and Q8_K blocks; the CPU must have `$feat`.
        #[target_feature(enable = $feat)]
        unsafe fn q3_k_inner(nb: usize, x: *const u8, y: *const u8) -> f32 {
            let (m3, m1) = (_mm256_set1_epi8(3), _mm256_set1_epi8(1));
            let mut acc = _mm256_setzero_ps();
            for i in 0..nb {
                let (bx, by) = (x.add(110 * i), y.add(292 * i));
                let s16 = q3_scales([rd32(bx.add(96)), rd32(bx.add(100)), rd32(bx.add(104))]);
                // quants are stored + 4 when their hmask bit is set: q = low2 + 4·bit - 4;
                // the - 4 comes back as - 4 Σ_g scale_g · bsum_g
                let mut sum = _mm256_slli_epi32::<2>(_mm256_madd_epi16(bsums(by), s16));
                sum = _mm256_sub_epi32(_mm256_setzero_si256(), sum);
                let mut hm = ld256(bx);
                for h in 0..2 {
                    let mut q2 = ld256(bx.add(32 + 32 * h));
                    for k in 0..4 {
                        let high = _mm256_slli_epi16::<2>(_mm256_and_si256(hm, m1));
                        let q = _mm256_or_si256(_mm256_and_si256(q2, m3), high);
                        let p = _mm256_maddubs_epi16(q, ld256(by.add(4 + 128 * h + 32 * k)));
                        sum = madd_acc(sum, p, group16_scales(s16, h, k));
                        q2 = _mm256_srli_epi16::<2>(q2);
                        hm = _mm256_srli_epi16::<1>(hm);
                    }
                }
                let d = _mm256_set1_ps(f16t(rd16(bx.add(108))) * rdf32(by));
                acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), acc);
            }
            hsum_ps(acc)
        }

        /// The Q4_K/Q5_K scales (i16, the 8 of them in each 128-bit half) and the
        /// mins term `Σ_g min_g · (bsum_2g + bsum_2g+1)` (4 i32 partial sums).
        ///
        /// # Safety
        /// `bx` must point to a Q4_K or Q5_K block, `by` to a Q8_K block.
        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn k4_prelude(bx: *const u8, by: *const u8) -> (__m256i, __m128i) {
            let (sc, mn) = k4_scales_mins([rd32(bx.add(4)), rd32(bx.add(8)), rd32(bx.add(12))]);
            let scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(sc as i64)));
            let mins = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(mn as i64));
            let b = bsums(by);
            let pairs = _mm_hadd_epi16(_mm256_castsi256_si128(b), _mm256_extracti128_si256::<1>(b));
            (scales, _mm_madd_epi16(mins, pairs))
        }

        /// # Safety
        /// `x` and `y` must point to `nb` Q4_K and Q8_K blocks; the CPU must have `$feat`.
        #[target_feature(enable = $feat)]
        unsafe fn q4_k_inner(nb: usize, x: *const u8, y: *const u8) -> f32 {
            let m4 = _mm256_set1_epi8(0x0f);
            let (mut acc, mut acc_m) = (_mm256_setzero_ps(), _mm_setzero_ps());
            for i in 0..nb {
                let (bx, by) = (x.add(144 * i), y.add(292 * i));
                let yd = rdf32(by);
                let (scales, mins) = k4_prelude(bx, by);
                acc_m = _mm_fmadd_ps(_mm_set1_ps(yd * f16t(rd16(bx.add(2)))), _mm_cvtepi32_ps(mins), acc_m);
                // two chains of the 8 multiply-adds, not one: half the latency
                let (mut sum_lo, mut sum_hi) = (_mm256_setzero_si256(), _mm256_setzero_si256());
                for j in 0..4 {
                    let q4 = ld256(bx.add(16 + 32 * j));
                    let lo = _mm256_maddubs_epi16(_mm256_and_si256(q4, m4), ld256(by.add(4 + 64 * j)));
                    let hi = _mm256_maddubs_epi16(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(q4), m4),
                        ld256(by.add(36 + 64 * j)),
                    );
                    sum_lo = madd_acc(sum_lo, lo, pick_words(scales, 2 * j, 2 * j));
                    sum_hi = madd_acc(sum_hi, hi, pick_words(scales, 2 * j + 1, 2 * j + 1));
                }
                let sum = _mm256_add_epi32(sum_lo, sum_hi);
                let d = _mm256_set1_ps(yd * f16t(rd16(bx)));
                acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), acc);
            }
            hsum_ps(acc) - hsum_ps128(acc_m)
        }

        /// # Safety
        /// `x` and `y` must point to `nb` Q5_K and Q8_K blocks; the CPU must have `$feat`.
        #[target_feature(enable = $feat)]
        unsafe fn q5_k_inner(nb: usize, x: *const u8, y: *const u8) -> f32 {
            let (m4, m1) = (_mm256_set1_epi8(0x0f), _mm256_set1_epi8(1));
            let (mut acc, mut acc_m) = (_mm256_setzero_ps(), _mm_setzero_ps());
            for i in 0..nb {
                let (bx, by) = (x.add(176 * i), y.add(292 * i));
                let yd = rdf32(by);
                let (scales, mins) = k4_prelude(bx, by);
                acc_m = _mm_fmadd_ps(_mm_set1_ps(yd * f16t(rd16(bx.add(2)))), _mm_cvtepi32_ps(mins), acc_m);
                // bit g of qh byte l is the fifth bit of value 32g + l
                let mut qh = ld256(bx.add(16));
                // two chains of the 8 multiply-adds (as Q4_K's)
                let (mut sum_lo, mut sum_hi) = (_mm256_setzero_si256(), _mm256_setzero_si256());
                for j in 0..4 {
                    let q4 = ld256(bx.add(48 + 32 * j));
                    let h0 = _mm256_slli_epi16::<4>(_mm256_and_si256(qh, m1));
                    let h1 = _mm256_slli_epi16::<3>(_mm256_and_si256(qh, _mm256_set1_epi8(2)));
                    qh = _mm256_srli_epi16::<2>(qh);
                    let q0 = _mm256_or_si256(_mm256_and_si256(q4, m4), h0);
                    let q1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(q4), m4), h1);
                    let lo = _mm256_maddubs_epi16(q0, ld256(by.add(4 + 64 * j)));
                    let hi = _mm256_maddubs_epi16(q1, ld256(by.add(36 + 64 * j)));
                    sum_lo = madd_acc(sum_lo, lo, pick_words(scales, 2 * j, 2 * j));
                    sum_hi = madd_acc(sum_hi, hi, pick_words(scales, 2 * j + 1, 2 * j + 1));
                }
                let sum = _mm256_add_epi32(sum_lo, sum_hi);
                let d = _mm256_set1_ps(yd * f16t(rd16(bx)));
                acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), acc);
            }
            hsum_ps(acc) - hsum_ps128(acc_m)
        }

        /// # Safety
        /// `x` and `y` must point to `nb` Q6_K and Q8_K blocks; the CPU must have `$feat`.
        #[target_feature(enable = $feat)]
        unsafe fn q6_k_inner(nb: usize, x: *const u8, y: *const u8) -> f32 {
            let (m4, m3) = (_mm256_set1_epi8(0x0f), _mm256_set1_epi8(3));
            let mut acc = _mm256_setzero_ps();
            for i in 0..nb {
                let (bx, by) = (x.add(210 * i), y.add(292 * i));
                let s16 = _mm256_cvtepi8_epi16(ld128(bx.add(192)));
                // quants are stored + 32: the - 32 comes back as - 32 Σ_g scale_g · bsum_g
                let fix = _mm256_slli_epi32::<5>(_mm256_madd_epi16(bsums(by), s16));
                // two chains of the 8 multiply-adds, even and odd groups (as Q4_K's)
                let mut sum = [_mm256_sub_epi32(_mm256_setzero_si256(), fix), _mm256_setzero_si256()];
                for h in 0..2 {
                    let ql0 = ld256(bx.add(64 * h));
                    let ql1 = ld256(bx.add(64 * h + 32));
                    let qh = ld256(bx.add(128 + 32 * h));
                    // value 128h + 32k + l: a nibble of ql (byte l or 32 + l), bits 2k..2k+2 of qh byte l
                    let q = [
                        _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16::<4>(_mm256_and_si256(qh, m3))),
                        _mm256_or_si256(
                            _mm256_and_si256(ql1, m4),
                            _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<2>(qh), m3)),
                        ),
                        _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4),
                            _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<4>(qh), m3)),
                        ),
                        _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4),
                            _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<6>(qh), m3)),
                        ),
                    ];
                    for (k, q) in q.into_iter().enumerate() {
                        let p = _mm256_maddubs_epi16(q, ld256(by.add(4 + 128 * h + 32 * k)));
                        sum[k % 2] = madd_acc(sum[k % 2], p, group16_scales(s16, h, k));
                    }
                }
                let sum = _mm256_add_epi32(sum[0], sum[1]);
                let d = _mm256_set1_ps(f16t(rd16(bx.add(208))) * rdf32(by));
                acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), acc);
            }
            hsum_ps(acc)
        }
    };
}
