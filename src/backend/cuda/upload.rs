//! Host-to-device uploads of leaves. Small ones are one copy from the host
//! bytes; large ones (a mapped GGUF's weights) go through two pinned
//! (page-locked) staging buffers per device, [`STAGE_BYTES`] each: the host
//! fills one while the device copies out of the other, so the copies run at
//! the link's speed for page-locked memory instead of the driver staging
//! every pageable copy itself.

use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, PinnedHostSlice};

use super::launch::cuda_err;
use crate::error::{Error, Result};

/// Size of each pinned staging buffer.
pub const STAGE_BYTES: usize = 8 << 20;

/// The two pinned staging buffers of a device, allocated at its first large upload.
#[derive(Default)]
pub(crate) struct Staging(Mutex<Option<[PinnedHostSlice<u8>; 2]>>);

impl Staging {
    /// `bytes` in a new device buffer of exactly that length (one zero byte
    /// for an empty slice), copied on `stream`; through the staging buffers
    /// when it spans at least two of them.
    pub(crate) fn upload(
        &self,
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        bytes: &[u8],
    ) -> Result<CudaSlice<u8>> {
        if bytes.is_empty() {
            return stream.alloc_zeros::<u8>(1).map_err(cuda_err("upload leaf"));
        }
        if bytes.len() < 2 * STAGE_BYTES {
            return stream.clone_htod(bytes).map_err(cuda_err("upload leaf"));
        }
        let mut guard = self.0.lock().map_err(|_| Error::internal("staging lock poisoned"))?;
        if guard.is_none() {
            // SAFETY: the pinned buffers are written (below) before any copy reads them.
            let pin = || unsafe { ctx.alloc_pinned::<u8>(STAGE_BYTES) }.map_err(cuda_err("cuMemHostAlloc (staging)"));
            *guard = Some([pin()?, pin()?]);
        }
        let stages = guard.as_mut().ok_or_else(|| Error::internal("no staging buffers"))?;
        // SAFETY: every byte of the new buffer is written by the copies below before anyone reads it.
        let mut out = unsafe { stream.alloc::<u8>(bytes.len()) }.map_err(cuda_err("upload leaf"))?;
        for (i, chunk) in bytes.chunks(STAGE_BYTES).enumerate() {
            let at = i * STAGE_BYTES;
            let mut dst = out.slice_mut(at..at + chunk.len());
            if chunk.len() < STAGE_BYTES {
                // the tail: straight from the host bytes
                stream.memcpy_htod(chunk, &mut dst).map_err(cuda_err("upload leaf"))?;
                continue;
            }
            let stage = &mut stages[i % 2];
            // waits until the copy that last read this buffer (two chunks ago) is done
            stage.as_mut_slice().map_err(cuda_err("staging wait"))?.copy_from_slice(chunk);
            stream.memcpy_htod(stage, &mut dst).map_err(cuda_err("upload leaf"))?;
        }
        Ok(out)
    }
}

/// A pinned (page-locked) host buffer of `bytes` zeros on `ctx`'s device: copies
/// from it go at the bus's rate, with no staging by the driver.
pub(crate) fn pinned_zeroed(ctx: &Arc<CudaContext>, bytes: usize) -> Result<PinnedHostSlice<u8>> {
    // SAFETY: every byte is written (zeroed) below, before anything can read it.
    let mut pin = unsafe { ctx.alloc_pinned::<u8>(bytes.max(1)) }.map_err(cuda_err("cuMemHostAlloc"))?;
    pin.as_mut_slice().map_err(cuda_err("cuMemHostAlloc"))?.fill(0);
    Ok(pin)
}
