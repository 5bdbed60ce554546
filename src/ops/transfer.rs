//! `to_device`: the seeds' `.to(device)` as a node, so the copy between
//! memories is in the graph, priced ([`crate::Graph::transfers`]) and placed
//! by the split scheduler, instead of hidden in it.

use crate::context::Context;
use crate::device::Device;
use crate::error::Result;
use crate::tensor::{Op, TensorId};

impl Context {
    /// A contiguous copy of `a` on `device`. In a split run
    /// ([`crate::SplitBackend`]) the node runs on the backend whose memory is
    /// `device`, the crossing copied in before it, and the nodes after it
    /// follow it there; a single backend runs it as a `cont`.
    pub fn to_device(&self, a: TensorId, device: Device) -> Result<TensorId> {
        let l = self.layout(a)?;
        self.new_result(Op::Transfer { src: a, to: device }, l.dtype, l.ne)
    }
}
