//! Whether the kernels ask for weight bytes ahead of use (software prefetch):
//! decided once per process from what the CPU reports. On Intel the matrix-
//! vector dots and the repacked tiles stream faster with it (eight rows read a
//! block at a time defeat the hardware's stream prefetch there); on AMD's
//! Zen 4 the hardware prefetchers keep up and the extra requests only compete
//! with them, so AMD CPUs go without. `RGML_PREFETCH=on|off` overrides the
//! choice (to measure it on a given machine).

use std::sync::OnceLock;

/// True when the kernels issue software prefetches (see the module docs).
#[inline]
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| match std::env::var("RGML_PREFETCH").as_deref() {
        Ok("on") => true,
        Ok("off") => false,
        Ok(v) => {
            eprintln!("warning: RGML_PREFETCH={v:?} is not on or off; ignored");
            !super::vendor::is_amd()
        }
        Err(_) => !super::vendor::is_amd(),
    })
}
