//! What a backend tells the planner: alignment and in-place reuse.

use crate::tensor::Op;

/// Byte alignment of CPU plan buffers.
pub const CPU_ALIGNMENT: usize = 64;
/// Byte alignment of CUDA plan buffers.
pub const CUDA_ALIGNMENT: usize = 256;

/// What a backend tells the planner: its alignment, and which kernels may
/// write their result over one of their sources (per op *and* source slot: a
/// kernel that reads a source after writing part of its output must say no).
pub trait ReuseRules {
    /// Alignment of every offset in the buffer (a power of two).
    fn alignment(&self) -> usize;
    /// True if `op`'s kernel stays correct when its destination is the same
    /// bytes, in the same layout, as source `slot`: the op's own rule
    /// ([`Op::may_overwrite`]) unless a backend's kernel differs.
    fn may_overwrite_source(&self, op: &Op, slot: usize) -> bool {
        op.may_overwrite(slot)
    }
}

/// Rules that allow no in-place reuse.
#[derive(Clone, Copy, Debug)]
pub struct NoReuse {
    /// Buffer alignment.
    pub alignment: usize,
}

impl ReuseRules for NoReuse {
    fn alignment(&self) -> usize {
        self.alignment
    }
    fn may_overwrite_source(&self, _: &Op, _: usize) -> bool {
        false
    }
}
