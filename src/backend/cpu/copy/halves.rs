//! F32 ↔ F16 rows at the CPU's widest conversion: sixteen values an
//! instruction with AVX-512 (`vcvtps2ph`/`vcvtph2ps` on zmm), else the `half`
//! crate's (F16C, eight at a time, or scalar). Round to nearest even either
//! way, so the bits do not depend on the path. F32 → F16 also with streaming
//! stores, for destinations too large to stay cached (`cpu::stream`).

use half::{f16, slice::HalfFloatSliceExt};

/// Whether the AVX-512 forms run here.
fn wide() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::quant::dot::SimdLevel;
        SimdLevel::cap() >= SimdLevel::Avx512 && std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// `d[i] = f16(s[i])`; the lengths must match.
pub(super) fn from_f32(d: &mut [f16], s: &[f32]) {
    debug_assert_eq!(d.len(), s.len());
    #[cfg(target_arch = "x86_64")]
    if wide() {
        // SAFETY: AVX-512 F is present.
        return unsafe { avx512::from_f32_with::<false>(d, s) };
    }
    d.convert_from_f32_slice(s);
}

/// [`from_f32`] with streaming stores where `d` is aligned to them
/// (`cpu::stream`; the caller fences). False, nothing written, where the CPU
/// has no AVX-512: the caller then converts as usual.
pub(super) fn from_f32_streamed(d: &mut [f16], s: &[f32]) -> bool {
    debug_assert_eq!(d.len(), s.len());
    #[cfg(target_arch = "x86_64")]
    if wide() {
        // SAFETY: AVX-512 F is present.
        unsafe { avx512::from_f32_with::<true>(d, s) };
        return true;
    }
    false
}

/// `d[i] = f32(s[i])`; the lengths must match.
pub(crate) fn to_f32(d: &mut [f32], s: &[f16]) {
    debug_assert_eq!(d.len(), s.len());
    #[cfg(target_arch = "x86_64")]
    if wide() {
        // SAFETY: AVX-512 F is present.
        return unsafe { avx512::to_f32(d, s) };
    }
    s.convert_to_f32_slice(d);
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use half::{f16, slice::HalfFloatSliceExt};
    use std::arch::x86_64::*;

    /// Sixteen values a conversion; with `STREAM` the stores that are aligned
    /// (after a head of single values) bypass the caches.
    #[target_feature(enable = "avx512f")]
    pub(super) fn from_f32_with<const STREAM: bool>(d: &mut [f16], s: &[f32]) {
        let n = d.len().min(s.len());
        let h = if STREAM { crate::backend::cpu::stream::head(d.as_ptr().cast(), 32, n, 2) } else { 0 };
        d[..h].convert_from_f32_slice(&s[..h]);
        let body = (n - h) / 16 * 16 + h;
        for (d, s) in d[h..body].chunks_exact_mut(16).zip(s[h..body].chunks_exact(16)) {
            // SAFETY: `s` holds 16 f32 and `d` 16 f16 (32 bytes), 32-byte aligned when streamed.
            unsafe {
                let v =
                    _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm512_loadu_ps(s.as_ptr()));
                if STREAM {
                    _mm256_stream_si256(d.as_mut_ptr().cast(), v);
                } else {
                    _mm256_storeu_si256(d.as_mut_ptr().cast(), v);
                }
            }
        }
        d[body..n].convert_from_f32_slice(&s[body..n]);
    }

    #[target_feature(enable = "avx512f")]
    pub(super) fn to_f32(d: &mut [f32], s: &[f16]) {
        let n = d.len().min(s.len()) / 16 * 16;
        for (d, s) in d[..n].chunks_exact_mut(16).zip(s[..n].chunks_exact(16)) {
            // SAFETY: `s` holds 16 f16 (32 bytes) and `d` 16 f32.
            unsafe { _mm512_storeu_ps(d.as_mut_ptr(), _mm512_cvtph_ps(_mm256_loadu_si256(s.as_ptr().cast()))) };
        }
        s[n..].convert_to_f32_slice(&mut d[n..]);
    }
}

#[cfg(test)]
mod tests {
    /// Every path rounds as the `half` crate does (nearest even), the tail included,
    /// specials and subnormals too.
    #[test]
    fn both_ways_match_half() {
        let mut s: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) * 0.37e-3 * (i % 7) as f32).collect();
        s.extend([f32::INFINITY, f32::NEG_INFINITY, 65520.0, 65519.0, 1e-7, -6.0e-8, 2.98e-8, 0.0, -0.0]);
        for n in [0, 1, 15, 16, 17, 33, s.len()] {
            let mut d = vec![half::f16::ZERO; n];
            super::from_f32(&mut d, &s[..n]);
            for (h, &x) in d.iter().zip(&s[..n]) {
                assert_eq!(h.to_bits(), half::f16::from_f32(x).to_bits(), "{x}");
            }
            // streamed, at every alignment of the destination (nothing past its end)
            for off in 0..17 {
                let mut e = vec![half::f16::from_f32(-3.0); n + off + 1];
                if super::from_f32_streamed(&mut e[off..off + n], &s[..n]) {
                    crate::backend::cpu::stream::fence();
                    assert!(e[off..off + n].iter().zip(&d).all(|(a, b)| a.to_bits() == b.to_bits()), "{n} at {off}");
                    assert!(e[..off].iter().chain(&e[off + n..]).all(|h| h.to_f32() == -3.0));
                }
            }
            let mut back = vec![0f32; n];
            super::to_f32(&mut back, &d);
            for (b, h) in back.iter().zip(&d) {
                assert_eq!(b.to_bits(), h.to_f32().to_bits());
            }
        }
        let nan = [f32::NAN; 16];
        let mut d = [half::f16::ZERO; 16];
        super::from_f32(&mut d, &nan);
        assert!(d.iter().all(|h| h.is_nan()));
    }
}
