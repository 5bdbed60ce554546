//! `--backend cpu|cuda`: the backend a command runs on, shared by the CLI's
//! subcommands.

use std::path::Path;

use rgml::gguf::GgufFile;
use rgml::{AnyBackend, Error, Result};

use rgml_models::model::offload;

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

impl BackendArg {
    /// Opens the backend for the model file `model`: the CPU, or on CUDA the
    /// device and the CPU as one split backend ([`offload::split`]) with
    /// `n_gpu_layers` of the file's layers on the device (`None`: all), every
    /// op the device lacks on the CPU.
    ///
    /// # Errors
    /// [`Error::Invalid`] for `n_gpu_layers` on the CPU; what opening the
    /// backend or reading the file's hyperparameters gives.
    pub fn open_for_model(
        self,
        threads: usize,
        device: usize,
        model: &Path,
        n_gpu_layers: Option<usize>,
    ) -> Result<AnyBackend> {
        match self {
            BackendArg::Cpu if n_gpu_layers.is_some() => {
                Err(Error::Invalid("--n-gpu-layers needs --backend cuda".into()))
            }
            BackendArg::Cpu => AnyBackend::cpu(threads),
            BackendArg::Cuda => {
                let n_layer = rgml_models::embed::n_layer_of(&GgufFile::open(model)?)?;
                let gpu = self.open(threads, device)?;
                Ok(offload::split(gpu, AnyBackend::cpu(threads)?, n_layer, n_gpu_layers)?.into())
            }
        }
    }
}
