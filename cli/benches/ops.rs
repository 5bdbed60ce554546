//! Criterion benchmarks of the standard workloads (see `rgml_cli::workloads`), with
//! a 64 MiB memcpy in the same group as the baseline. Throughput is bytes read
//! plus written, for the workloads and for memcpy alike. The `mul_mat` group
//! (W4, W5, and W5 Q4_0 with mapped, repacked weights) reports bytes of
//! weights read, beside a 64 MiB parallel read on the same pool.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rgml::{CpuBackend, DType, Plan, CPU_ALIGNMENT};
use rgml_cli::workloads::{self, Workload};

const N: i64 = 4096;
const MEMCPY_BYTES: usize = 64 << 20;

fn bench_workload(c: &mut Criterion, cpu: &CpuBackend, w: &Workload) {
    let plan = Plan::naive(&w.ctx, &w.graph, CPU_ALIGNMENT).unwrap();
    let mut st = cpu.alloc(&w.ctx, &w.graph, plan).unwrap();
    let mut g = c.benchmark_group("memory_bound");
    g.throughput(Throughput::Bytes(w.bytes().unwrap()));
    g.bench_function(BenchmarkId::new(w.name, &w.what), |b| b.iter(|| cpu.compute(&w.ctx, &w.graph, &mut st).unwrap()));
    g.finish();
}

fn memory_bound(c: &mut Criterion) {
    let cpu = CpuBackend::new(0).unwrap();
    let src = vec![1u8; MEMCPY_BYTES];
    let mut dst = vec![0u8; MEMCPY_BYTES];
    let mut g = c.benchmark_group("memory_bound");
    g.throughput(Throughput::Bytes(2 * MEMCPY_BYTES as u64));
    g.bench_function("memcpy 64MiB", |b| b.iter(|| dst.copy_from_slice(std::hint::black_box(&src))));
    g.finish();
    for w in workloads::memory_bound(N).unwrap() {
        bench_workload(c, &cpu, &w);
    }
}

fn matmul(c: &mut Criterion) {
    let cpu = CpuBackend::new(2).unwrap();
    let v: Vec<f32> = (0..MEMCPY_BYTES / 4).map(|i| i as f32).collect();
    let mut g = c.benchmark_group("mul_mat");
    g.throughput(Throughput::Bytes(MEMCPY_BYTES as u64));
    g.bench_function("read 64MiB", |b| b.iter(|| workloads::parallel_sum(&cpu, &v)));
    g.finish();
    let repacking = CpuBackend::new(2).unwrap().with_repacked_weights(true);
    let cases = [(DType::F32, 1), (DType::F32, 16), (DType::F32, 128), (DType::F32, 512)]
        .into_iter()
        .chain([DType::Q4_0, DType::Q8_0].into_iter().flat_map(|dt| [(dt, 1), (dt, 128)]));
    for (dt, n) in cases {
        bench_matmul(c, &cpu, &workloads::matmul(dt, N, N, n).unwrap());
    }
    for n in [1, 128] {
        bench_matmul(c, &repacking, &workloads::matmul_mapped(DType::Q4_0, N, N, n).unwrap());
    }
}

fn bench_matmul(c: &mut Criterion, cpu: &CpuBackend, w: &Workload) {
    let plan = Plan::naive(&w.ctx, &w.graph, CPU_ALIGNMENT).unwrap();
    let mut st = cpu.alloc(&w.ctx, &w.graph, plan).unwrap();
    let mut g = c.benchmark_group("mul_mat");
    g.throughput(Throughput::Bytes(w.weight_bytes().unwrap()));
    g.bench_function(BenchmarkId::new(w.name, &w.what), |b| b.iter(|| cpu.compute(&w.ctx, &w.graph, &mut st).unwrap()));
    g.finish();
}

fn overhead(c: &mut Criterion) {
    let w = workloads::add_chain(1000, 16).unwrap();
    for threads in [1, 2] {
        let cpu = CpuBackend::new(threads).unwrap();
        let plan = Plan::naive(&w.ctx, &w.graph, CPU_ALIGNMENT).unwrap();
        let mut st = cpu.alloc(&w.ctx, &w.graph, plan).unwrap();
        let mut g = c.benchmark_group("overhead");
        g.throughput(Throughput::Elements(w.nodes() as u64));
        g.bench_function(BenchmarkId::new("W6 1000 adds of 16", format!("{threads} threads")), |b| {
            b.iter(|| cpu.compute(&w.ctx, &w.graph, &mut st).unwrap())
        });
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = memory_bound, matmul, overhead
}
criterion_main!(benches);
