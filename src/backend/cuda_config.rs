//! What the CUDA backend's users configure and read back, with or without the
//! `cuda` feature: the settings of its runs ([`CudaConfig`]), its planner rules
//! ([`CudaRules`]) and the CUDA graph counters ([`GraphStats`]).

use crate::error::{Error, Result};
use crate::plan::{ReuseRules, CUDA_ALIGNMENT};

/// What the CUDA kernels allow the planner: 256-byte alignment, and the ops'
/// own in-place rules (each elementwise thread reads its element before
/// writing it).
#[derive(Clone, Copy, Debug, Default)]
pub struct CudaRules;

impl ReuseRules for CudaRules {
    fn alignment(&self) -> usize {
        CUDA_ALIGNMENT
    }
}

/// The smallest batch of activation rows that block-type weights meet
/// through F16 and cuBLAS by default ([`CudaConfig::dequant_gemm_from`]).
pub const DEQUANT_GEMM_FROM: usize = 32;

/// How a `CudaBackend` runs graphs. [`CudaConfig::default`] is what
/// `CudaBackend::new` uses; [`CudaConfig::from_env`] reads the A/B
/// switches of a GPU run from the environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaConfig {
    /// Quantized `mul_mat` may use the staged dot kernels where the rows are
    /// aligned for them (on by default). Both kernels compute the same sums
    /// in the same order: this changes speed, not results.
    pub staged_mmvq: bool,
    /// From how many activation rows a `mul_mat` with block-type weights
    /// dequantizes them to F16 and runs a cuBLAS GEMM (tensor cores) instead
    /// of the dot kernels ([`DEQUANT_GEMM_FROM`] by default; `None`: never).
    /// The dot kernels compute the CPU's function; the GEMM agrees with it to
    /// F16 rounding. Only 2-D weights into a packed destination take it.
    pub dequant_gemm_from: Option<usize>,
    /// Repeated runs may replay CUDA graphs (off by default): the second time
    /// a storage computes the same graph at the same device addresses, the
    /// run is captured, and later runs launch the captured graph. Not in
    /// poison mode. Results are the same bits (`CudaStorage::graph_stats`).
    pub graphs: bool,
}

impl Default for CudaConfig {
    fn default() -> CudaConfig {
        CudaConfig { staged_mmvq: true, dequant_gemm_from: Some(DEQUANT_GEMM_FROM), graphs: false }
    }
}

impl CudaConfig {
    /// The defaults with the environment's switches: `RGML_CUDA_MMVQ=generic`
    /// (the generic dot kernels), `RGML_CUDA_QGEMM=off` or a batch size (the
    /// dequantized GEMM), `RGML_CUDA_GRAPHS=1` (CUDA graphs). A malformed
    /// value is an error.
    pub fn from_env() -> Result<CudaConfig> {
        CudaConfig::from_vars(|k| std::env::var(k).ok())
    }

    /// [`CudaConfig::from_env`] with the variables read by `var`.
    fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<CudaConfig> {
        let mut c = CudaConfig::default();
        c.staged_mmvq = var("RGML_CUDA_MMVQ").is_none_or(|v| v != "generic");
        c.dequant_gemm_from = match var("RGML_CUDA_QGEMM") {
            Some(v) if v == "off" => None,
            Some(v) => Some(v.parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| {
                Error::Invalid(format!("RGML_CUDA_QGEMM={v}: expected `off` or a batch size of at least 1"))
            })?),
            None => c.dequant_gemm_from,
        };
        c.graphs = var("RGML_CUDA_GRAPHS").is_some_and(|v| v == "1");
        Ok(c)
    }
}

/// What a storage's computes did with CUDA graphs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GraphStats {
    /// Runs that launched the nodes one by one (first runs of a graph, and
    /// every run after a fallback).
    pub eager: u64,
    /// Runs that captured a graph (and launched it).
    pub captured: u64,
    /// Runs that launched a graph captured before.
    pub replayed: u64,
    /// Why graphs were given up for this storage, if they were.
    pub fallback: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_from_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        assert_eq!(CudaConfig::from_vars(env(&[])).unwrap(), CudaConfig::default());
        let c = CudaConfig::from_vars(env(&[
            ("RGML_CUDA_MMVQ", "generic"),
            ("RGML_CUDA_QGEMM", "off"),
            ("RGML_CUDA_GRAPHS", "1"),
        ]))
        .unwrap();
        assert_eq!(c, CudaConfig { staged_mmvq: false, dequant_gemm_from: None, graphs: true });
        assert_eq!(CudaConfig::from_vars(env(&[("RGML_CUDA_QGEMM", "8")])).unwrap().dequant_gemm_from, Some(8));
        for bad in ["0", "-3", "many"] {
            let pairs: &'static [(&str, &str)] = Box::leak(Box::new([("RGML_CUDA_QGEMM", bad)]));
            assert!(matches!(CudaConfig::from_vars(env(pairs)), Err(Error::Invalid(_))), "{bad}");
        }
        assert!(CudaConfig::from_vars(env(&[("RGML_CUDA_GRAPHS", "yes")])).is_ok_and(|c| !c.graphs));
    }
}
