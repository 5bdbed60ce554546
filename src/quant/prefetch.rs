//! Whether, and how, the kernels ask for weight bytes ahead of use (software
//! prefetch): decided once per process from what the CPU reports.
//!
//! - **The dots** (matrix-vector products on weights in place, `enabled`): on
//!   Intel they stream faster with it (eight rows read a block at a time defeat
//!   the hardware's stream prefetch there); on AMD's Zen 4 the hardware
//!   prefetchers follow one row at a time and the extra requests only compete
//!   with them, so AMD CPUs go without.
//! - **The tiles** reading a repacked group block by block (`tile::common`):
//!   as the dots, and on AMD too where the tiles are AVX2's; the blocks' lines
//!   into the L1, a couple of KiB ahead.
//! - **The one-row kernels that pace their requests** ([`paced`]: one line
//!   for each vector they load, as they load it; the repacked Q4_K/Q5_K
//!   decode kernel). Such a kernel spends many instructions on each line, so
//!   the core's own window runs few lines ahead, and the hardware's stream
//!   prefetch, which advances only as the stream is read, keeps too few lines
//!   in flight to draw one core's share of the memory's bandwidth. On AMD its
//!   requests go to the L2 and far ahead (a burst of them, a whole block's at
//!   once, stalls the loads they should serve there, and requests into the L1
//!   hold its few miss buffers); elsewhere as the tiles'.
//!
//! `RGML_PREFETCH=on|off` overrides the choice everywhere (to measure it on a
//! given machine): `on` gives the dots and the tiles Intel's rule, and the
//! paced kernels this CPU's.

use std::sync::OnceLock;

use crate::cpu_info::CpuInfo;

/// True when the dot kernels issue software prefetches (see the module docs).
#[inline]
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| forced().unwrap_or_else(|| !CpuInfo::get().is_amd()))
}

/// Which cache a software prefetch fills.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fill {
    /// Every level down to the L1 (`prefetcht0`).
    L1,
    /// The L2 and below (`prefetcht1`).
    L2,
}

/// How a weight stream asks for its bytes ahead of use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamPrefetch {
    /// The cache the requests fill.
    pub fill: Fill,
    /// How many bytes past the block in use they ask for.
    pub ahead: usize,
}

impl std::fmt::Display for StreamPrefetch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fill = match self.fill {
            Fill::L1 => "L1",
            Fill::L2 => "L2",
        };
        write!(f, "into the {fill}, {:.1} KiB ahead", self.ahead as f64 / 1024.0)
    }
}

/// Into the L1, 2.3 KiB ahead (8 AVX-512 Q4_0 blocks, 16 AVX2 ones, one Q4_K
/// super-block of 16 rows): the distance that served Intel's streams best.
pub const L1_AHEAD: usize = 2304;

/// The paced kernels' prefetch on this CPU ([`paced_rule`] of [`CpuInfo::get`]
/// and `RGML_PREFETCH`), read once.
#[inline]
pub fn paced() -> Option<StreamPrefetch> {
    static RULE: OnceLock<Option<StreamPrefetch>> = OnceLock::new();
    *RULE.get_or_init(|| paced_rule(CpuInfo::get(), forced()))
}

/// The paced kernels' prefetch for `cpu` (see the module docs), `forced` off
/// by `RGML_PREFETCH=off`. On AMD the requests go to the L2, 1/128 of one
/// core's L2 ahead (8 KiB of Zen 4's 1 MiB; from 4 to 16 KiB): about what
/// one core must have in flight to draw its share of the memory's bandwidth
/// across the loaded latency, and a small enough part of the L2 that every
/// line is still there when it is used.
pub fn paced_rule(cpu: &CpuInfo, forced: Option<bool>) -> Option<StreamPrefetch> {
    if forced == Some(false) {
        return None;
    }
    Some(if cpu.is_amd() {
        let ahead = (cpu.l2_bytes.unwrap_or(1 << 20) / 128).clamp(4 << 10, 16 << 10);
        StreamPrefetch { fill: Fill::L2, ahead }
    } else {
        StreamPrefetch { fill: Fill::L1, ahead: L1_AHEAD }
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::dot::SimdLevel;

    fn cpu(vendor: &str, l2: Option<usize>) -> CpuInfo {
        let text = format!("vendor_id\t: {vendor}\nmodel name\t: test\n");
        CpuInfo::parse(&text, l2, Some(32 << 20), 2, SimdLevel::Avx512)
    }

    #[test]
    fn amd_paced_kernels_ask_the_l2_a_slice_of_it_ahead() {
        let zen4 = paced_rule(&cpu("AuthenticAMD", Some(1 << 20)), None);
        assert_eq!(zen4, Some(StreamPrefetch { fill: Fill::L2, ahead: 8 << 10 }));
        // the distance stays within 4..16 KiB whatever the L2 says, and has a default
        assert_eq!(paced_rule(&cpu("AuthenticAMD", Some(256 << 10)), None).map(|p| p.ahead), Some(4 << 10));
        assert_eq!(paced_rule(&cpu("AuthenticAMD", Some(32 << 20)), None).map(|p| p.ahead), Some(16 << 10));
        assert_eq!(paced_rule(&cpu("AuthenticAMD", None), None).map(|p| p.ahead), Some(8 << 10));
    }

    #[test]
    fn other_paced_kernels_ask_the_l1_and_off_means_none() {
        let intel = cpu("GenuineIntel", Some(2 << 20));
        assert_eq!(paced_rule(&intel, None), Some(StreamPrefetch { fill: Fill::L1, ahead: L1_AHEAD }));
        assert_eq!(paced_rule(&intel, Some(true)), paced_rule(&intel, None));
        assert_eq!(paced_rule(&intel, Some(false)), None);
        assert_eq!(paced_rule(&cpu("AuthenticAMD", Some(1 << 20)), Some(false)), None);
    }
}
