//! `--backend cpu|cuda`: the backend a command runs on, shared by the CLI's
//! subcommands.

use rgml::{AnyBackend, Result};

/// Which backend a command runs on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendArg {
    /// The CPU (rayon, SIMD).
    #[default]
    Cpu,
    /// A CUDA device (cuBLAS and NVRTC-compiled kernels).
    Cuda,
}

impl BackendArg {
    /// Opens the backend: the CPU with `threads` threads (0: one per core), or
    /// CUDA device `device` with the environment's switches
    /// ([`rgml::CudaConfig::from_env`]). Without CUDA this is
    /// [`rgml::Error::Unavailable`] naming the missing library.
    pub fn open(self, threads: usize, device: usize) -> Result<AnyBackend> {
        match self {
            BackendArg::Cpu => AnyBackend::cpu(threads),
            BackendArg::Cuda => AnyBackend::cuda_with(device, rgml::CudaConfig::from_env()?),
        }
    }
}
