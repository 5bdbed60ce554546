//! What a node costs in memory traffic: the bytes a kernel must read and write
//! at least once. Metadata-only ops cost zero, whatever the tensor size.

use crate::context::Context;
use crate::error::Result;
use crate::layout::Layout;
use crate::tensor::{Op, TensorId};

/// Bytes a node reads and writes, counting each logical element once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Bytes read from sources.
    pub read: u64,
    /// Bytes written to the destination.
    pub written: u64,
}

impl Traffic {
    /// Read plus written.
    pub fn total(&self) -> u64 {
        self.read + self.written
    }
}

/// Logical bytes of a tensor: its elements at their type's size (a stride-0
/// broadcast counts each stored element once).
fn stored_bytes(l: &Layout) -> u64 {
    let distinct: i64 = (0..4).map(|i| if l.nb[i] == 0 { 1 } else { l.ne[i] }).product();
    (distinct as u64 / l.dtype.block_size() as u64) * l.dtype.type_size() as u64
}

/// The least traffic of node `id`: zero for leaves and metadata ops; for
/// compute ops, every source element read once and every result element
/// written once (`cpy` does not read its destination).
pub fn traffic(ctx: &Context, id: TensorId) -> Result<Traffic> {
    let t = ctx.tensor(id)?;
    let op = t.op();
    if op == Op::Leaf || op.is_metadata() {
        return Ok(Traffic::default());
    }
    let srcs = if op == Op::Cpy { &t.src()[..1] } else { t.src() };
    let mut read = 0;
    for &s in srcs {
        read += stored_bytes(ctx.tensor(s)?.layout());
    }
    if op == Op::SetRows {
        // the new rows and the indices; the destination is not read
        let (rows, idx) = (ctx.tensor(t.src()[1])?.layout(), ctx.tensor(t.src()[2])?.layout());
        let written = rows.nrows() as u64 * t.layout().row_size() as u64;
        return Ok(Traffic { read: stored_bytes(rows) + stored_bytes(idx), written });
    }
    if op == Op::GetRows {
        // the picked rows and the indices, not the whole table
        let (a, idx) = (ctx.tensor(t.src()[0])?.layout(), ctx.tensor(t.src()[1])?.layout());
        read = stored_bytes(idx) + t.layout().nrows() as u64 * a.row_size() as u64;
    }
    Ok(Traffic { read, written: stored_bytes(t.layout()) })
}

/// Floating-point operations of node `id` (2·M·N·K for `mul_mat`, one per
/// element for elementwise ops, 0 for copies and views).
pub fn flops(ctx: &Context, id: TensorId) -> Result<u64> {
    let t = ctx.tensor(id)?;
    let n = t.layout().nelements() as u64;
    Ok(match t.op() {
        Op::MulMat => 2 * n * ctx.tensor(t.src()[0])?.layout().ne[0] as u64,
        Op::Binary(_) | Op::Scale(_) | Op::Unary(_) => n,
        Op::SumRows => ctx.tensor(t.src()[0])?.layout().nelements() as u64,
        Op::RmsNorm { .. } => 3 * n,
        Op::Norm { .. } => 5 * n,
        Op::SoftMax { .. } => 5 * n,
        Op::Rope(p) => 6 * (t.layout().nrows() as u64) * (p.n_dims.max(0) as u64 / 2),
        _ => 0,
    })
}
