//! Quick `mul_mat` throughput harness: `cargo run -p rgml-models --release --example
//! matmul_gflops -- [threads] [n] [reps] [types...]` (defaults: 2 threads,
//! N=128, 7 repetitions, Q4_0 Q4_K Q5_K Q6_K) on 4096 × 4096 weights; prints
//! the median and best GFLOP/s per type (the machine may be shared: the best
//! of the runs is the less noisy figure).

use std::time::Instant;

use rgml::{CpuBackend, DType, Plan, CPU_ALIGNMENT};
use rgml_cli::workloads;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let threads: usize = args.first().map_or(Ok(2), |s| s.parse())?;
    let n: i64 = args.get(1).map_or(Ok(128), |s| s.parse())?;
    let reps: usize = args.get(2).map_or(Ok(7), |s| s.parse())?;
    let names: Vec<&str> = if args.len() > 3 {
        args[3..].iter().map(String::as_str).collect()
    } else {
        vec!["q4_0", "q4_K", "q5_K", "q6_K"]
    };
    let cpu = CpuBackend::new(threads)?;
    for name in names {
        let dt = DType::from_name(name).ok_or_else(|| format!("unknown type {name}"))?;
        let w = workloads::matmul(dt, 4096, 4096, n)?;
        let plan = Plan::naive(&w.ctx, &w.graph, CPU_ALIGNMENT)?;
        let mut st = cpu.alloc(&w.ctx, &w.graph, plan)?;
        cpu.compute(&w.ctx, &w.graph, &mut st)?;
        let mut t: Vec<f64> = (0..reps)
            .map(|_| {
                let s = Instant::now();
                cpu.compute(&w.ctx, &w.graph, &mut st).map(|_| s.elapsed().as_secs_f64())
            })
            .collect::<Result<_, _>>()?;
        t.sort_by(f64::total_cmp);
        let flops = w.flops()? as f64;
        println!(
            "{name:>5} N={n} threads={threads}: median {:7.1} GFLOP/s, best {:7.1} GFLOP/s",
            flops / t[reps / 2] / 1e9,
            flops / t[0] / 1e9
        );
    }
    Ok(())
}
