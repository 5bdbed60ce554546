//! Activation rows into the weights' dot partner type, as ggml-cpu's
//! `from_float` for that type does on x86-64.

use half::f16;

use super::super::{check_row, quantize_row, BlockQ8_0, BlockQ8_1, QK};
use super::{scalar, vec_dot_type};
use crate::dtype::DType;
use crate::error::{Error, Result};

/// Converts one activation row `src` into `dst`, a row of
/// [`vec_dot_type`]`(w)`, exactly as ggml-cpu's `from_float` of that type does
/// on x86-64, so that a matmul sees the bytes ggml's would:
///
/// - F32: a copy. F16: round to nearest even (F16C's `vcvtps2ph`; a NaN stays
///   a quiet NaN with its top payload bits). BF16: ggml's
///   `ggml_compute_fp32_to_bf16` (round to nearest even, NaN made quiet).
/// - Q8_0 and Q8_1: ggml-cpu's AVX `quantize_row_q8_0`/`quantize_row_q8_1`,
///   which differ from the reference quantizer ([`quantize_row`]) in two ways:
///   the inverse scale is `127 / amax` rather than `1 / (amax / 127)`, and
///   quants round half to **even** (`vroundps`) rather than half away from zero
///   (`roundf`). `d = amax / 127` is stored as f16; Q8_1's `s` is the f16 of
///   `d * Σq`. A NaN or infinite input gives the quants `vcvtps2dq` and the
///   saturating packs give (`-128` for NaN).
/// - Q8_K: the reference `quantize_row_q8_K_ref`, which ggml-cpu uses on x86.
///
/// `src.len()` must be a whole number of the partner's blocks and `dst.len()`
/// its row size, else [`Error::Shape`]; a `w` without a dot kernel (see
/// [`super::dot_fn`]) is [`Error::Unsupported`].
///
/// [`quantize_row`]: super::super::quantize_row
pub fn quantize_activations(w: DType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    const OP: &str = "quantize_activations";
    if scalar::kernel(w).is_none() {
        return Err(Error::Unsupported { op: OP, dtype: w });
    }
    let t = vec_dot_type(w);
    check_row(OP, t, src.len(), dst.len())?;
    match t {
        DType::Q8_0 => {
            for (x, out) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(size_of::<BlockQ8_0>())) {
                let (d, qs, _) = q8_x86(x);
                out.copy_from_slice(bytemuck::bytes_of(&BlockQ8_0 { d: f16::from_f32(d), qs }));
            }
        }
        DType::Q8_1 => {
            for (x, out) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(size_of::<BlockQ8_1>())) {
                let (d, qs, sum) = q8_x86(x);
                let s = f16::from_f32(d * sum as f32);
                out.copy_from_slice(bytemuck::bytes_of(&BlockQ8_1 { d: f16::from_f32(d), s, qs }));
            }
        }
        // F32, F16, BF16, Q8_K: the conversions of quantize_row are ggml-cpu's
        _ => quantize_row(t, src, dst)?,
    }
    Ok(())
}

/// `_mm_max_ps(a, b)` lane semantics: `a > b ? a : b` (so `b` when either is NaN).
#[inline(always)]
fn max_ps(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// `amax` of a 32-value block, reduced in the lane order of ggml-cpu's AVX code
/// (which only matters for NaNs).
#[inline(always)]
fn amax_x86(x: &[f32]) -> f32 {
    let m: [f32; 8] = std::array::from_fn(|l| (1..4).fold(x[l].abs(), |m, v| max_ps(m, x[8 * v + l].abs())));
    let m4: [f32; 4] = std::array::from_fn(|k| max_ps(m[4 + k], m[k]));
    max_ps(max_ps(m4[0], m4[2]), max_ps(m4[1], m4[3]))
}

/// One Q8_0/Q8_1 block as ggml-cpu's AVX quantizer makes it: the f32 scale,
/// the quants, and the (wrapping) sum of the unsaturated i32 quants.
#[inline(always)]
fn q8_x86(x: &[f32]) -> (f32, [i8; QK], i32) {
    let amax = amax_x86(x);
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    let mut qs = [0i8; QK];
    let mut sum = 0i32;
    for (q, &v) in qs.iter_mut().zip(x) {
        let r = (v * id).round_ties_even();
        // vcvtps2dq: out of range and NaN give i32::MIN
        let i = if (-2_147_483_648.0..2_147_483_648.0).contains(&r) { r as i32 } else { i32::MIN };
        sum = sum.wrapping_add(i);
        // two saturating packs, i32 -> i16 -> i8
        *q = i.clamp(-128, 127) as i8;
    }
    (d, qs, sum)
}
