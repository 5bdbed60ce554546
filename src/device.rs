//! Where a tensor's bytes live: the seeds' `.to(device)` is a graph node
//! ([`Context::to_device`]) whose price a [`Transfer`] states.
//!
//! [`Transfer`]: crate::Transfer
//!
//! [`Context::to_device`]: crate::Context::to_device

use std::fmt;

/// A memory a backend computes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    /// Host memory (the CPU backend's, and where leaves' data lives).
    Cpu,
    /// The memory of the CUDA device with this ordinal.
    Cuda(u32),
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}
