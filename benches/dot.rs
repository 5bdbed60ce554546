//! Dot kernels: one 4096-value weight row with one activation row, for every
//! weight type and every SIMD level this CPU has (throughput in weight values);
//! the i-quants, which have no quantizer, dot random valid blocks.
//!
//! First, a table in the style of `rgml bench` (`RGML_DOT_ROUNDS` rounds,
//! default 5; 0 skips it): for IQ4_NL, IQ4_XS and MXFP4 (and Q4_0 for comparison), one
//! thread computes a matrix-vector product (every row of a weight matrix
//! against one activation row) at each level; each round times, alternately,
//! the kernel, the scalar kernel, a read of the same weight bytes (u64 sums)
//! and a memcpy of them (read + write bytes counted). Rows report the median
//! over the rounds of the weight GB/s and of the per-round ratios to the
//! scalar kernel and to the two baselines, for a matrix that stays in L2
//! (256 × 4096) and one that does not (4096 × 4096).

use std::time::Instant;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rgml::quant::dot::{dot_fn_for, quantize_activations, vec_dot_type, DotKernel, SimdLevel};
use rgml::quant::{has_quantizer, quantize_row};
use rgml::DType;

#[path = "../tests/common/blocks.rs"]
mod blocks;

const N: usize = 4096;
use rgml::quant::dot::WEIGHT_TYPES as WEIGHTS;

fn vals(n: usize) -> Vec<f32> {
    (0..n as u32).map(|i| ((i.wrapping_mul(2_654_435_761) % 2001) as f32 - 1000.0) / 1000.0).collect()
}

/// `rows` weight rows of `N` values of `wt`: quantized, or random valid blocks.
fn weights(wt: DType, rows: usize) -> Vec<u8> {
    let v = vals(N * rows);
    if has_quantizer(wt) {
        let rs = wt.row_size(N as i64).unwrap();
        let mut w = vec![0u8; rs * rows];
        for (x, q) in v.chunks(N).zip(w.chunks_mut(rs)) {
            quantize_row(wt, x, q).unwrap();
        }
        w
    } else {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        blocks::random_blocks(wt, rows * N / wt.block_size(), || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        })
    }
}

fn dots(c: &mut Criterion) {
    let vals = vals(N);
    for wt in WEIGHTS {
        let w = weights(wt, 1);
        let mut a = vec![0u8; vec_dot_type(wt).row_size(N as i64).unwrap()];
        quantize_activations(wt, &vals, &mut a).unwrap();
        let mut g = c.benchmark_group("dot 4096");
        g.throughput(Throughput::Elements(N as u64));
        for level in SimdLevel::ALL {
            if let Some(f) = dot_fn_for(wt, level).filter(|f| f.level() == level) {
                g.bench_function(BenchmarkId::new(wt.name(), format!("{level:?}")), |b| {
                    b.iter(|| f.dot(N, std::hint::black_box(&w), std::hint::black_box(&a)))
                });
            }
        }
        g.finish();
    }
}

/// Seconds per call of `f`, the median of 5 timings of enough calls for ~20 ms.
fn seconds(mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    f();
    let once = start.elapsed().as_secs_f64().max(1e-7);
    let reps = ((0.02 / once) as usize).clamp(1, 100_000);
    let mut t: Vec<f64> = (0..5)
        .map(|_| {
            let s = Instant::now();
            for _ in 0..reps {
                f();
            }
            s.elapsed().as_secs_f64() / reps as f64
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[2]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A matrix-vector product: every `row`-byte row of `w` dotted with `a`.
fn matvec(f: &DotKernel, w: &[u8], row: usize, a: &[u8], out: &mut [f32]) {
    for (o, r) in out.iter_mut().zip(w.chunks_exact(row)) {
        *o = f.dot(N, r, a).unwrap();
    }
    std::hint::black_box(out);
}

fn rounds(_: &mut Criterion) {
    let n_rounds: usize = std::env::var("RGML_DOT_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(5);
    if n_rounds == 0 {
        return;
    }
    println!(
        "\nmatvec, 1 thread, {n_rounds} alternating rounds (medians); GB/s of weight bytes; \
         x scalar / x read / x memcpy: ratios to the scalar kernel, a u64 read and a memcpy of the same bytes"
    );
    println!(
        "{:<8} {:>6} {:<7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "type", "rows", "level", "GB/s", "read", "memcpy", "x scalar", "x read", "x memcpy"
    );
    let x = vals(N);
    for wt in [DType::Q4_0, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4] {
        let mut a = vec![0u8; vec_dot_type(wt).row_size(N as i64).unwrap()];
        quantize_activations(wt, &x, &mut a).unwrap();
        let row = wt.row_size(N as i64).unwrap();
        for rows in [256usize, 4096] {
            let w = weights(wt, rows);
            let bytes = w.len() as f64;
            let mut copy = vec![0u8; w.len()];
            let mut out = vec![0f32; rows];
            let scalar = dot_fn_for(wt, SimdLevel::Scalar).unwrap();
            for level in SimdLevel::ALL.into_iter().filter(|l| l.is_supported()) {
                let f = dot_fn_for(wt, level).unwrap();
                if f.level() != level {
                    continue;
                }
                let (mut gbps, mut reads, mut copies) = (Vec::new(), Vec::new(), Vec::new());
                let (mut vs_scalar, mut vs_read, mut vs_copy) = (Vec::new(), Vec::new(), Vec::new());
                for _ in 0..n_rounds {
                    let k = bytes / seconds(|| matvec(&f, &w, row, &a, &mut out)) / 1e9;
                    let s = bytes / seconds(|| matvec(&scalar, &w, row, &a, &mut out)) / 1e9;
                    let r = bytes
                        / seconds(|| {
                            let words = w.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap()));
                            std::hint::black_box(words.fold(0u64, u64::wrapping_add));
                        })
                        / 1e9;
                    let m = 2.0 * bytes
                        / seconds(|| {
                            copy.copy_from_slice(std::hint::black_box(&w));
                            std::hint::black_box(&mut copy);
                        })
                        / 1e9;
                    gbps.push(k);
                    reads.push(r);
                    copies.push(m);
                    vs_scalar.push(k / s);
                    vs_read.push(k / r);
                    vs_copy.push(k / m);
                }
                println!(
                    "{:<8} {:>6} {:<7} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.3} {:>9.3}",
                    wt.name(),
                    rows,
                    format!("{level:?}"),
                    median(gbps),
                    median(reads),
                    median(copies),
                    median(vs_scalar),
                    median(vs_read),
                    median(vs_copy)
                );
            }
        }
    }
    println!();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = rounds, dots
}
criterion_main!(benches);
