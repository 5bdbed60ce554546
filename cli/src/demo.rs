//! `rgml demo`: the seeds' example on a built-in 4096×4096 f32 matrix. Builds
//! transpose, view, cont, a broadcast add and an in-place mul; prints each
//! node's shape, strides and the bytes it moves; runs it and checks the result
//! against a plain loop.

use crate::outln;
use std::time::Instant;

use rgml::{cost, Context, CpuBackend, Graph, TensorId};

/// The sides `--n` may take: a quarter of it is the view's side, and the largest makes a
/// 1 GiB matrix (the demo holds three of that size).
pub const SIDES: std::ops::RangeInclusive<i64> = 4..=16384;

/// Runs the demo with side `n` and `threads` threads; returns false if a check failed.
///
/// # Errors
/// A side outside [`SIDES`], or the backend's error.
pub fn run(n: i64, threads: usize) -> Result<bool, String> {
    if !SIDES.contains(&n) {
        return Err(format!("--n {n} is out of range ({}..={})", SIDES.start(), SIDES.end()));
    }
    let e = |e: rgml::Error| e.to_string();
    let mut ctx = Context::new();
    let nn = (n * n) as usize;
    let xv: Vec<f32> = (0..nn).map(|i| (i % 977) as f32 * 0.25).collect();
    let x = ctx.new_f32(&[n, n], &xv).map_err(e)?;
    ctx.set_name(x, "x").map_err(e)?;
    let bias_v: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let bias = ctx.new_f32(&[n], &bias_v).map_err(e)?;
    ctx.set_name(bias, "bias").map_err(e)?;
    let half = ctx.new_f32(&[1], &[0.5]).map_err(e)?;
    ctx.set_name(half, "half").map_err(e)?;

    let t0 = Instant::now();
    let xt = ctx.transpose(x).map_err(e)?;
    ctx.set_name(xt, "xt = transpose(x)").map_err(e)?;
    let row_bytes = ctx.layout(x).map_err(e)?.nb[1];
    let block = ctx.view_2d(x, n / 4, n / 4, row_bytes, 0).map_err(e)?;
    ctx.set_name(block, "block = view_2d(x)").map_err(e)?;
    let build_views = t0.elapsed();
    let c = ctx.cont(xt).map_err(e)?;
    ctx.set_name(c, "c = cont(xt)").map_err(e)?;
    let y = ctx.add(c, bias).map_err(e)?;
    ctx.set_name(y, "y = c + bias").map_err(e)?;
    let z = ctx.mul_inplace(y, half).map_err(e)?;
    ctx.set_name(z, "y *= 0.5 (inplace)").map_err(e)?;
    let bsum = ctx.sum_rows(block).map_err(e)?;
    ctx.set_name(bsum, "sum_rows(block)").map_err(e)?;

    let graph = Graph::build(&ctx, &[z, bsum]).map_err(e)?;
    outln!("rgml demo: x is a {n}x{n} f32 matrix ({} MiB)\n", (nn * 4) >> 20);
    outln!("{:<22} {:<9} {:<22} {:<32} {:>5} {:>12}", "node", "op", "ne", "nb (bytes)", "view", "bytes moved");
    for &id in graph.leafs().iter().chain(graph.nodes()) {
        let t = ctx.tensor(id).map_err(e)?;
        let l = t.layout();
        let moved = cost::traffic(&ctx, id).map_err(e)?.total();
        outln!(
            "{:<22} {:<9} {:<22} {:<32} {:>5} {:>12}",
            ctx.label(id),
            t.op().name(),
            format!("{:?}", l.ne),
            format!("{:?}", l.nb),
            if t.view_src().is_some() { "yes" } else { "no" },
            moved
        );
    }
    outln!("\nbuilding transpose + view took {:?} (metadata only: independent of size)", build_views);

    let cpu = CpuBackend::new(threads).map_err(e)?;
    let t1 = Instant::now();
    let st = cpu.run(&ctx, &graph).map_err(e)?;
    outln!("computing the graph on {} threads took {:?}\n", cpu.threads(), t1.elapsed());

    let got_y = st.read_f32(&ctx, y).map_err(e)?;
    let got_x = st.read_f32(&ctx, x).map_err(e)?;
    let got_b = st.read_f32(&ctx, bsum).map_err(e)?;
    let n = n as usize;
    let mut ok = true;
    let mut check = |what: &str, pass: bool| {
        outln!("check {:<58} {}", what, if pass { "ok" } else { "FAILED" });
        ok &= pass;
    };
    let y_ok = (0..n).all(|i1| (0..n).all(|i0| got_y[i1 * n + i0] == (xv[i0 * n + i1] + i0 as f32) * 0.5));
    check("y[i1][i0] == (x[i0][i1] + bias[i0]) * 0.5", y_ok);
    check("x is unchanged (only y was written in place)", got_x == xv);
    let b_ok = (0..n / 4).all(|r| {
        let s: f64 = (0..n / 4).map(|c| xv[r * n + c] as f64).sum();
        (got_b[r] as f64 - s).abs() <= 1e-6 * s.abs().max(1.0)
    });
    check("sum_rows(block) == row sums of x's top-left quarter", b_ok);
    let zero_cost =
        [xt, block].iter().all(|&id: &TensorId| cost::traffic(&ctx, id).map(|t| t.total() == 0).unwrap_or(false));
    check("transpose and view move 0 bytes", zero_cost);
    Ok(ok)
}
