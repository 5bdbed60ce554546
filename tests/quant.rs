//! ggml's block formats against reference data:
//! - dequantization of every tensor in the GGUF fixtures (made by gguf-py)
//!   against gguf-py's own `dequantize`, bit for bit;
//! - quantization against gguf-py (Q4_0 … Q8_0) and ggml's reference
//!   quantizers (all 12 block types), byte for byte;
//! - round-trip error bounds, and unaligned sources and destinations.
//!
//! The reference files live in `tests/fixtures/gguf/` and `tests/fixtures/quant/`
//! (provenance in `tests/fixtures/README.md`).

use std::path::{Path, PathBuf};

use rgml::quant::{dequantize_row, quantize_row};
use rgml::DType;

/// The types of `tests/fixtures/quant` (the later ones are in `tests/iquant.rs`).
const BLOCK_TYPES: [DType; 12] = [
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
    DType::Q8_1,
    DType::Q2_K,
    DType::Q3_K,
    DType::Q4_K,
    DType::Q5_K,
    DType::Q6_K,
    DType::Q8_K,
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

/// Index of the first value whose bits differ.
fn first_bit_difference(a: &[f32], b: &[f32]) -> Option<usize> {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).position(|(x, y)| x.to_bits() != y.to_bits())
}

/// Every tensor of every valid GGUF fixture, dequantized straight from the
/// file's bytes, equals gguf-py's `dequantize` bit for bit (NaN payloads included).
#[test]
fn dequantize_matches_gguf_fixtures() {
    let root = fixtures().join("gguf");
    let manifest: serde_json::Value = serde_json::from_slice(&read(&root.join("manifest.json"))).unwrap();
    let size = |v: &serde_json::Value| v.as_u64().unwrap_or_else(|| panic!("not a u64: {v}")) as usize;
    let mut seen = std::collections::BTreeMap::<DType, usize>::new();
    for file in manifest["valid"].as_array().expect("valid[]") {
        let name = file["file"].as_str().unwrap();
        let bytes = read(&root.join(name));
        let Some(tensors) = file.get("tensors") else { continue };
        for t in tensors.as_array().unwrap() {
            let tname = format!("{name}:{}", t["name"].as_str().unwrap());
            let ty = t["ggml_type"].as_str().unwrap();
            let dtype = DType::from_name(ty).unwrap_or_else(|| panic!("{tname}: unknown type {ty}"));
            assert_eq!(dtype.ggml_id(), t["ggml_type_id"], "{tname}");
            let ne: Vec<usize> = t["ne"].as_array().unwrap().iter().map(size).collect();
            let n: usize = ne.iter().product();
            let off = size(&t["file_offset"]);
            let nbytes = size(&t["n_bytes"]);
            let raw = &bytes[off..off + nbytes];
            let expected = f32s(&read(&root.join(t["expected"].as_str().unwrap())));
            assert_eq!(expected.len(), n, "{tname}");

            // row by row, rows of ne[0]
            let row_bytes = dtype.row_size(ne[0] as i64).unwrap();
            assert_eq!(row_bytes * (n / ne[0]), nbytes, "{tname}");
            let mut got = vec![0f32; n];
            for (src, dst) in raw.chunks_exact(row_bytes).zip(got.chunks_exact_mut(ne[0])) {
                dequantize_row(dtype, src, dst).unwrap();
            }
            if let Some(i) = first_bit_difference(&got, &expected) {
                panic!(
                    "{tname} ({dtype}): value {i}: got {:#010x}, expected {:#010x}",
                    got[i].to_bits(),
                    expected[i].to_bits()
                );
            }
            // and the whole tensor as one long row
            let mut whole = vec![0f32; n];
            dequantize_row(dtype, raw, &mut whole).unwrap();
            assert_eq!(first_bit_difference(&whole, &expected), None, "{tname}");
            *seen.entry(dtype).or_default() += 1;
        }
    }
    // the fixtures cover the float types and all stored block types
    for d in [DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0] {
        assert!(seen.contains_key(&d), "no {d} tensor checked: {seen:?}");
    }
    for d in [DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K] {
        assert!(seen.contains_key(&d), "no {d} tensor checked: {seen:?}");
    }
}

/// The quantization fixtures: rows of f32 and their reference bytes per type.
struct QuantFixtures {
    rows: Vec<(String, Vec<f32>)>,
}

impl QuantFixtures {
    fn load() -> Self {
        let dir = fixtures().join("quant");
        let input = f32s(&read(&dir.join("input.f32")));
        let index = String::from_utf8(read(&dir.join("rows.txt"))).unwrap();
        let mut rows = Vec::new();
        let mut at = 0;
        for line in index.lines() {
            let (n, label) = line.split_once(' ').unwrap();
            let n: usize = n.parse().unwrap();
            rows.push((label.to_string(), input[at..at + n].to_vec()));
            at += n;
        }
        assert_eq!(at, input.len(), "rows.txt does not cover input.f32");
        QuantFixtures { rows }
    }

    /// Each row's reference bytes for `dtype`.
    fn expected(&self, dtype: DType) -> Vec<Vec<u8>> {
        let bytes = read(&fixtures().join("quant").join(format!("{}.bin", dtype.name())));
        let mut at = 0;
        let out = self
            .rows
            .iter()
            .map(|(_, x)| {
                let n = dtype.row_size(x.len() as i64).unwrap();
                at += n;
                bytes[at - n..at].to_vec()
            })
            .collect();
        assert_eq!(at, bytes.len(), "{dtype}: file size does not match rows.txt");
        out
    }
}

/// Quantization is byte-identical to gguf-py (Q4_0 … Q8_0) and to ggml's
/// reference quantizers (all block types).
#[test]
fn quantize_matches_reference_bytes() {
    let fx = QuantFixtures::load();
    let mut failures = Vec::new();
    for dtype in BLOCK_TYPES {
        for ((label, x), want) in fx.rows.iter().zip(fx.expected(dtype)) {
            let mut got = vec![0u8; want.len()];
            quantize_row(dtype, x, &mut got).unwrap();
            if got != want {
                let bs = dtype.type_size();
                let i = got.iter().zip(&want).position(|(a, b)| a != b).unwrap();
                failures.push(format!(
                    "{dtype} row {label} (n={}): block {} byte {}: got {:#04x}, expected {:#04x}",
                    x.len(),
                    i / bs,
                    i % bs,
                    got[i],
                    want[i]
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

/// Dequantizing the reference bytes gives finite values close to the input,
/// and the same values from an unaligned copy of the bytes.
#[test]
fn reference_bytes_dequantize_aligned_and_unaligned() {
    let fx = QuantFixtures::load();
    for dtype in BLOCK_TYPES {
        for ((label, x), want) in fx.rows.iter().zip(fx.expected(dtype)) {
            // an 8-aligned copy, and one starting at an odd address
            let mut store = vec![0u64; want.len() / 8 + 2];
            let buf: &mut [u8] = bytemuck::cast_slice_mut(&mut store);
            buf[..want.len()].copy_from_slice(&want);
            let mut aligned = vec![0f32; x.len()];
            dequantize_row(dtype, &buf[..want.len()], &mut aligned).unwrap();
            buf[1..1 + want.len()].copy_from_slice(&want);
            let mut unaligned = vec![0f32; x.len()];
            dequantize_row(dtype, &buf[1..1 + want.len()], &mut unaligned).unwrap();
            assert_eq!(first_bit_difference(&aligned, &unaligned), None, "{dtype} {label}");
            assert!(aligned.iter().all(|v| v.is_finite()), "{dtype} {label}");

            // quantizing into an unaligned destination writes the same bytes
            let dst = &mut buf[3..3 + want.len()];
            quantize_row(dtype, x, dst).unwrap();
            assert_eq!(dst, &want[..], "{dtype} {label}");
        }
    }
}

/// Seeded Gaussian-ish values (sum of uniforms) without an RNG crate.
fn gaussian(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..n).map(|_| ((0..4).map(|_| next()).sum::<f64>() - 2.0) as f32 * 1.7).collect()
}

/// dequantize(quantize(x)) stays within each type's expected error, per block
/// and as a relative RMS over the row.
#[test]
fn round_trip_error_bounds() {
    // (type, relative RMS bound, max error in units of the block's largest magnitude). The
    // block bounds follow from the formats: half a step, plus the f16 rounding of the scale
    // (Q4_0/Q5_0 put the largest magnitude at level -8/-16, so the opposite extreme can
    // only reach 7/8 and 15/16 of it).
    let bounds = [
        (DType::Q8_0, 0.006, 0.0045),
        (DType::Q8_1, 0.006, 0.0045),
        (DType::Q8_K, 0.008, 0.004),
        (DType::Q6_K, 0.025, 0.025),
        (DType::Q5_0, 0.05, 0.064),
        (DType::Q5_1, 0.045, 0.035),
        (DType::Q5_K, 0.045, 0.05),
        (DType::Q4_0, 0.1, 0.126),
        (DType::Q4_1, 0.09, 0.07),
        (DType::Q4_K, 0.085, 0.09),
        (DType::Q3_K, 0.19, 0.25),
        (DType::Q2_K, 0.35, 0.4),
    ];
    for (seed, n, scale) in [(1u64, 256usize, 1.0f32), (2, 512, 0.02), (3, 1024, 300.0), (4, 4096, 1e-4)] {
        let x: Vec<f32> = gaussian(seed, n).iter().map(|v| v * scale).collect();
        // with values around 1e-4 the f16 scales are subnormal and lose precision
        let tiny = scale < 1e-3;
        for (dtype, rms_bound, block_bound) in bounds {
            let mut q = vec![0u8; dtype.row_size(n as i64).unwrap()];
            quantize_row(dtype, &x, &mut q).unwrap();
            let mut y = vec![0f32; n];
            dequantize_row(dtype, &q, &mut y).unwrap();
            let err2: f64 = x.iter().zip(&y).map(|(a, b)| f64::from(a - b).powi(2)).sum();
            let sig2: f64 = x.iter().map(|a| f64::from(*a).powi(2)).sum();
            let rel = (err2 / sig2).sqrt();
            let rms_bound = if tiny { 3.0 * rms_bound } else { rms_bound };
            assert!(rel < rms_bound, "{dtype} n={n} scale={scale}: relative RMS error {rel:.4} >= {rms_bound}");
            let bs = dtype.block_size();
            for (b, (xs, ys)) in x.chunks(bs).zip(y.chunks(bs)).enumerate().filter(|_| !tiny) {
                let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
                let worst = xs.iter().zip(ys).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
                assert!(
                    worst <= block_bound * amax,
                    "{dtype} n={n} scale={scale} block {b}: max error {worst} > {block_bound} * {amax}"
                );
            }
            // quantizing is deterministic
            let mut again = vec![0u8; q.len()];
            quantize_row(dtype, &x, &mut again).unwrap();
            assert_eq!(q, again, "{dtype}");
        }
    }
}

/// Values that are already on a legacy type's grid survive a second round trip unchanged.
#[test]
fn legacy_round_trip_is_stable() {
    let x = gaussian(9, 1024);
    for dtype in [DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::Q4_1, DType::Q5_1] {
        let rt = |v: &[f32]| {
            let mut q = vec![0u8; dtype.row_size(v.len() as i64).unwrap()];
            quantize_row(dtype, v, &mut q).unwrap();
            let mut y = vec![0f32; v.len()];
            dequantize_row(dtype, &q, &mut y).unwrap();
            y
        };
        let once = rt(&x);
        let twice = rt(&once);
        let worst = once.iter().zip(&twice).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        // the f16 scale of the second pass can differ by a rounding step
        assert!(worst <= amax * 2e-3, "{dtype}: second round trip moved a value by {worst}");
    }
}
