//! What the CPU says about itself: vendor, model name, the SIMD level the kernels run at,
//! cache sizes and cores. Benchmarks name the CPU with every figure, and kernels that
//! depend on the memory system (how far ahead to prefetch, how to split a product that
//! streams from memory) read it instead of constants tuned on one machine.
//!
//! On Linux it comes from `/proc/cpuinfo` and `/sys/devices/system/cpu/cpu0/cache`;
//! elsewhere, or where those are missing, the fields say they are unknown.

use std::sync::OnceLock;

/// The host CPU, as [`CpuInfo::get`] finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuInfo {
    /// `GenuineIntel`, `AuthenticAMD`, … (`"unknown"` if not found).
    pub vendor: String,
    /// The model name (`"unknown"` if not found).
    pub model: String,
    /// Family and model numbers, where the CPU reports them.
    pub family_model: Option<(u32, u32)>,
    /// The level the kernels run at (the CPU's, capped by `RGML_SIMD`).
    pub simd: SimdLevel,
    /// Bytes of the L2 cache one core sees.
    pub l2_bytes: Option<usize>,
    /// Bytes of the last-level (L3) cache one core sees.
    pub l3_bytes: Option<usize>,
    /// Threads this process may run at once.
    pub threads: usize,
}

impl CpuInfo {
    /// The host CPU, read once per process.
    pub fn get() -> &'static CpuInfo {
        static INFO: OnceLock<CpuInfo> = OnceLock::new();
        INFO.get_or_init(CpuInfo::read)
    }

    /// True on an AMD CPU (`AuthenticAMD`), where some kernel choices differ
    /// (the software prefetch, the Q4_K tile's smallest batch).
    pub fn is_amd(&self) -> bool {
        self.vendor == "AuthenticAMD"
    }

    fn read() -> CpuInfo {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cache = |level: u32| cache_bytes(std::path::Path::new("/sys/devices/system/cpu/cpu0/cache"), level);
        CpuInfo::parse(
            &cpuinfo,
            cache(2),
            cache(3),
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            SimdLevel::detect(),
        )
    }

    /// The fields of a `/proc/cpuinfo` text (its first processor), with the rest given.
    pub fn parse(
        cpuinfo: &str,
        l2_bytes: Option<usize>,
        l3_bytes: Option<usize>,
        threads: usize,
        simd: SimdLevel,
    ) -> CpuInfo {
        let field = |name: &str| {
            cpuinfo.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then(|| v.trim().to_string())
            })
        };
        let number = |name: &str| field(name).and_then(|v| v.parse::<u32>().ok());
        CpuInfo {
            vendor: field("vendor_id").unwrap_or_else(|| "unknown".into()),
            model: field("model name").unwrap_or_else(|| "unknown".into()),
            family_model: number("cpu family").zip(number("model")),
            simd,
            l2_bytes,
            l3_bytes,
            threads,
        }
    }

    /// One line for a report: model, vendor (family/model), SIMD level, L2 and L3, threads.
    pub fn describe(&self) -> String {
        let fm = self.family_model.map_or(String::new(), |(f, m)| format!(" family {f} model {m}"));
        let size = |b: Option<usize>| b.map_or("?".to_string(), |b| format!("{} MiB", b as f64 / (1 << 20) as f64));
        format!(
            "{} ({}{fm}), {}, L2 {}, L3 {}, {} threads",
            self.model,
            self.vendor,
            self.simd.name(),
            size(self.l2_bytes),
            size(self.l3_bytes),
            self.threads
        )
    }
}

/// Bytes of the data or unified cache of `level` under a Linux `cache` folder (`index*/level`,
/// `type`, `size` as `266240K`).
pub fn cache_bytes(dir: &std::path::Path, level: u32) -> Option<usize> {
    let entries = std::fs::read_dir(dir).ok()?;
    entries.flatten().find_map(|e| {
        let read = |f: &str| std::fs::read_to_string(e.path().join(f)).ok().map(|s| s.trim().to_string());
        if read("level")?.parse::<u32>().ok()? != level || read("type")? == "Instruction" {
            return None;
        }
        parse_size(&read("size")?)
    })
}

/// `266240K`, `32M`, `512` as bytes.
fn parse_size(s: &str) -> Option<usize> {
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: usize = digits.parse().ok()?;
    let scale = match unit.trim() {
        "" => 1,
        "K" | "KB" | "KiB" => 1 << 10,
        "M" | "MB" | "MiB" => 1 << 20,
        "G" | "GB" | "GiB" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(scale)
}

/// An instruction-set level a kernel can be built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SimdLevel {
    /// Portable Rust, the reference.
    Scalar,
    /// x86-64 AVX2 with FMA and F16C (256-bit vectors).
    Avx2,
    /// x86-64 AVX-512 F/BW/VL with VNNI on top of [`SimdLevel::Avx2`]: 512-bit
    /// float kernels, `vpdpbusd`/`vpdpwssd` in the integer ones.
    Avx512,
}

impl SimdLevel {
    /// Every level, slowest first.
    pub const ALL: [SimdLevel; 3] = [SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512];

    /// Whether this CPU can run kernels of this level (runtime detection).
    pub fn is_supported(self) -> bool {
        match self {
            SimdLevel::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx2 => {
                is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c")
            }
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx512 => {
                SimdLevel::Avx2.is_supported()
                    && is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512vl")
                    && is_x86_feature_detected!("avx512vnni")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The best level this CPU supports up to [`SimdLevel::cap`], detected
    /// once per process.
    pub fn detect() -> SimdLevel {
        static BEST: std::sync::OnceLock<SimdLevel> = std::sync::OnceLock::new();
        *BEST.get_or_init(|| {
            let cap = SimdLevel::cap();
            SimdLevel::ALL.into_iter().rev().find(|&l| l <= cap && l.is_supported()).unwrap_or(SimdLevel::Scalar)
        })
    }

    /// The highest level the CPU kernels may use: `RGML_SIMD` (`scalar`,
    /// `avx2` or `avx512`, as PyTorch's `ATEN_CPU_CAPABILITY`) to run a
    /// narrower CPU's kernels on this one, else [`SimdLevel::Avx512`]. Read
    /// once per process; another value is ignored with a warning on stderr.
    pub fn cap() -> SimdLevel {
        static CAP: std::sync::OnceLock<SimdLevel> = std::sync::OnceLock::new();
        *CAP.get_or_init(|| match std::env::var("RGML_SIMD") {
            Err(_) => SimdLevel::Avx512,
            Ok(v) => SimdLevel::parse(&v).unwrap_or_else(|| {
                eprintln!("warning: RGML_SIMD={v:?} is not scalar, avx2 or avx512; ignored");
                SimdLevel::Avx512
            }),
        })
    }

    /// The level's `RGML_SIMD` name.
    pub fn name(self) -> &'static str {
        match self {
            SimdLevel::Scalar => "scalar",
            SimdLevel::Avx2 => "avx2",
            SimdLevel::Avx512 => "avx512",
        }
    }

    /// A level by its `RGML_SIMD` name (case-insensitive).
    pub fn parse(name: &str) -> Option<SimdLevel> {
        SimdLevel::ALL.into_iter().find(|l| l.name().eq_ignore_ascii_case(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpuinfo_text_is_read() {
        let text = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n\
                    model name\t: AMD EPYC 9654 96-Core Processor\nflags\t\t: fpu\n\nprocessor\t: 1\n";
        let c = CpuInfo::parse(text, Some(1 << 20), Some(32 << 20), 2, SimdLevel::Avx512);
        assert_eq!(c.vendor, "AuthenticAMD");
        assert_eq!(c.model, "AMD EPYC 9654 96-Core Processor");
        assert_eq!(c.family_model, Some((25, 17)));
        let d = c.describe();
        assert!(d.contains("AMD EPYC 9654") && d.contains("family 25 model 17") && d.contains("L3 32 MiB"), "{d}");
        let none = CpuInfo::parse("", None, None, 1, SimdLevel::Scalar);
        assert_eq!((none.vendor.as_str(), none.family_model), ("unknown", None));
        assert!(none.describe().contains("L3 ?"));
    }

    #[test]
    fn cache_sizes_are_read_from_sysfs_layout() {
        assert_eq!(parse_size("266240K"), Some(266240 << 10));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("12"), Some(12));
        assert_eq!(parse_size("1T"), None);
        let dir = std::env::temp_dir().join(format!("rgml-cache-{}", std::process::id()));
        for (i, (level, kind, size)) in
            [(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"), (3, "Unified", "260M")]
                .iter()
                .enumerate()
        {
            let d = dir.join(format!("index{i}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("level"), format!("{level}\n")).unwrap();
            std::fs::write(d.join("type"), format!("{kind}\n")).unwrap();
            std::fs::write(d.join("size"), format!("{size}\n")).unwrap();
        }
        assert_eq!(cache_bytes(&dir, 1), Some(48 << 10));
        assert_eq!(cache_bytes(&dir, 2), Some(2 << 20));
        assert_eq!(cache_bytes(&dir, 3), Some(260 << 20));
        assert_eq!(cache_bytes(&dir, 4), None);
        std::fs::remove_dir_all(&dir).ok();
    }
}
