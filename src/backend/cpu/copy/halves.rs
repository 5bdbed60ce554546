//! F32 ↔ F16 rows at the CPU's widest conversion: sixteen values an
//! instruction with AVX-512 (`vcvtps2ph`/`vcvtph2ps` on zmm), else the `half`
//! crate's (F16C, eight at a time, or scalar). Round to nearest even either
//! way, so the bits do not depend on the path.

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
        return unsafe { avx512::from_f32(d, s) };
    }
    d.convert_from_f32_slice(s);
}

/// `d[i] = f32(s[i])`; the lengths must match.
pub(super) fn to_f32(d: &mut [f32], s: &[f16]) {
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

    #[target_feature(enable = "avx512f")]
    pub(super) fn from_f32(d: &mut [f16], s: &[f32]) {
        let n = d.len().min(s.len()) / 16 * 16;
        for (d, s) in d[..n].chunks_exact_mut(16).zip(s[..n].chunks_exact(16)) {
            // SAFETY: `s` holds 16 f32 and `d` 16 f16 (32 bytes).
            unsafe {
                let h =
                    _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm512_loadu_ps(s.as_ptr()));
                _mm256_storeu_si256(d.as_mut_ptr().cast(), h);
            }
        }
        d[n..].convert_from_f32_slice(&s[n..]);
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
