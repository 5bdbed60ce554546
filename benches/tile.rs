//! One thread, `k = 4096`: 64 weight rows (in L2) against `n` activation
//! rows, by the per-element dot kernel (`quant::dot::dot_fn`) and by the tile
//! kernel (`quant::tile`, `mr` weight rows per call, every activation row), at
//! each level this CPU has (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K). Throughput in multiply-adds
//! (elements = k·m·n).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rgml::quant::dot::{dot_fn_for, quantize_activations, vec_dot_type, SimdLevel};
use rgml::quant::tile::tile_kernel_for;
use rgml::{quant, DType};

const K: usize = 4096;
const M: usize = 64;

fn vals(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32).map(|i| ((i.wrapping_mul(2_654_435_761) ^ seed) % 2001) as f32 / 1000.0 - 1.0).collect()
}

fn tiles(c: &mut Criterion) {
    for w in [DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K] {
        let wrow = w.row_size(K as i64).unwrap();
        let mut wq = vec![0u8; wrow * M];
        for (src, dst) in vals(K * M, 1).chunks(K).zip(wq.chunks_mut(wrow)) {
            quant::quantize_row(w, src, dst).unwrap();
        }
        let wrows: Vec<&[u8]> = wq.chunks(wrow).collect();
        for n in [1, 4, 16, 128] {
            let arow = vec_dot_type(w).row_size(K as i64).unwrap();
            let mut aq = vec![0u8; arow * n];
            for (src, dst) in vals(K * n, 2).chunks(K).zip(aq.chunks_mut(arow)) {
                quantize_activations(w, src, dst).unwrap();
            }
            let mut g = c.benchmark_group(format!("tile {} n={n}", w.name()));
            g.throughput(Throughput::Elements((K * M * n) as u64));
            for level in SimdLevel::ALL {
                let (Some(dot), Some(t)) = (dot_fn_for(w, level), tile_kernel_for(w, level)) else { continue };
                let mut out = vec![0f32; M * n];
                g.bench_function(BenchmarkId::new("dot", format!("{level:?}")), |b| {
                    b.iter(|| {
                        for (i, wr) in wrows.iter().enumerate() {
                            for (j, a) in aq.chunks(arow).enumerate() {
                                out[j * M + i] = dot.dot(K, wr, a).expect("dot");
                            }
                        }
                    })
                });
                let prow = t.prepared_row_size(K).unwrap();
                let mut prep = vec![0u8; prow * n];
                for (a, p) in aq.chunks(arow).zip(prep.chunks_mut(prow)) {
                    t.prepare(a, p).unwrap();
                }
                let arows: Vec<&[u8]> = prep.chunks(prow).collect();
                g.bench_function(BenchmarkId::new("tile", format!("{level:?}")), |b| {
                    b.iter(|| {
                        for (s, ws) in wrows.chunks(t.mr()).enumerate() {
                            t.run(K, ws, &arows, &mut out[s * t.mr()..], M).expect("tile run");
                        }
                    })
                });
            }
            g.finish();
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(1));
    targets = tiles
}
criterion_main!(benches);
