//! The CPU executor: runs a planned graph on its graph pool (`pool`) through the
//! executor loop, node by node in the graph's order, each node split across
//! threads by rows or blocks.
//!
//! `backend` (the pool and its settings) and `storage` (the memory of one
//! planned graph) sit on `kernels`, which hands each op family to its kernel
//! module; the kernel modules share only `mem` (raw memory) and `copy`, and
//! `matmul_id` runs `matmul` once per expert.

mod attention;
mod back;
mod backend;
mod copy;
mod dot_blocks;
mod elementwise;
mod kernels;
mod matmul;
mod matmul_id;
mod mem;
mod norm;
mod pool;
mod reduce;
mod rope;
mod rows;
mod shape;
mod softmax;
mod sort;
mod storage;
mod stream;
mod vexp;
mod width;

pub use backend::{CpuBackend, CpuRules, MAX_THREADS_PER_CORE};
pub use storage::CpuStorage;

#[cfg(test)]
mod tests;
