//! `rgml bench`: times the standard workloads and reports each as GB/s and as
//! a ratio to a 64 MiB memcpy timed in the same run, right after it. Bytes are
//! read plus written, for the workloads and for memcpy alike.

use std::time::Instant;

use rgml::workloads::{self, Workload};
use rgml::CpuBackend;

/// Bytes of the memcpy baseline.
pub const MEMCPY_BYTES: usize = 64 << 20;

/// One workload's figures.
pub struct Row {
    /// W1, W2a, …
    pub name: String,
    /// What it computes.
    pub what: String,
    /// Worker threads.
    pub threads: usize,
    /// Median seconds per run.
    pub median_s: f64,
    /// Bytes read + written per run.
    pub bytes: u64,
    /// bytes / median_s / 1e9.
    pub gbps: f64,
    /// The memcpy baseline timed right after (read + write bytes).
    pub memcpy_gbps: f64,
    /// gbps / memcpy_gbps.
    pub ratio: f64,
    /// Microseconds per node (the overhead workload).
    pub us_per_node: Option<f64>,
    /// GFLOP/s (matrix products).
    pub gflops: Option<f64>,
}

impl Row {
    /// One JSON object.
    pub fn json(&self) -> String {
        serde_json::json!({
            "name": self.name, "what": self.what, "threads": self.threads,
            "median_s": self.median_s, "bytes": self.bytes, "gbps": self.gbps,
            "memcpy_gbps": self.memcpy_gbps, "ratio": self.ratio, "us_per_node": self.us_per_node,
            "gflops": self.gflops,
        })
        .to_string()
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median seconds of `reps` runs of `f` after one warm-up run.
pub fn time<E>(reps: usize, mut f: impl FnMut() -> Result<(), E>) -> Result<f64, E> {
    f()?;
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        let s = Instant::now();
        f()?;
        t.push(s.elapsed().as_secs_f64());
    }
    Ok(median(t))
}

/// GB/s (read + write) of copying `MEMCPY_BYTES` between two warm buffers.
pub fn memcpy_gbps(reps: usize) -> f64 {
    let src = vec![1u8; MEMCPY_BYTES];
    let mut dst = vec![0u8; MEMCPY_BYTES];
    let t = time::<()>(reps, || {
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
        Ok(())
    })
    .unwrap_or(f64::NAN);
    2.0 * MEMCPY_BYTES as f64 / t / 1e9
}

fn run_one(cpu: &CpuBackend, w: &Workload, reps: usize) -> Result<Row, String> {
    let plan = rgml::Plan::naive(&w.ctx, &w.graph, rgml::CPU_ALIGNMENT).map_err(|e| e.to_string())?;
    let mut st = cpu.alloc(&w.ctx, &w.graph, plan).map_err(|e| e.to_string())?;
    let median_s = time(reps, || cpu.compute(&w.ctx, &w.graph, &mut st)).map_err(|e| e.to_string())?;
    let memcpy = memcpy_gbps(reps);
    let bytes = w.bytes().map_err(|e| e.to_string())?;
    let gbps = bytes as f64 / median_s / 1e9;
    Ok(Row {
        name: w.name.to_string(),
        what: w.what.clone(),
        threads: cpu.threads(),
        median_s,
        bytes,
        gbps,
        memcpy_gbps: memcpy,
        ratio: gbps / memcpy,
        us_per_node: None,
        gflops: None,
    })
}

/// GB/s of reading a 64 MiB f32 buffer (a parallel sum on `cpu`'s threads).
pub fn read_gbps(cpu: &CpuBackend, reps: usize) -> f64 {
    let v: Vec<f32> = (0..(MEMCPY_BYTES / 4)).map(|i| i as f32).collect();
    let threads = cpu.threads().max(1);
    let t = time::<()>(reps, || {
        let chunk = v.len().div_ceil(threads);
        let s: f32 = std::thread::scope(|sc| {
            let hs: Vec<_> = v.chunks(chunk).map(|c| sc.spawn(move || sum16(c))).collect();
            hs.into_iter().map(|h| h.join().unwrap_or(0.0)).sum()
        });
        std::hint::black_box(s);
        Ok(())
    })
    .unwrap_or(f64::NAN);
    MEMCPY_BYTES as f64 / t / 1e9
}

/// Sum with 16 independent accumulators, so it runs at memory speed.
fn sum16(v: &[f32]) -> f32 {
    let mut acc = [0f32; 16];
    let chunks = v.chunks_exact(16);
    let rest: f32 = chunks.remainder().iter().sum();
    for c in chunks {
        for j in 0..16 {
            acc[j] += c[j];
        }
    }
    acc.iter().sum::<f32>() + rest
}

/// W4/W5: one `mul_mat`; GFLOP/s, and weight GB/s against the read bandwidth.
fn run_matmul(cpu: &CpuBackend, w: &Workload, reps: usize) -> Result<Row, String> {
    let e = |e: rgml::Error| e.to_string();
    let plan = rgml::Plan::naive(&w.ctx, &w.graph, rgml::CPU_ALIGNMENT).map_err(e)?;
    let mut st = cpu.alloc(&w.ctx, &w.graph, plan).map_err(e)?;
    let median_s = time(reps, || cpu.compute(&w.ctx, &w.graph, &mut st)).map_err(e)?;
    let read = read_gbps(cpu, reps);
    let wbytes = w.weight_bytes().map_err(e)?;
    let gbps = wbytes as f64 / median_s / 1e9;
    Ok(Row {
        name: w.name.to_string(),
        what: w.what.clone(),
        threads: cpu.threads(),
        median_s,
        bytes: wbytes,
        gbps,
        memcpy_gbps: read,
        ratio: gbps / read,
        us_per_node: None,
        gflops: Some(w.flops().map_err(e)? as f64 / median_s / 1e9),
    })
}

/// Runs every workload: the memory-bound ones at size `n` with `threads`
/// threads, and the overhead chain (1000 adds of 16 floats) with 1 and 2 threads.
pub fn run(threads: usize, n: i64, reps: usize, mut each: impl FnMut(&Row)) -> Result<Vec<Row>, String> {
    let cpu = CpuBackend::new(threads).map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for w in workloads::memory_bound(n).map_err(|e| e.to_string())? {
        let r = run_one(&cpu, &w, reps)?;
        each(&r);
        rows.push(r);
    }
    for (dt, ns) in
        [(rgml::DType::F32, &[1, 16, 128, 512][..]), (rgml::DType::Q4_0, &[1, 128]), (rgml::DType::Q8_0, &[1, 128])]
    {
        for &nt in ns {
            let w = workloads::matmul(dt, n, n, nt).map_err(|e| e.to_string())?;
            let r = run_matmul(&cpu, &w, reps.min(5))?;
            each(&r);
            rows.push(r);
        }
    }
    let chain = workloads::add_chain(1000, 16).map_err(|e| e.to_string())?;
    for t in [1, 2] {
        let cpu = CpuBackend::new(t).map_err(|e| e.to_string())?;
        let mut r = run_one(&cpu, &chain, reps.max(50))?;
        r.name = format!("W6-t{t}");
        r.us_per_node = Some(r.median_s * 1e6 / chain.nodes() as f64);
        each(&r);
        rows.push(r);
    }
    Ok(rows)
}
