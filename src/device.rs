//! Where a tensor's bytes live, and what moving them costs: the seeds'
//! `.to(device)`, made a graph node ([`Context::to_device`]) whose price a
//! [`Transfer`] states.
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

/// One copy of a tensor's bytes between devices: its price.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// What crosses (a transfer node, or the root a split run copies).
    pub tensor: crate::tensor::TensorId,
    /// Bytes copied.
    pub bytes: u64,
    /// Where the bytes were.
    pub from: Device,
    /// Where they go.
    pub to: Device,
    /// Whether the host side is page-locked memory (DMA straight from it;
    /// pageable memory is staged by the driver at a fraction of the speed).
    pub pinned: bool,
}

impl Transfer {
    /// `h2d`, `d2h`, `d2d` (between two devices) or `none` (same memory).
    pub fn direction(&self) -> &'static str {
        match (self.from, self.to) {
            (a, b) if a == b => "none",
            (Device::Cpu, _) => "h2d",
            (_, Device::Cpu) => "d2h",
            _ => "d2d",
        }
    }
}

impl fmt::Display for Transfer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} B {}→{} ({})",
            self.direction(),
            self.bytes,
            self.from,
            self.to,
            if self.pinned { "pinned" } else { "pageable" }
        )
    }
}
