//! The vector width the F32 loops of the CPU kernels (elementwise, streamed
//! stores) are compiled for, by runtime detection: the same loops at 16 or 8
//! lanes instead of the baseline's 4, which matters when the operands sit in
//! cache (elementwise ops are exact, so the bits are the same at every width).

use crate::cpu_info::SimdLevel;

/// A width; [`Wide::detect`] gives this CPU's (capped by `RGML_SIMD`).
#[derive(Clone, Copy)]
pub(crate) enum Wide {
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    Base,
}

impl Wide {
    /// The width, found once (every elementwise node asks).
    #[inline(always)]
    pub(crate) fn detect() -> Wide {
        static WIDE: std::sync::OnceLock<Wide> = std::sync::OnceLock::new();
        *WIDE.get_or_init(Wide::find)
    }

    fn find() -> Wide {
        #[cfg(target_arch = "x86_64")]
        {
            // with FMA, so that `mul_add` (SiLU's exp) is one instruction there
            let cap = SimdLevel::cap();
            let fma = std::arch::is_x86_feature_detected!("fma");
            if fma && cap >= SimdLevel::Avx512 && std::arch::is_x86_feature_detected!("avx512f") {
                return Wide::Avx512;
            }
            if fma && cap >= SimdLevel::Avx2 && std::arch::is_x86_feature_detected!("avx2") {
                return Wide::Avx2;
            }
        }
        Wide::Base
    }
}
