//! AVX2 tiles: 8 weight rows, one per i32 lane of a `__m256`, packed per
//! chunk of [`KC`] blocks as in the AVX-512 tiles, with `vpmaddubsw` for the
//! byte products:
//!
//! - Q4_0: the nibbles (`≤ 15`) times the broadcast activation quants; a pair
//!   is at most `2·15·128`, so the 8 products of a block add up in i16 without
//!   saturating, then `vpmaddwd` widens them once.
//! - Q8_0: `|q_w|` times the activation quants with the weight's sign (the
//!   dot kernels' `vpsignb` trick, with their `-128` caveat), widened per group.

// index loops read best over the lanes and vectors of a block
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;

use super::PREPARED_BLOCK as PB;

/// Weight rows per call.
pub(super) const MR: usize = 8;
/// Blocks per packed chunk.
const KC: usize = 32;
/// Activation rows per register group.
const NR: usize = 4;

/// One packed block: 8 unsigned quant vectors, (Q8_0) 8 sign vectors, the scales (f32 bits).
type Packed = [__m256i; 17];

/// The rows' base pointers; missing rows repeat row 0 (their lanes are never stored).
struct Rows {
    ptr: [*const u8; MR],
    /// Bytes per block.
    wb: usize,
}

impl Rows {
    /// # Panics
    /// If `w` is empty.
    fn new(w: &[&[u8]], wb: usize) -> Rows {
        let mut ptr = [w[0].as_ptr(); MR];
        for (p, r) in ptr.iter_mut().zip(w) {
            *p = r.as_ptr();
        }
        Rows { ptr, wb }
    }
}

/// An unaligned i32, broadcast.
///
/// # Safety
/// `p..p + 4` must be readable; the CPU must have AVX.
#[inline(always)]
unsafe fn bcast(p: *const u8) -> __m256i {
    _mm256_set1_epi32(p.cast::<i32>().read_unaligned())
}

/// The scales of the blocks at `p[r] + off`, as f32 bits.
///
/// # Safety
/// Every `p[r] + off` must point at a block; the CPU must have AVX2 and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scales(p: &[*const u8; MR], off: usize) -> __m256i {
    let mut d = [0u16; MR];
    for r in 0..MR {
        d[r] = u16::from_le(p[r].add(off).cast::<u16>().read_unaligned());
    }
    _mm256_castps_si256(_mm256_cvtph_ps(_mm_loadu_si128(d.as_ptr().cast())))
}

/// A 4 × 4 dword transpose within each 128-bit lane: dword `4L + g` of
/// result `e` is dword `e` of lane `L` of `z[g]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn transpose4(z: [__m256i; 4]) -> [__m256i; 4] {
    let a0 = _mm256_unpacklo_epi32(z[0], z[1]);
    let a1 = _mm256_unpackhi_epi32(z[0], z[1]);
    let a2 = _mm256_unpacklo_epi32(z[2], z[3]);
    let a3 = _mm256_unpackhi_epi32(z[2], z[3]);
    [
        _mm256_unpacklo_epi64(a0, a2),
        _mm256_unpackhi_epi64(a0, a2),
        _mm256_unpacklo_epi64(a1, a3),
        _mm256_unpackhi_epi64(a1, a3),
    ]
}

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

/// The 32 bytes at `p[r] + off` of the 8 rows, transposed by dwords: lane
/// `r` of vector `e` holds bytes `4e..4e + 4` of row `r`.
///
/// # Safety
/// `p[r] + off .. + 32` must be readable for every row; the CPU must have AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn transpose32(p: &[*const u8; MR], off: usize) -> [__m256i; 8] {
    let (mut zl, mut zh) = ([_mm256_setzero_si256(); 4], [_mm256_setzero_si256(); 4]);
    for g in 0..4 {
        zl[g] = _mm256_loadu_si256(p[g].add(off).cast());
        zh[g] = _mm256_loadu_si256(p[g + 4].add(off).cast());
    }
    // lane 0 of lo[e] holds dword e of rows 0..4, lane 1 dword 4 + e; hi[e] rows 4..8
    let (lo, hi) = (transpose4(zl), transpose4(zh));
    let mut out = [_mm256_setzero_si256(); 8];
    for e in 0..4 {
        out[e] = _mm256_permute2x128_si256::<0x20>(lo[e], hi[e]);
        out[4 + e] = _mm256_permute2x128_si256::<0x31>(lo[e], hi[e]);
    }
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

/// The tile loop; `Q8` picks the packing and the products.
///
/// # Safety
/// The contract of `super::RawTile`, at this level.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile<const Q8: bool>(nb: usize, w: &[&[u8]], a: &[&[u8]], out: &mut [f32], stride: usize) {
    let rows = Rows::new(w, if Q8 { 34 } else { 18 });
    let m = w.len().min(MR);
    let o = out.as_mut_ptr();
    // written before it is read: no need to zero it per call
    let mut buf = std::mem::MaybeUninit::<[Packed; KC]>::uninit();
    let base = buf.as_mut_ptr().cast::<Packed>();
    let mut b0 = 0;
    while b0 < nb {
        let kc = KC.min(nb - b0);
        for bi in 0..kc {
            let p = if Q8 { pack_q8_0(&rows, b0 + bi) } else { pack_q4_0(&rows, b0 + bi) };
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
/// The contract of `super::RawTile`, at this level.
pub(super) unsafe fn q4_0(nb: usize, w: &[&[u8]], a: &[&[u8]], out: &mut [f32], stride: usize) {
    tile::<false>(nb, w, a, out, stride)
}

/// Q8_0 weights.
///
/// # Safety
/// The contract of `super::RawTile`, at this level.
pub(super) unsafe fn q8_0(nb: usize, w: &[&[u8]], a: &[&[u8]], out: &mut [f32], stride: usize) {
    tile::<true>(nb, w, a, out, stride)
}

/// Super-blocks per packed Q4_K chunk.
const KC_K: usize = 4;
/// Activation rows per register group for Q4_K.
const NR_K: usize = 4;

/// One packed Q4_K super-block of 8 rows: the nibbles of group `g` (32 values)
/// as 8 vectors like a Q4_0 block, the 6-bit scales and the mins twice per
/// lane (two i16, for `vpmaddwd`), and `d`, `dmin` as f32.
#[derive(Clone, Copy)]
struct PackedK {
    q: [[__m256i; 8]; 8],
    sc: [__m256i; 8],
    mins: [__m256i; 8],
    d: __m256,
    dmin: __m256,
}

/// A `vpshufb` index moving byte `j` of each dword to its first and third
/// bytes (two i16 lanes), zeroing the rest.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn byte_picker(j: usize) -> __m256i {
    let mut idx = [-128i8; 16];
    for q in 0..4 {
        idx[4 * q] = (4 * q + j) as i8;
        idx[4 * q + 2] = (4 * q + j) as i8;
    }
    // SAFETY: `idx` is 16 bytes
    _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(idx.as_ptr().cast()) })
}

/// Super-block `b` of 8 Q4_K rows.
///
/// # Safety
/// Every row of `rows` must hold more than `b` super-blocks; the CPU must have AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack_q4_k(rows: &Rows, b: usize) -> PackedK {
    let (p, off) = (&rows.ptr, b * rows.wb);
    let m4 = _mm256_set1_epi8(0x0f);
    let mut out = PackedK {
        q: [[_mm256_setzero_si256(); 8]; 8],
        sc: [_mm256_setzero_si256(); 8],
        mins: [_mm256_setzero_si256(); 8],
        d: _mm256_castsi256_ps(scales(p, off)),
        dmin: _mm256_castsi256_ps(scales(p, off + 2)),
    };
    // bytes 32c..32c + 32 of qs: group 2c in the low nibbles, 2c + 1 in the high ones
    for c in 0..4 {
        let t = transpose32(p, off + 16 + 32 * c);
        for e in 0..8 {
            out.q[2 * c][e] = _mm256_and_si256(t[e], m4);
            out.q[2 * c + 1][e] = _mm256_and_si256(_mm256_srli_epi16::<4>(t[e]), m4);
        }
    }
    // the 12 scale bytes of each row, transposed by dwords; then ggml's
    // get_scale_min_k4 on every lane at once
    let mut z = [_mm256_setzero_si256(); 4];
    for g in 0..4 {
        z[g] = _mm256_set_m128i(_mm_loadu_si128(p[g + 4].add(off).cast()), _mm_loadu_si128(p[g].add(off).cast()));
    }
    let h = transpose4(z);
    let (low6, low4, top2) = (_mm256_set1_epi8(0x3f), _mm256_set1_epi8(0x0f), _mm256_set1_epi8(3));
    let top = |v: __m256i| _mm256_slli_epi32::<4>(_mm256_and_si256(_mm256_srli_epi32::<6>(v), top2));
    let sc = [_mm256_and_si256(h[1], low6), _mm256_or_si256(_mm256_and_si256(h[3], low4), top(h[1]))];
    let mn = [
        _mm256_and_si256(h[2], low6),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32::<4>(h[3]), low4), top(h[2])),
    ];
    for g in 0..8 {
        // both as two i16 per lane, for vpmaddwd
        let pick = byte_picker(g % 4);
        out.sc[g] = _mm256_shuffle_epi8(sc[g / 4], pick);
        out.mins[g] = _mm256_shuffle_epi8(mn[g / 4], pick);
    }
    out
}

/// [`group`] for Q4_K: per group of 32, the nibble products add up in i16
/// (at most `16·15·128`), then `vpmaddwd` with the scale widens them; the mins
/// go against Q8_K's `bsums`; `acc + d·d_a·isum - dmin·d_a·mins`.
///
/// # Safety
/// `a[j]` must point at `pk.len()` Q8_K blocks; `m` values at `o[j]` must be
/// writable (and readable unless `first`); the CPU must have AVX2+FMA.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn group_k<const N: usize>(pk: &[PackedK], a: [*const u8; N], o: [*mut f32; N], m: usize, first: bool) {
    const QB: usize = 292;
    let mut acc = [_mm256_setzero_ps(); N];
    if !first {
        for j in 0..N {
            let mut v = [0f32; MR];
            std::ptr::copy_nonoverlapping(o[j], v.as_mut_ptr(), m);
            acc[j] = _mm256_loadu_ps(v.as_ptr());
        }
    }
    for (bi, w) in pk.iter().enumerate() {
        let mut isum = [_mm256_setzero_si256(); N];
        for g in 0..8 {
            for j in 0..N {
                let p = a[j].add(bi * QB + 4 + 32 * g);
                let mut s16 = _mm256_maddubs_epi16(w.q[g][0], bcast(p));
                for e in 1..8 {
                    s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(w.q[g][e], bcast(p.add(4 * e))));
                }
                isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(s16, w.sc[g]));
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

/// Q4_K weights (activations: Q8_K rows as they are).
///
/// # Safety
/// The contract of `super::RawTile`, at this level.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q4_k(nb: usize, w: &[&[u8]], a: &[&[u8]], out: &mut [f32], stride: usize) {
    const QB: usize = 292;
    let rows = Rows::new(w, 144);
    let m = w.len().min(MR);
    let o = out.as_mut_ptr();
    // written before it is read: no need to zero it per call
    let mut buf = std::mem::MaybeUninit::<[PackedK; KC_K]>::uninit();
    let base = buf.as_mut_ptr().cast::<PackedK>();
    let mut b0 = 0;
    while b0 < nb {
        let kc = KC_K.min(nb - b0);
        for bi in 0..kc {
            // SAFETY: bi < KC_K, inside `buf`
            base.add(bi).write(pack_q4_k(&rows, b0 + bi));
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
                    group_k::<$n>(pk, ap, op, m, b0 == 0);
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
}
