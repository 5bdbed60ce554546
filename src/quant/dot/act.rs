//! Activation rows into the weights' dot partner type, as ggml-cpu's
//! `from_float` for that type does on x86-64.

use half::f16;

use super::super::blocks::{BlockQ8_0, BlockQ8_1, BlockQ8_K, QK, QK_K};
use super::super::{check_row, quantize_row};
use super::common::vec_dot_type;
use super::scalar;
use crate::dtype::DType;
use crate::error::{Error, Result};

/// Converts one activation row `src` into `dst`, a row of
/// [`vec_dot_type`]`(w)`, exactly as ggml-cpu's `from_float` of that type does
/// on x86-64, so that a matmul sees the bytes ggml's would:
///
/// - F32: a copy. F16: round to nearest even (F16C's `vcvtps2ph`; a NaN stays
///   a quiet NaN with its top payload bits). BF16: ggml's
///   `ggml_compute_fp32_to_bf16` (round to nearest even, NaN made quiet).
/// - Q8_0 and Q8_1: ggml-cpu's AVX `quantize_row_q8_0`/`quantize_row_q8_1`,
///   which differ from the reference quantizer ([`quantize_row`]) in two ways:
///   the inverse scale is `127 / amax` rather than `1 / (amax / 127)`, and
///   quants round half to **even** (`vroundps`) rather than half away from zero
///   (`roundf`). `d = amax / 127` is stored as f16; Q8_1's `s` is the f16 of
///   `d * Σq`. A NaN or infinite input gives the quants `vcvtps2dq` and the
///   saturating packs give (`-128` for NaN).
/// - Q8_K: the reference `quantize_row_q8_K_ref`, which ggml-cpu uses on x86.
///
/// `src.len()` must be a whole number of the partner's blocks and `dst.len()`
/// its row size, else [`Error::Shape`]; a `w` without a dot kernel (see
/// [`super::dot_fn`]) is [`Error::Unsupported`].
///
/// [`quantize_row`]: super::super::quantize_row
pub fn quantize_activations(w: DType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    const OP: &str = "quantize_activations";
    if scalar::kernel(w).is_none() {
        return Err(Error::Unsupported { op: OP, dtype: w });
    }
    let t = vec_dot_type(w);
    check_row(OP, t, src.len(), dst.len())?;
    #[cfg(target_arch = "x86_64")]
    let avx2 = super::common::SimdLevel::Avx2.is_supported();
    #[cfg(not(target_arch = "x86_64"))]
    let avx2 = false;
    match t {
        DType::Q8_0 | DType::Q8_1 => {
            let bytes = t.type_size();
            for (x, out) in src.as_chunks::<QK>().0.iter().zip(dst.chunks_exact_mut(bytes)) {
                let (d, qs, sum) = q8_block(x, avx2);
                let d16 = f16::from_f32(d);
                if t == DType::Q8_0 {
                    out.copy_from_slice(bytemuck::bytes_of(&BlockQ8_0 { d: d16, qs }));
                } else {
                    let s = f16::from_f32(d * sum as f32);
                    out.copy_from_slice(bytemuck::bytes_of(&BlockQ8_1 { d: d16, s, qs }));
                }
            }
        }
        #[cfg(target_arch = "x86_64")]
        DType::Q8_K if avx2 => {
            for (x, out) in src.as_chunks::<QK_K>().0.iter().zip(dst.chunks_exact_mut(size_of::<BlockQ8_K>())) {
                // SAFETY: the CPU has AVX2+FMA+F16C (`avx2`)
                let y = unsafe { x86::q8_k(x) };
                out.copy_from_slice(bytemuck::bytes_of(&y));
            }
        }
        #[cfg(target_arch = "x86_64")]
        DType::F16 if avx2 => {
            // SAFETY: the CPU has AVX2+FMA+F16C (`avx2`)
            unsafe { x86::f16_row(src, dst) }
        }
        // F32, F16, BF16, Q8_K: the conversions of quantize_row are ggml-cpu's
        _ => quantize_row(t, src, dst)?,
    }
    Ok(())
}

/// One Q8_0/Q8_1 block (see [`q8_x86`]), with AVX2 when `avx2` (which must
/// only be true when the CPU has AVX2+FMA+F16C).
#[inline]
fn q8_block(x: &[f32; QK], avx2: bool) -> (f32, [i8; QK], i32) {
    #[cfg(target_arch = "x86_64")]
    if avx2 {
        // SAFETY: the caller checked that the CPU has AVX2+FMA+F16C
        return unsafe { x86::q8(x) };
    }
    let _ = avx2;
    q8_x86(x)
}

/// `_mm_max_ps(a, b)` lane semantics: `a > b ? a : b` (so `b` when either is NaN).
#[inline(always)]
fn max_ps(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// `amax` of a 32-value block, reduced in the lane order of ggml-cpu's AVX code
/// (which only matters for NaNs).
#[inline(always)]
fn amax_x86(x: &[f32]) -> f32 {
    let m: [f32; 8] = std::array::from_fn(|l| (1..4).fold(x[l].abs(), |m, v| max_ps(m, x[8 * v + l].abs())));
    let m4: [f32; 4] = std::array::from_fn(|k| max_ps(m[4 + k], m[k]));
    max_ps(max_ps(m4[0], m4[2]), max_ps(m4[1], m4[3]))
}

/// One Q8_0/Q8_1 block as ggml-cpu's AVX quantizer makes it: the f32 scale,
/// the quants, and the (wrapping) sum of the unsaturated i32 quants.
#[inline(always)]
fn q8_x86(x: &[f32]) -> (f32, [i8; QK], i32) {
    let amax = amax_x86(x);
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    let mut qs = [0i8; QK];
    let mut sum = 0i32;
    for (q, &v) in qs.iter_mut().zip(x) {
        let r = (v * id).round_ties_even();
        // vcvtps2dq: out of range and NaN give i32::MIN
        let i = if (-2_147_483_648.0..2_147_483_648.0).contains(&r) { r as i32 } else { i32::MIN };
        sum = sum.wrapping_add(i);
        // two saturating packs, i32 -> i16 -> i8
        *q = i.clamp(-128, 127) as i8;
    }
    (d, qs, sum)
}

/// The AVX2 forms of the quantizers, bit for bit the scalar ones (tested below).
#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use bytemuck::Zeroable;

    use crate::quant::blocks::{BlockQ8_K, QK, QK_K};

    /// [`super::q8_x86`] with ggml-cpu's AVX2 instructions.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn q8(x: &[f32; QK]) -> (f32, [i8; QK], i32) {
        // SAFETY: `x` holds 32 floats, 4 loads of 8
        let v: [__m256; 4] = std::array::from_fn(|k| unsafe { _mm256_loadu_ps(x.as_ptr().add(8 * k)) });
        let sign = _mm256_set1_ps(-0.0);
        let m = v[1..].iter().fold(_mm256_andnot_ps(sign, v[0]), |m, &v| _mm256_max_ps(m, _mm256_andnot_ps(sign, v)));
        let m4 = _mm_max_ps(_mm256_extractf128_ps::<1>(m), _mm256_castps256_ps128(m));
        let m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        let amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
        let d = amax / 127.0;
        let id = _mm256_set1_ps(if amax != 0.0 { 127.0 / amax } else { 0.0 });
        let i = v.map(|v| {
            _mm256_cvtps_epi32(_mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(
                v, id,
            )))
        });
        let s = _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3]));
        let s = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
        let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
        let sum = _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32::<0b01>(s)));
        // saturating packs work within 128-bit lanes; the permute restores the order
        let q = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
        let q = _mm256_permutevar8x32_epi32(q, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        let mut qs = [0i8; QK];
        // SAFETY: `qs` has room for 32 bytes
        unsafe { _mm256_storeu_si256(qs.as_mut_ptr().cast(), q) };
        (d, qs, sum)
    }

    /// `src` as f16 (`vcvtps2ph`, round to nearest even), into `dst`.
    ///
    /// # Panics
    /// If `dst` holds fewer than `2 * src.len()` bytes.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn f16_row(src: &[f32], dst: &mut [u8]) {
        assert!(dst.len() / 2 >= src.len());
        let (xs, ys) = (src.chunks_exact(8), dst.chunks_exact_mut(16));
        let tail = xs.remainder();
        for (x, y) in xs.zip(ys) {
            // SAFETY: `x` holds 8 floats and `y` 16 bytes
            unsafe {
                let h = _mm256_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT }>(_mm256_loadu_ps(x.as_ptr()));
                _mm_storeu_si128(y.as_mut_ptr().cast(), h);
            }
        }
        let done = src.len() - tail.len();
        for (x, y) in tail.iter().zip(dst[2 * done..].chunks_exact_mut(2)) {
            y.copy_from_slice(&half::f16::from_f32(*x).to_bits().to_le_bytes());
        }
    }

    /// ggml's reference `quantize_row_q8_K_ref` for one block (the `Block`
    /// quantizer of [`BlockQ8_K`]), with the same f32 operations in AVX2.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn q8_k(x: &[f32; QK_K]) -> BlockQ8_K {
        // SAFETY (all loads): `x` holds 256 floats, 32 loads of 8
        let ld = |k: usize| unsafe { _mm256_loadu_ps(x.as_ptr().add(8 * k)) };
        let sign = _mm256_set1_ps(-0.0);
        // amax ignoring NaN (vmaxps returns its second operand when the first is NaN)
        let mut m = _mm256_setzero_ps();
        for k in 0..QK_K / 8 {
            m = _mm256_max_ps(_mm256_andnot_ps(sign, ld(k)), m);
        }
        let m4 = _mm_max_ps(_mm256_extractf128_ps::<1>(m), _mm256_castps256_ps128(m));
        let m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        let amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
        let mut y = BlockQ8_K::zeroed();
        if amax == 0.0 {
            return y;
        }
        // the signed value of the first element of largest magnitude
        let am = _mm256_set1_ps(amax);
        let first = (0..QK_K / 8)
            .find_map(|k| {
                let hit = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(_mm256_andnot_ps(sign, ld(k)), am));
                (hit != 0).then(|| 8 * k + hit.trailing_zeros() as usize)
            })
            // a NaN in the row matches nothing: any index gives a NaN block, as in ggml
            .unwrap_or(0);
        let iscale = -127.0 / x[first];
        // nearest_int: add 1.5·2^23 (a separate add, as in ggml) and take the low mantissa bits
        let (is, magic) = (_mm256_set1_ps(iscale), _mm256_set1_ps(12_582_912.0));
        let (low, bias, top) = (_mm256_set1_epi32(0x007f_ffff), _mm256_set1_epi32(0x0040_0000), _mm256_set1_epi32(127));
        let q = |k: usize| {
            let v = _mm256_castps_si256(_mm256_add_ps(_mm256_mul_ps(ld(k), is), magic));
            _mm256_min_epi32(_mm256_sub_epi32(_mm256_and_si256(v, low), bias), top)
        };
        for (c, out) in y.qs.chunks_exact_mut(32).enumerate() {
            // the values lie in -127..=127 here (0..=127 for NaN), so saturating packs truncate exactly
            let p = _mm256_packs_epi16(
                _mm256_packs_epi32(q(4 * c), q(4 * c + 1)),
                _mm256_packs_epi32(q(4 * c + 2), q(4 * c + 3)),
            );
            let p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            // SAFETY: `out` is 32 bytes
            unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), p) };
        }
        for (s, qs) in y.bsums.iter_mut().zip(y.qs.chunks_exact(16)) {
            *s = qs.iter().map(|&q| i32::from(q)).sum::<i32>() as i16;
        }
        y.d = 1.0 / iscale;
        y
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// Random floats with NaN, infinities, zeros, ties and tiny values mixed in.
    fn nasty(seed: u64, n: usize) -> Vec<f32> {
        let mut r = seed;
        let specials = [f32::NAN, -f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, 0.5, -2.5, 1e-40, f32::MAX];
        (0..n)
            .map(|i| {
                r ^= r << 13;
                r ^= r >> 7;
                r ^= r << 17;
                let x = f32::from_bits((r >> 32) as u32);
                match (r >> 8) % 64 {
                    0 => specials[i % specials.len()],
                    1..=40 => (r >> 40) as i32 as f32 / 1e3 * if i % 7 == 0 { 1e-30 } else { 1.0 },
                    _ if x.is_finite() => x,
                    _ => 1.0,
                }
            })
            .collect()
    }

    #[test]
    fn avx2_quantizers_match_scalar_bit_for_bit() {
        if !crate::quant::dot::common::SimdLevel::Avx2.is_supported() {
            eprintln!("skipped: no AVX2");
            return;
        }
        for seed in 1..400u64 {
            // blocks with and without specials
            let mut x = nasty(seed, QK_K);
            if seed % 3 == 0 {
                x.iter_mut().for_each(|v| *v = if v.is_finite() { *v } else { 0.0 });
            }
            if seed % 5 == 0 {
                x.iter_mut().for_each(|v| *v = 0.0);
            }
            for b in x.chunks_exact(QK) {
                let b: &[f32; QK] = b.try_into().unwrap();
                // SAFETY: AVX2 checked above
                let (d, qs, sum) = unsafe { x86::q8(b) };
                let (d2, qs2, sum2) = q8_x86(b);
                assert_eq!((d.to_bits(), qs, sum), (d2.to_bits(), qs2, sum2), "{b:?}");
            }
            let (mut got16, mut want16) = (vec![0u8; 2 * QK_K], vec![0u8; 2 * QK_K]);
            let bits: Vec<f32> =
                x.iter().map(|v| f32::from_bits(v.to_bits() ^ (seed as u32).wrapping_mul(0x9e37_79b9))).collect();
            for n in [QK_K, QK_K - 3] {
                // SAFETY: AVX2 checked above
                unsafe { x86::f16_row(&bits[..n], &mut got16[..2 * n]) };
                quantize_row(DType::F16, &bits[..n], &mut want16[..2 * n]).unwrap();
                assert_eq!(got16, want16);
            }
            let mut want = vec![0u8; size_of::<BlockQ8_K>()];
            quantize_row(DType::Q8_K, &x, &mut want).unwrap();
            // SAFETY: AVX2 checked above
            let got = unsafe { x86::q8_k(x.as_slice().try_into().unwrap()) };
            assert_eq!(bytemuck::bytes_of(&got), &want[..], "{x:?}");
        }
    }
}
