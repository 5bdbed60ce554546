//! What a node costs: the bytes a kernel must read and write at least once,
//! and its floating-point operations ([`Op::traffic`], [`Op::flops`]).
//! Metadata-only ops cost zero, whatever the tensor size.

use crate::context::Context;
use crate::error::Result;
use crate::tensor::TensorId;

#[cfg(doc)]
use crate::op::Op;
pub use crate::op::Traffic;

/// The least traffic of node `id` ([`Op::traffic`]).
pub fn traffic(ctx: &Context, id: TensorId) -> Result<Traffic> {
    let t = ctx.tensor(id)?;
    t.op().traffic(|s| ctx.layout(s), t.layout())
}

/// Floating-point operations of node `id` ([`Op::flops`]).
pub fn flops(ctx: &Context, id: TensorId) -> Result<u64> {
    let t = ctx.tensor(id)?;
    t.op().flops(|s| ctx.layout(s), t.layout())
}
