//! The x86-64 kernels of IQ4_NL, IQ4_XS and MXFP4, written once and
//! instantiated per level like [`super::x86_int`]'s (and on its primitives).
//!
//! All three look their 4-bit indices up in a 16-entry i8 table with one
//! `vpshufb` per 32 values, then dot the signed bytes with the activations:
//! IQ4_NL and MXFP4 through the level's `sdot` (exact on AVX-512, the
//! `abs`/`sign` form on AVX2), IQ4_XS through `vpmaddubsw` on the absolute
//! values and `madd_acc` with the group's 6-bit scale, as ggml's AVX2 kernel
//! (so a `-128` activation quant against a negative level is wrong on both
//! levels, as in ggml; no quantizer writes one).

/// Defines `iq_kernel(w)` and the IQ4_NL, IQ4_XS and MXFP4 kernels for target
/// features `$feat` in the invoking module, which must have invoked
/// `int_kernels!($feat)` before (for `wrap!`, `two_acc!` and the helpers it
/// imports) and provide `sdot` and `madd_acc`.
macro_rules! iq_kernels {
    ($feat:literal) => {
        use super::super::iq4::E8M0_HALF;
        use super::super::iq_grids::{KVALUES_IQ4NL, KVALUES_MXFP4};

        /// The IQ4/MXFP4 kernel of this level for weights of type `w`.
        fn iq_kernel(w: crate::dtype::DType) -> Option<DotFn> {
            use crate::dtype::DType;
            Some(match w {
                DType::IQ4_NL => iq4_nl_q8_0,
                DType::IQ4_XS => iq4_xs_q8_k,
                DType::MXFP4 => mxfp4_q8_0,
                _ => return None,
            })
        }

        wrap!(iq4_nl_q8_0, iq4_nl_inner, 32, 18, 34);
        wrap!(iq4_xs_q8_k, iq4_xs_inner, QK_K, 136, 292);
        wrap!(mxfp4_q8_0, mxfp4_inner, 32, 17, 34);

        /// A 16-entry i8 table in both 128-bit halves (for `vpshufb`).
        #[inline]
        #[target_feature(enable = $feat)]
        fn table(t: &[i8; 16]) -> __m256i {
            // SAFETY: `t` is 16 readable bytes
            _mm256_broadcastsi128_si256(unsafe { ld128(t.as_ptr().cast()) })
        }

        /// The 32 table values of the 16 bytes of indices at `p` (IQ4_NL's
        /// packing: low nibbles are values 0..16, high ones 16..32).
        ///
        /// # Safety
        /// `p..p + 16` must be readable.
        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn lookup(t: __m256i, p: *const u8) -> __m256i {
            _mm256_shuffle_epi8(t, nibbles(p))
        }

        /// # Safety
        /// `x` and `y` must point to `nb` IQ4_NL and Q8_0 blocks; the CPU must have `$feat`.
        #[target_feature(enable = $feat)]
        unsafe fn iq4_nl_inner(nb: usize, x: *const u8, y: *const u8) -> f32 {
            let t = table(&KVALUES_IQ4NL);
            let acc = two_acc!(nb, |i, acc| {
                let (bx, by) = (x.add(18 * i), y.add(34 * i));
                let sum = sdot(lookup(t, bx.add(2)), ld256(by.add(2)));
                _mm256_fmadd_ps(scale2(rd16(by), rd16(bx)), _mm256_cvtepi32_ps(sum), acc)
            });
            hsum_ps(acc)
        }

        /// # Safety
        /// `x` and `y` must point to `nb` MXFP4 and Q8_0 blocks; the CPU must have `$feat`.
        #[target_feature(enable = $feat)]
        unsafe fn mxfp4_inner(nb: usize, x: *const u8, y: *const u8) -> f32 {
            let t = table(&KVALUES_MXFP4);
            let acc = two_acc!(nb, |i, acc| {
                let (bx, by) = (x.add(17 * i), y.add(34 * i));
                let sum = sdot(lookup(t, bx.add(1)), ld256(by.add(2)));
                let d = _mm256_set1_ps(f16t(rd16(by)) * E8M0_HALF[usize::from(*bx)]);
                _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), acc)
            });
            hsum_ps(acc)
        }

        /// # Safety
        /// `x` and `y` must point to `nb` IQ4_XS and Q8_K blocks; the CPU must have `$feat`.
        #[target_feature(enable = $feat)]
        unsafe fn iq4_xs_inner(nb: usize, x: *const u8, y: *const u8) -> f32 {
            let t = table(&KVALUES_IQ4NL);
            let mut acc = _mm256_setzero_ps();
            for i in 0..nb {
                let (bx, by) = (x.add(136 * i), y.add(292 * i));
                let (sh, sl) = (u32::from(rd16(bx.add(2))), rd32(bx.add(4)));
                // two sums (even and odd groups) to halve the dependency chain
                let mut sum = [_mm256_setzero_si256(); 2];
                for g in 0..8 {
                    let ls = (((sl >> (4 * g)) & 0x0f) | (((sh >> (2 * g)) & 3) << 4)) as i16 - 32;
                    let q = lookup(t, bx.add(8 + 16 * g));
                    let p =
                        _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(ld256(by.add(4 + 32 * g)), q));
                    sum[g % 2] = madd_acc(sum[g % 2], p, _mm256_set1_epi16(ls));
                }
                let d = _mm256_set1_ps(f16t(rd16(bx)) * rdf32(by));
                acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_add_epi32(sum[0], sum[1])), acc);
            }
            hsum_ps(acc)
        }
    };
}
