//! The lane layout of the AVX2 tiles ([`MR`] weight rows, one per lane) and the
//! loads and transposes that [`super::legacy`] and [`super::k`] share.

use std::arch::x86_64::*;

use super::super::common::{prefetch_ahead, Half, Source};

/// Weight rows per call.
pub(crate) const MR: usize = 8;

/// The rows of one call ([`super::super::common::Rows`]), one per lane.
pub(super) type Rows = super::super::common::Rows<MR>;

/// An unaligned i32, broadcast.
///
/// # Safety
/// `p..p + 4` must be readable; the CPU must have AVX.
#[inline(always)]
pub(super) unsafe fn bcast(p: *const u8) -> __m256i {
    _mm256_set1_epi32(p.cast::<i32>().read_unaligned())
}

/// The scales of the blocks at `p[r] + off`, as f32 bits.
///
/// # Safety
/// Every `p[r] + off` must point at a block; the CPU must have AVX2 and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn scales(p: &[*const u8; MR], off: usize) -> __m256i {
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
pub(super) fn transpose4(z: [__m256i; 4]) -> [__m256i; 4] {
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

/// Asks for the bytes [`prefetch_ahead`] of each row's `p[r] + off`: eight
/// rows read a block at a time defeat the hardware's stream prefetch (a
/// model's weights, streamed from memory, went about 1.3× faster with it).
#[inline(always)]
fn prefetch_rows(p: &[*const u8; MR], off: usize) {
    for r in 0..MR {
        prefetch_ahead(p[r].wrapping_add(off), 1);
    }
}

/// The 16 bytes at `p[r] + off` of the 8 rows, transposed by dwords: lane `r`
/// of vector `e` holds bytes `4e..4e + 4` of row `r`.
///
/// # Safety
/// `p[r] + off .. + 16` must be readable for every row; the CPU must have AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn transpose16(p: &[*const u8; MR], off: usize) -> [__m256i; 4] {
    prefetch_rows(p, off);
    let mut z = [_mm256_setzero_si256(); 4];
    for g in 0..4 {
        z[g] = _mm256_set_m128i(_mm_loadu_si128(p[g + 4].add(off).cast()), _mm_loadu_si128(p[g].add(off).cast()));
    }
    transpose4(z)
}

/// The 32 bytes at `p[r] + off` of the 8 rows, transposed by dwords: lane
/// `r` of vector `e` holds bytes `4e..4e + 4` of row `r`.
///
/// # Safety
/// `p[r] + off .. + 32` must be readable for every row; the CPU must have AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn transpose32(p: &[*const u8; MR], off: usize) -> [__m256i; 8] {
    prefetch_rows(p, off);
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

/// A group of 8 rows repacked ahead of time ([`super::super::common::Repacked`]).
pub(super) type Repacked = super::super::common::Repacked<MR>;

impl Source<__m256i> for Rows {
    const REPACKED: bool = false;
    #[inline(always)]
    unsafe fn touch(&self, _b: usize) {}
    #[inline(always)]
    unsafe fn t16(&self, b: usize, off: usize) -> [__m256i; 4] {
        transpose16(&self.ptr, b * self.wb + off)
    }
    #[inline(always)]
    unsafe fn t32(&self, b: usize, off: usize) -> [__m256i; 8] {
        transpose32(&self.ptr, b * self.wb + off)
    }
    #[inline(always)]
    unsafe fn dword(&self, b: usize, off: usize) -> __m256i {
        let mut d = [0u32; MR];
        for r in 0..MR {
            d[r] = u32::from_le(self.ptr[r].add(b * self.wb + off).cast::<u32>().read_unaligned());
        }
        _mm256_loadu_si256(d.as_ptr().cast())
    }
    #[inline(always)]
    unsafe fn half(&self, b: usize, off: usize) -> __m256i {
        scales(&self.ptr, b * self.wb + off)
    }
}

impl Source<__m256i> for Repacked {
    const REPACKED: bool = true;
    #[inline(always)]
    unsafe fn touch(&self, b: usize) {
        Repacked::touch(self, b)
    }
    #[inline(always)]
    unsafe fn t16(&self, b: usize, off: usize) -> [__m256i; 4] {
        let (v, mut out) = (self.at(off), [_mm256_setzero_si256(); 4]);
        for (e, o) in out.iter_mut().enumerate() {
            *o = _mm256_loadu_si256(self.vector(b, v + e).cast());
        }
        out
    }
    #[inline(always)]
    unsafe fn t32(&self, b: usize, off: usize) -> [__m256i; 8] {
        let (v, mut out) = (self.at(off), [_mm256_setzero_si256(); 8]);
        for (e, o) in out.iter_mut().enumerate() {
            *o = _mm256_loadu_si256(self.vector(b, v + e).cast());
        }
        out
    }
    #[inline(always)]
    unsafe fn dword(&self, b: usize, off: usize) -> __m256i {
        _mm256_loadu_si256(self.vector(b, self.at(off)).cast())
    }
    #[inline(always)]
    unsafe fn half(&self, b: usize, off: usize) -> __m256i {
        let halves = match self.half_at(b, off) {
            Half::Body { v, high } => {
                // the low or high halves of the dwords, gathered from both 128-bit lanes
                let d = _mm256_loadu_si256(self.vector(b, v).cast());
                let d = if high { _mm256_srli_epi32::<16>(d) } else { d };
                let low_halves = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
                let x = _mm256_shuffle_epi8(d, _mm256_set_m128i(low_halves, low_halves));
                _mm256_castsi256_si128(_mm256_permute4x64_epi64::<0x08>(x))
            }
            Half::Trailer(p) => _mm_loadu_si128(p.cast()),
        };
        _mm256_castps_si256(_mm256_cvtph_ps(halves))
    }
}

/// The first `m` values at `o[j]` as 8-lane accumulators (the rest zero),
/// or zeros when `first`.
///
/// # Safety
/// Unless `first`, `m ≤ MR` values at each `o[j]` must be readable; the CPU must have AVX.
#[inline(always)]
pub(super) unsafe fn load_acc<const N: usize>(o: [*mut f32; N], m: usize, first: bool) -> [__m256; N] {
    let mut acc = [_mm256_setzero_ps(); N];
    if !first {
        for j in 0..N {
            let mut v = [0f32; MR];
            std::ptr::copy_nonoverlapping(o[j], v.as_mut_ptr(), m);
            acc[j] = _mm256_loadu_ps(v.as_ptr());
        }
    }
    acc
}

/// Stores the first `m` lanes of each accumulator at `o[j]`.
///
/// # Safety
/// `m ≤ MR` values at each `o[j]` must be writable; the CPU must have AVX.
#[inline(always)]
pub(super) unsafe fn store_acc<const N: usize>(o: [*mut f32; N], m: usize, acc: [__m256; N]) {
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

/// Bit `g` of each byte of `qh` moved to bit 4 (the rest cleared): the fifth
/// bits of Q5_K's group `g`, or of a repacked Q5_0 block's vector `g`. A
/// function, not a closure, so that it is compiled for AVX2 and inlines (a
/// closure would not inherit the features).
///
/// # Safety
/// The CPU must have AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn fifth_bit(qh: __m256i, g: usize) -> __m256i {
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
