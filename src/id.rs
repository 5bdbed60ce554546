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

/// A hasher for [`TensorId`] keys (FxHash's multiply-rotate): the executor and
/// planner look ids up per node, where the standard SipHash is most of the cost.
/// Ids are not attacker-chosen, so a keyed hash buys nothing here.
#[derive(Clone, Copy, Default)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        bytes.iter().for_each(|&b| self.write_u64(u64::from(b)));
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// A map keyed by [`TensorId`] with [`IdHasher`].
pub(crate) type IdMap<V> = std::collections::HashMap<TensorId, V, std::hash::BuildHasherDefault<IdHasher>>;
/// A set of [`TensorId`]s with [`IdHasher`].
pub(crate) type IdSet = std::collections::HashSet<TensorId, std::hash::BuildHasherDefault<IdHasher>>;
