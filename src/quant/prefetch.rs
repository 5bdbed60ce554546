//! Whether the kernels ask for weight bytes ahead of use (software prefetch):
//! decided once per process from what the CPU reports. On Intel the matrix-
//! vector dots and the repacked tiles stream faster with it (eight rows read a
//! block at a time defeat the hardware's stream prefetch there); on AMD's
//! Zen 4 the hardware prefetchers keep up and the extra requests only compete
//! with them, so AMD CPUs go without, but for the AVX2 tiles, which stream
//! faster with it there too (the tiles' own rule, `tile::common`).
//! `RGML_PREFETCH=on|off` overrides the choice everywhere (to measure it on a
//! given machine).

use std::sync::OnceLock;

/// True when the dot kernels issue software prefetches (see the module docs).
#[inline]
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| forced().unwrap_or_else(|| !crate::cpu_info::CpuInfo::get().is_amd()))
}

/// What `RGML_PREFETCH` asks for (`None`: unset, or neither `on` nor `off`,
/// which is ignored with a warning on stderr), read once.
pub(crate) fn forced() -> Option<bool> {
    static FORCED: OnceLock<Option<bool>> = OnceLock::new();
    *FORCED.get_or_init(|| match std::env::var("RGML_PREFETCH").as_deref() {
        Ok("on") => Some(true),
        Ok("off") => Some(false),
        Ok(v) => {
            eprintln!("warning: RGML_PREFETCH={v:?} is not on or off; ignored");
            None
        }
        Err(_) => None,
    })
}
