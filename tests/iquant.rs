//! The types added with IQ4_NL (IQ4_NL, IQ4_XS, MXFP4, the i-quants IQ1_S …
//! IQ3_S, TQ1_0, TQ2_0, and F64) against reference data made outside rgml
//! (`tests/fixtures/iquant/`, provenance in `tests/fixtures/README.md`):
//!
//! - dequantization of random valid blocks of every type, bit for bit against
//!   gguf-py 0.19.0's `dequantize` (F64: numpy's conversion to f32), from
//!   aligned and unaligned bytes;
//! - the quantizers byte for byte against ggml's reference ones
//!   (`quantize_row_iq4_nl_ref`, `quantize_iq4_nl`, `quantize_row_iq4_xs_ref`,
//!   `quantize_row_mxfp4_ref`, `quantize_row_tq{1,2}_0_ref`; gguf-py agrees on
//!   MXFP4, TQ1_0 and TQ2_0), and the dequantization of their output against
//!   gguf-py's (SHA-256 per row);
//! - the scalar dot kernels bit for bit against ggml's
//!   `ggml_vec_dot_*_generic` on the same bytes, and every kernel (every SIMD
//!   level) against an f64 product of the dequantized rows.
//!
//! Dot tolerance, per type: `|got - f64| ≤ tol · Σ|w_i·a_i|` with `tol` from
//! [`DOT_TOLERANCE`] (1e-6 for every type here; `tests/dot.rs` checks rows up
//! to 16384 values at 1e-5): the integer part is exact, so only the f32
//! scaling of each block's sum and the summing of the blocks round, about
//! 2⁻²⁴ ≈ 6e-8 per operation and a few dozen operations per row.

mod common;

use std::path::{Path, PathBuf};

use rgml::quant::dot::{dot_fn_for, dot_fn_scalar, vec_dot_type, SimdLevel};
use rgml::quant::{dequantize_row, quantize_chunk, quantize_row};
use rgml::DType;
use sha2::{Digest, Sha256};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/iquant")
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The block types of the fixtures, by file name: those after Q8_K in the table.
fn new_types() -> &'static [DType] {
    let t = &DType::QUANTIZED[12..];
    assert_eq!((t[0], t.len()), (DType::IQ4_NL, 12));
    t
}

/// Dequantizes `bytes` in rows of `ne0` values.
fn dequant(t: DType, bytes: &[u8], ne0: usize) -> Vec<f32> {
    let row = t.row_size(ne0 as i64).unwrap();
    let mut out = vec![0f32; bytes.len() / row * ne0];
    for (s, d) in bytes.chunks_exact(row).zip(out.chunks_exact_mut(ne0)) {
        dequantize_row(t, s, d).unwrap();
    }
    out
}

#[test]
fn random_blocks_dequantize_as_gguf_py() {
    for &t in new_types() {
        let bytes = read(&dir().join(format!("random/{}.bin", t.name())));
        let want = f32s(&read(&dir().join(format!("random/{}.f32", t.name()))));
        assert_eq!(want.len(), bytes.len() / t.type_size() * t.block_size(), "{t}");
        // as one long row, and in rows of two blocks from an odd address
        let got = dequant(t, &bytes, want.len());
        if let Some(i) = bits(&got).iter().zip(bits(&want)).position(|(a, b)| *a != b) {
            panic!("{t}: value {i} (block {}): got {:e}, gguf-py {:e}", i / t.block_size(), got[i], want[i]);
        }
        let mut shifted = vec![0u8; bytes.len() + 1];
        shifted[1..].copy_from_slice(&bytes);
        assert_eq!(bits(&dequant(t, &shifted[1..], 2 * t.block_size())), bits(&want), "{t} unaligned");
    }
    let f64s = read(&dir().join("random/f64.bin"));
    let want = f32s(&read(&dir().join("random/f64.f32")));
    assert_eq!(bits(&dequant(DType::F64, &f64s, want.len())), bits(&want), "f64 (numpy's astype(float32))");
}

/// The rows of `input.f32` and their labels.
fn rows() -> Vec<(String, Vec<f32>)> {
    let input = f32s(&read(&dir().join("input.f32")));
    let index = String::from_utf8(read(&dir().join("rows.txt"))).unwrap();
    let mut at = 0;
    let rows: Vec<(String, Vec<f32>)> = index
        .lines()
        .map(|l| {
            let (n, label) = l.split_once(' ').unwrap();
            let n: usize = n.parse().unwrap();
            at += n;
            (label.to_string(), input[at - n..at].to_vec())
        })
        .collect();
    assert_eq!(at, input.len());
    rows
}

/// The reference bytes of `file` (`<file>.bin`), cut per row for type `t`.
fn expected(file: &str, t: DType, rows: &[(String, Vec<f32>)]) -> Vec<Vec<u8>> {
    let bytes = read(&dir().join(format!("{file}.bin")));
    let mut at = 0;
    let out = rows
        .iter()
        .map(|(_, x)| {
            let n = t.row_size(x.len() as i64).unwrap();
            at += n;
            bytes[at - n..at].to_vec()
        })
        .collect();
    assert_eq!(at, bytes.len(), "{file}");
    out
}

/// Quantizer output equals ggml's reference bytes. IQ4_NL's reference
/// quantizer leaves the indices of a block whose largest magnitude is below
/// 1e-15 uninitialised (they read as 0 either way, its scale being 0): for
/// such blocks only the scale is compared (rgml writes index 8, the level
/// nearest zero, as ggml's searching quantizer does).
#[test]
fn quantizers_match_ggml_reference_bytes() {
    let rows = rows();
    let mut failures = Vec::new();
    let cases: [(&str, DType, bool); 6] = [
        ("iq4_nl", DType::IQ4_NL, false),
        ("iq4_nl_file", DType::IQ4_NL, true),
        ("iq4_xs", DType::IQ4_XS, false),
        ("mxfp4", DType::MXFP4, false),
        ("tq1_0", DType::TQ1_0, false),
        ("tq2_0", DType::TQ2_0, false),
    ];
    for (file, t, chunk) in cases {
        for ((label, x), want) in rows.iter().zip(expected(file, t, &rows)) {
            let mut got = vec![0u8; want.len()];
            if chunk {
                quantize_chunk(t, x, &mut got).unwrap();
            } else {
                quantize_row(t, x, &mut got).unwrap();
                // what llama-quantize writes is the reference for every type but IQ4_NL
                if t != DType::IQ4_NL {
                    let mut c = vec![0u8; want.len()];
                    quantize_chunk(t, x, &mut c).unwrap();
                    assert_eq!(c, got, "{t} {label}: quantize_chunk");
                }
            }
            let bs = t.type_size();
            for (b, ((g, w), xs)) in got.chunks(bs).zip(want.chunks(bs)).zip(x.chunks(t.block_size())).enumerate() {
                let tiny = file == "iq4_nl" && xs.iter().all(|v| v.abs() < 1e-15);
                let (g, w) = if tiny { (&g[..2], &w[..2]) } else { (g, w) };
                if g != w {
                    let i = g.iter().zip(w).position(|(a, b)| a != b).unwrap();
                    failures
                        .push(format!("{file} row {label}: block {b} byte {i}: got {:#04x}, ggml {:#04x}", g[i], w[i]));
                    break;
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn quantized_rows_dequantize_as_gguf_py() {
    let rows = rows();
    let hashes: serde_json::Value = serde_json::from_slice(&read(&dir().join("dequant.json"))).unwrap();
    for (file, t) in [
        ("iq4_nl", DType::IQ4_NL),
        ("iq4_nl_file", DType::IQ4_NL),
        ("iq4_xs", DType::IQ4_XS),
        ("mxfp4", DType::MXFP4),
        ("tq1_0", DType::TQ1_0),
        ("tq2_0", DType::TQ2_0),
    ] {
        let want = hashes[file].as_array().unwrap();
        assert_eq!(want.len(), rows.len());
        for (((label, x), bytes), h) in rows.iter().zip(expected(file, t, &rows)).zip(want) {
            let mut y = vec![0f32; x.len()];
            dequantize_row(t, &bytes, &mut y).unwrap();
            let le: Vec<u8> = y.iter().flat_map(|v| v.to_le_bytes()).collect();
            let got: String = Sha256::digest(&le).iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(got, h.as_str().unwrap(), "{file} row {label}");
        }
    }
}

/// Quantize → dequantize stays within each type's error on ordinary data.
#[test]
fn round_trip_error_bounds() {
    let mut rng = common::Rng(31);
    // (type, relative RMS bound): the 16 non-linear levels of IQ4 (and MXFP4's
    // 8 magnitudes under a power-of-two scale) give about 4-bit accuracy
    for (t, bound) in [(DType::IQ4_NL, 0.1), (DType::IQ4_XS, 0.1), (DType::MXFP4, 0.2)] {
        for scale in [1.0f32, 0.02, 300.0] {
            let x: Vec<f32> = (0..4096).map(|_| (rng.f(1.0) + rng.f(1.0) + rng.f(1.0)) * scale).collect();
            for f in [quantize_row, quantize_chunk] {
                let mut q = vec![0u8; t.row_size(4096).unwrap()];
                f(t, &x, &mut q).unwrap();
                let y = dequant(t, &q, 4096);
                let err: f64 = x.iter().zip(&y).map(|(a, b)| f64::from(a - b).powi(2)).sum();
                let sig: f64 = x.iter().map(|a| f64::from(*a).powi(2)).sum();
                let rel = (err / sig).sqrt();
                assert!(rel < bound, "{t} scale {scale}: relative RMS error {rel:.4} >= {bound}");
            }
        }
    }
    // the searching IQ4_NL quantizer is never worse than the reference one on the whole row
    let x: Vec<f32> = (0..8192).map(|_| rng.f(1.0) * rng.f(1.0)).collect();
    let err = |f: fn(DType, &[f32], &mut [u8]) -> rgml::Result<()>| {
        let mut q = vec![0u8; DType::IQ4_NL.row_size(8192).unwrap()];
        f(DType::IQ4_NL, &x, &mut q).unwrap();
        dequant(DType::IQ4_NL, &q, 8192).iter().zip(&x).map(|(a, b)| f64::from(a - b).powi(2)).sum::<f64>()
    };
    assert!(err(quantize_chunk) <= err(quantize_row));
    // ternary values survive TQ1_0 and TQ2_0 exactly (amax is an f16)
    let x: Vec<f32> = (0..512).map(|i| [-1.5f32, 0.0, 1.5][(i * 7 + i / 3) % 3]).collect();
    for t in [DType::TQ1_0, DType::TQ2_0] {
        let mut q = vec![0u8; t.row_size(512).unwrap()];
        quantize_row(t, &x, &mut q).unwrap();
        assert_eq!(dequant(t, &q, 512), x, "{t}");
    }
}

/// The relative dot tolerance of weight type `t` (see the module docs), and
/// the worst error measured on the fixtures (all levels, rows of 256 … 1024).
const DOT_TOLERANCE: [(DType, f64, f64); 12] = [
    (DType::IQ4_NL, 1e-6, 5.2e-8),
    (DType::IQ4_XS, 1e-6, 4.8e-8),
    (DType::MXFP4, 1e-6, 2.4e-8),
    (DType::IQ1_S, 1e-6, 3.4e-8),
    (DType::IQ1_M, 1e-6, 7.8e-9),
    (DType::IQ2_XXS, 1e-6, 1.5e-8),
    (DType::IQ2_XS, 1e-6, 1.2e-8),
    (DType::IQ2_S, 1e-6, 1.4e-8),
    (DType::IQ3_XXS, 1e-6, 2.4e-8),
    (DType::IQ3_S, 1e-6, 1.2e-8),
    (DType::TQ1_0, 1e-6, 5.5e-8),
    (DType::TQ2_0, 1e-6, 1.9e-8),
];

fn dot_tolerance(t: DType) -> f64 {
    DOT_TOLERANCE.iter().find(|e| e.0 == t).map_or(0.0, |e| e.1)
}

/// The f64 product of the dequantized rows and `Σ|w_i·a_i|`.
fn f64_dot(t: DType, w: &[u8], a: &[u8], n: usize) -> (f64, f64) {
    let (wv, av) = (dequant(t, w, n), dequant(vec_dot_type(t), a, n));
    let dot = wv.iter().zip(&av).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum();
    let mag = wv.iter().zip(&av).map(|(&x, &y)| (f64::from(x) * f64::from(y)).abs()).sum();
    (dot, mag)
}

#[test]
fn dot_kernels_match_ggml_generic_and_f64() {
    let index: serde_json::Value = serde_json::from_slice(&read(&dir().join("dot/index.json"))).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for (set, info) in index.as_object().unwrap() {
        let t = DType::from_name(info["type"].as_str().unwrap()).unwrap();
        let n = info["n"].as_u64().unwrap() as usize;
        let (w, a) = (read(&dir().join(format!("dot/{set}.w"))), read(&dir().join(format!("dot/{set}.a"))));
        let want = f32s(&read(&dir().join(format!("dot/{set}.out"))));
        let (wr, ar) = (t.row_size(n as i64).unwrap(), vec_dot_type(t).row_size(n as i64).unwrap());
        assert_eq!((w.len() / wr, a.len() / ar), (want.len(), want.len()), "{set}");
        let scalar = dot_fn_scalar(t).unwrap();
        for (r, &ggml) in want.iter().enumerate() {
            let (wrow, arow) = (&w[r * wr..(r + 1) * wr], &a[r * ar..(r + 1) * ar]);
            let got = scalar.dot(n, wrow, arow).unwrap();
            assert_eq!(got.to_bits(), ggml.to_bits(), "{set} row {r}: scalar {got:e}, ggml's generic {ggml:e}");
            let (exact, mag) = f64_dot(t, wrow, arow, n);
            if mag > 1e36 {
                // random MXFP4 exponents reach 2^127: such rows overflow f32 (ggml's too)
                continue;
            }
            let tol = dot_tolerance(t) * mag + 1e-30;
            for level in SimdLevel::ALL {
                let Some(f) = dot_fn_for(t, level) else { continue };
                let v = f64::from(f.dot(n, wrow, arow).unwrap());
                assert!((v - exact).abs() <= tol, "{set} row {r} {level:?}: {v:e} vs f64 {exact:e} (tol {tol:e})");
            }
        }
        seen.insert(t);
    }
    assert_eq!(seen.len(), new_types().len(), "{seen:?}");
}
