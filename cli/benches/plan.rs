//! Planning time: a 100k-node chain and the reference MLP (plan only, no compute).

use criterion::{criterion_group, criterion_main, Criterion};
use rgml::{Allocator, CpuRules};

fn planning(c: &mut Criterion) {
    let w = rgml_cli::workloads::add_chain(100_000, 16).unwrap();
    let alloc = Allocator::new(CpuRules);
    c.bench_function("plan chain of 100k adds", |b| b.iter(|| alloc.plan(&w.ctx, &w.graph).unwrap()));
    c.bench_function("graph build of 100k adds", |b| b.iter(|| rgml::Graph::build(&w.ctx, &[w.output]).unwrap()));
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = planning
}
criterion_main!(benches);
