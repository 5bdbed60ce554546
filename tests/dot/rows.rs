//! The rows the dot tests feed the kernels (weights and activations of every
//! type, realistic, random-byte and extreme) and the f64 reference.

use half::{bf16, f16};
use rgml::quant::dot::{quantize_activations, vec_dot_type};
use rgml::quant::{dequantize_row, has_quantizer, quantize_row};
use rgml::DType;

use super::common::Rng;

/// Uniform in `0..n`.
pub(crate) fn below(rng: &mut Rng, n: u64) -> u64 {
    rng.next() % n
}

/// `n` random bytes.
pub(crate) fn random_bytes(rng: &mut Rng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.next() as u8).collect()
}

/// A float with a random sign and a magnitude in [2^lo, 2^hi).
pub(crate) fn log_uniform(rng: &mut Rng, lo: i32, hi: i32) -> f32 {
    let e = lo + below(rng, (hi - lo) as u64) as i32;
    let m = 1.0 + (rng.f(1.0) + 1.0) / 2.0;
    let s = if rng.next() & 1 == 0 { 1.0 } else { -1.0 };
    s * m * 2f32.powi(e)
}

/// How a test row is made.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Kind {
    /// Random floats converted with `quantize_row` (weights) or
    /// `quantize_activations` (activations): what a model sees.
    Realistic,
    /// Random bytes with sane scale fields: every quant pattern.
    RandomBytes,
    /// Every quant at an extreme, scales large or subnormal.
    Extreme,
}

pub(crate) fn set_f16(b: &mut [u8], off: usize, x: f32) {
    b[off..off + 2].copy_from_slice(&f16::from_f32(x).to_bits().to_le_bytes());
}

/// Byte offsets of the f16 scale fields in a block of `t`.
pub(crate) fn scale_fields(t: DType) -> &'static [usize] {
    match t {
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 => &[0],
        DType::Q4_1 | DType::Q5_1 | DType::Q8_1 | DType::Q4_K | DType::Q5_K => &[0, 2],
        DType::Q2_K => &[80, 82],
        DType::Q3_K => &[108],
        DType::Q6_K => &[208],
        DType::IQ4_NL
        | DType::IQ4_XS
        | DType::IQ1_S
        | DType::IQ2_XXS
        | DType::IQ2_XS
        | DType::IQ2_S
        | DType::IQ3_XXS
        | DType::IQ3_S => &[0],
        DType::TQ1_0 => &[52],
        DType::TQ2_0 => &[64],
        _ => &[],
    }
}

/// Sets the scales ggml does not store as a whole f16: MXFP4's E8M0 exponent
/// (kept where products stay finite), IQ1_M's f16 split over four nibbles.
pub(crate) fn fix_other_scales(t: DType, b: &mut [u8], rng: &mut Rng, kind: Kind) {
    match t {
        DType::MXFP4 => {
            b[0] = match kind {
                Kind::Extreme if rng.next() & 1 == 0 => 150,
                Kind::Extreme => 1, // a subnormal f32 scale
                _ => 110 + below(rng, 20) as u8,
            }
        }
        DType::IQ1_M => {
            let x = match kind {
                Kind::Extreme if rng.next() & 1 == 0 => 60000.0,
                Kind::Extreme => 3e-7,
                _ => log_uniform(rng, -12, 2),
            };
            let h = f16::from_f32(x).to_bits();
            for w in 0..4 {
                let top = &mut b[48 + 2 * w + 1];
                *top = (*top & 0x0f) | ((((h >> (4 * w)) & 0x0f) as u8) << 4);
            }
        }
        _ => {}
    }
}

/// Byte range of the i8 quants of a Q8 block (they are kept out of -128, which
/// no ggml quantizer writes).
pub(crate) fn q8_quants(t: DType) -> Option<std::ops::Range<usize>> {
    match t {
        DType::Q8_0 => Some(2..34),
        DType::Q8_1 => Some(4..36),
        DType::Q8_K => Some(4..260),
        _ => None,
    }
}

/// Fixes up a block-quantized row of random bytes: sane scales, no -128 quants,
/// consistent Q8_1 sums and Q8_K block sums.
pub(crate) fn fix_blocks(t: DType, row: &mut [u8], rng: &mut Rng, kind: Kind) {
    for b in row.chunks_exact_mut(t.type_size()) {
        fix_other_scales(t, b, rng, kind);
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
pub(crate) fn float_row(t: DType, n: usize, rng: &mut Rng, kind: Kind) -> Vec<u8> {
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
pub(crate) fn weight_row(t: DType, n: usize, rng: &mut Rng, kind: Kind) -> Vec<u8> {
    if t.is_float() {
        return float_row(t, n, rng, kind);
    }
    let bytes = t.row_size(n as i64).unwrap();
    // no quantizer for the i-quants: random valid blocks stand for quantized rows
    let kind = if kind == Kind::Realistic && !has_quantizer(t) { Kind::RandomBytes } else { kind };
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
pub(crate) fn activation_row(w: DType, n: usize, rng: &mut Rng, kind: Kind) -> Vec<u8> {
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

pub(crate) fn dequant(t: DType, row: &[u8], n: usize) -> Vec<f64> {
    let mut out = vec![0f32; n];
    dequantize_row(t, row, &mut out).unwrap();
    out.into_iter().map(f64::from).collect()
}

/// The f64 reference of `w · a` and the tolerance scale `Σ|terms|`.
pub(crate) fn reference(wt: DType, w: &[u8], a: &[u8], n: usize) -> (f64, f64) {
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
