//! Dot kernels: one 4096-value weight row with one activation row, for every
//! weight type and every SIMD level this CPU has (throughput in weight values).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rgml::quant::dot::{dot_fn_for, quantize_activations, vec_dot_type, SimdLevel};
use rgml::quant::quantize_row;

const N: usize = 4096;
use rgml::quant::dot::WEIGHT_TYPES as WEIGHTS;

fn dots(c: &mut Criterion) {
    let vals: Vec<f32> =
        (0..N as u32).map(|i| ((i.wrapping_mul(2_654_435_761) % 2001) as f32 - 1000.0) / 1000.0).collect();
    for wt in WEIGHTS {
        let mut w = vec![0u8; wt.row_size(N as i64).unwrap()];
        quantize_row(wt, &vals, &mut w).unwrap();
        let mut a = vec![0u8; vec_dot_type(wt).row_size(N as i64).unwrap()];
        quantize_activations(wt, &vals, &mut a).unwrap();
        let mut g = c.benchmark_group("dot 4096");
        g.throughput(Throughput::Elements(N as u64));
        for level in SimdLevel::ALL {
            if let Some(f) = dot_fn_for(wt, level) {
                g.bench_function(BenchmarkId::new(wt.name(), format!("{level:?}")), |b| {
                    b.iter(|| f.dot(N, std::hint::black_box(&w), std::hint::black_box(&a)))
                });
            }
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = dots
}
criterion_main!(benches);
