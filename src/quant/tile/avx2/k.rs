//! The k-quant tiles, with Q8_K activations (their own prepared rows). The
//! weight quants are unsigned bytes and `vpmaddubsw` products are summed in
//! i16 only as far as they cannot saturate (a product pair is at most
//! `2 · q_max · 128`), then widened by `vpmaddwd` with the group's scale:
//!
//! - Q4_K (`q ≤ 15`): the 8 vectors of a group of 32 in one i16 sum;
//! - Q5_K (`q ≤ 31`, the fifth bit merged when packing): two sums of 4;
//! - Q6_K (`q + 32 ≤ 63`): groups of 16, two sums of 2, signed 8-bit scales;
//!   the `+ 32` comes back off as `32 · Σ_g scale_g · bsum_g` (`vpmaddwd`
//!   with pairs of scales and `bsums`).
//!
//! Q4_K/Q5_K's mins meet Q8_K's `bsums` through `vpmaddwd`; per super-block,
//! `acc + d·d_a·isum - dmin·d_a·mins` (Q6_K: `acc + d·d_a·isum`) in f32.

// index loops read best over the lanes and vectors of a block
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;

use super::super::common::{groups_of_run, Source};
use super::lanes::{bcast, load_acc, store_acc, Repacked, Rows, MR};

/// Bytes of a Q8_K block.
pub(super) const QB: usize = 292;
/// Super-blocks per packed chunk.
const KC_K: usize = 4;
/// Activation rows per register group.
const NR_K: usize = 4;

/// One packed Q4_K/Q5_K super-block of 8 rows: the quants of group `g` (32
/// values) as 8 vectors like a Q4_0 block, the 6-bit scales and the mins twice
/// per lane (two i16, for `vpmaddwd`), and `d`, `dmin` as f32.
#[derive(Clone, Copy)]
struct PackedK {
    q: [[__m256i; 8]; 8],
    sc: [__m256i; 8],
    mins: [__m256i; 8],
    d: __m256,
    dmin: __m256,
}

/// A `vpshufb` index that puts, in every dword, byte `from[i]` of that dword
/// at byte `i` (zero for `None`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dword_shuffle(from: [Option<usize>; 4]) -> __m256i {
    let mut idx = [-128i8; 16];
    for q in 0..4 {
        for (i, f) in from.iter().enumerate() {
            if let Some(f) = f {
                idx[4 * q + i] = (4 * q + f) as i8;
            }
        }
    }
    // SAFETY: `idx` is 16 readable bytes
    _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(idx.as_ptr().cast()) })
}

/// Super-block `b` of 8 Q4_K rows, or Q5_K rows when `FIVE` (whose nibbles
/// start at byte 48, after the 32 bytes of fifth bits).
///
/// # Safety
/// Every row of `rows` must hold more than `b` super-blocks; the CPU must have AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack_k4<const FIVE: bool>(s: &impl Source<__m256i>, b: usize) -> PackedK {
    let m4 = _mm256_set1_epi8(0x0f);
    let mut out = PackedK {
        q: [[_mm256_setzero_si256(); 8]; 8],
        sc: [_mm256_setzero_si256(); 8],
        mins: [_mm256_setzero_si256(); 8],
        d: _mm256_setzero_ps(),
        dmin: _mm256_setzero_ps(),
    };
    // bytes 32c..32c + 32 of qs: group 2c in the low nibbles, 2c + 1 in the high ones
    let qs = if FIVE { 48 } else { 16 };
    for c in 0..4 {
        let t = s.t32(b, qs + 32 * c);
        for e in 0..8 {
            out.q[2 * c][e] = _mm256_and_si256(t[e], m4);
            out.q[2 * c + 1][e] = _mm256_and_si256(_mm256_srli_epi16::<4>(t[e]), m4);
        }
    }
    if FIVE {
        // bit g of qh byte l is the fifth bit of value 32g + l; after g shifts of
        // a 16-bit lane, bit 0 of each byte is still that byte's bit g
        let mut qh = s.t32(b, 16);
        let m1 = _mm256_set1_epi8(1);
        for g in 0..8 {
            for e in 0..8 {
                let bit = _mm256_slli_epi16::<4>(_mm256_and_si256(qh[e], m1));
                out.q[g][e] = _mm256_or_si256(out.q[g][e], bit);
                qh[e] = _mm256_srli_epi16::<1>(qh[e]);
            }
        }
    }
    let head = HeadK::decode(s, b);
    (out.d, out.dmin) = (head.d, head.dmin);
    for g in 0..8 {
        (out.sc[g], out.mins[g]) = (head.scale(g), head.min(g));
    }
    out
}

/// The scales and mins of a Q4_K/Q5_K super-block of 8 rows, as ggml's
/// `get_scale_min_k4` gives them on every lane at once, 4 groups a vector
/// (byte `g % 4` of each dword), and `d`, `dmin` as f32.
pub(super) struct HeadK {
    sc: [__m256i; 2],
    mn: [__m256i; 2],
    pub(super) d: __m256,
    pub(super) dmin: __m256,
}

impl HeadK {
    /// Super-block `b`'s head: the 16 bytes of each row (`d`, `dmin`, then the
    /// 12 scale bytes), transposed by dwords.
    ///
    /// # Safety
    /// As for [`pack_k4`].
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn decode(s: &impl Source<__m256i>, b: usize) -> HeadK {
        let h = s.t16(b, 0);
        let (low6, low4, top2) = (_mm256_set1_epi8(0x3f), _mm256_set1_epi8(0x0f), _mm256_set1_epi8(3));
        let top = |v: __m256i| _mm256_slli_epi32::<4>(_mm256_and_si256(_mm256_srli_epi32::<6>(v), top2));
        HeadK {
            sc: [_mm256_and_si256(h[1], low6), _mm256_or_si256(_mm256_and_si256(h[3], low4), top(h[1]))],
            mn: [
                _mm256_and_si256(h[2], low6),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32::<4>(h[3]), low4), top(h[2])),
            ],
            d: _mm256_castsi256_ps(s.half(b, 0)),
            dmin: _mm256_castsi256_ps(s.half(b, 2)),
        }
    }

    /// Group `g`'s scale as two i16 per lane, for `vpmaddwd`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn scale(&self, g: usize) -> __m256i {
        _mm256_shuffle_epi8(self.sc[g / 4], dword_shuffle([Some(g % 4), None, Some(g % 4), None]))
    }

    /// Group `g`'s min as two i16 per lane, for `vpmaddwd` with a pair of `bsums`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn min(&self, g: usize) -> __m256i {
        _mm256_shuffle_epi8(self.mn[g / 4], dword_shuffle([Some(g % 4), None, Some(g % 4), None]))
    }
}

/// Adds the packed Q4_K/Q5_K super-blocks `pk` times the same super-blocks of
/// `N` activation rows (`a[j]` points at the first) to the 8-lane
/// accumulators at `o[j]` (starting from 0 when `first`); only the first `m`
/// lanes are read or written. `H` vectors of products are summed in i16
/// before each `vpmaddwd` (8 for Q4_K, 4 for Q5_K: at most `2·H·q_max·128`).
///
/// # Safety
/// `a[j]` must point at `pk.len()` Q8_K blocks; `m ≤ MR` values at `o[j]` must
/// be writable (and readable unless `first`); the CPU must have AVX2+FMA.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn group_k4<const H: usize, const N: usize>(
    pk: &[PackedK],
    a: [*const u8; N],
    o: [*mut f32; N],
    m: usize,
    first: bool,
) {
    let mut acc = load_acc(o, m, first);
    for (bi, w) in pk.iter().enumerate() {
        let mut isum = [_mm256_setzero_si256(); N];
        for g in 0..8 {
            for j in 0..N {
                let p = a[j].add(bi * QB + 4 + 32 * g);
                for e0 in (0..8).step_by(H) {
                    let mut s16 = _mm256_maddubs_epi16(w.q[g][e0], bcast(p.add(4 * e0)));
                    for e in e0 + 1..e0 + H {
                        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(w.q[g][e], bcast(p.add(4 * e))));
                    }
                    isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(s16, w.sc[g]));
                }
            }
        }
        for j in 0..N {
            let p = a[j].add(bi * QB);
            let mut mins = _mm256_setzero_si256();
            for (g, mg) in w.mins.iter().enumerate() {
                mins = _mm256_add_epi32(mins, _mm256_madd_epi16(*mg, bcast(p.add(260 + 4 * g))));
            }
            let da = _mm256_set1_ps(p.cast::<f32>().read_unaligned());
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_mul_ps(w.d, da), acc[j]);
            acc[j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(w.dmin, da), acc[j]);
        }
    }
    store_acc(o, m, acc);
}

/// One packed Q6_K super-block of 8 rows: the quants `+ 32` of group `g` (16
/// values) as 4 vectors (lane `r` of vector `e`: values `16g + 4e..+ 4` of
/// row `r`), the signed scales twice per lane (two i16, for `vpmaddwd`), the
/// scale pairs `(scale_2g, scale_2g+1)` as two i16 per lane (against a pair of
/// `bsums`), and `d` as f32.
#[derive(Clone, Copy)]
struct Packed6 {
    q: [[__m256i; 4]; 16],
    sc: [__m256i; 16],
    pairs: [__m256i; 8],
    d: __m256,
}

/// The signed 8-bit scales of a Q6_K super-block of 8 rows (bytes 192..208,
/// transposed by dwords: lane `r` of vector `e` holds scales `4e..4e + 4` of
/// row `r`), spread for `vpmaddwd`.
pub(super) struct Scales6([__m256i; 4]);

impl Scales6 {
    /// Super-block `b`'s scales.
    ///
    /// # Safety
    /// As for [`pack_q6_k`].
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn decode(s: &impl Source<__m256i>, b: usize) -> Scales6 {
        Scales6(s.t16(b, 192))
    }

    /// Group `g`'s scale in both i16 of each lane (moved to the top byte of
    /// an i16 and sign-extended from there), for `vpmaddwd`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn scale(&self, g: usize) -> __m256i {
        let j = Some(g % 4);
        _mm256_srai_epi16::<8>(_mm256_shuffle_epi8(self.0[g / 4], dword_shuffle([None, j, None, j])))
    }

    /// Groups `2p` and `2p + 1`'s scales as the two i16 of each lane, for
    /// `vpmaddwd` with a pair of `bsums`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn pair(&self, p: usize) -> __m256i {
        let j = 2 * (p % 2);
        _mm256_srai_epi16::<8>(_mm256_shuffle_epi8(self.0[p / 2], dword_shuffle([None, Some(j), None, Some(j + 1)])))
    }
}

/// Super-block `b` of 8 Q6_K rows.
///
/// # Safety
/// Every row of `rows` must hold more than `b` super-blocks; the CPU must have AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack_q6_k(s: &impl Source<__m256i>, b: usize) -> Packed6 {
    let mut out = Packed6 {
        q: [[_mm256_setzero_si256(); 4]; 16],
        sc: [_mm256_setzero_si256(); 16],
        pairs: [_mm256_setzero_si256(); 8],
        d: _mm256_castsi256_ps(s.half(b, 208)),
    };
    let scales = Scales6::decode(s, b);
    for g in 0..16 {
        out.sc[g] = scales.scale(g);
    }
    for p in 0..8 {
        out.pairs[p] = scales.pair(p);
    }
    let (m4, m3) = (_mm256_set1_epi8(0x0f), _mm256_set1_epi8(3));
    for h in 0..2 {
        // value 128h + 32q + l: a nibble of ql byte 64h + 32(q % 2) + l, bits 2q..2q + 2 of qh byte 32h + l
        let ql0 = s.t32(b, 64 * h);
        let ql1 = s.t32(b, 64 * h + 32);
        let qh = s.t32(b, 128 + 32 * h);
        for e in 0..8 {
            let low = [
                _mm256_and_si256(ql0[e], m4),
                _mm256_and_si256(ql1[e], m4),
                _mm256_and_si256(_mm256_srli_epi16::<4>(ql0[e]), m4),
                _mm256_and_si256(_mm256_srli_epi16::<4>(ql1[e]), m4),
            ];
            let high = [
                _mm256_and_si256(qh[e], m3),
                _mm256_and_si256(_mm256_srli_epi16::<2>(qh[e]), m3),
                _mm256_and_si256(_mm256_srli_epi16::<4>(qh[e]), m3),
                _mm256_and_si256(_mm256_srli_epi16::<6>(qh[e]), m3),
            ];
            // vector e holds l = 4e..4e + 4: group 8h + 2q + e / 4, its vector e % 4
            for q in 0..4 {
                out.q[8 * h + 2 * q + e / 4][e % 4] = _mm256_or_si256(low[q], _mm256_slli_epi16::<4>(high[q]));
            }
        }
    }
    out
}

/// [`group_k4`] for Q6_K: per group of 16, two i16 sums of 2 `vpmaddubsw`
/// (at most `4·63·128`), each widened with the scale; per super-block the
/// `+ 32` correction, then `acc + d·d_a·isum`.
///
/// # Safety
/// As for [`group_k4`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn group_q6<const N: usize>(pk: &[Packed6], a: [*const u8; N], o: [*mut f32; N], m: usize, first: bool) {
    let mut acc = load_acc(o, m, first);
    for (bi, w) in pk.iter().enumerate() {
        let mut isum = [_mm256_setzero_si256(); N];
        for g in 0..16 {
            for j in 0..N {
                let p = a[j].add(bi * QB + 4 + 16 * g);
                let prod = |e: usize| _mm256_maddubs_epi16(w.q[g][e], bcast(p.add(4 * e)));
                let lo = _mm256_madd_epi16(_mm256_add_epi16(prod(0), prod(1)), w.sc[g]);
                let hi = _mm256_madd_epi16(_mm256_add_epi16(prod(2), prod(3)), w.sc[g]);
                isum[j] = _mm256_add_epi32(isum[j], _mm256_add_epi32(lo, hi));
            }
        }
        for j in 0..N {
            let p = a[j].add(bi * QB);
            // Σ_g scale_g · bsum_g, then isum - 32 · that
            let mut corr = _mm256_setzero_si256();
            for (g, s) in w.pairs.iter().enumerate() {
                corr = _mm256_add_epi32(corr, _mm256_madd_epi16(*s, bcast(p.add(260 + 4 * g))));
            }
            let isum = _mm256_sub_epi32(isum[j], _mm256_slli_epi32::<5>(corr));
            let da = _mm256_set1_ps(p.cast::<f32>().read_unaligned());
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(w.d, da), acc[j]);
        }
    }
    store_acc(o, m, acc);
}

/// The k-quant tile loop: `$rows` weight rows' super-blocks from the
/// [`Source`] `$src` decoded `KC_K` at a time into `$ty` by `$pack(src, b)`,
/// then every activation row meets the chunk through `$group::<$pre.., N>`
/// (N = `NR_K`, then 2, then 1; one row meets each super-block as it is
/// decoded). Expands inside an unsafe function with the contract of
/// `super::super::common::RawTile`.
macro_rules! k_tile {
    ($nb:expr, $src:expr, $rows:expr, $a:expr, $out:expr, $stride:expr, $ty:ty, $pack:expr, $group:ident [$($pre:tt),*]) => {{
        let (nb, a, stride, src) = ($nb, $a, $stride, $src);
        let m = $rows.min(MR);
        let o = $out.as_mut_ptr();
        if let [a0] = a {
            for b in 0..nb {
                src.touch(b);
                let w = $pack(&src, b);
                // SAFETY: row 0 holds nb Q8_K blocks and out[..m] (the RawTile contract)
                $group::<$($pre,)* 1>(std::slice::from_ref(&w), [a0.as_ptr().add(b * QB)], [o], m, b == 0);
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
                src.touch(b0 + bi);
                base.add(bi).write($pack(&src, b0 + bi));
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
                        // out[(j + jj) * stride..][..m] (the RawTile contract)
                        $group::<$($pre,)* $n>(pk, ap, op, m, b0 == 0);
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
/// its transposed body ([`Repacked`]: Q6_K's `d`), both decoding by `$pack`.
macro_rules! k_kernels {
    ($name:ident, $packed:ident, $wb:expr, $tail:expr, $ty:ty, $pack:expr, $group:ident [$($pre:tt),*]) => {
        /// Weights in their GGUF layout (activations: Q8_K rows as they are).
        ///
        /// # Safety
        /// The contract of `super::super::common::RawTile`, at this level.
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(crate) unsafe fn $name(nb: usize, w: &[&[u8]], a: &[&[u8]], out: &mut [f32], stride: usize) {
            k_tile!(nb, Rows::new(w, $wb), w.len(), a, out, stride, $ty, $pack, $group[$($pre),*])
        }

        /// A run of groups of weight rows repacked by `TileKernel::pack_group`.
        ///
        /// # Safety
        /// The contract of `super::super::common::RawPacked`, at this level.
        #[target_feature(enable = "avx2,fma,f16c")]
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
            #[target_feature(enable = "avx2,fma,f16c")]
            unsafe fn one(nb: usize, group: *const u8, rows: usize, a: &[&[u8]], out: &mut [f32], stride: usize) {
                let src = Repacked::new(group, $wb, 0, $tail);
                k_tile!(nb, src, rows, a, out, stride, $ty, $pack, $group[$($pre),*])
            }
            for (at, first, n) in groups_of_run(nb * $wb * MR, MR, rows) {
                one(nb, group[at..].as_ptr(), n, a, &mut out[first..], stride)
            }
        }
    };
}

k_kernels!(q4_k, q4_k_tiled_packed, 144, 0, PackedK, pack_k4::<false>, group_k4[8]);
k_kernels!(q5_k, q5_k_tiled_packed, 176, 0, PackedK, pack_k4::<true>, group_k4[4]);

k_kernels!(q6_k, q6_k_tiled_packed, 210, 2, Packed6, pack_q6_k, group_q6[]);
