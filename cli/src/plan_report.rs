//! `rgml plan`: for each built-in graph, the naive sum of its buffers, the
//! planned buffer and the lower bound, plus how long planning took.

use std::time::Instant;

use rgml::{Allocator, Context, CpuRules, Graph, PlanStats};

use rgml_models::mlp::Mlp;

/// One graph's figures.
pub struct Report {
    /// `mlp n=32`, …
    pub name: String,
    /// Sizes.
    pub stats: PlanStats,
    /// Nodes in the graph.
    pub nodes: usize,
    /// Seconds to plan it.
    pub plan_s: f64,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: naive {} B, planned {} B, lower bound {} B ({} nodes, planned in {:.3} ms; {} B of leaf data read in place)",
            self.name,
            self.stats.naive,
            self.stats.planned,
            self.stats.lower_bound,
            self.nodes,
            self.plan_s * 1e3,
            self.stats.external
        )
    }
}

fn report(name: String, ctx: &Context, graph: &Graph) -> Result<Report, String> {
    let alloc = Allocator::new(CpuRules);
    let t = Instant::now();
    let plan = alloc.plan(ctx, graph).map_err(|e| e.to_string())?;
    let plan_s = t.elapsed().as_secs_f64();
    plan.verify(ctx, graph, &CpuRules).map_err(|e| e.to_string())?;
    Ok(Report { name, stats: plan.stats(), nodes: graph.nodes().len(), plan_s })
}

/// The MLP of 4096 → 4096 → 4096 on `n` tokens.
pub fn mlp(n: i64) -> Result<Report, String> {
    let m = Mlp::build(4096, 4096, n).map_err(|e| e.to_string())?;
    report(format!("mlp n={n}"), &m.ctx, &m.graph)
}

/// A chain of `len` adds on 16 floats (planning time at scale).
pub fn chain(len: usize) -> Result<Report, String> {
    let w = crate::workloads::add_chain(len, 16).map_err(|e| e.to_string())?;
    report(format!("chain of {len} adds"), &w.ctx, &w.graph)
}

/// Every built-in graph.
pub fn all() -> Result<Vec<Report>, String> {
    Ok(vec![mlp(32)?, mlp(512)?, chain(100_000)?])
}
