//! One activation row against repacked Q4_K/Q5_K groups of 8 rows (decode's
//! products at AVX2): each super-block's quants are split and used as they
//! load, and only its scales and mins ([`HeadK`]) are decoded whole. The
//! tile's [`super::k`] block of a whole super-block (64 vectors, more than
//! AVX2's 16 registers) would go through the stack once more per row.
//! Sums as the tile's `group_k4` makes them, so the bits are its bits.

use std::arch::x86_64::*;

use super::super::common::{groups_of_run, Source};
use super::k::{q4_k_tiled_packed, q5_k_tiled_packed, HeadK, QB};
use super::lanes::{bcast, store_acc, Repacked, MR};

/// Quant vector `e` of groups `2c` and `2c + 1` of super-block `b` (their
/// bytes `32c + 4e..` in every lane), as two vectors of unsigned values: the
/// low and the high nibbles, with Q5_K's fifth bits (`FIVE`) merged in.
///
/// # Safety
/// As for [`Source::dword`], at AVX2.
#[inline(always)]
unsafe fn quants<const FIVE: bool>(s: &Repacked, b: usize, c: usize, e: usize) -> (__m256i, __m256i) {
    let m4 = _mm256_set1_epi8(0x0f);
    let t = s.dword(b, if FIVE { 48 } else { 16 } + 32 * c + 4 * e);
    let (mut lo, mut hi) = (_mm256_and_si256(t, m4), _mm256_and_si256(_mm256_srli_epi16::<4>(t), m4));
    if FIVE {
        // bit g of qh byte l is the fifth bit of value 32g + l: bit 2c for the
        // low nibbles, 2c + 1 for the high ones, each moved to bit 4 within its byte
        let qh = s.dword(b, 16 + 4 * e);
        let bit = |g: usize| _mm256_and_si256(qh, _mm256_set1_epi8(1 << g));
        let to4 = |v: __m256i, g: usize| match g {
            0..4 => _mm256_sll_epi16(v, _mm_cvtsi32_si128(4 - g as i32)),
            _ => _mm256_srl_epi16(v, _mm_cvtsi32_si128(g as i32 - 4)),
        };
        lo = _mm256_or_si256(lo, to4(bit(2 * c), 2 * c));
        hi = _mm256_or_si256(hi, to4(bit(2 * c + 1), 2 * c + 1));
    }
    (lo, hi)
}

/// One activation row at `a` (`nb` Q8_K blocks) against a repacked group of
/// `m` rows, its results to `o[..m]`. `H` products are summed in i16 before
/// each `vpmaddwd`, as in the tile (8 for Q4_K, 4 for Q5_K).
///
/// # Safety
/// `s` must hold `nb` repacked super-blocks, `a` point at `nb` Q8_K blocks,
/// `o[..m]` be writable with `m ≤ MR`; the CPU must have AVX2+FMA.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn single<const FIVE: bool, const H: usize>(nb: usize, s: &Repacked, a: *const u8, o: *mut f32, m: usize) {
    let mut acc = _mm256_setzero_ps();
    for b in 0..nb {
        s.touch(b);
        let (head, y) = (HeadK::decode(s, b), a.add(b * QB));
        let mut isum = _mm256_setzero_si256();
        for c in 0..4 {
            let q: [(__m256i, __m256i); 8] = std::array::from_fn(|e| quants::<FIVE>(s, b, c, e));
            for (g, half) in [(2 * c, 0), (2 * c + 1, 1)] {
                let p = y.add(4 + 32 * g);
                let pick = |e: usize| if half == 0 { q[e].0 } else { q[e].1 };
                for e0 in (0..8).step_by(H) {
                    let mut s16 = _mm256_maddubs_epi16(pick(e0), bcast(p.add(4 * e0)));
                    for e in e0 + 1..e0 + H {
                        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(pick(e), bcast(p.add(4 * e))));
                    }
                    isum = _mm256_add_epi32(isum, _mm256_madd_epi16(s16, head.scale(g)));
                }
            }
        }
        let mut mins = _mm256_setzero_si256();
        for g in 0..8 {
            mins = _mm256_add_epi32(mins, _mm256_madd_epi16(head.min(g), bcast(y.add(260 + 4 * g))));
        }
        let da = _mm256_set1_ps(y.cast::<f32>().read_unaligned());
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(head.d, da), acc);
        acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(head.dmin, da), acc);
    }
    store_acc([o], m, [acc]);
}

/// A run of groups of Q4_K weight rows repacked by `TileKernel::pack_group`: one
/// activation row by [`single`], more by the tile.
///
/// # Safety
/// The contract of `super::super::common::RawPacked`, at this level.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn q4_k_packed(nb: usize, group: &[u8], rows: usize, a: &[&[u8]], out: &mut [f32], stride: usize) {
    if let [a1] = a {
        for (at, first, n) in groups_of_run(nb * 144 * MR, MR, rows) {
            let s = Repacked::new(group[at..].as_ptr(), 144, 0, 0);
            single::<false, 8>(nb, &s, a1.as_ptr(), out[first..].as_mut_ptr(), n);
        }
        return;
    }
    q4_k_tiled_packed(nb, group, rows, a, out, stride)
}

/// A run of groups of Q5_K weight rows repacked by `TileKernel::pack_group`: one
/// activation row by [`single`], more by the tile.
///
/// # Safety
/// The contract of `super::super::common::RawPacked`, at this level.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn q5_k_packed(nb: usize, group: &[u8], rows: usize, a: &[&[u8]], out: &mut [f32], stride: usize) {
    if let [a1] = a {
        for (at, first, n) in groups_of_run(nb * 176 * MR, MR, rows) {
            let s = Repacked::new(group[at..].as_ptr(), 176, 0, 0);
            single::<true, 4>(nb, &s, a1.as_ptr(), out[first..].as_mut_ptr(), n);
        }
        return;
    }
    q5_k_tiled_packed(nb, group, rows, a, out, stride)
}
