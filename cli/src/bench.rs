//! `rgml bench`: times the standard workloads and reports each as GB/s and as
//! a ratio to a 64 MiB memcpy (a 64 MiB read for `mul_mat`) timed in the same
//! run: workload and baseline are timed alternately for [`ROUNDS`] rounds, and
//! the ratio is the median of the rounds' ratios, so that the machine's speed
//! drifting between seconds moves both sides of a ratio alike. Bytes are read
//! plus written, for the workloads and for memcpy alike.

use std::time::Instant;

use crate::workloads::{self, Workload};
use rgml::CpuBackend;
use rgml_models::model::kv::KvType;
use rgml_models::model::{argmax, LoadOptions, Model};
use rgml_models::synthetic::{synthetic_llama, LlamaDims};

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
    /// The baseline (memcpy: read + write bytes; or the read), median over the rounds.
    pub memcpy_gbps: f64,
    /// The median over the rounds of the round's GB/s ÷ its baseline.
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

/// The column headings of [`Row::table_line`].
pub fn table_header() -> String {
    format!(
        "{:<14} {:<52} {:>3} {:>11} {:>9} {:>9} {:>7} {:>9} {:>9}",
        "name", "workload", "thr", "median", "GB/s", "base", "ratio", "us/node", "GFLOP/s"
    )
}

impl Row {
    /// One line of the table under [`table_header`].
    pub fn table_line(&self) -> String {
        format!(
            "{:<14} {:<52} {:>3} {:>9.3}ms {:>9.2} {:>9.2} {:>7.2} {:>9} {:>9}",
            self.name,
            self.what,
            self.threads,
            self.median_s * 1e3,
            self.gbps,
            self.memcpy_gbps,
            self.ratio,
            self.us_per_node.map_or(String::new(), |u| format!("{u:.3}")),
            self.gflops.map_or(String::new(), |g| format!("{g:.1}"))
        )
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Timed runs of a workload fill at least this long, so short workloads get
/// enough runs for a stable median on a shared machine.
const MIN_TIMED_S: f64 = 0.25;

/// Median seconds of at least `reps` runs of `f` after one warm-up run (more
/// runs, up to 1000, when `reps` would take under a quarter of a second).
pub fn time<E>(reps: usize, mut f: impl FnMut() -> Result<(), E>) -> Result<f64, E> {
    let s = Instant::now();
    f()?;
    let warm = s.elapsed().as_secs_f64().max(1e-7);
    let reps = reps.max((MIN_TIMED_S / warm).ceil().min(1000.0) as usize).max(1);
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        let s = Instant::now();
        f()?;
        t.push(s.elapsed().as_secs_f64());
    }
    Ok(median(t))
}

/// Rounds of alternate workload and baseline timings behind each row.
pub const ROUNDS: usize = 3;

/// [`ROUNDS`] rounds of: `work` timed ([`time`] with `reps`), then `base`
/// (a baseline in GB/s); returns the median work seconds, the median
/// baseline, and the median over rounds of `bytes / work seconds / 1e9 ÷ baseline`.
fn paired<E>(
    reps: usize,
    bytes: u64,
    mut work: impl FnMut() -> Result<(), E>,
    mut base: impl FnMut() -> f64,
) -> Result<(f64, f64, f64), E> {
    let (mut secs, mut bases, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let s = time(reps, &mut work)?;
        let b = base();
        ratios.push(bytes as f64 / s / 1e9 / b);
        secs.push(s);
        bases.push(b);
    }
    Ok((median(secs), median(bases), median(ratios)))
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
    let bytes = w.bytes().map_err(|e| e.to_string())?;
    let (median_s, memcpy, ratio) =
        paired(reps, bytes, || cpu.compute(&w.ctx, &w.graph, &mut st), || memcpy_gbps(reps))
            .map_err(|e| e.to_string())?;
    Ok(Row {
        name: w.name.to_string(),
        what: w.what.clone(),
        threads: cpu.threads(),
        median_s,
        bytes,
        gbps: bytes as f64 / median_s / 1e9,
        memcpy_gbps: memcpy,
        ratio,
        us_per_node: None,
        gflops: None,
    })
}

/// Bytes of the buffer that measures the machine's read bandwidth, and of the weights of
/// the streaming rows: `mib` MiB when given, else four times the last cache (so that nearly
/// every byte comes from memory), at least 256 MiB, at most 2 GiB.
pub fn stream_bytes(mib: Option<usize>) -> usize {
    match mib {
        Some(m) => m.max(1) << 20,
        None => rgml::CpuInfo::get().l3_bytes.unwrap_or(64 << 20).saturating_mul(4).clamp(256 << 20, 2 << 30),
    }
}

/// The memory [`read_buffer_gbps`] reads: a host buffer as the backend allocates its own
/// (repacked weights among them), so on huge pages where the system gives them. A
/// heap vector's 4 KiB pages read slower (Zen 4, 2 threads, 256 MiB: 40-46 against
/// 50-56 GB/s), which would flatter every ratio to it.
pub struct ReadBuffer(rgml::HostBuffer);

impl ReadBuffer {
    /// The buffer's values.
    pub fn values(&self) -> &[f32] {
        bytemuck::cast_slice(self.0.as_bytes())
    }
}

/// A [`ReadBuffer`] of `bytes` bytes (whole f32), written once so its pages exist.
///
/// # Errors
/// The system refused the memory.
pub fn read_buffer(bytes: usize) -> Result<ReadBuffer, String> {
    let mut b = rgml::HostBuffer::zeroed(bytes / 4 * 4)
        .map_err(|_| format!("out of memory: the {} MiB read buffer could not be allocated", bytes >> 20))?;
    for (i, v) in b.as_bytes_mut().chunks_exact_mut(4).enumerate() {
        v.copy_from_slice(&((i % 1024) as f32).to_le_bytes());
    }
    Ok(ReadBuffer(b))
}

/// GB/s of reading `v` once on `cpu`'s pool ([`workloads::parallel_sum`]), the median of
/// `reps` reads: with `v` larger than the caches, the machine's read bandwidth on these threads.
pub fn read_buffer_gbps(cpu: &CpuBackend, v: &[f32], reps: usize) -> f64 {
    let t = time::<()>(reps, || {
        std::hint::black_box(workloads::parallel_sum(cpu, v));
        Ok(())
    })
    .unwrap_or(f64::NAN);
    std::mem::size_of_val(v) as f64 / t / 1e9
}

/// W4/W5: one `mul_mat`; GFLOP/s, and weight GB/s against the read bandwidth.
fn run_matmul(cpu: &CpuBackend, w: &Workload, reps: usize) -> Result<Row, String> {
    // one 64 MiB buffer for every round's read
    let buf = read_buffer(MEMCPY_BYTES)?;
    run_weights(cpu, w, reps, || read_buffer_gbps(cpu, buf.values(), reps))
}

/// A workload of products: GFLOP/s, and weight GB/s against `read` (GB/s), alternating.
fn run_weights(cpu: &CpuBackend, w: &Workload, reps: usize, read: impl FnMut() -> f64) -> Result<Row, String> {
    let e = |e: rgml::Error| e.to_string();
    let plan = rgml::Plan::naive(&w.ctx, &w.graph, rgml::CPU_ALIGNMENT).map_err(e)?;
    let mut st = cpu.alloc(&w.ctx, &w.graph, plan).map_err(e)?;
    let wbytes = w.weight_bytes().map_err(e)?;
    let (median_s, read, ratio) = paired(reps, wbytes, || cpu.compute(&w.ctx, &w.graph, &mut st), read).map_err(e)?;
    Ok(Row {
        name: w.name.to_string(),
        what: w.what.clone(),
        threads: cpu.threads(),
        median_s,
        bytes: wbytes,
        gbps: wbytes as f64 / median_s / 1e9,
        memcpy_gbps: read,
        ratio,
        us_per_node: None,
        gflops: Some(w.flops().map_err(e)? as f64 / median_s / 1e9),
    })
}

/// One `mul_mat` row of the table: `n`×`n` weights of `dt` with `rows` activation rows.
fn product(cpu: &CpuBackend, dt: rgml::DType, (n, rows): (i64, i64), reps: usize, name: String) -> Result<Row, String> {
    let w = workloads::matmul(dt, n, n, rows).map_err(|e| e.to_string())?;
    let mut r = run_matmul(cpu, &w, reps.min(5))?;
    r.name = name;
    Ok(r)
}

/// The product of `n`×`n` weights with `rows` activation rows for each of
/// `types`, as the W5 rows (`W5-{type}-n{rows}`).
pub fn run_matvecs(
    threads: usize,
    (n, rows_n): (i64, i64),
    reps: usize,
    types: &[rgml::DType],
    mut each: impl FnMut(&Row),
) -> Result<Vec<Row>, String> {
    let cpu = CpuBackend::new(threads).map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for &dt in types {
        if n % dt.block_size() as i64 != 0 {
            return Err(format!("--n {n} is not whole {dt} blocks of {}", dt.block_size()));
        }
        let r = product(&cpu, dt, (n, rows_n), reps, format!("W5-{dt}-n{rows_n}"))?;
        each(&r);
        rows.push(r);
    }
    Ok(rows)
}

/// The weight types of the model files people run, for the streaming rows.
pub const STREAM_TYPES: [rgml::DType; 9] = {
    use rgml::DType::*;
    [F16, BF16, Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K]
};

/// The streaming rows (`MV-stream-{type}`, with `repack` `…-rp`, with more than one
/// activation row `…-n{rows}`): products of `rows` activation rows with distinct
/// `n`×`n` weight matrices of each type, `total` bytes of them in all
/// ([`stream_bytes`]: four times the last cache), so that a decode step's weights come
/// from memory as a real model's do; weight GB/s against a parallel read of as many bytes on the same threads,
/// timed alternately. The mark for every type is 0.9 of the read.
pub fn run_stream(
    threads: usize,
    (n, rows_n, total): (i64, i64, usize),
    reps: usize,
    types: &[rgml::DType],
    repack: bool,
    mut each: impl FnMut(&Row),
) -> Result<Vec<Row>, String> {
    let e = |e: rgml::Error| e.to_string();
    let cpu = CpuBackend::new(threads).map_err(e)?.with_repacked_weights(repack);
    let mut rows = Vec::new();
    for &dt in types {
        if n % dt.block_size() as i64 != 0 {
            return Err(format!("--n {n} is not whole {dt} blocks of {}", dt.block_size()));
        }
        let one = dt.row_size(n).unwrap_or(0) * n as usize;
        let count = total.div_ceil(one.max(1));
        let w = workloads::matvecs(dt, n, n, (count, rows_n), repack).map_err(e)?;
        let buf = read_buffer(w.weight_bytes().map_err(e)? as usize)?;
        let mut r = run_weights(&cpu, &w, reps, || read_buffer_gbps(&cpu, buf.values(), reps))?;
        let batch = if rows_n > 1 { format!("-n{rows_n}") } else { String::new() };
        r.name = format!("MV-stream-{dt}{}{batch}", if repack { "-rp" } else { "" });
        r.what = format!("{} ({} MiB; against reading as many bytes)", w.what, r.bytes >> 20);
        each(&r);
        rows.push(r);
    }
    Ok(rows)
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
    for (dt, ns) in [
        (rgml::DType::F32, &[1, 16, 128, 512][..]),
        (rgml::DType::Q4_0, &[1, 128]),
        (rgml::DType::Q8_0, &[1, 128]),
        (rgml::DType::Q4_K, &[1]),
    ] {
        for &nt in ns.iter().filter(|_| n % dt.block_size() as i64 == 0) {
            let name = if dt == rgml::DType::F32 { format!("W4-n{nt}") } else { format!("W5-{dt}-n{nt}") };
            let r = product(&cpu, dt, (n, nt), reps, name)?;
            each(&r);
            rows.push(r);
        }
    }
    // weights mapped from a file and repacked once (`with_repacked_weights`)
    let repacking = CpuBackend::new(threads).map_err(|e| e.to_string())?.with_repacked_weights(true);
    let rp = [(rgml::DType::Q4_0, 1), (rgml::DType::Q4_0, 128), (rgml::DType::Q4_K, 1)];
    // (Q4_K needs n to be whole 256-value super-blocks)
    for (dt, nt) in rp.into_iter().filter(|(dt, _)| n % dt.block_size() as i64 == 0) {
        let w = workloads::matmul_mapped(dt, n, n, nt).map_err(|e| e.to_string())?;
        let mut r = run_matmul(&repacking, &w, reps.min(5))?;
        r.name = format!("W5-{dt}-n{nt}-rp");
        r.what = format!("{}, repacked", w.what);
        each(&r);
        rows.push(r);
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

/// Prompt and generation speed of a synthetic llama (random weights).
pub struct LlamaSpeed {
    /// What was run.
    pub what: String,
    /// Prompt tokens per second (one batch).
    pub prompt_tps: f64,
    /// Generated tokens per second (one token per step).
    pub gen_tps: f64,
}

/// Builds a synthetic llama (n_embd 2048, 4 layers, n_ff 5632, vocab 32000) of
/// `dtype` weights in a temporary file, then times a `prompt`-token prompt and
/// `gen` generated tokens on `threads` threads, with repacked weights if
/// `repack` ([`rgml::CpuBackend::with_repacked_weights`]). See [`llama_speed_on`].
pub fn llama_speed(
    dtype: rgml::DType,
    threads: usize,
    prompt: usize,
    gen: usize,
    repack: bool,
    kv: KvType,
) -> Result<LlamaSpeed, String> {
    let cpu = CpuBackend::new(threads).map_err(|e| e.to_string())?.with_repacked_weights(repack);
    let how = format!("{}{} threads", if repack { "repacked, " } else { "" }, m_threads(threads));
    llama_speed_on(cpu, &how, dtype, LlamaDims::BENCH, (prompt, gen), kv)
}

/// Builds a synthetic llama of shape `dims` and `dtype` weights in a
/// temporary file, loads it on `backend` with a `kv` cache (`how` says how, for the
/// row's text), then times a `prompt`-token prompt (one batch) and `gen` generated
/// tokens (one per step, through the KV cache; each step computes only the
/// last position's logits, as llama.cpp does). A one-token run first (then
/// the cache is reset) leaves the load-time work (the mapping's first touch,
/// repacking, kernel compilation) out of the timings. The file is deleted.
pub fn llama_speed_on<B: rgml::Backend>(
    backend: B,
    how: &str,
    dtype: rgml::DType,
    dims: LlamaDims,
    (prompt, gen): (usize, usize),
    kv: KvType,
) -> Result<LlamaSpeed, String> {
    let e = |e: rgml::Error| e.to_string();
    let path = std::env::temp_dir().join(format!("rgml-synthetic-llama-{}-{dtype}.gguf", std::process::id()));
    let LlamaDims { n_embd, n_layer, n_ff, n_vocab, .. } = dims;
    synthetic_llama(&path, dtype, dims, None).map_err(e)?;
    let result = (|| {
        let opts = LoadOptions { n_ctx: Some(prompt + gen + 1), kv_type: kv, ..Default::default() };
        let mut m = Model::load_with(&path, opts, backend).map_err(e)?;
        m.eval_last(&[1]).map_err(e)?;
        m.reset().map_err(e)?;
        let tokens: Vec<u32> = (0..prompt as u32).map(|i| (i * 7919) % n_vocab as u32).collect();
        let t = Instant::now();
        let mut next = argmax(&m.eval_last(&tokens).map_err(e)?);
        let prompt_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        for _ in 0..gen {
            next = argmax(&m.eval_last(&[next]).map_err(e)?);
        }
        let gen_s = t.elapsed().as_secs_f64();
        Ok(LlamaSpeed {
            what: format!(
                "synthetic llama {dtype}: n_embd {n_embd}, {n_layer} layers, n_ff {n_ff}, vocab {n_vocab}, {} KV cache, {how}",
                kv.dtype()
            ),
            prompt_tps: prompt as f64 / prompt_s,
            gen_tps: gen as f64 / gen_s,
        })
    })();
    std::fs::remove_file(&path).ok();
    result
}

fn m_threads(t: usize) -> usize {
    if t == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        t
    }
}
