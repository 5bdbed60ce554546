//! Device scratch memory for the temporaries of a node (quantized activation
//! rows, packed or converted GEMM operands): one grow-only buffer per device,
//! handed out by a bump pointer and taken back after each node.
//!
//! Reusing the same bytes for every node is safe because all of a device's
//! work is ordered on its one stream: the next node's kernels run after this
//! node's have finished with them. It replaces an allocation (and its free)
//! per temporary, and it is what lets a run be captured as a CUDA graph: the
//! addresses stay the same from run to run, and nothing is allocated during
//! the capture ([`Scratch::set_fixed`]).

use std::sync::Mutex;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use super::launch::cuda_err;
use crate::error::{Error, Result};

/// Alignment of every scratch range (that of the plan buffer's tensors).
const ALIGN: usize = crate::plan::CUDA_ALIGNMENT;
/// The smallest buffer allocated (so that small graphs allocate once).
const MIN_BYTES: usize = 1 << 20;

#[derive(Default)]
struct Arena {
    buf: Option<CudaSlice<u8>>,
    used: usize,
    /// Buffers outgrown during the current node: kept alive until
    /// [`Scratch::release`], because the node's kernels are not queued yet.
    retired: Vec<CudaSlice<u8>>,
    /// While a CUDA graph is captured: growing is an error.
    fixed: bool,
}

/// A device's scratch buffer (see the module docs).
#[derive(Default)]
pub(crate) struct Scratch(Mutex<Arena>);

impl Scratch {
    fn arena(&self) -> Result<std::sync::MutexGuard<'_, Arena>> {
        self.0.lock().map_err(|_| Error::internal("scratch lock poisoned"))
    }

    /// The device address of `bytes` bytes (256-byte aligned) that the
    /// current node may use until [`Scratch::release`]. Their contents are
    /// whatever an earlier node left there.
    pub fn take(&self, stream: &std::sync::Arc<CudaStream>, bytes: usize) -> Result<u64> {
        let mut a = self.arena()?;
        let size = bytes.max(1).div_ceil(ALIGN) * ALIGN;
        let cap = a.buf.as_ref().map_or(0, |b| b.len());
        let at = a.used;
        if at + size > cap {
            if a.fixed {
                return Err(Error::internal(format!(
                    "scratch of {cap} bytes cannot grow to {} during a CUDA graph capture",
                    at + size
                )));
            }
            let new_cap = (at + size).max(2 * cap).max(MIN_BYTES);
            // SAFETY: scratch bytes are written by the kernel they are taken
            // for before any kernel reads them; no host code reads them.
            let fresh = unsafe { stream.alloc::<u8>(new_cap) }.map_err(cuda_err("alloc scratch"))?;
            if let Some(old) = a.buf.replace(fresh) {
                a.retired.push(old);
            }
            // the ranges taken before stay in the retired buffer
            a.used = 0;
        }
        let base = a.buf.as_ref().map_or(0, |b| b.device_ptr(stream).0);
        let at = a.used;
        a.used = at + size;
        Ok(base + at as u64)
    }

    /// The node's kernels are queued: its ranges may serve the next node, and
    /// buffers outgrown during it are freed (in stream order, after those kernels).
    pub fn release(&self) -> Result<()> {
        let mut a = self.arena()?;
        a.used = 0;
        a.retired.clear();
        Ok(())
    }

    /// While `fixed`, [`Scratch::take`] errors instead of growing the buffer
    /// (a CUDA graph being captured must not allocate, and keeps the addresses).
    pub fn set_fixed(&self, fixed: bool) -> Result<()> {
        self.arena()?.fixed = fixed;
        Ok(())
    }

    /// The buffer's address and size: what a captured graph depends on.
    pub fn extent(&self, stream: &std::sync::Arc<CudaStream>) -> Result<(u64, usize)> {
        let a = self.arena()?;
        Ok(a.buf.as_ref().map_or((0, 0), |b| (b.device_ptr(stream).0, b.len())))
    }
}
