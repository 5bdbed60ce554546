//! `rgml bench --backend cuda`: the standard workloads at sizes that dwarf the
//! H200's 60 MB L2, on one CUDA device, against a device-to-device copy timed
//! in the same run (and again right after each workload).
//!
//! Every graph is built once, planned with `Allocator::new(CudaRules)` and
//! allocated once (its leaves are uploaded then, outside the timing). A timed
//! run is one [`CudaBackend::compute`], which returns after synchronizing the
//! stream; the copy is one `cuMemcpyDtoDAsync` followed by a stream
//! synchronize. Both are timed by the wall clock, the median of `reps` runs
//! after one warm-up run, so a graph's fixed launch and synchronization cost
//! (the `overhead` row) is inside its time.
//!
//! Rows (the names `scripts/torch_bench.py` uses too):
//! - `copy`: the baseline, a device-to-device copy of an `n`×`n` f32 buffer
//!   (1 GiB at n = 16384); GB/s counts read + write bytes.
//! - `H2D`, `H2D-pinned`, `D2H`, `D2H-pinned`: the seeds' `.to(device)` and
//!   back, 64 MiB copied from pageable host memory and from pinned memory to
//!   the device, and from the device into each; GB/s of the bytes moved and the ratio to the device copy (information: PCIe is the
//!   bound, not HBM).
//! - `W1` `cont(transpose(x))`, `W2b` add of a broadcast row, `W3` inplace
//!   mul, `W7` cpy f32→f16, all `n`×`n` f32: GB/s of read + write bytes and
//!   the ratio to the copy (target ≥ 0.85).
//! - `MM-f16-8192`, `MM-bf16-8192`: `mul_mat` with weights and activations
//!   both of that type, 8192³; GFLOP/s (target ≥ 0.9 of `torch.matmul`).
//! - `MV-q4_0-4096`, `MV-q4_0-16384`: Q4_0 matrix-vector products (N=1); one
//!   graph holds several products with distinct weight matrices (32 of 9 MiB,
//!   4 of 144 MiB: over 240 MiB in all, so the weights come from HBM, not L2,
//!   and the graph's fixed cost is shared). GB/s of weight bytes read, and the
//!   ratio to the HBM read bound, taken to be the copy's GB/s (read + write
//!   bytes per second: the rate HBM moves bytes in either direction); target ≥ 0.7.
//! - `MQ-q4_0-4096-512`, `…-dot`: Q4_0 4096² weights against 512 activation
//!   rows (a prompt), through the dequantized F16 GEMM (the default for
//!   batches) and through the dot kernels; GFLOP/s (information).
//! - `W6` (1000 adds of 16 floats) and `overhead` (one such add): µs per node
//!   and per graph run: launch and synchronization cost. `W6-graph` and
//!   `overhead-graph`: the same with CUDA graphs (every timed run a replay).

use crate::workloads::{self, Workload};
use cudarc::driver::CudaSlice;
use rgml::{Allocator, CudaBackend, CudaRules, DType};

use crate::bench::{time, Row};

/// Sizes of the CUDA workloads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// Side of the square f32 matrices of the copy and the memory-bound workloads.
    pub n: i64,
    /// M = K = N of the F16/BF16 matrix products.
    pub mm: i64,
    /// (side, distinct weight matrices per graph) of each Q4_0 matrix-vector row.
    pub matvecs: Vec<(i64, usize)>,
    /// (side, activation rows) of the Q4_0 prompt-sized products.
    pub prefill: (i64, i64),
}

impl Default for Sizes {
    /// 16384² f32 (1 GiB), 8192³ products, Q4_0 matvecs 32 × 4096² and 4 ×
    /// 16384², Q4_0 4096² weights against 512 activation rows.
    fn default() -> Sizes {
        Sizes { n: 16384, mm: 8192, matvecs: vec![(4096, 32), (16384, 4)], prefill: (4096, 512) }
    }
}

/// What a row measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Memory,
    MatMul,
    MatVec,
    Overhead,
}

/// A workload to build when its turn comes (the large ones take GiBs of host memory).
struct Spec {
    name: String,
    kind: Kind,
    build: Box<dyn Fn() -> rgml::Result<Workload>>,
    /// The backend's settings for this row (CUDA graphs, `mul_mat` paths).
    tune: fn(CudaBackend) -> CudaBackend,
}

fn spec(name: impl Into<String>, kind: Kind, build: impl Fn() -> rgml::Result<Workload> + 'static) -> Spec {
    Spec { name: name.into(), kind, build: Box::new(build), tune: |b| b }
}

/// The workloads of one run, in order.
fn specs(s: &Sizes) -> Vec<Spec> {
    let (n, mm) = (s.n, s.mm);
    let mut v = vec![
        spec("W1", Kind::Memory, move || workloads::transpose_copy(n)),
        spec("W2b", Kind::Memory, move || workloads::add_row(n)),
        spec("W3", Kind::Memory, move || workloads::mul_inplace(n)),
        spec("W7", Kind::Memory, move || workloads::cpy_f32_f16(n)),
    ];
    for dt in [DType::F16, DType::BF16] {
        v.push(spec(format!("MM-{dt}-{mm}"), Kind::MatMul, move || workloads::matmul_float(dt, mm, mm, mm)));
    }
    for &(side, count) in &s.matvecs {
        v.push(spec(format!("MV-q4_0-{side}"), Kind::MatVec, move || {
            workloads::matvecs(DType::Q4_0, side, side, (count, 1), false)
        }));
    }
    // a prompt's products: the dequantized F16 GEMM (the default), then the dot kernels
    let (side, rows) = s.prefill;
    let prefill = move || workloads::matmul(DType::Q4_0, side, side, rows);
    v.push(spec(format!("MQ-q4_0-{side}-{rows}"), Kind::MatMul, prefill));
    v.push(Spec {
        tune: |b| b.with_dequant_gemm(None),
        ..spec(format!("MQ-q4_0-{side}-{rows}-dot"), Kind::MatMul, prefill)
    });
    v.push(spec("W6", Kind::Overhead, || workloads::add_chain(1000, 16)));
    v.push(spec("overhead", Kind::Overhead, || workloads::add_chain(1, 16)));
    let graphs: fn(CudaBackend) -> CudaBackend = |b| b.with_graphs(true);
    v.push(Spec { tune: graphs, ..spec("W6-graph", Kind::Overhead, || workloads::add_chain(1000, 16)) });
    v.push(Spec { tune: graphs, ..spec("overhead-graph", Kind::Overhead, || workloads::add_chain(1, 16)) });
    v
}

/// Checks sizes before anything large is allocated.
fn check(s: &Sizes) -> Result<(), String> {
    let ok = |v: i64| (1..=32768).contains(&v);
    if !ok(s.n) || !ok(s.mm) || s.matvecs.iter().any(|&(side, c)| !ok(side) || side % 32 != 0 || c == 0) {
        return Err(format!(
            "bench sizes out of range: n {} and mm {} must be in 1..=32768, matvec sides multiples of 32 \
             in that range with at least one matrix ({:?})",
            s.n, s.mm, s.matvecs
        ));
    }
    Ok(())
}

/// The device-to-device copy baseline: two device buffers kept for the whole run.
struct CopyBase {
    src: CudaSlice<u8>,
    dst: CudaSlice<u8>,
}

impl CopyBase {
    fn new(be: &CudaBackend, bytes: usize) -> Result<CopyBase, String> {
        let s = be.stream();
        let err = |e: cudarc::driver::DriverError| format!("copy baseline: allocating {bytes} bytes: {e:?}");
        Ok(CopyBase { src: s.alloc_zeros::<u8>(bytes).map_err(err)?, dst: s.alloc_zeros::<u8>(bytes).map_err(err)? })
    }

    /// Median seconds of one copy (stream synchronized).
    fn seconds(&mut self, be: &CudaBackend, reps: usize) -> Result<f64, String> {
        let s = be.stream().clone();
        let (src, dst) = (&self.src, &mut self.dst);
        time(reps, || {
            s.memcpy_dtod(src, dst)?;
            s.synchronize()
        })
        .map_err(|e| format!("copy baseline: {e:?}"))
    }

    /// GB/s of read + write bytes.
    fn gbps(&mut self, be: &CudaBackend, reps: usize) -> Result<f64, String> {
        Ok(2.0 * self.src.len() as f64 / self.seconds(be, reps)? / 1e9)
    }
}

/// Median seconds of one `compute` of `w` (planned and allocated once, here),
/// after two runs (with CUDA graphs, those capture the graph, so that every
/// timed run is a replay).
fn time_graph(be: &CudaBackend, w: &Workload, reps: usize) -> rgml::Result<f64> {
    let plan = Allocator::new(CudaRules).plan(&w.ctx, &w.graph)?;
    let mut st = be.alloc(&w.ctx, &w.graph, plan)?;
    for _ in 0..2 {
        be.compute(&w.ctx, &w.graph, &mut st)?;
    }
    let t = time(reps, || be.compute(&w.ctx, &w.graph, &mut st))?;
    if let Some(why) = st.graph_stats().fallback {
        return Err(rgml::Error::Invalid(format!("CUDA graphs fell back to eager runs: {why}")));
    }
    Ok(t)
}

/// What a run produced: the rows, and the workloads that failed with why.
pub struct Outcome {
    /// One row per workload that ran (the copy first).
    pub rows: Vec<Row>,
    /// (name, error) of each workload that could not be built or run.
    pub failed: Vec<(String, String)>,
}

/// Opens CUDA device `device` (an [`rgml::Error::Unavailable`] message when
/// there is none) and times the copy and every workload of `sizes`, calling
/// `each` with each row as it is ready and `fail` with each workload that
/// fails; a failure does not stop the others.
pub fn run(
    device: usize,
    sizes: &Sizes,
    reps: usize,
    mut each: impl FnMut(&Row),
    mut fail: impl FnMut(&str, &str),
) -> Result<Outcome, String> {
    check(sizes)?;
    let config = rgml::CudaConfig::from_env().map_err(|e| e.to_string())?;
    let be = CudaBackend::with_config(device, config).map_err(|e| e.to_string())?;
    eprintln!("CUDA device #{}: {} ({})", be.ordinal(), be.name(), be.arch());
    let copy_bytes = (sizes.n * sizes.n * 4) as usize;
    let mut base = CopyBase::new(&be, copy_bytes)?;
    let t = base.seconds(&be, reps)?;
    let copy = 2.0 * copy_bytes as f64 / t / 1e9;
    let first = Row {
        name: "copy".into(),
        what: format!("device-to-device copy {0}x{0} f32 ({1} MiB)", sizes.n, copy_bytes >> 20),
        threads: 0,
        median_s: t,
        bytes: 2 * copy_bytes as u64,
        gbps: copy,
        memcpy_gbps: copy,
        ratio: 1.0,
        us_per_node: None,
        gflops: None,
    };
    each(&first);
    let mut out = Outcome { rows: vec![first], failed: Vec::new() };
    for (to_device, pinned) in [(true, false), (true, true), (false, false), (false, true)] {
        match host_device_copy(&be, to_device, pinned, reps, copy) {
            Ok(r) => {
                each(&r);
                out.rows.push(r);
            }
            Err(e) => {
                let name = transfer_name(to_device, pinned);
                fail(name, &e);
                out.failed.push((name.into(), e));
            }
        }
    }
    for s in specs(sizes) {
        match run_spec(&be, &mut base, &s, reps) {
            Ok(r) => {
                each(&r);
                out.rows.push(r);
            }
            Err(e) => {
                fail(&s.name, &e);
                out.failed.push((s.name, e));
            }
        }
    }
    Ok(out)
}

/// Bytes of the host-device rows.
const H2D_BYTES: usize = 64 << 20;

/// The name of a host-device row.
fn transfer_name(to_device: bool, pinned: bool) -> &'static str {
    match (to_device, pinned) {
        (true, false) => "H2D",
        (true, true) => "H2D-pinned",
        (false, false) => "D2H",
        (false, true) => "D2H-pinned",
    }
}

/// The `H2D`/`D2H` rows (pageable host memory) or `H2D-pinned`/`D2H-pinned`:
/// one synchronized copy of [`H2D_BYTES`] to or from the device, against the
/// device copy's `copy` GB/s.
fn host_device_copy(be: &CudaBackend, to_device: bool, pinned: bool, reps: usize, copy: f64) -> Result<Row, String> {
    let s = be.stream().clone();
    let dir = if to_device { "host-to-device" } else { "device-to-host" };
    let err = |e: cudarc::driver::DriverError| format!("{dir} copy: {e:?}");
    let mut dev = s.alloc_zeros::<u8>(H2D_BYTES).map_err(err)?;
    let mut host = vec![1u8; H2D_BYTES];
    let median_s = if pinned {
        let mut pin = be.pinned_zeroed(H2D_BYTES).map_err(|e| e.to_string())?;
        pin.as_mut_slice().map_err(err)?.copy_from_slice(&host);
        time(reps, || {
            if to_device {
                s.memcpy_htod(&pin, &mut dev)?;
            } else {
                s.memcpy_dtoh(&dev, &mut pin)?;
            }
            s.synchronize()
        })
    } else {
        time(reps, || {
            if to_device {
                s.memcpy_htod(&host, &mut dev)?;
            } else {
                s.memcpy_dtoh(&dev, &mut host)?;
            }
            s.synchronize()
        })
    }
    .map_err(err)?;
    let gbps = H2D_BYTES as f64 / median_s / 1e9;
    Ok(Row {
        name: transfer_name(to_device, pinned).into(),
        what: format!("{dir} copy {} MiB ({})", H2D_BYTES >> 20, if pinned { "pinned" } else { "pageable" }),
        threads: 0,
        median_s,
        bytes: H2D_BYTES as u64,
        gbps,
        memcpy_gbps: copy,
        ratio: gbps / copy,
        us_per_node: None,
        gflops: None,
    })
}

fn run_spec(be: &CudaBackend, base: &mut CopyBase, s: &Spec, reps: usize) -> Result<Row, String> {
    let e = |e: rgml::Error| e.to_string();
    let w = (s.build)().map_err(e)?;
    let median_s = time_graph(&(s.tune)(be.clone()), &w, reps).map_err(e)?;
    // the copy again, right after, as the bound of this row
    let copy = base.gbps(be, reps)?;
    let (bytes, gflops, us_per_node) = match s.kind {
        Kind::Memory => (w.bytes().map_err(e)?, None, None),
        Kind::MatMul | Kind::MatVec => (w.weight_bytes().map_err(e)?, Some(w.flops().map_err(e)? as f64), None),
        Kind::Overhead => (w.bytes().map_err(e)?, None, Some(median_s * 1e6 / w.nodes().max(1) as f64)),
    };
    let gbps = bytes as f64 / median_s / 1e9;
    Ok(Row {
        name: s.name.clone(),
        what: w.what.clone(),
        threads: 0,
        median_s,
        bytes,
        gbps,
        memcpy_gbps: copy,
        ratio: if s.kind == Kind::Overhead { f64::NAN } else { gbps / copy },
        us_per_node,
        gflops: gflops.map(|f| f / median_s / 1e9),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Sizes {
        Sizes { n: 64, mm: 32, matvecs: vec![(64, 3)], prefill: (64, 40) }
    }

    #[test]
    fn row_names_match_torch_bench() {
        let names: Vec<String> = specs(&Sizes::default()).into_iter().map(|s| s.name).collect();
        let want = ["W1", "W2b", "W3", "W7", "MM-f16-8192", "MM-bf16-8192", "MV-q4_0-4096", "MV-q4_0-16384"]
            .into_iter()
            .chain(["MQ-q4_0-4096-512", "MQ-q4_0-4096-512-dot", "W6", "overhead", "W6-graph", "overhead-graph"]);
        let want: Vec<&str> = want.collect();
        assert_eq!(names, want);
        let script =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/torch_bench.py")).unwrap();
        for n in ["copy", "H2D", "H2D-pinned", "D2H", "D2H-pinned", "W1", "W2b", "W3", "W7", "MM-", "MV-q4_0-"] {
            assert!(script.contains(&format!("\"{n}")), "torch_bench.py has no row {n}");
        }
    }

    /// Every workload builds, plans with the CUDA rules and computes on the CPU (small sizes).
    #[test]
    fn workloads_plan_for_cuda_and_run_on_cpu() {
        let cpu = rgml::CpuBackend::new(1).unwrap();
        for s in specs(&small()) {
            let w = (s.build)().unwrap();
            let plan = Allocator::new(CudaRules).plan(&w.ctx, &w.graph).unwrap();
            let mut st = cpu.alloc(&w.ctx, &w.graph, plan).unwrap();
            cpu.compute(&w.ctx, &w.graph, &mut st).unwrap();
            let out = st.read_f32(&w.ctx, w.output).unwrap();
            assert!(out.iter().all(|v| v.is_finite()), "{}", s.name);
            if s.kind == Kind::MatVec {
                assert_eq!(w.weight_bytes().unwrap(), 3 * 64 * 64 / 32 * 18, "{}", s.name);
                assert_eq!(w.nodes(), 3);
            }
        }
    }

    #[test]
    fn bad_sizes_are_errors_before_any_device_work() {
        for s in [
            Sizes { n: 0, ..small() },
            Sizes { mm: 40000, ..small() },
            Sizes { matvecs: vec![(100, 1)], ..small() },
            Sizes { matvecs: vec![(64, 0)], ..small() },
        ] {
            let e = run(0, &s, 1, |_| {}, |_, _| {}).err().unwrap();
            assert!(e.contains("out of range"), "{e}");
        }
    }
}
