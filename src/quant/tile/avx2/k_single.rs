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

/// Bit `g` of each byte of `qh` moved to bit 4 (the rest cleared): the fifth
/// bits of Q5_K's group `g`. A function, not a closure, so that it is compiled
/// for AVX2 and inlines (a closure would not inherit the features).
///
/// # Safety
/// The CPU must have AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn fifth_bit(qh: __m256i, g: usize) -> __m256i {
    let v = _mm256_and_si256(qh, _mm256_set1_epi8(1 << g));
    match g {
        0 => _mm256_slli_epi16::<4>(v),
        1 => _mm256_slli_epi16::<3>(v),
        2 => _mm256_slli_epi16::<2>(v),
        3 => _mm256_slli_epi16::<1>(v),
        4 => v,
        5 => _mm256_srli_epi16::<1>(v),
        6 => _mm256_srli_epi16::<2>(v),
        _ => _mm256_srli_epi16::<3>(v),
    }
}

/// Quant vector `e` of groups `2C` and `2C + 1` of super-block `b` (their
/// bytes `32C + 4e..` in every lane), as two vectors of unsigned values: the
/// low and the high nibbles, with Q5_K's fifth bits (`FIVE`) merged in. A
/// constant `C` lets the shifts fold (a shift by a register count costs more,
/// and a loop over `c` kept its vectors on the stack).
///
/// # Safety
/// As for [`Source::dword`], at AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn quants<const FIVE: bool, const C: usize>(s: &Repacked, b: usize, e: usize) -> (__m256i, __m256i) {
    let m4 = _mm256_set1_epi8(0x0f);
    let t = s.dword(b, if FIVE { 48 } else { 16 } + 32 * C + 4 * e);
    let (mut lo, mut hi) = (_mm256_and_si256(t, m4), _mm256_and_si256(_mm256_srli_epi16::<4>(t), m4));
    if FIVE {
        // bit g of qh byte l is the fifth bit of value 32g + l: bit 2C for the
        // low nibbles, 2C + 1 for the high ones, each moved to bit 4 within its byte
        let qh = s.dword(b, 16 + 4 * e);
        lo = _mm256_or_si256(lo, fifth_bit(qh, 2 * C));
        hi = _mm256_or_si256(hi, fifth_bit(qh, 2 * C + 1));
    }
    (lo, hi)
}

/// The scaled integer dots of groups `2C` and `2C + 1` of super-block `b`
/// with the Q8_K block at `y`, summed (integers: the order is free). `H`
/// products are summed in i16 before each `vpmaddwd`, as in the tile.
///
/// # Safety
/// As for [`single`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pair<const FIVE: bool, const H: usize, const C: usize>(
    s: &Repacked,
    b: usize,
    y: *const u8,
    head: &HeadK,
) -> __m256i {
    let q: [(__m256i, __m256i); 8] = std::array::from_fn(|e| quants::<FIVE, C>(s, b, e));
    let mut isum = _mm256_setzero_si256();
    for (g, half) in [(2 * C, 0), (2 * C + 1, 1)] {
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
    isum
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
        let first = _mm256_add_epi32(pair::<FIVE, H, 0>(s, b, y, &head), pair::<FIVE, H, 1>(s, b, y, &head));
        let second = _mm256_add_epi32(pair::<FIVE, H, 2>(s, b, y, &head), pair::<FIVE, H, 3>(s, b, y, &head));
        let isum = _mm256_add_epi32(first, second);
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
