//! The dot-product kernels of `rgml::quant::dot`:
//! - every SIMD level this CPU supports against the scalar kernel, for every
//!   weight type, at odd sizes, on realistic (quantized), random-byte and
//!   extreme rows, read from unaligned slices;
//! - the scalar kernel against an independent f64 reference (both rows
//!   dequantized with `quant::dequantize_row`, products summed in f64);
//! - `quantize_activations` against ggml-cpu's x86 semantics (round half to
//!   even for Q8_0/Q8_1), and the API's errors and length checks.
//!
//! Tolerance: `|got - want| ≤ 1e-5 · Σ|terms|`, where `Σ|terms|` is the f64 sum
//! of `(|scaled quant| + |min|) · |activation|` over all values (plus `|m·s|` per
//! Q4_1/Q5_1 block): every kernel's integer part is exact, so they differ
//! only by f32 rounding of the per-block scaling and the order of the sums.

mod common;

use common::Rng;
use half::{bf16, f16};
use rgml::quant::dot::{
    dot_fn, dot_fn_for, dot_fn_scalar, kernel_level, quantize_activations, vec_dot_type, SimdLevel,
};
use rgml::quant::{dequantize_row, quantize_row};
use rgml::{DType, Error};

use rgml::quant::dot::WEIGHT_TYPES;

const REL_TOL: f64 = 1e-5;

/// Uniform in `0..n`.
fn below(rng: &mut Rng, n: u64) -> u64 {
    rng.next() % n
}

/// `n` random bytes.
fn random_bytes(rng: &mut Rng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.next() as u8).collect()
}

/// A float with a random sign and a magnitude in [2^lo, 2^hi).
fn log_uniform(rng: &mut Rng, lo: i32, hi: i32) -> f32 {
    let e = lo + below(rng, (hi - lo) as u64) as i32;
    let m = 1.0 + (rng.f(1.0) + 1.0) / 2.0;
    let s = if rng.next() & 1 == 0 { 1.0 } else { -1.0 };
    s * m * 2f32.powi(e)
}

/// How a test row is made.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// Random floats converted with `quantize_row` (weights) or
    /// `quantize_activations` (activations): what a model sees.
    Realistic,
    /// Random bytes with sane scale fields: every quant pattern.
    RandomBytes,
    /// Every quant at an extreme, scales large or subnormal.
    Extreme,
}

fn set_f16(b: &mut [u8], off: usize, x: f32) {
    b[off..off + 2].copy_from_slice(&f16::from_f32(x).to_bits().to_le_bytes());
}

/// Byte offsets of the f16 scale fields in a block of `t`.
fn scale_fields(t: DType) -> &'static [usize] {
    match t {
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 => &[0],
        DType::Q4_1 | DType::Q5_1 | DType::Q8_1 | DType::Q4_K | DType::Q5_K => &[0, 2],
        DType::Q2_K => &[80, 82],
        DType::Q3_K => &[108],
        DType::Q6_K => &[208],
        _ => &[],
    }
}

/// Byte range of the i8 quants of a Q8 block (they are kept out of -128, which
/// no ggml quantizer writes).
fn q8_quants(t: DType) -> Option<std::ops::Range<usize>> {
    match t {
        DType::Q8_0 => Some(2..34),
        DType::Q8_1 => Some(4..36),
        DType::Q8_K => Some(4..260),
        _ => None,
    }
}

/// Fixes up a block-quantized row of random bytes: sane scales, no -128 quants,
/// consistent Q8_1 sums and Q8_K block sums.
fn fix_blocks(t: DType, row: &mut [u8], rng: &mut Rng, kind: Kind) {
    for b in row.chunks_exact_mut(t.type_size()) {
        for &off in scale_fields(t) {
            let x = match kind {
                // (Q8_1's s = f16(d·Σq) must stay finite)
                Kind::Extreme if rng.next() & 1 == 0 => {
                    if q8_quants(t).is_some() {
                        15.0
                    } else {
                        60000.0
                    }
                }
                Kind::Extreme => 3e-7, // an f16 subnormal
                _ => log_uniform(rng, -12, 2),
            };
            set_f16(b, off, x);
        }
        if let Some(r) = q8_quants(t) {
            for q in &mut b[r.clone()] {
                if *q == 0x80 {
                    *q = 0x81;
                }
            }
            let sum: i32 = b[r.clone()].iter().map(|&q| i32::from(q as i8)).sum();
            match t {
                DType::Q8_1 => {
                    let d = f16::from_le_bytes([b[0], b[1]]).to_f32();
                    set_f16(b, 2, d * sum as f32);
                }
                DType::Q8_K => {
                    let d = if kind == Kind::Extreme { 1e20 } else { log_uniform(rng, -12, 2) };
                    b[0..4].copy_from_slice(&d.to_le_bytes());
                    for (g, qs) in b[4..260].to_vec().chunks_exact(16).enumerate() {
                        let s: i16 = qs.iter().map(|&q| i16::from(q as i8)).sum();
                        b[260 + 2 * g..262 + 2 * g].copy_from_slice(&s.to_le_bytes());
                    }
                }
                _ => {}
            }
        }
    }
}

/// A row of `n` values of float type `t`.
fn float_row(t: DType, n: usize, rng: &mut Rng, kind: Kind) -> Vec<u8> {
    let edge = [0.0, -0.0, 1.0, -1.0, 65504.0, -65504.0, 6e-8, -1e-7, 1e-30, 0.3];
    let mut out = Vec::new();
    for i in 0..n {
        let x = match kind {
            Kind::Realistic => rng.f(1.0),
            Kind::RandomBytes => log_uniform(rng, -40, 20),
            Kind::Extreme => edge[i % edge.len()],
        };
        match t {
            DType::F32 => out.extend_from_slice(&x.to_le_bytes()),
            // random f16 bit patterns (finite), incl. subnormals
            DType::F16 if kind == Kind::RandomBytes => {
                let bits = loop {
                    let b = rng.next() as u16;
                    if b & 0x7c00 != 0x7c00 {
                        break b;
                    }
                };
                out.extend_from_slice(&bits.to_le_bytes())
            }
            DType::F16 => out.extend_from_slice(&f16::from_f32(x).to_bits().to_le_bytes()),
            DType::BF16 => out.extend_from_slice(&bf16::from_f32(x).to_bits().to_le_bytes()),
            _ => unreachable!(),
        }
    }
    out
}

/// A weight row of `n` values of `t`.
fn weight_row(t: DType, n: usize, rng: &mut Rng, kind: Kind) -> Vec<u8> {
    if t.is_float() {
        return float_row(t, n, rng, kind);
    }
    let bytes = t.row_size(n as i64).unwrap();
    match kind {
        Kind::Realistic => {
            let scale = log_uniform(rng, -6, 4);
            let x: Vec<f32> = (0..n).map(|_| rng.f(1.0) * scale).collect();
            let mut row = vec![0u8; bytes];
            quantize_row(t, &x, &mut row).unwrap();
            row
        }
        Kind::RandomBytes => {
            let mut row = random_bytes(rng, bytes);
            fix_blocks(t, &mut row, rng, kind);
            row
        }
        Kind::Extreme => {
            let fill = if rng.next() & 1 == 0 { 0xff } else { 0x00 };
            let mut row = vec![fill; bytes];
            fix_blocks(t, &mut row, rng, kind);
            row
        }
    }
}

/// An activation row of `n` values of `vec_dot_type(w)`.
fn activation_row(w: DType, n: usize, rng: &mut Rng, kind: Kind) -> Vec<u8> {
    let t = vec_dot_type(w);
    if t.is_float() {
        return float_row(t, n, rng, kind);
    }
    let bytes = t.row_size(n as i64).unwrap();
    match kind {
        Kind::Realistic => {
            let scale = log_uniform(rng, -6, 6);
            let x: Vec<f32> = (0..n).map(|_| rng.f(1.0) * scale).collect();
            let mut row = vec![0u8; bytes];
            quantize_activations(w, &x, &mut row).unwrap();
            row
        }
        Kind::RandomBytes | Kind::Extreme => {
            let mut row = if kind == Kind::Extreme {
                // all +127 or all -127
                let q = if rng.next() & 1 == 0 { 0x7f } else { 0x81 };
                vec![q; bytes]
            } else {
                random_bytes(rng, bytes)
            };
            fix_blocks(t, &mut row, rng, kind);
            row
        }
    }
}

fn dequant(t: DType, row: &[u8], n: usize) -> Vec<f64> {
    let mut out = vec![0f32; n];
    dequantize_row(t, row, &mut out).unwrap();
    out.into_iter().map(f64::from).collect()
}

/// The f64 reference of `w · a` and the tolerance scale `Σ|terms|`.
fn reference(wt: DType, w: &[u8], a: &[u8], n: usize) -> (f64, f64) {
    let at = vec_dot_type(wt);
    let (wv, av) = (dequant(wt, w, n), dequant(at, a, n));
    // the affine types' offset part: the row dequantized with its scale `d` zeroed
    let zero_d = match wt {
        DType::Q4_1 | DType::Q5_1 | DType::Q4_K | DType::Q5_K => Some(0),
        DType::Q2_K => Some(80),
        _ => None,
    };
    let off = match zero_d {
        Some(o) => {
            let mut z = w.to_vec();
            for b in z.chunks_exact_mut(wt.type_size()) {
                b[o..o + 2].fill(0);
            }
            dequant(wt, &z, n)
        }
        None => vec![0.0; n],
    };
    let (mut dot, mut mag) = (0f64, 0f64);
    for i in 0..n {
        let scaled = wv[i] - off[i];
        mag += (scaled.abs() + off[i].abs()) * av[i].abs();
        dot += scaled * av[i];
        if !matches!(wt, DType::Q4_1 | DType::Q5_1) {
            dot += off[i] * av[i];
        }
    }
    if matches!(wt, DType::Q4_1 | DType::Q5_1) {
        // ggml uses Q8_1's stored s = f16(d·Σq), not d·Σq: Σ_blocks m·s
        for (b, blk) in a.chunks_exact(at.type_size()).enumerate() {
            let s = f64::from(f16::from_le_bytes([blk[2], blk[3]]).to_f32());
            let m = off[32 * b];
            dot += m * s;
            mag += (m * s).abs();
        }
    }
    (dot, mag)
}

/// `bytes` copied to an odd address.
fn unaligned(bytes: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(bytes.len() + 1);
    v.push(0xa5);
    v.extend_from_slice(bytes);
    v
}

fn sizes(t: DType) -> Vec<usize> {
    match t.block_size() {
        1 => vec![0, 1, 7, 8, 15, 16, 31, 33, 63, 64, 65, 127, 257, 1000, 4099],
        bs => [1, 2, 3, 7, 16, 33].iter().map(|k| k * bs).chain([4096, 8192 + 32 * bs]).collect(),
    }
}

fn check_close(what: &str, got: f32, want: f64, mag: f64) {
    let err = (f64::from(got) - want).abs();
    let tol = REL_TOL * mag + 1e-30;
    assert!(err <= tol, "{what}: got {got}, want {want}, error {err:e} > tolerance {tol:e} (Σ|terms| = {mag:e})");
}

fn levels() -> Vec<SimdLevel> {
    SimdLevel::ALL.into_iter().filter(|l| l.is_supported()).collect()
}

#[test]
fn every_level_agrees_with_scalar_and_scalar_with_f64() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let levels = levels();
    eprintln!("levels on this CPU: {levels:?}");
    for wt in WEIGHT_TYPES {
        let scalar = dot_fn_scalar(wt).unwrap();
        for n in sizes(wt) {
            for kind in [Kind::Realistic, Kind::RandomBytes, Kind::Extreme] {
                let w = weight_row(wt, n, &mut rng, kind);
                let a = activation_row(wt, n, &mut rng, kind);
                let (want, mag) = reference(wt, &w, &a, n);
                let s = scalar.dot(n, &w, &a).unwrap();
                check_close(&format!("{wt} scalar n={n} {kind:?}"), s, want, mag);
                let (wu, au) = (unaligned(&w), unaligned(&a));
                assert_eq!(
                    scalar.dot(n, &wu[1..], &au[1..]).unwrap().to_bits(),
                    s.to_bits(),
                    "{wt} scalar unaligned n={n}"
                );
                for &level in &levels {
                    let f = dot_fn_for(wt, level).unwrap();
                    let what = format!("{wt} {level:?} n={n} {kind:?}");
                    let got = f.dot(n, &w, &a).unwrap();
                    check_close(&what, got, f64::from(s), mag);
                    check_close(&what, got, want, mag);
                    assert_eq!(f.dot(n, &wu[1..], &au[1..]).unwrap().to_bits(), got.to_bits(), "{what} unaligned");
                }
            }
        }
    }
}

#[test]
fn realistic_rows_from_floats_match_the_float_dot() {
    // end to end: quantized weights · quantized activations ≈ the f32 dot
    let mut rng = Rng(7);
    let n = 4096;
    let x: Vec<f32> = (0..n).map(|_| rng.f(1.0)).collect();
    let y: Vec<f32> = (0..n).map(|_| rng.f(1.0)).collect();
    let exact: f64 = x.iter().zip(&y).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum();
    let norm = x.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>().sqrt()
        * y.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>().sqrt();
    for wt in WEIGHT_TYPES {
        let mut w = vec![0u8; wt.row_size(n as i64).unwrap()];
        quantize_row(wt, &x, &mut w).unwrap();
        let mut a = vec![0u8; vec_dot_type(wt).row_size(n as i64).unwrap()];
        quantize_activations(wt, &y, &mut a).unwrap();
        let got = dot_fn(wt).unwrap().dot(n, &w, &a).unwrap();
        // 2-bit weights are coarse; the bound is loose but catches layout mix-ups
        let bound = if wt == DType::Q2_K { 0.1 } else { 0.05 } * norm;
        assert!((f64::from(got) - exact).abs() < bound, "{wt}: {got} vs {exact} (‖x‖‖y‖ = {norm})");
    }
}

#[test]
fn q8_0_activations_round_half_to_even() {
    // amax = 127 makes id = 127/127 = 1 exactly, so x·id is x itself
    let mut x = vec![0f32; 32];
    let ties = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, -126.5, 3.4999998, 3.5000002];
    let want: [i8; 10] = [0, 2, 2, 0, -2, -2, 126, -126, 3, 4];
    x[..ties.len()].copy_from_slice(&ties);
    x[31] = 127.0;
    for w in [DType::Q4_0, DType::Q5_0, DType::Q8_0] {
        let mut out = vec![0u8; 34];
        quantize_activations(w, &x, &mut out).unwrap();
        assert_eq!(f16::from_le_bytes([out[0], out[1]]).to_f32(), 1.0);
        let qs: Vec<i8> = out[2..34].iter().map(|&b| b as i8).collect();
        assert_eq!(&qs[..ties.len()], &want, "{w}");
        assert_eq!(qs[31], 127);
        // the reference quantizer rounds half away from zero instead
        let mut reference = vec![0u8; 34];
        quantize_row(DType::Q8_0, &x, &mut reference).unwrap();
        assert_eq!(reference[2] as i8, 1, "roundf(0.5) = 1");
    }
    // Q8_1: the same quants, and s = f16(d · Σq)
    let mut out = vec![0u8; 36];
    quantize_activations(DType::Q4_1, &x, &mut out).unwrap();
    let qs: Vec<i8> = out[4..36].iter().map(|&b| b as i8).collect();
    assert_eq!(&qs[..ties.len()], &want);
    let sum: i32 = qs.iter().map(|&q| i32::from(q)).sum();
    assert_eq!(f16::from_le_bytes([out[2], out[3]]), f16::from_f32(sum as f32));
}

#[test]
fn q8_activations_use_127_over_amax() {
    // ggml-cpu's id = 127/amax, not 1/(amax/127): compare with a direct model
    let mut rng = Rng(99);
    for _ in 0..200 {
        let scale = log_uniform(&mut rng, -20, 20);
        let x: Vec<f32> = (0..64).map(|_| rng.f(1.0) * scale).collect();
        let mut out = vec![0u8; 68];
        quantize_activations(DType::Q8_0, &x, &mut out).unwrap();
        for (b, xs) in out.chunks_exact(34).zip(x.chunks_exact(32)) {
            let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
            assert_eq!(f16::from_le_bytes([b[0], b[1]]), f16::from_f32(amax / 127.0));
            let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
            for (&q, &v) in b[2..].iter().zip(xs) {
                assert_eq!(q as i8, (v * id).round_ties_even() as i8, "x = {v}, amax = {amax}");
            }
        }
    }
}

#[test]
fn other_activation_types_are_ggml_cpu_conversions() {
    let mut rng = Rng(3);
    let mut x: Vec<f32> = (0..512).map(|_| log_uniform(&mut rng, -30, 30)).collect();
    x[..6].copy_from_slice(&[0.0, -0.0, f32::INFINITY, f32::NAN, 1.0 + f32::EPSILON, 65520.0]);
    // F32: a copy
    let mut out = vec![0u8; 2048];
    quantize_activations(DType::F32, &x, &mut out).unwrap();
    for (b, v) in out.chunks_exact(4).zip(&x) {
        assert_eq!(u32::from_le_bytes(b.try_into().unwrap()), v.to_bits());
    }
    // F16: round to nearest even, overflow to inf, NaN quiet
    let mut out = vec![0u8; 1024];
    quantize_activations(DType::F16, &x, &mut out).unwrap();
    for (b, v) in out.chunks_exact(2).zip(&x) {
        assert_eq!(u16::from_le_bytes([b[0], b[1]]), f16::from_f32(*v).to_bits(), "{v}");
    }
    assert_eq!(u16::from_le_bytes([out[10], out[11]]), 0x7c00, "65520 rounds up to inf");
    // BF16: ggml_compute_fp32_to_bf16
    quantize_activations(DType::BF16, &x, &mut out).unwrap();
    for (b, v) in out.chunks_exact(2).zip(&x) {
        let u = v.to_bits();
        let want = if u & 0x7fff_ffff > 0x7f80_0000 { (u >> 16) | 64 } else { (u + (0x7fff + ((u >> 16) & 1))) >> 16 };
        assert_eq!(u32::from(u16::from_le_bytes([b[0], b[1]])), want, "{v}");
    }
    // Q8_K: the reference quantizer
    let x: Vec<f32> = x.iter().map(|v| if v.is_finite() { *v } else { 0.0 }).collect();
    for w in [DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K] {
        let (mut got, mut want) = (vec![0u8; 584], vec![0u8; 584]);
        quantize_activations(w, &x, &mut got).unwrap();
        quantize_row(DType::Q8_K, &x, &mut want).unwrap();
        assert_eq!(got, want, "{w}");
    }
}

#[test]
fn vec_dot_types_follow_ggml_cpu() {
    use DType::*;
    let table = [
        (F32, F32),
        (F16, F16),
        (BF16, BF16),
        (Q4_0, Q8_0),
        (Q4_1, Q8_1),
        (Q5_0, Q8_0),
        (Q5_1, Q8_1),
        (Q8_0, Q8_0),
        (Q2_K, Q8_K),
        (Q3_K, Q8_K),
        (Q4_K, Q8_K),
        (Q5_K, Q8_K),
        (Q6_K, Q8_K),
    ];
    for (w, a) in table {
        assert_eq!(vec_dot_type(w), a, "{w}");
        assert!(dot_fn(w).is_ok() && dot_fn_scalar(w).is_ok(), "{w}");
        assert_eq!(w.block_size(), a.block_size());
    }
    for w in [Q8_1, Q8_K, I8, I16, I32] {
        assert!(matches!(dot_fn(w), Err(Error::Unsupported { .. })), "{w}");
        assert!(matches!(dot_fn_scalar(w), Err(Error::Unsupported { .. })), "{w}");
        assert!(dot_fn_for(w, SimdLevel::Scalar).is_none());
        let r = quantize_activations(w, &[0.0; 256], &mut [0u8; 1024]);
        assert!(matches!(r, Err(Error::Unsupported { .. })), "{w}");
    }
}

#[test]
fn levels_and_dispatch() {
    assert!(SimdLevel::Scalar.is_supported());
    let best = SimdLevel::detect();
    assert!(best.is_supported());
    for w in WEIGHT_TYPES {
        assert_eq!(dot_fn(w).unwrap().level(), dot_fn_for(w, best).unwrap().level(), "{w}");
        assert_eq!(dot_fn(w).unwrap().level(), kernel_level(w, best).unwrap(), "{w}");
        assert_eq!(dot_fn_scalar(w).unwrap().level(), SimdLevel::Scalar);
        assert_eq!(dot_fn_for(w, SimdLevel::Scalar).unwrap().level(), SimdLevel::Scalar);
        for level in SimdLevel::ALL {
            assert_eq!(dot_fn_for(w, level).is_some(), level.is_supported(), "{w} {level:?}");
            let k = kernel_level(w, level).unwrap();
            assert!(k <= level);
            if cfg!(target_arch = "x86_64") {
                assert_eq!(k, level, "{w}: every pair has a kernel at every x86 level");
            }
        }
    }
}

#[test]
fn activation_length_errors() {
    let r = quantize_activations(DType::Q4_0, &[0.0; 33], &mut [0u8; 36]);
    assert!(matches!(r, Err(Error::Shape { .. })), "{r:?}");
    let r = quantize_activations(DType::Q4_0, &[0.0; 32], &mut [0u8; 35]);
    assert!(matches!(r, Err(Error::Shape { .. })), "{r:?}");
    let r = quantize_activations(DType::Q4_K, &[0.0; 32], &mut [0u8; 36]);
    assert!(matches!(r, Err(Error::Shape { .. })), "{r:?}");
    assert!(quantize_activations(DType::F16, &[], &mut []).is_ok());
}

/// Every kernel, called with a slice one byte short (or long), or a partial
/// block, is an `Error::Shape`, never a read past the slice.
#[test]
fn bad_lengths_are_errors_at_every_level() {
    for w in WEIGHT_TYPES {
        let n = w.block_size() * 2;
        let wb = w.row_size(n as i64).unwrap();
        let ab = vec_dot_type(w).row_size(n as i64).unwrap();
        for level in levels() {
            let f = dot_fn_for(w, level).unwrap();
            let (wv, av) = (vec![0u8; wb + 1], vec![0u8; ab + 1]);
            for (x, y) in [(&wv[..wb - 1], &av[..ab]), (&wv[..wb], &av[..ab - 1]), (&wv[..], &av[..ab])] {
                let r = f.dot(n, x, y);
                assert!(matches!(r, Err(Error::Shape { .. })), "{w} {level:?}: bad slice lengths gave {r:?}");
            }
            if w.block_size() > 1 {
                let r = f.dot(n - 1, &wv[..wb], &av[..ab]);
                assert!(matches!(r, Err(Error::Shape { .. })), "{w} {level:?}: a partial block gave {r:?}");
            }
            assert_eq!(f.dot(0, &[], &[]).unwrap(), 0.0);
        }
    }
}

/// Q8_0 quants of -128 (which no ggml quantizer writes) are exact in the
/// scalar and AVX-512 VNNI kernels.
#[test]
fn q8_0_minus_128_is_exact_where_documented() {
    let mut w = vec![0u8; 34];
    let mut a = vec![0u8; 34];
    set_f16(&mut w, 0, 1.0);
    set_f16(&mut a, 0, 1.0);
    w[2..].fill(0x80);
    a[2..].fill(0x80);
    w[2] = 0x81; // -127 · -128
    let want = 31.0 * 128.0 * 128.0 + 127.0 * 128.0;
    for level in [SimdLevel::Scalar, SimdLevel::Avx512] {
        if let Some(f) = dot_fn_for(DType::Q8_0, level) {
            assert_eq!(f.dot(32, &w, &a).unwrap(), want, "{level:?}");
        }
    }
}

/// Activations with NaN or infinities never panic the conversion (the block
/// becomes NaN garbage, as in ggml).
#[test]
fn non_finite_activations_do_not_panic() {
    for wt in [DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::F16] {
        let pt = vec_dot_type(wt);
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut x = vec![0.5f32; 256];
            x[17] = bad;
            let mut out = vec![0u8; pt.row_size(256).unwrap()];
            quantize_activations(wt, &x, &mut out).unwrap();
        }
    }
}
