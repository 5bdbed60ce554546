//! Tensor handles.

use std::fmt;

/// Handle of a tensor in its [`Context`](crate::Context): the arena index plus the
/// context's id, so a handle used with the wrong context is an error, not a wrong tensor;
/// and the context's epoch when the tensor was made, so a handle to a tensor that
/// [`Context::truncate`](crate::Context::truncate) removed is an error, not the tensor
/// that later took its index. Handles order by creation (program order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorId {
    pub(crate) ctx: u32,
    pub(crate) idx: u32,
    pub(crate) epoch: u32,
}

impl TensorId {
    /// The arena index (creation order).
    pub fn index(self) -> usize {
        self.idx as usize
    }
}

impl fmt::Display for TensorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.idx)
    }
}
