//! The CUDA backend's types when rgml is built without the `cuda` feature:
//! the same names, uninhabited, so code written for both backends (and
//! [`AnyBackend`](crate::AnyBackend)) compiles unchanged, and
//! [`CudaBackend::new`] is an [`Error::Unavailable`] saying why.

use crate::backend::traits::{Backend, BackendStorage};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::plan::Plan;
use crate::tensor::TensorId;

pub use crate::backend::cuda_config::{CudaConfig, CudaRules, GraphStats, DEQUANT_GEMM_FROM};

/// A CUDA device; none can exist in a build without the `cuda` feature.
#[derive(Clone, Debug)]
pub enum CudaBackend {}

/// The memory of one planned graph on a CUDA device (none in this build).
#[derive(Debug)]
pub enum CudaStorage {}

fn unavailable() -> Error {
    Error::Unavailable { what: "CUDA".into(), why: "rgml was built without its `cuda` feature".into() }
}

impl CudaBackend {
    /// [`Error::Unavailable`]: this build has no CUDA backend.
    pub fn new(_ordinal: usize) -> Result<CudaBackend> {
        Err(unavailable())
    }
    /// [`Error::Unavailable`]: this build has no CUDA backend.
    pub fn with_config(_ordinal: usize, _config: CudaConfig) -> Result<CudaBackend> {
        Err(unavailable())
    }
    /// Poison mode (never reached: no value of this type exists).
    pub fn with_poison(self, _poison: bool) -> CudaBackend {
        match self {}
    }
    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        match *self {}
    }
}

impl Backend for CudaBackend {
    type Storage = CudaStorage;
    type Rules = CudaRules;
    fn rules(&self) -> CudaRules {
        match *self {}
    }
    fn describe(&self) -> String {
        match *self {}
    }
    fn device(&self) -> crate::device::Device {
        match *self {}
    }
    fn alloc(&self, _: &Context, _: &Graph, _: Plan) -> Result<CudaStorage> {
        match *self {}
    }
    fn alloc_with_capacity(&self, _: &Context, _: &Graph, _: Plan, _: usize) -> Result<CudaStorage> {
        match *self {}
    }
    fn compute_steps(&self, _: &Context, _: &Graph, _: &mut CudaStorage, _: std::ops::Range<usize>) -> Result<()> {
        match *self {}
    }
}

impl BackendStorage for CudaStorage {
    fn plan(&self) -> &Plan {
        match *self {}
    }
    fn capacity(&self) -> usize {
        match *self {}
    }
    fn rebind(&mut self, _: &Context, _: &Graph, _: Plan) -> Result<()> {
        match *self {}
    }
    fn grow(&mut self, _: usize) -> Result<()> {
        match *self {}
    }
    fn reset_leaf(&mut self, _: &Context, _: TensorId) -> Result<()> {
        match *self {}
    }
    fn set_bytes(&mut self, _: &Context, _: TensorId, _: &[u8]) -> Result<()> {
        match *self {}
    }
    fn read_f32(&self, _: &Context, _: TensorId) -> Result<Vec<f32>> {
        match *self {}
    }
    fn read_bytes(&self, _: &Context, _: TensorId) -> Result<Vec<u8>> {
        match *self {}
    }
    fn read_bytes_into(&self, _: &Context, _: TensorId, _: &mut [u8]) -> Result<()> {
        match *self {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_says_the_feature_is_off() {
        let e = CudaBackend::new(0).unwrap_err();
        assert!(matches!(e, Error::Unavailable { .. }) && e.to_string().contains("`cuda` feature"), "{e}");
        assert!(crate::AnyBackend::cuda(0).is_err());
    }
}
