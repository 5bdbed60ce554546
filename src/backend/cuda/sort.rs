//! `argsort` on the device (`kernels/sort.cu`): one block per row sorts the
//! row's keys (the value's bits in the CPU's order, then its index), so ties
//! keep index order, `-0` equals `0`, NaN sorts with `+inf` (last, ascending),
//! and the permutation is the CPU's whatever the schedule. Rows of up to
//! [`SHARED_KEYS`] values sort in shared memory (a MoE router's 8–256 experts,
//! a vocabulary's top-k candidates after a cut); longer ones in scratch memory,
//! [`WORK_BYTES`] of rows per launch. `mul_mat_id`'s routing sorts its pairs
//! with the same kernel code ([`plan`]).

use cudarc::driver::LaunchConfig;

use super::device::Device;
use super::launch::{launch, Bound, BoundMut};
use crate::dtype::DType;
use crate::error::{Error, Result};

/// The most keys a block sorts in shared memory (32 KiB of them).
pub(crate) const SHARED_KEYS: i64 = 4096;
/// The most keys of one row (1 GiB of scratch memory).
const MAX_KEYS: i64 = 1 << 27;
/// The scratch memory of the keys of one launch, for rows longer than [`SHARED_KEYS`].
const WORK_BYTES: i64 = 64 << 20;

/// How one block sorts `len` keys: `(n, threads, shared)`, the keys padded to
/// `n` (a power of two), the block's threads, and its dynamic shared memory
/// in bytes (0: the keys are in global memory).
pub(crate) fn plan(len: i64) -> Result<(i64, u32, u32)> {
    if len > MAX_KEYS {
        return Err(Error::Invalid(format!("CUDA sort: {len} keys in one row exceed the limit of {MAX_KEYS}")));
    }
    let n = (len.max(1) as u64).next_power_of_two() as i64;
    let threads = (n / 2).clamp(32, 1024) as u32;
    let shared = if n <= SHARED_KEYS { (n * 8) as u32 } else { 0 };
    Ok((n, threads, shared))
}

/// `dst[:, r]` = the I32 indices of row `r` of `a` (F32, F16 or BF16, any
/// strides) in value order, largest first if `descending`.
pub(crate) fn argsort(dev: &Device, descending: bool, dst: BoundMut, a: Bound) -> Result<()> {
    if dst.l.dtype != DType::I32 || dst.l.ne != a.l.ne {
        return Err(Error::internal(format!("argsort of {:?} into {:?} {:?}", a.l.ne, dst.l.dtype, dst.l.ne)));
    }
    let (ne0, rows) = (a.l.ne[0], a.l.nrows());
    if ne0 == 0 || rows == 0 {
        return Ok(());
    }
    let (n, threads, shared) = plan(ne0)?;
    let per_launch = if shared > 0 { rows } else { (WORK_BYTES / (n * 8)).max(1) }.min(i32::MAX as i64);
    let work = if shared > 0 { 0 } else { dev.scratch.take(&dev.stream, (per_launch.min(rows) * n * 8) as usize)? };
    let mut row0 = 0;
    while row0 < rows {
        let count = per_launch.min(rows - row0);
        let cfg = LaunchConfig { grid_dim: (count as u32, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: shared };
        // the stream orders each launch's use of `work` after the last one's
        launch!(dev, "sort", "rg_argsort", cfg;
            dst.ptr, dst.p("argsort")?, a.ptr, a.p("argsort")?, work, n, i32::from(descending), row0);
        row0 += count;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_geometry() {
        assert_eq!(plan(0).unwrap(), (1, 32, 8));
        assert_eq!(plan(8).unwrap(), (8, 32, 64));
        assert_eq!(plan(129).unwrap(), (256, 128, 2048));
        assert_eq!(plan(4096).unwrap(), (4096, 1024, 32768));
        assert_eq!(plan(4097).unwrap(), (8192, 1024, 0));
        assert!(plan(MAX_KEYS + 1).is_err());
    }
}
