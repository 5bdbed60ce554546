//! The dot-product kernels of `rgml::quant::dot`:
//! - every SIMD level this CPU supports against the scalar kernel, for every
//!   weight type, at odd sizes, on realistic (quantized; random valid blocks
//!   for the i-quants, which have no quantizer), random-byte and extreme rows,
//!   read from unaligned slices;
//! - the scalar kernel against an independent f64 reference (both rows
//!   dequantized with `quant::dequantize_row`, products summed in f64);
//! - `quantize_activations` against ggml-cpu's x86 semantics (round half to
//!   even for Q8_0/Q8_1), and the API's errors and length checks.
//!
//! Tolerance: `|got - want| ≤ 1e-5 · Σ|terms|`, where `Σ|terms|` is the f64 sum
//! of `(|scaled quant| + |min|) · |activation|` over all values (plus `|m·s|` per
//! Q4_1/Q5_1 block): every kernel's integer part is exact, so they differ
//! only by f32 rounding of the per-block scaling and the order of the sums.

#[path = "../common/mod.rs"]
mod common;
mod rows;

use common::Rng;
use half::f16;
use rgml::quant::dot::{
    dot_fn, dot_fn_for, dot_fn_scalar, kernel_level, quantize_activations, vec_dot_type, SimdLevel,
};
use rgml::quant::{has_quantizer, quantize_row};
use rgml::{DType, Error};
use rows::{activation_row, log_uniform, reference, set_f16, weight_row, Kind};

use rgml::quant::dot::WEIGHT_TYPES;

const REL_TOL: f64 = 1e-5;

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
    for wt in WEIGHT_TYPES.into_iter().filter(|&t| has_quantizer(t)) {
        let mut w = vec![0u8; wt.row_size(n as i64).unwrap()];
        quantize_row(wt, &x, &mut w).unwrap();
        let mut a = vec![0u8; vec_dot_type(wt).row_size(n as i64).unwrap()];
        quantize_activations(wt, &y, &mut a).unwrap();
        let got = dot_fn(wt).unwrap().dot(n, &w, &a).unwrap();
        // 2-bit weights are coarse; the bound is loose but catches layout mix-ups
        let bound = match wt {
            DType::Q2_K => 0.1,
            // ternary weights: x is not ternary, its rounding to {-1, 0, 1}·amax is coarse
            DType::TQ1_0 | DType::TQ2_0 => 0.5,
            _ => 0.05,
        } * norm;
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
        (IQ4_NL, Q8_0),
        (MXFP4, Q8_0),
        (IQ4_XS, Q8_K),
        (IQ1_S, Q8_K),
        (IQ1_M, Q8_K),
        (IQ2_XXS, Q8_K),
        (IQ2_XS, Q8_K),
        (IQ2_S, Q8_K),
        (IQ3_XXS, Q8_K),
        (IQ3_S, Q8_K),
        (TQ1_0, Q8_K),
        (TQ2_0, Q8_K),
    ];
    assert_eq!(table.len(), WEIGHT_TYPES.len());
    for (w, a) in table {
        assert_eq!(vec_dot_type(w), a, "{w}");
        assert!(dot_fn(w).is_ok() && dot_fn_scalar(w).is_ok(), "{w}");
        assert_eq!(w.block_size(), a.block_size());
    }
    for w in [Q8_1, Q8_K, I8, I16, I32, I64, F64] {
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
            // the i-quants and ternary types have scalar kernels only
            let simd = !matches!(
                w,
                DType::IQ1_S
                    | DType::IQ1_M
                    | DType::IQ2_XXS
                    | DType::IQ2_XS
                    | DType::IQ2_S
                    | DType::IQ3_XXS
                    | DType::IQ3_S
                    | DType::TQ1_0
                    | DType::TQ2_0
            );
            if cfg!(target_arch = "x86_64") && simd {
                assert_eq!(k, level, "{w}: a kernel at every x86 level");
            } else {
                assert_eq!(k, SimdLevel::Scalar, "{w}");
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
