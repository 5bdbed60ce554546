//! The CPU's vendor, for the kernel choices measured to differ between
//! Intel and AMD ([`super::prefetch`], the Q4_K tile's `min_rows`).

use std::sync::OnceLock;

/// True on an `AuthenticAMD` CPU (CPUID leaf 0's vendor string), read once.
pub(crate) fn is_amd() -> bool {
    static AMD: OnceLock<bool> = OnceLock::new();
    *AMD.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            // leaf 0 (the vendor string) exists on every x86-64 CPU
            let r = std::arch::x86_64::__cpuid(0);
            let vendor: Vec<u8> = [r.ebx, r.edx, r.ecx].iter().flat_map(|v| v.to_le_bytes()).collect();
            vendor == b"AuthenticAMD"
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    })
}
