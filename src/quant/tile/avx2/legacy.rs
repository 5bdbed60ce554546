//! The 32-value tiles: Q4_0 and Q8_0 weights, prepared Q8_0 activations.
//!
//! - Q4_0: the nibbles (`≤ 15`) times the broadcast activation quants; a pair
//!   is at most `2·15·128`, so the 8 products of a block add up in i16 without
//!   saturating, then `vpmaddwd` widens them once.
//! - Q8_0: `|q_w|` times the activation quants with the weight's sign (the
//!   dot kernels' `vpsignb` trick, with their `-128` caveat), widened per group.

// index loops read best over the lanes and vectors of a block
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;

use super::super::common::{packed_q4_0_block, prefetch_ahead, Blocks, PREPARED_BLOCK as PB};
use super::lanes::{bcast, scales, transpose32, transpose4, Rows, MR};

/// Blocks per packed chunk.
const KC: usize = 32;
/// Activation rows per register group.
const NR: usize = 4;

/// One packed block: 8 unsigned quant vectors, (Q8_0) 8 sign vectors, the scales (f32 bits).
type Packed = [__m256i; 17];

/// Block `b` of 8 Q4_0 rows: vector `t` lane `r` holds values `4t..4t + 4` of row `r`.
///
/// # Safety
/// Every row of `rows` must hold more than `b` blocks; the CPU must have AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack_q4_0(rows: &Rows, b: usize) -> Packed {
    let (p, off) = (&rows.ptr, b * rows.wb);
    let mut z = [_mm256_setzero_si256(); 4];
    for g in 0..4 {
        z[g] =
            _mm256_set_m128i(_mm_loadu_si128(p[g + 4].add(off + 2).cast()), _mm_loadu_si128(p[g].add(off + 2).cast()));
    }
    let t = transpose4(z);
    let m4 = _mm256_set1_epi8(0x0f);
    let mut out = [_mm256_setzero_si256(); 17];
    for e in 0..4 {
        out[e] = _mm256_and_si256(t[e], m4);
        out[e + 4] = _mm256_and_si256(_mm256_srli_epi16::<4>(t[e]), m4);
    }
    out[16] = scales(p, off);
    out
}

/// Block `b` of 8 Q8_0 rows, transposed ([`transpose32`]), as `|q|` (0..8) and `q` (8..16).
///
/// # Safety
/// Every row of `rows` must hold more than `b` blocks; the CPU must have AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack_q8_0(rows: &Rows, b: usize) -> Packed {
    let (p, off) = (&rows.ptr, b * rows.wb);
    let t = transpose32(p, off + 2);
    let mut out = [_mm256_setzero_si256(); 17];
    for e in 0..8 {
        out[e] = _mm256_sign_epi8(t[e], t[e]);
        out[8 + e] = t[e];
    }
    out[16] = scales(p, off);
    out
}

/// Q4_0 weight rows (18-byte blocks).
struct Q4_0Rows(Rows);
/// Q8_0 weight rows (34-byte blocks).
struct Q8_0Rows(Rows);
/// A group of Q4_0 rows repacked by `TileKernel::pack_group`: per block, the
/// four transposed quant vectors as bytes, then the 8 scales as f16.
struct Q4_0Packed(*const u8);

impl Blocks<Packed> for Q4_0Rows {
    #[inline(always)]
    unsafe fn get(&self, b: usize) -> Packed {
        pack_q4_0(&self.0, b)
    }
}

impl Blocks<Packed> for Q8_0Rows {
    #[inline(always)]
    unsafe fn get(&self, b: usize) -> Packed {
        pack_q8_0(&self.0, b)
    }
}

impl Blocks<Packed> for Q4_0Packed {
    #[inline(always)]
    unsafe fn get(&self, b: usize) -> Packed {
        const BLOCK: usize = packed_q4_0_block(MR);
        let p = self.0.add(b * BLOCK);
        prefetch_ahead(p, BLOCK);
        unpack_q4_0(p)
    }
}

/// A repacked Q4_0 block at `p`: the nibbles of the four vectors split into
/// the eight of [`pack_q4_0`], the scales widened to f32.
///
/// # Safety
/// `p .. p + packed_q4_0_block(MR)` must be readable; the CPU must have AVX2 and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn unpack_q4_0(p: *const u8) -> Packed {
    let m4 = _mm256_set1_epi8(0x0f);
    let mut out = [_mm256_setzero_si256(); 17];
    for e in 0..4 {
        let t = _mm256_loadu_si256(p.add(32 * e).cast());
        out[e] = _mm256_and_si256(t, m4);
        out[e + 4] = _mm256_and_si256(_mm256_srli_epi16::<4>(t), m4);
    }
    out[16] = _mm256_castps_si256(_mm256_cvtph_ps(_mm_loadu_si128(p.add(128).cast())));
    out
}

/// Adds the packed blocks `pk` times the same blocks of `N` activation rows
/// (`a[j]` points at the first of them) to the 8-lane accumulators at `o[j]`
/// (starting from 0 when `first`); only the first `m` lanes are read or written.
///
/// # Safety
/// `a[j]` must point at `pk.len()` prepared blocks; `m` values at `o[j]` must be
/// writable (and readable unless `first`); the CPU must have AVX2+FMA.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn group<const Q8: bool, const N: usize>(
    pk: &[Packed],
    a: [*const u8; N],
    o: [*mut f32; N],
    m: usize,
    first: bool,
) {
    let mut acc = [_mm256_setzero_ps(); N];
    if !first {
        for j in 0..N {
            let mut v = [0f32; MR];
            std::ptr::copy_nonoverlapping(o[j], v.as_mut_ptr(), m);
            acc[j] = _mm256_loadu_ps(v.as_ptr());
        }
    }
    let ones = _mm256_set1_epi16(1);
    for (bi, w) in pk.iter().enumerate() {
        let dw = _mm256_castsi256_ps(w[16]);
        for j in 0..N {
            let p = a[j].add(bi * PB);
            let s = if Q8 {
                let mut s = _mm256_setzero_si256();
                for t in 0..8 {
                    let y = _mm256_sign_epi8(bcast(p.add(4 * t)), w[8 + t]);
                    s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(w[t], y), ones));
                }
                s
            } else {
                let mut s16 = _mm256_maddubs_epi16(w[0], bcast(p));
                for t in 1..8 {
                    s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(w[t], bcast(p.add(4 * t))));
                }
                // plus the correction -8 · Σ q_a for the unsigned nibbles
                _mm256_add_epi32(_mm256_madd_epi16(s16, ones), bcast(p.add(36)))
            };
            let d = _mm256_mul_ps(dw, _mm256_set1_ps(p.add(32).cast::<f32>().read_unaligned()));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, acc[j]);
        }
    }
    for j in 0..N {
        if m == MR {
            _mm256_storeu_ps(o[j], acc[j]);
        } else {
            let mut v = [0f32; MR];
            _mm256_storeu_ps(v.as_mut_ptr(), acc[j]);
            std::ptr::copy_nonoverlapping(v.as_ptr(), o[j], m);
        }
    }
}

/// The tile loop over the blocks of `w` (`rows` weight rows); `Q8` picks the products.
///
/// # Safety
/// The contract of `super::super::common::RawTile`, at this level, with `w` giving
/// `nb` blocks of `rows` weight rows.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile<const Q8: bool>(
    nb: usize,
    w: &impl Blocks<Packed>,
    rows: usize,
    a: &[&[u8]],
    out: &mut [f32],
    stride: usize,
) {
    let m = rows.min(MR);
    let o = out.as_mut_ptr();
    // written before it is read: no need to zero it per call
    let mut buf = std::mem::MaybeUninit::<[Packed; KC]>::uninit();
    let base = buf.as_mut_ptr().cast::<Packed>();
    let mut b0 = 0;
    while b0 < nb {
        let kc = KC.min(nb - b0);
        for bi in 0..kc {
            let p = w.get(b0 + bi);
            // SAFETY: bi < KC, inside `buf`
            base.add(bi).write(p);
        }
        // SAFETY: the first `kc` entries were just written
        let pk = std::slice::from_raw_parts(base.cast_const(), kc);
        let mut j = 0;
        while j < a.len() {
            macro_rules! run {
                ($n:expr) => {{
                    let (mut ap, mut op) = ([std::ptr::null::<u8>(); $n], [std::ptr::null_mut::<f32>(); $n]);
                    for jj in 0..$n {
                        ap[jj] = a[j + jj].as_ptr().add(b0 * PB);
                        op[jj] = o.add((j + jj) * stride);
                    }
                    group::<Q8, $n>(pk, ap, op, m, b0 == 0);
                    j += $n;
                }};
            }
            match a.len() - j {
                NR.. => run!(NR),
                2.. => run!(2),
                _ => run!(1),
            }
        }
        b0 += kc;
    }
}

/// Q4_0 weights.
///
/// # Safety
/// The contract of `super::super::common::RawTile`, at this level.
pub(crate) unsafe fn q4_0(nb: usize, w: &[&[u8]], a: &[&[u8]], out: &mut [f32], stride: usize) {
    tile::<false>(nb, &Q4_0Rows(Rows::new(w, 18)), w.len(), a, out, stride)
}

/// Q8_0 weights.
///
/// # Safety
/// The contract of `super::super::common::RawTile`, at this level.
pub(crate) unsafe fn q8_0(nb: usize, w: &[&[u8]], a: &[&[u8]], out: &mut [f32], stride: usize) {
    tile::<true>(nb, &Q8_0Rows(Rows::new(w, 34)), w.len(), a, out, stride)
}

/// A group of Q4_0 weight rows repacked by `TileKernel::pack_group`.
///
/// # Safety
/// The contract of `super::super::common::RawPacked`, at this level.
pub(crate) unsafe fn q4_0_packed(nb: usize, group: &[u8], rows: usize, a: &[&[u8]], out: &mut [f32], stride: usize) {
    tile::<false>(nb, &Q4_0Packed(group.as_ptr()), rows, a, out, stride)
}
