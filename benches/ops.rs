//! Criterion benchmarks of the standard workloads (see `rgml::workloads`), with
//! a 64 MiB memcpy in the same group as the baseline. Throughput is bytes read
//! plus written, for the workloads and for memcpy alike.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rgml::workloads::{self, Workload};
use rgml::{CpuBackend, Plan, CPU_ALIGNMENT};

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
    targets = memory_bound, overhead
}
criterion_main!(benches);
