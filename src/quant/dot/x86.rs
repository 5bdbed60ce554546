//! Helpers shared by the x86-64 kernels (AVX2+FMA+F16C and up).
//!
//! The loads take raw pointers and read unaligned; their callers have checked
//! the slice lengths once (see [`blocks`](super::common::blocks)).

use std::arch::x86_64::*;

pub(super) use super::common::f16t;

/// Sum of the 8 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn hsum_ps(v: __m256) -> f32 {
    hsum_ps128(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v)))
}

/// Sum of the 4 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn hsum_ps128(v: __m128) -> f32 {
    let v = _mm_add_ps(v, _mm_movehl_ps(v, v));
    _mm_cvtss_f32(_mm_add_ss(v, _mm_movehdup_ps(v)))
}

/// 32 unaligned bytes.
///
/// # Safety
/// `p..p + 32` must be readable.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn ld256(p: *const u8) -> __m256i {
    _mm256_loadu_si256(p.cast())
}

/// 16 unaligned bytes.
///
/// # Safety
/// `p..p + 16` must be readable.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn ld128(p: *const u8) -> __m128i {
    _mm_loadu_si128(p.cast())
}

/// An unaligned little-endian u16.
///
/// # Safety
/// `p..p + 2` must be readable.
#[inline(always)]
pub(super) unsafe fn rd16(p: *const u8) -> u16 {
    u16::from_le(p.cast::<u16>().read_unaligned())
}

/// An unaligned little-endian u32.
///
/// # Safety
/// `p..p + 4` must be readable.
#[inline(always)]
pub(super) unsafe fn rd32(p: *const u8) -> u32 {
    u32::from_le(p.cast::<u32>().read_unaligned())
}

/// An unaligned little-endian f32.
///
/// # Safety
/// `p..p + 4` must be readable.
#[inline(always)]
pub(super) unsafe fn rdf32(p: *const u8) -> f32 {
    f32::from_bits(rd32(p))
}

/// `d_w * d_a` of two f16 scales, broadcast to 8 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn scale2(dw: u16, da: u16) -> __m256 {
    _mm256_set1_ps(f16t(dw) * f16t(da))
}

/// The 32 nibbles of the 16 bytes at `p` as bytes: the low nibbles in bytes
/// 0..16, the high ones in 16..32.
///
/// # Safety
/// `p..p + 16` must be readable.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn nibbles(p: *const u8) -> __m256i {
    // a broadcast load (no shuffle uop), then the upper copy shifted down by 4
    let q = _mm256_broadcastsi128_si256(ld128(p));
    _mm256_and_si256(_mm256_srlv_epi32(q, _mm256_set_epi32(4, 4, 4, 4, 0, 0, 0, 0)), _mm256_set1_epi8(0x0f))
}

/// Byte `k` is `0xff` where bit `k` of `bits` is set, else 0.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn bytes_from_bits(bits: u32) -> __m256i {
    // byte k <- byte k / 8 of `bits`, then test bit k % 8
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(bits as i32),
        _mm256_set_epi64x(0x0303_0303_0303_0303, 0x0202_0202_0202_0202, 0x0101_0101_0101_0101, 0),
    );
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit)
}

/// The i16 in word `w` (0..8) of each 128-bit half of `v`, broadcast within
/// that half; `lo` and `hi` pick the word for the low and high half.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn pick_words(v: __m256i, lo: usize, hi: usize) -> __m256i {
    let word = |w: usize| (((2 * w + 1) << 8) | (2 * w)) as i16;
    _mm256_shuffle_epi8(v, _mm256_set_m128i(_mm_set1_epi16(word(hi)), _mm_set1_epi16(word(lo))))
}

/// Q4_K/Q5_K's 12 packed bytes as (8 six-bit scales, 8 six-bit mins), one byte each.
#[inline(always)]
pub(super) fn k4_scales_mins(b: [u32; 3]) -> (u64, u64) {
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const TOP2: u32 = 0x0303_0303;
    // groups 0..4 keep the low 6 bits of bytes 0..8; groups 4..8 take a nibble
    // from bytes 8..12 and their top two bits from the top of bytes 0..8
    let sc = (b[0] & LOW6, (b[2] & LOW4) | (((b[0] >> 6) & TOP2) << 4));
    let mn = (b[1] & LOW6, ((b[2] >> 4) & LOW4) | (((b[1] >> 6) & TOP2) << 4));
    (u64::from(sc.0) | (u64::from(sc.1) << 32), u64::from(mn.0) | (u64::from(mn.1) << 32))
}

/// Q3_K's 12 packed bytes as its 16 signed scales (`6-bit value - 32`) in i16 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q3_scales(b: [u32; 3]) -> __m256i {
    const LOW4: u32 = 0x0f0f_0f0f;
    const TOP2: u32 = 0x0303_0303;
    // scale j: a nibble of byte j % 8 (low for j < 8), two bits of byte 8 + j % 4 at 2 * (j / 4)
    let s0 = (b[0] & LOW4) | ((b[2] & TOP2) << 4);
    let s1 = (b[1] & LOW4) | (((b[2] >> 2) & TOP2) << 4);
    let s2 = ((b[0] >> 4) & LOW4) | (((b[2] >> 4) & TOP2) << 4);
    let s3 = ((b[1] >> 4) & LOW4) | (((b[2] >> 6) & TOP2) << 4);
    let s = _mm_set_epi32(s3 as i32, s2 as i32, s1 as i32, s0 as i32);
    _mm256_cvtepi8_epi16(_mm_sub_epi8(s, _mm_set1_epi8(32)))
}
