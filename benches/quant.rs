//! Quantize and dequantize throughput per block type (GB/s of f32 produced or
//! consumed), and the time to open and inspect a multi-GB GGUF file (a sparse
//! file made here and deleted: only its header is read).

use std::io::Write;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rgml::gguf::GgufFile;
use rgml::{quant, DType};

#[path = "../tests/common/blocks.rs"]
mod blocks;

const TYPES: [DType; 24] = DType::QUANTIZED;
const N: usize = 1 << 20;

fn quantization(c: &mut Criterion) {
    let src: Vec<f32> =
        (0..N as u32).map(|i| ((i.wrapping_mul(2_654_435_761) % 2001) as f32 - 1000.0) / 500.0).collect();
    let mut out = vec![0f32; N];
    for dt in TYPES {
        let mut q = vec![0u8; dt.row_size(N as i64).unwrap()];
        let quantizes = quant::has_quantizer(dt);
        if quantizes {
            quant::quantize_row(dt, &src, &mut q).unwrap();
        } else {
            let mut s = 0x9e37_79b9_7f4a_7c15u64;
            q = blocks::random_blocks(dt, N / dt.block_size(), || {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s
            });
        }
        let mut g = c.benchmark_group("quantization");
        g.throughput(Throughput::Bytes((N * 4) as u64));
        g.bench_function(BenchmarkId::new("dequantize", dt.name()), |b| {
            b.iter(|| quant::dequantize_row(dt, &q, &mut out).unwrap())
        });
        if quantizes {
            g.bench_function(BenchmarkId::new("quantize", dt.name()), |b| {
                b.iter(|| quant::quantize_row(dt, &src, &mut q).unwrap())
            });
        }
        g.finish();
    }
}

/// A GGUF v3 file of one F32 tensor of `ne0 × ne1`, written as a header and a
/// sparse data section (no data blocks on disk).
fn sparse_gguf(path: &std::path::Path, ne0: u64, ne1: u64) -> std::io::Result<()> {
    let mut h = Vec::new();
    h.extend_from_slice(b"GGUF");
    h.extend_from_slice(&3u32.to_le_bytes());
    h.extend_from_slice(&1u64.to_le_bytes()); // tensors
    h.extend_from_slice(&0u64.to_le_bytes()); // metadata keys
    let name = b"huge.weight";
    h.extend_from_slice(&(name.len() as u64).to_le_bytes());
    h.extend_from_slice(name);
    h.extend_from_slice(&2u32.to_le_bytes());
    h.extend_from_slice(&ne0.to_le_bytes());
    h.extend_from_slice(&ne1.to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes()); // F32
    h.extend_from_slice(&0u64.to_le_bytes()); // offset in the data section
    h.resize(h.len().next_multiple_of(32), 0);
    let mut f = std::fs::File::create(path)?;
    f.write_all(&h)?;
    f.set_len(h.len() as u64 + ne0 * ne1 * 4)
}

fn inspect_large(c: &mut Criterion) {
    let path = std::env::temp_dir().join(format!("rgml-bench-sparse-{}.gguf", std::process::id()));
    sparse_gguf(&path, 65536, 32768).unwrap(); // 8 GiB of f32
    c.bench_function("open and inspect an 8 GiB GGUF", |b| {
        b.iter(|| {
            let f = GgufFile::open(&path).unwrap();
            assert_eq!(f.tensors()[0].size, 8 << 30);
        })
    });
    std::fs::remove_file(&path).ok();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = quantization, inspect_large
}
criterion_main!(benches);
