//! One activation row against repacked Q4_K/Q5_K/Q6_K groups of 8 rows
//! (decode's products at AVX2): each super-block's quants are split and used
//! as they load, and only its scales and mins ([`HeadK`], [`Scales6`]) are
//! decoded whole. The tile's [`super::k`] block of a whole super-block (64
//! vectors, more than AVX2's 16 registers) would go through the stack once
//! more per row. Integer sums as the tile's `group_k4` and `group_q6` make
//! them, scaled in their order, so the bits are the tile's bits.

use std::arch::x86_64::*;

use super::super::common::{groups_of_run, Source, Q6_BYTES, ROWS_APART};
use super::k::{q4_k_tiled_packed, q5_k_tiled_packed, q6_k_tiled_packed, HeadK, Scales6, QB};
use super::lanes::{bcast, fifth_bit, store_acc, Repacked, MR};

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

/// A run of groups of Q4_K weight rows repacked by `TileKernel::pack_group`: up to
/// [`ROWS_APART`] activation rows by [`single`] each, more by the tile.
///
/// # Safety
/// The contract of `super::super::common::RawPacked`, at this level.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn q4_k_packed(nb: usize, group: &[u8], rows: usize, a: &[&[u8]], out: &mut [f32], stride: usize) {
    if a.len() <= ROWS_APART {
        for (at, first, n) in groups_of_run(nb * 144 * MR, MR, rows) {
            let s = Repacked::new(group[at..].as_ptr(), 144, 0, 0);
            for (j, a) in a.iter().enumerate() {
                single::<false, 8>(nb, &s, a.as_ptr(), out[j * stride + first..].as_mut_ptr(), n);
            }
        }
        return;
    }
    q4_k_tiled_packed(nb, group, rows, a, out, stride)
}

/// A run of groups of Q5_K weight rows repacked by `TileKernel::pack_group`: up to
/// [`ROWS_APART`] activation rows by [`single`] each, more by the tile.
///
/// # Safety
/// The contract of `super::super::common::RawPacked`, at this level.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn q5_k_packed(nb: usize, group: &[u8], rows: usize, a: &[&[u8]], out: &mut [f32], stride: usize) {
    if a.len() <= ROWS_APART {
        for (at, first, n) in groups_of_run(nb * 176 * MR, MR, rows) {
            let s = Repacked::new(group[at..].as_ptr(), 176, 0, 0);
            for (j, a) in a.iter().enumerate() {
                single::<true, 4>(nb, &s, a.as_ptr(), out[j * stride + first..].as_mut_ptr(), n);
            }
        }
        return;
    }
    q5_k_tiled_packed(nb, group, rows, a, out, stride)
}

/// Vector `e` of Q6_K groups `8H + 2j + e / 4` of super-block `b`, for j < 4
/// (values `128H + 32j + 4e..+ 4` of each row, `+ 32` included; see
/// [`q6_quarter`]). A function, not a closure, so that it is compiled for
/// AVX2 and inlines.
///
/// # Safety
/// As for [`single_q6`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6_quants<const H: usize>(s: &Repacked, b: usize, e: usize) -> [__m256i; 4] {
    let (m4, m30) = (_mm256_set1_epi8(0x0f), _mm256_set1_epi8(0x30));
    let (ql0, ql1, qh) =
        (s.dword(b, 64 * H + 4 * e), s.dword(b, 64 * H + 32 + 4 * e), s.dword(b, 128 + 32 * H + 4 * e));
    let low = [
        _mm256_and_si256(ql0, m4),
        _mm256_and_si256(ql1, m4),
        _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4),
        _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4),
    ];
    // bits 2j..2j + 2 moved to bits 4..6 (what crosses a byte is masked off)
    let high = [_mm256_slli_epi16::<4>(qh), _mm256_slli_epi16::<2>(qh), qh, _mm256_srli_epi16::<2>(qh)];
    [
        _mm256_or_si256(low[0], _mm256_and_si256(high[0], m30)),
        _mm256_or_si256(low[1], _mm256_and_si256(high[1], m30)),
        _mm256_or_si256(low[2], _mm256_and_si256(high[2], m30)),
        _mm256_or_si256(low[3], _mm256_and_si256(high[3], m30)),
    ]
}

/// The scaled dots of Q6_K groups `8H + 2j + HALF` (j < 4) of super-block
/// `b` with the Q8_K block at `y`, summed: a quarter of the super-block's
/// integer dot, its `+ 32` still in. Per group, as in the tile: two i16 sums
/// of two `vpmaddubsw` (at most `4 · 63 · 128`), each widened with the scale.
///
/// Value `128H + 32j + l` (l < 32) is a nibble of `ql` byte `64H + 32(j % 2) + l`
/// (the high one for j ≥ 2) and bits `2j..2j + 2` of `qh` byte `32H + l`;
/// dword `e` of a vector holds `l = 4e..4e + 4`, and groups `8H + 2j + HALF`
/// take `l` in `16 HALF..16 HALF + 16`. Constant `H` and `HALF` let every
/// index and shift fold.
///
/// # Safety
/// As for [`single_q6`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6_quarter<const H: usize, const HALF: usize>(
    s: &Repacked,
    b: usize,
    y: *const u8,
    scales: &Scales6,
) -> __m256i {
    let mut isum = _mm256_setzero_si256();
    for e0 in [4 * HALF, 4 * HALF + 2] {
        let (q0, q1) = (q6_quants::<H>(s, b, e0), q6_quants::<H>(s, b, e0 + 1));
        for j in 0..4 {
            let p = y.add(4 + 128 * H + 32 * j);
            let s16 = _mm256_add_epi16(
                _mm256_maddubs_epi16(q0[j], bcast(p.add(4 * e0))),
                _mm256_maddubs_epi16(q1[j], bcast(p.add(4 * e0 + 4))),
            );
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(s16, scales.scale(8 * H + 2 * j + HALF)));
        }
    }
    isum
}

/// One activation row at `a` (`nb` Q8_K blocks) against a repacked Q6_K
/// group of `m` rows, its results to `o[..m]`: the integer dot of each
/// super-block as the tile's `group_q6` makes it (the `+ 32` taken back off
/// as `32 · Σ scale · bsum`), then `acc + d·d_a·isum` in its order.
///
/// # Safety
/// `s` must hold `nb` repacked super-blocks, `a` point at `nb` Q8_K blocks,
/// `o[..m]` be writable with `m ≤ MR`; the CPU must have AVX2+FMA.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn single_q6(nb: usize, s: &Repacked, a: *const u8, o: *mut f32, m: usize) {
    let mut acc = _mm256_setzero_ps();
    for b in 0..nb {
        s.touch(b);
        let (scales, y) = (Scales6::decode(s, b), a.add(b * QB));
        let first = _mm256_add_epi32(q6_quarter::<0, 0>(s, b, y, &scales), q6_quarter::<0, 1>(s, b, y, &scales));
        let second = _mm256_add_epi32(q6_quarter::<1, 0>(s, b, y, &scales), q6_quarter::<1, 1>(s, b, y, &scales));
        let mut corr = _mm256_setzero_si256();
        for p in 0..8 {
            corr = _mm256_add_epi32(corr, _mm256_madd_epi16(scales.pair(p), bcast(y.add(260 + 4 * p))));
        }
        let isum = _mm256_sub_epi32(_mm256_add_epi32(first, second), _mm256_slli_epi32::<5>(corr));
        let da = _mm256_set1_ps(y.cast::<f32>().read_unaligned());
        let d = _mm256_castsi256_ps(s.half(b, 208));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, da), acc);
    }
    store_acc([o], m, [acc]);
}

/// A run of groups of Q6_K weight rows repacked by `TileKernel::pack_group`:
/// up to [`ROWS_APART`] activation rows by [`single_q6`] each, more by the tile.
///
/// # Safety
/// The contract of `super::super::common::RawPacked`, at this level.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn q6_k_packed(nb: usize, group: &[u8], rows: usize, a: &[&[u8]], out: &mut [f32], stride: usize) {
    if a.len() <= ROWS_APART {
        for (at, first, n) in groups_of_run(nb * Q6_BYTES * MR, MR, rows) {
            let s = Repacked::new(group[at..].as_ptr(), Q6_BYTES, 0, 2);
            for (j, a) in a.iter().enumerate() {
                single_q6(nb, &s, a.as_ptr(), out[j * stride + first..].as_mut_ptr(), n);
            }
        }
        return;
    }
    q6_k_tiled_packed(nb, group, rows, a, out, stride)
}
