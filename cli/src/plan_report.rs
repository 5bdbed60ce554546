//! `rgml plan`: for each built-in graph, the naive sum of its buffers, the
//! planned buffer and the lower bound, plus how long planning took, and the
//! copies between devices the graph asks for (`to_device` nodes) with their bytes.

use std::time::Instant;

use rgml::{Allocator, Context, CpuRules, Device, Graph, PlanStats, Transfer};

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
    /// Its transfer nodes, priced.
    pub transfers: Vec<Transfer>,
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
        )?;
        for t in &self.transfers {
            write!(f, "\n  transfer: {t}")?;
        }
        Ok(())
    }
}

fn report(name: String, ctx: &Context, graph: &Graph) -> Result<Report, String> {
    let alloc = Allocator::new(CpuRules);
    let t = Instant::now();
    let plan = alloc.plan(ctx, graph).map_err(|e| e.to_string())?;
    let plan_s = t.elapsed().as_secs_f64();
    plan.verify(ctx, graph, &CpuRules).map_err(|e| e.to_string())?;
    let transfers = graph.transfers(ctx).map_err(|e| e.to_string())?;
    Ok(Report { name, stats: plan.stats(), nodes: graph.nodes().len(), plan_s, transfers })
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

/// A training step of a 4096 → 4096 → 10 ReLU classifier on `n` rows (forward,
/// backward and AdamW in one graph, shapes only), and how much of the forward pass
/// the backward pass keeps alive: the forward results gradient nodes read.
pub fn train_step(n: i64) -> Result<(Report, String), String> {
    let e = |e: rgml::Error| e.to_string();
    let mut ctx = Context::new_no_alloc();
    let x = ctx.new_tensor(rgml::DType::F32, &[4096, n]).map_err(e)?;
    let labels = ctx.new_tensor(rgml::DType::F32, &[10, n]).map_err(e)?;
    let shapes = [[4096, 4096], [4096, 1], [4096, 10], [10, 1]];
    let params: Vec<_> =
        shapes.iter().map(|ne| ctx.new_tensor(rgml::DType::F32, ne)).collect::<Result<_, _>>().map_err(e)?;
    for &t in params.iter().chain([&x, &labels]) {
        ctx.set_input(t).map_err(e)?;
    }
    let logits = rgml::train::mlp(&ctx, x, &params).map_err(e)?;
    let loss = ctx.cross_entropy_loss(logits, labels).map_err(e)?;
    let forward = Graph::build(&ctx, &[loss]).map_err(e)?;
    let grads = ctx.backward(loss, &params).map_err(e)?;
    let hyper = ctx.new_tensor(rgml::DType::F32, &[8]).map_err(e)?;
    ctx.set_input(hyper).map_err(e)?;
    let mut steps = vec![loss];
    for &p in &params {
        let ne = ctx.layout(p).map_err(e)?.ne;
        let (m, v) =
            (ctx.new_tensor(rgml::DType::F32, &ne).map_err(e)?, ctx.new_tensor(rgml::DType::F32, &ne).map_err(e)?);
        for t in [m, v] {
            ctx.set_input(t).map_err(e)?;
        }
        let g = grads.get(p).ok_or("a parameter without a gradient")?;
        steps.push(ctx.opt_step_adamw(p, g, m, v, hyper).map_err(e)?);
    }
    let graph = Graph::build(&ctx, &steps).map_err(e)?;
    // forward results (built up to the loss) that a later node of the step reads
    let kept: std::collections::BTreeSet<rgml::TensorId> = graph
        .nodes()
        .iter()
        .filter(|id| id.index() > loss.index())
        .flat_map(|&id| ctx.tensor(id).map(|t| t.src().to_vec()).unwrap_or_default())
        .filter(|s| s.index() <= loss.index() && ctx.tensor(*s).is_ok_and(|t| t.op().is_compute()))
        .collect();
    let kept_bytes: usize = kept.iter().filter_map(|&s| ctx.layout(s).ok()).map(|l| l.nbytes()).sum();
    let fwd = report(format!("mlp 4096-4096-10 forward n={n}"), &ctx, &forward)?;
    let step = report(format!("train step (forward + backward + AdamW) n={n}"), &ctx, &graph)?;
    let note = format!(
        "  kept for backward: {kept_bytes} B in {} forward results; forward alone plans {} B",
        kept.len(),
        fwd.stats.planned
    );
    Ok((step, note))
}

/// The seeds' `.to("cuda")`: a 4096×4096 F32 tensor (64 MiB) moved to the
/// GPU, scaled there and moved back (shapes only: planned, not run).
pub fn round_trip() -> Result<Report, String> {
    let e = |e: rgml::Error| e.to_string();
    let mut ctx = Context::new_no_alloc();
    let x = ctx.new_tensor(rgml::DType::F32, &[4096, 4096]).map_err(e)?;
    ctx.set_input(x).map_err(e)?;
    let on_gpu = ctx.to_device(x, Device::Cuda(0)).map_err(e)?;
    let y = ctx.scale(on_gpu, 2.0).map_err(e)?;
    let back = ctx.to_device(y, Device::Cpu).map_err(e)?;
    ctx.set_output(back).map_err(e)?;
    let graph = Graph::build(&ctx, &[back]).map_err(e)?;
    report("64 MiB to cuda:0, scaled, back".into(), &ctx, &graph)
}

/// Every built-in graph.
pub fn all() -> Result<Vec<Report>, String> {
    Ok(vec![mlp(32)?, mlp(512)?, chain(100_000)?, round_trip()?])
}
