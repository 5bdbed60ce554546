//! The k-quant tiles, with Q8_K activations (their own prepared rows):
//!
//! - Q4_K, Q5_K: per super-block, 8 groups of 32 unsigned quants (Q5_K's fifth
//!   bit merged into the nibbles when packing) as 8 vectors each, the 6-bit
//!   scales and mins decoded into lanes. Per group, 8 `vpdpbusd` give the exact
//!   dot, scaled by the group's scale in integers (`vpmulld`); the mins meet
//!   Q8_K's `bsums` through `vpdpwssd`; per super-block
//!   `acc + d·d_a·isum - dmin·d_a·mins` in f32, as the dot kernels do.
//! - Q6_K: 16 groups of 16 quants, stored `+ 32` (unsigned 0..63), as 4 vectors
//!   each, and the signed 8-bit scales in lanes. Per group, 4 `vpdpbusd` and a
//!   `vpmulld`; the `+ 32` comes back off as `32 · Σ_g scale_g · bsum_g`
//!   (`vpdpwssd` with pairs of scales and `bsums`), so the integer dot is exact;
//!   then `acc + d·d_a·isum`.
//!
//! Every integer sum stays far inside i32: at most `256 · 63 · 128 · 128`
//! (Q6_K's unsigned part) before the correction.

// index loops read best over the lanes and vectors of a block
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;

use super::super::common::{Blocks, Source};
use super::lanes::{bcast, byte_picker, Repacked, Rows};

/// Bytes of a Q8_K block.
pub(super) const QB: usize = 292;
/// Super-blocks per packed chunk (4 × about 5.5 KiB of stack).
pub(super) const KC_K: usize = 4;
/// Activation rows per register group.
pub(super) const NR_K: usize = 4;

/// The scales and mins of a Q4_K/Q5_K super-block of 16 rows: the 6-bit
/// scales (i32 lanes), the mins twice per lane (two i16, for `vpdpwssd` with
/// a pair of `bsums`), and `d`, `dmin` as f32.
#[derive(Clone, Copy)]
pub(super) struct HeadK {
    pub(super) sc: [__m512i; 8],
    mins: [__m512i; 8],
    d: __m512,
    dmin: __m512,
}

/// One packed Q4_K/Q5_K super-block of 16 rows: the quants of group `g` (32
/// values) as 8 vectors like a Q4_0 block, and its [`HeadK`].
#[derive(Clone, Copy)]
struct PackedK {
    q: [[__m512i; 8]; 8],
    head: HeadK,
}

/// Super-block `b` of 16 Q4_K rows, or Q5_K rows when `FIVE` (whose nibbles
/// start at byte 48, after the 32 bytes of fifth bits).
///
/// # Safety
/// Every row of `rows` must hold more than `b` super-blocks; the CPU must have AVX-512 F/BW.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn pack_k4<const FIVE: bool>(s: &impl Source<__m512i>, b: usize) -> PackedK {
    // the 16-byte head of each row's super-block: d and dmin, then the 12 scale bytes
    let h = s.t16(b, 0);
    // bytes 32c..32c + 32 of qs: group 2c in the low nibbles, 2c + 1 in the high ones
    let qs = if FIVE { 48 } else { 16 };
    let mut t = [[_mm512_setzero_si512(); 8]; 4];
    for (c, tc) in t.iter_mut().enumerate() {
        *tc = s.t32(b, qs + 32 * c);
    }
    let mut out = decode_k4(&h, &t);
    if FIVE {
        // bit g of qh byte l is the fifth bit of value 32g + l; after g shifts of
        // a 16-bit lane, bit 0 of each byte is still that byte's bit g
        let mut qh = s.t32(b, 16);
        let m1 = _mm512_set1_epi8(1);
        for g in 0..8 {
            for e in 0..8 {
                let bit = _mm512_slli_epi16::<4>(_mm512_and_si512(qh[e], m1));
                out.q[g][e] = _mm512_or_si512(out.q[g][e], bit);
                qh[e] = _mm512_srli_epi16::<1>(qh[e]);
            }
        }
    }
    out
}

/// The scales, mins, `d` and `dmin` of a Q4_K/Q5_K super-block from its
/// transposed 16-byte heads `h`.
///
/// # Safety
/// The CPU must have AVX-512 F/BW.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn decode_head(h: &[__m512i; 4]) -> HeadK {
    let half = |v: __m512i| _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
    let mut out = HeadK {
        sc: [_mm512_setzero_si512(); 8],
        mins: [_mm512_setzero_si512(); 8],
        d: half(h[0]),
        dmin: half(_mm512_srli_epi32::<16>(h[0])),
    };
    // ggml's get_scale_min_k4 on every lane at once (bytes j of the scales and mins)
    let (low6, low4, top2) = (_mm512_set1_epi8(0x3f), _mm512_set1_epi8(0x0f), _mm512_set1_epi8(3));
    let top = |v: __m512i| _mm512_slli_epi32::<4>(_mm512_and_si512(_mm512_srli_epi32::<6>(v), top2));
    let sc = [_mm512_and_si512(h[1], low6), _mm512_or_si512(_mm512_and_si512(h[3], low4), top(h[1]))];
    let mn = [
        _mm512_and_si512(h[2], low6),
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32::<4>(h[3]), low4), top(h[2])),
    ];
    for g in 0..8 {
        out.sc[g] = _mm512_shuffle_epi8(sc[g / 4], byte_picker(g % 4, false));
        out.mins[g] = _mm512_shuffle_epi8(mn[g / 4], byte_picker(g % 4, true));
    }
    out
}

/// A Q4_K/Q5_K super-block of 16 rows from its transposed bytes: `h`, the
/// 16-byte heads (d, dmin, the 12 scale bytes), and `t[c]`, quant bytes
/// `32c..32c + 32` (lane `r` of vector `e`: bytes `4e..4e + 4` of row `r`).
///
/// # Safety
/// The CPU must have AVX-512 F/BW.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn decode_k4(h: &[__m512i; 4], t: &[[__m512i; 8]; 4]) -> PackedK {
    let m4 = _mm512_set1_epi8(0x0f);
    let mut out = PackedK { q: [[_mm512_setzero_si512(); 8]; 8], head: decode_head(h) };
    for c in 0..4 {
        for e in 0..8 {
            out.q[2 * c][e] = _mm512_and_si512(t[c][e], m4);
            out.q[2 * c + 1][e] = _mm512_and_si512(_mm512_srli_epi16::<4>(t[c][e]), m4);
        }
    }
    out
}

/// The super-blocks of Q4_K weights (`FIVE`: Q5_K) from a [`Source`].
struct K4<S, const FIVE: bool>(S);
/// The super-blocks of Q6_K weights from a [`Source`].
struct Q6K<S>(S);

impl<S: Source<__m512i>, const FIVE: bool> Blocks<PackedK> for K4<S, FIVE> {
    #[inline(always)]
    unsafe fn get(&self, b: usize) -> PackedK {
        self.0.touch(b);
        pack_k4::<FIVE>(&self.0, b)
    }
}

impl<S: Source<__m512i>> Blocks<Packed6> for Q6K<S> {
    #[inline(always)]
    unsafe fn get(&self, b: usize) -> Packed6 {
        self.0.touch(b);
        pack_q6_k(&self.0, b)
    }
}

/// Loads the accumulators of `o[j]` (lanes in `mask`), or zeros when `first`.
///
/// # Safety
/// Unless `first`, the lanes of `o[j]` in `mask` must be readable; the CPU must have AVX-512 F.
#[inline(always)]
pub(super) unsafe fn load_acc<const N: usize>(o: [*mut f32; N], mask: __mmask16, first: bool) -> [__m512; N] {
    let mut acc = [_mm512_setzero_ps(); N];
    if !first {
        for j in 0..N {
            acc[j] = _mm512_maskz_loadu_ps(mask, o[j]);
        }
    }
    acc
}

/// `acc` plus one Q4_K/Q5_K super-block's dot with the Q8_K block at `y`,
/// given its scaled integer sum `isum`: the mins meet the `bsums`, then
/// `acc + d·d_a·isum - dmin·d_a·mins`, as the dot kernels do.
///
/// # Safety
/// `y` must point at a Q8_K block; the CPU must have AVX-512 VNNI.
#[inline(always)]
pub(super) unsafe fn finish_k4(acc: __m512, isum: __m512i, w: &HeadK, y: *const u8) -> __m512 {
    let mut mins = _mm512_setzero_si512();
    for (g, m) in w.mins.iter().enumerate() {
        mins = _mm512_dpwssd_epi32(mins, *m, bcast(y.add(260 + 4 * g)));
    }
    let da = _mm512_set1_ps(y.cast::<f32>().read_unaligned());
    let acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(w.d, da), acc);
    _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins), _mm512_mul_ps(w.dmin, da), acc)
}

/// Adds the packed Q4_K/Q5_K super-blocks `pk` times the same super-blocks of
/// `N` activation rows (`a[j]` points at the first) to the 16-lane
/// accumulators at `o[j]` (starting from 0 when `first`); lanes outside `mask`
/// are neither read nor written.
///
/// # Safety
/// `a[j]` must point at `pk.len()` Q8_K blocks; the lanes of `o[j]` in `mask`
/// must be writable (and readable unless `first`); the CPU must have AVX-512 VNNI.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn group_k4<const N: usize>(pk: &[PackedK], a: [*const u8; N], o: [*mut f32; N], mask: __mmask16, first: bool) {
    let mut acc = load_acc(o, mask, first);
    for (bi, w) in pk.iter().enumerate() {
        let mut isum = [_mm512_setzero_si512(); N];
        for g in 0..8 {
            for j in 0..N {
                let p = a[j].add(bi * QB + 4 + 32 * g);
                let mut s = _mm512_setzero_si512();
                for (e, q) in w.q[g].iter().enumerate() {
                    s = _mm512_dpbusd_epi32(s, *q, bcast(p.add(4 * e)));
                }
                isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(s, w.head.sc[g]));
            }
        }
        for j in 0..N {
            acc[j] = finish_k4(acc[j], isum[j], &w.head, a[j].add(bi * QB));
        }
    }
    for j in 0..N {
        _mm512_mask_storeu_ps(o[j], mask, acc[j]);
    }
}

/// One packed Q6_K super-block of 16 rows: the quants `+ 32` of group `g`
/// (16 values) as 4 vectors (lane `r` of vector `e`: values `16g + 4e..+ 4`
/// of row `r`), the signed scales (i32 lanes), the scale pairs
/// `(scale_2g, scale_2g+1)` as two i16 per lane (for `vpdpwssd` with a pair
/// of `bsums`), and `d` as f32.
#[derive(Clone, Copy)]
struct Packed6 {
    q: [[__m512i; 4]; 16],
    sc: [__m512i; 16],
    pairs: [__m512i; 8],
    d: __m512,
}

/// A `vpshufb` index that puts, in every dword, byte `from[i]` of that dword
/// at byte `i` (zero for `None`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn dword_shuffle(from: [Option<usize>; 4]) -> __m512i {
    let mut idx = [-128i8; 16];
    for q in 0..4 {
        for (i, f) in from.iter().enumerate() {
            if let Some(f) = f {
                idx[4 * q + i] = (4 * q + f) as i8;
            }
        }
    }
    // SAFETY: `idx` is 16 readable bytes
    _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(idx.as_ptr().cast()) })
}

/// Super-block `b` of 16 Q6_K rows.
///
/// # Safety
/// Every row of `rows` must hold more than `b` super-blocks; the CPU must have AVX-512 F/BW.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn pack_q6_k(s: &impl Source<__m512i>, b: usize) -> Packed6 {
    let mut out = Packed6 {
        q: [[_mm512_setzero_si512(); 4]; 16],
        sc: [_mm512_setzero_si512(); 16],
        pairs: [_mm512_setzero_si512(); 8],
        d: _mm512_castsi512_ps(s.half(b, 208)),
    };
    // lane r of s[e]: scales 4e..4e + 4 of row r; each sign-extended from the top byte
    let sv = s.t16(b, 192);
    for g in 0..16 {
        let top = _mm512_shuffle_epi8(sv[g / 4], dword_shuffle([None, None, None, Some(g % 4)]));
        out.sc[g] = _mm512_srai_epi32::<24>(top);
    }
    for g in 0..8 {
        let j = 2 * (g % 2);
        let tops = _mm512_shuffle_epi8(sv[g / 2], dword_shuffle([None, Some(j), None, Some(j + 1)]));
        out.pairs[g] = _mm512_srai_epi16::<8>(tops);
    }
    let (m4, m3) = (_mm512_set1_epi8(0x0f), _mm512_set1_epi8(3));
    for h in 0..2 {
        // value 128h + 32q + l: a nibble of ql byte 64h + 32(q % 2) + l, bits 2q..2q + 2 of qh byte 32h + l
        let ql0 = s.t32(b, 64 * h);
        let ql1 = s.t32(b, 64 * h + 32);
        let qh = s.t32(b, 128 + 32 * h);
        for e in 0..8 {
            let low = [
                _mm512_and_si512(ql0[e], m4),
                _mm512_and_si512(ql1[e], m4),
                _mm512_and_si512(_mm512_srli_epi16::<4>(ql0[e]), m4),
                _mm512_and_si512(_mm512_srli_epi16::<4>(ql1[e]), m4),
            ];
            let high = [
                _mm512_and_si512(qh[e], m3),
                _mm512_and_si512(_mm512_srli_epi16::<2>(qh[e]), m3),
                _mm512_and_si512(_mm512_srli_epi16::<4>(qh[e]), m3),
                _mm512_and_si512(_mm512_srli_epi16::<6>(qh[e]), m3),
            ];
            // vector e holds l = 4e..4e + 4: group 8h + 2q + e / 4, its vector e % 4
            for q in 0..4 {
                out.q[8 * h + 2 * q + e / 4][e % 4] = _mm512_or_si512(low[q], _mm512_slli_epi16::<4>(high[q]));
            }
        }
    }
    out
}

/// [`group_k4`] for Q6_K: per group of 16, 4 `vpdpbusd` and the scale
/// (`vpmulld`); per super-block the `+ 32` correction, then `acc + d·d_a·isum`.
///
/// # Safety
/// As for [`group_k4`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn group_q6<const N: usize>(pk: &[Packed6], a: [*const u8; N], o: [*mut f32; N], mask: __mmask16, first: bool) {
    let mut acc = load_acc(o, mask, first);
    for (bi, w) in pk.iter().enumerate() {
        let mut isum = [_mm512_setzero_si512(); N];
        for g in 0..16 {
            for j in 0..N {
                let p = a[j].add(bi * QB + 4 + 16 * g);
                let mut s = _mm512_setzero_si512();
                for (e, q) in w.q[g].iter().enumerate() {
                    s = _mm512_dpbusd_epi32(s, *q, bcast(p.add(4 * e)));
                }
                isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(s, w.sc[g]));
            }
        }
        for j in 0..N {
            let p = a[j].add(bi * QB);
            // Σ_g scale_g · bsum_g, then isum - 32 · that
            let mut corr = _mm512_setzero_si512();
            for (g, s) in w.pairs.iter().enumerate() {
                corr = _mm512_dpwssd_epi32(corr, *s, bcast(p.add(260 + 4 * g)));
            }
            let isum = _mm512_sub_epi32(isum[j], _mm512_slli_epi32::<5>(corr));
            let da = _mm512_set1_ps(p.cast::<f32>().read_unaligned());
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(w.d, da), acc[j]);
        }
    }
    for j in 0..N {
        _mm512_mask_storeu_ps(o[j], mask, acc[j]);
    }
}

/// The k-quant tile loop: `$rows` weight rows' super-blocks packed `KC_K` at
/// a time into `$ty` by the block source `$src`, then every activation row meets the
/// chunk through `$group::<N>` (N = `NR_K`, then 2, then 1). Expands inside
/// an unsafe function with the contract of `super::super::common::RawTile`.
macro_rules! k_tile {
    ($nb:expr, $src:expr, $rows:expr, $a:expr, $out:expr, $stride:expr, $ty:ty, $group:ident) => {{
        let (nb, a, stride, src) = ($nb, $a, $stride, $src);
        let mask = super::lanes::lanes_mask($rows);
        let o = $out.as_mut_ptr();
        if let [a0] = a {
            // one activation row: each super-block used as it is decoded (no chunk buffer to reuse)
            for b in 0..nb {
                let w = Blocks::<$ty>::get(&src, b);
                // SAFETY: row 0 holds nb Q8_K blocks and out[..rows] (the RawTile contract)
                $group::<1>(std::slice::from_ref(&w), [a0.as_ptr().add(b * QB)], [o], mask, b == 0);
            }
            return;
        }
        // written before it is read: no need to zero it per call
        let mut buf = std::mem::MaybeUninit::<[$ty; KC_K]>::uninit();
        let base = buf.as_mut_ptr().cast::<$ty>();
        let mut b0 = 0;
        while b0 < nb {
            let kc = KC_K.min(nb - b0);
            for bi in 0..kc {
                // SAFETY: bi < KC_K, inside `buf`; b0 + bi < nb super-blocks in every row
                base.add(bi).write(Blocks::<$ty>::get(&src, b0 + bi));
            }
            // SAFETY: the first `kc` entries were just written
            let pk = std::slice::from_raw_parts(base.cast_const(), kc);
            let mut j = 0;
            while j < a.len() {
                macro_rules! run {
                    ($n:expr) => {{
                        let (mut ap, mut op) = ([std::ptr::null::<u8>(); $n], [std::ptr::null_mut::<f32>(); $n]);
                        for jj in 0..$n {
                            ap[jj] = a[j + jj].as_ptr().add(b0 * QB);
                            op[jj] = o.add((j + jj) * stride);
                        }
                        // SAFETY: rows j..j + $n exist, hold nb Q8_K blocks and have
                        // out[(j + jj) * stride..][..w.len()] (the RawTile contract)
                        $group::<$n>(pk, ap, op, mask, b0 == 0);
                        j += $n;
                    }};
                }
                match a.len() - j {
                    NR_K.. => run!(NR_K),
                    2.. => run!(2),
                    _ => run!(1),
                }
            }
            b0 += kc;
        }
    }};
}

/// Defines the kernel `$name` on weight rows in their GGUF layout and
/// `$packed` on a group repacked with `$tail` bytes of each super-block after
/// its transposed body ([`Repacked`]); `$src` wraps either source.
macro_rules! k_kernels {
    ($name:ident, $packed:ident, $src:ident$(<$five:literal>)?, $wb:expr, $tail:expr, $ty:ty, $group:ident) => {
        /// Weights in their GGUF layout (activations: Q8_K rows as they are).
        ///
        /// # Safety
        /// The contract of `super::super::common::RawTile`, at this level.
        #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
        pub(crate) unsafe fn $name(nb: usize, w: &[&[u8]], a: &[&[u8]], out: &mut [f32], stride: usize) {
            k_tile!(nb, $src::<_ $(, $five)?>(Rows::new(w, $wb)), w.len(), a, out, stride, $ty, $group)
        }

        /// A run of groups of weight rows repacked by `TileKernel::pack_group`.
        ///
        /// # Safety
        /// The contract of `super::super::common::RawPacked`, at this level.
        #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
        pub(crate) unsafe fn $packed(
            nb: usize,
            group: &[u8],
            rows: usize,
            a: &[&[u8]],
            out: &mut [f32],
            stride: usize,
        ) {
            // one group (`k_tile` returns early for one activation row)
            #[inline]
            #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
            unsafe fn one(nb: usize, group: *const u8, rows: usize, a: &[&[u8]], out: &mut [f32], stride: usize) {
                let src = $src::<_ $(, $five)?>(Repacked::new(group, $wb, 0, $tail));
                k_tile!(nb, src, rows, a, out, stride, $ty, $group)
            }
            let mr = super::lanes::MR;
            for (at, first, n) in super::super::common::groups_of_run(nb * $wb * mr, mr, rows) {
                one(nb, group[at..].as_ptr(), n, a, &mut out[first..], stride)
            }
        }
    };
}

k_kernels!(q4_k, q4_k_tiled_packed, K4<false>, 144, 0, PackedK, group_k4);
k_kernels!(q5_k, q5_k_tiled_packed, K4<true>, 176, 0, PackedK, group_k4);
k_kernels!(q6_k, q6_k_tiled_packed, Q6K, 210, 2, Packed6, group_q6);
