//! The lane layout of the AVX-512 tiles ([`MR`] weight rows, one per lane) and the
//! loads and transposes that [`super::legacy`] and [`super::k`] share.

use std::arch::x86_64::*;

use super::super::common::{Half, Source};

/// Weight rows per call.
pub(crate) const MR: usize = 16;

/// The rows of one call ([`super::super::common::Rows`]), one per lane.
pub(super) type Rows = super::super::common::Rows<MR>;

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
pub(super) unsafe fn bcast(p: *const u8) -> __m512i {
    _mm512_set1_epi32(p.cast::<i32>().read_unaligned())
}

/// The scales of the blocks at `p[r] + off`, as f32 bits.
///
/// # Safety
/// Every `p[r] + off` must point at a block; the CPU must have AVX-512 F and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn scales(p: &[*const u8; MR], off: usize) -> __m512i {
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
pub(super) unsafe fn transpose16(p: &[*const u8; MR], off: usize) -> [__m512i; 4] {
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

/// The 32 bytes at `p[r] + off` of the 16 rows, transposed by dwords: lane
/// `r` of vector `e` holds bytes `4e..4e + 4` of row `r` (an 8 × 8 dword
/// transpose in each 256-bit half, rows 0..8 and 8..16).
///
/// # Safety
/// `p[r] + off .. + 32` must be readable for every row; the CPU must have AVX-512 F.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn transpose32(p: &[*const u8; MR], off: usize) -> [__m512i; 8] {
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

/// A group of 16 rows repacked ahead of time ([`super::super::common::Repacked`]).
pub(super) type Repacked = super::super::common::Repacked<MR>;

impl Source<__m512i> for Rows {
    const REPACKED: bool = false;
    #[inline(always)]
    unsafe fn touch(&self, _b: usize) {}
    #[inline(always)]
    unsafe fn t16(&self, b: usize, off: usize) -> [__m512i; 4] {
        transpose16(&self.ptr, b * self.wb + off)
    }
    #[inline(always)]
    unsafe fn t32(&self, b: usize, off: usize) -> [__m512i; 8] {
        transpose32(&self.ptr, b * self.wb + off)
    }
    #[inline(always)]
    unsafe fn dword(&self, b: usize, off: usize) -> __m512i {
        let mut d = [0u32; MR];
        for r in 0..MR {
            d[r] = u32::from_le(self.ptr[r].add(b * self.wb + off).cast::<u32>().read_unaligned());
        }
        _mm512_loadu_si512(d.as_ptr().cast())
    }
    #[inline(always)]
    unsafe fn half(&self, b: usize, off: usize) -> __m512i {
        scales(&self.ptr, b * self.wb + off)
    }
}

impl Source<__m512i> for Repacked {
    const REPACKED: bool = true;
    #[inline(always)]
    unsafe fn touch(&self, b: usize) {
        Repacked::touch(self, b)
    }
    #[inline(always)]
    unsafe fn t16(&self, b: usize, off: usize) -> [__m512i; 4] {
        let (v, mut out) = (self.at(off), [_mm512_setzero_si512(); 4]);
        for (e, o) in out.iter_mut().enumerate() {
            *o = _mm512_loadu_si512(self.vector(b, v + e).cast());
        }
        out
    }
    #[inline(always)]
    unsafe fn t32(&self, b: usize, off: usize) -> [__m512i; 8] {
        let (v, mut out) = (self.at(off), [_mm512_setzero_si512(); 8]);
        for (e, o) in out.iter_mut().enumerate() {
            *o = _mm512_loadu_si512(self.vector(b, v + e).cast());
        }
        out
    }
    #[inline(always)]
    unsafe fn dword(&self, b: usize, off: usize) -> __m512i {
        _mm512_loadu_si512(self.vector(b, self.at(off)).cast())
    }
    #[inline(always)]
    unsafe fn half(&self, b: usize, off: usize) -> __m512i {
        let halves = match self.half_at(b, off) {
            Half::Body { v, high } => {
                let d = _mm512_loadu_si512(self.vector(b, v).cast());
                _mm512_cvtepi32_epi16(if high { _mm512_srli_epi32::<16>(d) } else { d })
            }
            Half::Trailer(p) => _mm256_loadu_si256(p.cast()),
        };
        _mm512_castps_si512(_mm512_cvtph_ps(halves))
    }
}

/// A `vpshufb` index moving byte `j` of each dword to its low byte, and also
/// to its third byte when `both` (two i16 lanes), zeroing the rest.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn byte_picker(j: usize, both: bool) -> __m512i {
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

/// The lanes of a call's `rows` weight rows (all 16 from [`MR`] on).
pub(super) fn lanes_mask(rows: usize) -> __mmask16 {
    if rows >= MR {
        !0
    } else {
        (1 << rows) - 1
    }
}
