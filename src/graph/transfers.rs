//! [`Graph::transfers`]: the copies between memories a graph asks for, with
//! their price, where each tensor lives by the rule PyTorch's users know: a
//! leaf's data is in host memory, a `to_device` node's copy on its device,
//! and any other result where its first computed operand is (host memory
//! for a node of leaves alone); and [`Transfer`], the price of one copy.

use super::Graph;
use crate::context::Context;
use crate::device::Device;
use crate::error::Result;
use crate::id::IdMap;
use std::fmt;

impl Graph {
    /// Every transfer node of the graph, in execution order, with the bytes
    /// it moves and where from and to (see the module docs). `pinned` says
    /// how a split run would stage it: through pinned memory when either
    /// side is a CUDA device (whose backend has some), else pageable.
    ///
    /// # Errors
    /// A graph of another context.
    pub fn transfers(&self, ctx: &Context) -> Result<Vec<Transfer>> {
        self.check_context(ctx)?;
        let mut at: IdMap<Device> = IdMap::default();
        let mut out = Vec::new();
        for &id in &self.nodes {
            let t = ctx.tensor(id)?;
            let mut from = Device::Cpu;
            for &s in t.src() {
                if let Some(&d) = at.get(&ctx.storage_root(s)?) {
                    from = d;
                    break;
                }
            }
            let here = t.view_src().map_or(from, |r| at.get(&r).copied().unwrap_or(from));
            let here = match t.op().transfer_to() {
                Some(to) => {
                    let pinned = [from, to].iter().any(|d| matches!(d, Device::Cuda(_)));
                    out.push(Transfer { tensor: id, bytes: t.layout().nbytes() as u64, from, to, pinned });
                    to
                }
                None => here,
            };
            at.insert(id, here);
        }
        Ok(out)
    }
}

/// One copy of a tensor's bytes between devices: its price.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// What crosses (a transfer node, or the root a split run copies).
    pub tensor: crate::tensor::TensorId,
    /// Bytes copied.
    pub bytes: u64,
    /// Where the bytes were.
    pub from: Device,
    /// Where they go.
    pub to: Device,
    /// Whether the host side is page-locked memory (DMA straight from it;
    /// pageable memory is staged by the driver at a fraction of the speed).
    pub pinned: bool,
}

impl Transfer {
    /// `h2d`, `d2h`, `d2d` (between two devices) or `none` (same memory).
    pub fn direction(&self) -> &'static str {
        match (self.from, self.to) {
            (a, b) if a == b => "none",
            (Device::Cpu, _) => "h2d",
            (_, Device::Cpu) => "d2h",
            _ => "d2d",
        }
    }
}

impl fmt::Display for Transfer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} B {}→{} ({})",
            self.direction(),
            self.bytes,
            self.from,
            self.to,
            if self.pinned { "pinned" } else { "pageable" }
        )
    }
}
