//! AVX-512 VNNI tiles: 16 weight rows, one per i32 lane of a `__m512`.
//!
//! Per chunk of [`KC`] blocks the weight rows are packed (see [`pack_q4_0`],
//! [`pack_q8_0`]): block `b` becomes 8 vectors whose lane `r` holds four
//! unsigned quants of row `r` (vector `t` pairs with activation quants
//! `4t..4t + 4`), plus the 16 scales as f32. Each activation row then costs,
//! per block, 8 `vpdpbusd` with a broadcast group of its quants, a conversion,
//! a multiply and an FMA (see [`group`]), for 16 × 32 multiply-adds.

// index loops read best over the lanes and vectors of a block
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;

use super::PREPARED_BLOCK as PB;

/// Weight rows per call.
pub(super) const MR: usize = 16;
/// Blocks per packed chunk (32 × 576 bytes of stack, in L1).
const KC: usize = 32;
/// Activation rows per register group (accumulators + 9 packed vectors + temporaries fit in 32 registers).
const NR: usize = 8;

/// One packed block: 8 quant vectors and the scales (f32 bits).
type Packed = [__m512i; 9];

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

/// An unaligned little-endian u16.
///
/// # Safety
/// `p..p + 2` must be readable.
#[inline(always)]
unsafe fn rd16(p: *const u8) -> u16 {
    u16::from_le(p.cast::<u16>().read_unaligned())
}

/// An unaligned i32, broadcast.
///
/// # Safety
/// `p..p + 4` must be readable; the CPU must have AVX-512 F.
#[inline(always)]
unsafe fn bcast(p: *const u8) -> __m512i {
    _mm512_set1_epi32(p.cast::<i32>().read_unaligned())
}

/// The scales of the blocks at `p[r] + off`, as f32 bits.
///
/// # Safety
/// Every `p[r] + off` must point at a block; the CPU must have AVX-512 F and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn scales(p: &[*const u8; MR], off: usize) -> __m512i {
    let mut d = [0u16; MR];
    for r in 0..MR {
        d[r] = rd16(p[r].add(off));
    }
    _mm512_castps_si512(_mm512_cvtph_ps(_mm256_loadu_si256(d.as_ptr().cast())))
}

/// The 16 bytes at `p[r] + off` of the 16 rows, transposed by dwords: lane
/// `r` of vector `e` holds bytes `4e..4e + 4` of row `r` (`z[g]` holds rows
/// `g, g + 4, g + 8, g + 12` in its 128-bit lanes, then a 4 × 4 dword transpose
/// within each lane).
///
/// # Safety
/// `p[r] + off .. + 16` must be readable for every row; the CPU must have AVX-512 F.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn transpose16(p: &[*const u8; MR], off: usize) -> [__m512i; 4] {
    let ld = |r: usize| _mm_loadu_si128(p[r].add(off).cast());
    let mut z = [_mm512_setzero_si512(); 4];
    for g in 0..4 {
        let v = _mm512_castsi128_si512(ld(g));
        let v = _mm512_inserti32x4::<1>(v, ld(g + 4));
        let v = _mm512_inserti32x4::<2>(v, ld(g + 8));
        z[g] = _mm512_inserti32x4::<3>(v, ld(g + 12));
    }
    let a0 = _mm512_unpacklo_epi32(z[0], z[1]);
    let a1 = _mm512_unpackhi_epi32(z[0], z[1]);
    let a2 = _mm512_unpacklo_epi32(z[2], z[3]);
    let a3 = _mm512_unpackhi_epi32(z[2], z[3]);
    [
        _mm512_unpacklo_epi64(a0, a2),
        _mm512_unpackhi_epi64(a0, a2),
        _mm512_unpacklo_epi64(a1, a3),
        _mm512_unpackhi_epi64(a1, a3),
    ]
}

/// Block `b` of 16 Q4_0 rows: the 16 quant bytes of each row are transposed
/// by dwords (lane `r` of vector `t < 4` holds bytes `4t..4t + 4` of row `r`),
/// then split into low nibbles (values `4t..`) and high nibbles (values
/// `16 + 4t..`, vector `t + 4`).
///
/// # Safety
/// Every row of `rows` must hold more than `b` blocks; the CPU must have AVX-512 F/BW.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn pack_q4_0(rows: &Rows, b: usize) -> Packed {
    let (p, off) = (&rows.ptr, b * rows.wb);
    let t = transpose16(p, off + 2);
    let m4 = _mm512_set1_epi8(0x0f);
    let mut out = [_mm512_setzero_si512(); 9];
    for e in 0..4 {
        out[e] = _mm512_and_si512(t[e], m4);
        out[e + 4] = _mm512_and_si512(_mm512_srli_epi16::<4>(t[e]), m4);
    }
    out[8] = scales(p, off);
    out
}

/// The 32 bytes at `p[r] + off` of the 16 rows, transposed by dwords: lane
/// `r` of vector `e` holds bytes `4e..4e + 4` of row `r` (an 8 × 8 dword
/// transpose in each 256-bit half, rows 0..8 and 8..16).
///
/// # Safety
/// `p[r] + off .. + 32` must be readable for every row; the CPU must have AVX-512 F.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn transpose32(p: &[*const u8; MR], off: usize) -> [__m512i; 8] {
    // z[q]: row q in the low half, row q + 8 in the high half
    let mut z = [_mm512_setzero_si512(); 8];
    for q in 0..8 {
        let lo = _mm256_loadu_si256(p[q].add(off).cast());
        z[q] = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), _mm256_loadu_si256(p[q + 8].add(off).cast()));
    }
    let mut t = [_mm512_setzero_si512(); 8];
    for q in 0..4 {
        t[2 * q] = _mm512_unpacklo_epi32(z[2 * q], z[2 * q + 1]);
        t[2 * q + 1] = _mm512_unpackhi_epi32(z[2 * q], z[2 * q + 1]);
    }
    // u[e] (e < 4), per 128-bit lane: dword e (lanes 0, 2) or 4 + e (lanes 1, 3) of
    // rows 0..4 (lanes 0, 1) and 8..12 (lanes 2, 3); u[4 + e] the same for rows 4..8, 12..16
    let mut u = [_mm512_setzero_si512(); 8];
    for h in [0, 4] {
        u[h] = _mm512_unpacklo_epi64(t[h], t[h + 2]);
        u[h + 1] = _mm512_unpackhi_epi64(t[h], t[h + 2]);
        u[h + 2] = _mm512_unpacklo_epi64(t[h + 1], t[h + 3]);
        u[h + 3] = _mm512_unpackhi_epi64(t[h + 1], t[h + 3]);
    }
    let lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    let hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    let mut out = [_mm512_setzero_si512(); 8];
    for e in 0..4 {
        out[e] = _mm512_permutex2var_epi64(u[e], lo, u[4 + e]);
        out[e + 4] = _mm512_permutex2var_epi64(u[e], hi, u[4 + e]);
    }
    out
}

/// Block `b` of 16 Q8_0 rows: the quants transposed ([`transpose32`]) and made
/// unsigned (`+ 128`).
///
/// # Safety
/// Every row of `rows` must hold more than `b` blocks; the CPU must have AVX-512 F/BW.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn pack_q8_0(rows: &Rows, b: usize) -> Packed {
    let (p, off) = (&rows.ptr, b * rows.wb);
    let t = transpose32(p, off + 2);
    let bias = _mm512_set1_epi8(-128);
    let mut out = [_mm512_setzero_si512(); 9];
    for e in 0..8 {
        out[e] = _mm512_xor_si512(t[e], bias);
    }
    out[8] = scales(p, off);
    out
}

/// Adds the packed blocks `pk` times the same blocks of `N` activation rows
/// (`a[j]` points at the first of them) to the 16-lane accumulators at `o[j]`
/// (starting from 0 when `first`); lanes outside `mask` are neither read nor written.
///
/// # Safety
/// `a[j]` must point at `pk.len()` prepared blocks; the lanes of `o[j]` in
/// `mask` must be writable (and readable unless `first`); the CPU must have AVX-512 VNNI.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn group<const N: usize>(pk: &[Packed], a: [*const u8; N], o: [*mut f32; N], mask: __mmask16, first: bool) {
    let mut acc = [_mm512_setzero_ps(); N];
    if !first {
        for j in 0..N {
            acc[j] = _mm512_maskz_loadu_ps(mask, o[j]);
        }
    }
    for (bi, w) in pk.iter().enumerate() {
        let dw = _mm512_castsi512_ps(w[8]);
        for j in 0..N {
            let p = a[j].add(bi * PB);
            // starts from the correction -off · Σ q_a, which undoes the unsigned bias
            let mut s = bcast(p.add(36));
            for (t, wt) in w[..8].iter().enumerate() {
                s = _mm512_dpbusd_epi32(s, *wt, bcast(p.add(4 * t)));
            }
            let d = _mm512_mul_ps(dw, _mm512_set1_ps(p.add(32).cast::<f32>().read_unaligned()));
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), d, acc[j]);
        }
    }
    for j in 0..N {
        _mm512_mask_storeu_ps(o[j], mask, acc[j]);
    }
}

/// The tile loop; `Q8` picks the packing.
///
/// # Safety
/// The contract of `super::RawTile`, at this level.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn tile<const Q8: bool>(nb: usize, w: &[&[u8]], a: &[&[u8]], out: &mut [f32], stride: usize) {
    let rows = Rows::new(w, if Q8 { 34 } else { 18 });
    let mask: __mmask16 = if w.len() >= MR { !0 } else { (1 << w.len()) - 1 };
    let o = out.as_mut_ptr();
    // written before it is read: no need to zero 18 KiB per call
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
                    group::<$n>(pk, ap, op, mask, b0 == 0);
                    j += $n;
                }};
            }
            match a.len() - j {
                NR.. => run!(NR),
                4.. => run!(4),
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

/// Super-blocks per packed Q4_K chunk (4 × 5 KiB of stack).
const KC_K: usize = 4;
/// Activation rows per register group for Q4_K.
const NR_K: usize = 4;

/// One packed Q4_K super-block of 16 rows: the nibbles of group `g` (32
/// values) as 8 vectors like a Q4_0 block, the 6-bit scales (i32 lanes), the
/// mins twice per lane (two i16, for `vpdpwssd` with a pair of `bsums`), and
/// `d`, `dmin` as f32.
#[derive(Clone, Copy)]
struct PackedK {
    q: [[__m512i; 8]; 8],
    sc: [__m512i; 8],
    mins: [__m512i; 8],
    d: __m512,
    dmin: __m512,
}

/// A `vpshufb` index moving byte `j` of each dword to its low byte, and also
/// to its third byte when `both` (two i16 lanes), zeroing the rest.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn byte_picker(j: usize, both: bool) -> __m512i {
    let mut idx = [-128i8; 16];
    for q in 0..4 {
        idx[4 * q] = (4 * q + j) as i8;
        if both {
            idx[4 * q + 2] = (4 * q + j) as i8;
        }
    }
    // SAFETY: `idx` is 16 bytes
    _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(idx.as_ptr().cast()) })
}

/// Super-block `b` of 16 Q4_K rows.
///
/// # Safety
/// Every row of `rows` must hold more than `b` super-blocks; the CPU must have AVX-512 F/BW.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn pack_q4_k(rows: &Rows, b: usize) -> PackedK {
    let (p, off) = (&rows.ptr, b * rows.wb);
    // the 16-byte head of each row's super-block: d and dmin, then the 12 scale bytes
    let h = transpose16(p, off);
    let half = |v: __m512i| _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
    let m4 = _mm512_set1_epi8(0x0f);
    let mut out = PackedK {
        q: [[_mm512_setzero_si512(); 8]; 8],
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
    // bytes 32c..32c + 32 of qs: group 2c in the low nibbles, 2c + 1 in the high ones
    for c in 0..4 {
        let t = transpose32(p, off + 16 + 32 * c);
        for e in 0..8 {
            out.q[2 * c][e] = _mm512_and_si512(t[e], m4);
            out.q[2 * c + 1][e] = _mm512_and_si512(_mm512_srli_epi16::<4>(t[e]), m4);
        }
    }
    out
}

/// [`group`] for Q4_K: per super-block, each group's exact integer dot times
/// its scale (`vpmulld`), the mins against Q8_K's `bsums` (`vpdpwssd`), then
/// `acc + d·d_a·isum - dmin·d_a·mins`.
///
/// # Safety
/// `a[j]` must point at `pk.len()` Q8_K blocks; the lanes of `o[j]` in `mask`
/// must be writable (and readable unless `first`); the CPU must have AVX-512 VNNI.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn group_k<const N: usize>(pk: &[PackedK], a: [*const u8; N], o: [*mut f32; N], mask: __mmask16, first: bool) {
    const QB: usize = 292;
    let mut acc = [_mm512_setzero_ps(); N];
    if !first {
        for j in 0..N {
            acc[j] = _mm512_maskz_loadu_ps(mask, o[j]);
        }
    }
    for (bi, w) in pk.iter().enumerate() {
        let mut isum = [_mm512_setzero_si512(); N];
        for g in 0..8 {
            for j in 0..N {
                let p = a[j].add(bi * QB + 4 + 32 * g);
                let mut s = _mm512_setzero_si512();
                for (e, q) in w.q[g].iter().enumerate() {
                    s = _mm512_dpbusd_epi32(s, *q, bcast(p.add(4 * e)));
                }
                isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(s, w.sc[g]));
            }
        }
        for j in 0..N {
            let p = a[j].add(bi * QB);
            let mut mins = _mm512_setzero_si512();
            for (g, m) in w.mins.iter().enumerate() {
                mins = _mm512_dpwssd_epi32(mins, *m, bcast(p.add(260 + 4 * g)));
            }
            let da = _mm512_set1_ps(p.cast::<f32>().read_unaligned());
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), _mm512_mul_ps(w.d, da), acc[j]);
            acc[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins), _mm512_mul_ps(w.dmin, da), acc[j]);
        }
    }
    for j in 0..N {
        _mm512_mask_storeu_ps(o[j], mask, acc[j]);
    }
}

/// Q4_K weights (activations: Q8_K rows as they are).
///
/// # Safety
/// The contract of `super::RawTile`, at this level.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn q4_k(nb: usize, w: &[&[u8]], a: &[&[u8]], out: &mut [f32], stride: usize) {
    const QB: usize = 292;
    let rows = Rows::new(w, 144);
    let mask: __mmask16 = if w.len() >= MR { !0 } else { (1 << w.len()) - 1 };
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
                    group_k::<$n>(pk, ap, op, mask, b0 == 0);
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
