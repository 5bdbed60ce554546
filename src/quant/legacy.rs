//! The 32-value formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1.
//!
//! Quantizers follow ggml's `quantize_row_*_ref` (and gguf-py, which matches
//! them byte for byte on finite input): the scale comes from the block's
//! extreme value(s), quants are `trunc(x/d + offset + 0.5)` clamped to the
//! range (round half away from zero for the 8-bit types), and all arithmetic is
//! in f32 in the same order.

use super::blocks::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1, QK};
use super::common::{f2h, h2f, Block, Quantize};
use crate::dtype::DType;

const HALF: usize = QK / 2;

/// The value of largest magnitude (the first one on ties), or 0.
fn signed_absmax(x: &[f32]) -> f32 {
    let (mut amax, mut max) = (0f32, 0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    max
}

/// Smallest and largest value.
fn min_max(x: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

/// `1/d`, or 0 when `d` is 0.
fn inverse(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

/// `trunc(v)` clamped to `0..=hi` (the references truncate after adding 0.5).
fn trunc_clamp(v: f32, hi: i32) -> u8 {
    (v as i32).clamp(0, hi) as u8
}

/// Splits 32 five-bit quants into low nibbles (paired `j`, `j + 16`) and the fifth bits.
fn pack5(q: &[u8; QK]) -> ([u8; HALF], [u8; 4]) {
    let mut qs = [0u8; HALF];
    let mut qh = 0u32;
    for j in 0..HALF {
        qs[j] = (q[j] & 0x0f) | ((q[j + HALF] & 0x0f) << 4);
        qh |= u32::from(q[j] >> 4) << j;
        qh |= u32::from(q[j + HALF] >> 4) << (j + HALF);
    }
    (qs, qh.to_le_bytes())
}

/// The 32 five-bit quants of a Q5_0/Q5_1 block.
fn unpack5(qs: &[u8; HALF], qh: [u8; 4]) -> [u8; QK] {
    let qh = u32::from_le_bytes(qh);
    let mut q = [0u8; QK];
    for j in 0..HALF {
        q[j] = (qs[j] & 0x0f) | (((qh >> j) & 1) as u8) << 4;
        q[j + HALF] = (qs[j] >> 4) | (((qh >> (j + HALF)) & 1) as u8) << 4;
    }
    q
}

impl Block for BlockQ4_0 {
    const DTYPE: DType = DType::Q4_0;
    const VALUES: usize = QK;

    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK);
        let d = h2f(self.d);
        for (j, &b) in self.qs.iter().enumerate() {
            dst[j] = ((b & 0x0f) as i32 - 8) as f32 * d;
            dst[j + HALF] = ((b >> 4) as i32 - 8) as f32 * d;
        }
    }
}

impl Quantize for BlockQ4_0 {
    fn quantize(x: &[f32]) -> Self {
        assert_eq!(x.len(), QK);
        let d = signed_absmax(x) / -8.0;
        let id = inverse(d);
        let mut qs = [0u8; HALF];
        for (j, q) in qs.iter_mut().enumerate() {
            *q = trunc_clamp(x[j] * id + 8.5, 15) | trunc_clamp(x[j + HALF] * id + 8.5, 15) << 4;
        }
        BlockQ4_0 { d: f2h(d), qs }
    }
}

impl Block for BlockQ4_1 {
    const DTYPE: DType = DType::Q4_1;
    const VALUES: usize = QK;

    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK);
        let (d, m) = (h2f(self.d), h2f(self.m));
        for (j, &b) in self.qs.iter().enumerate() {
            dst[j] = (b & 0x0f) as f32 * d + m;
            dst[j + HALF] = (b >> 4) as f32 * d + m;
        }
    }
}

impl Quantize for BlockQ4_1 {
    fn quantize(x: &[f32]) -> Self {
        assert_eq!(x.len(), QK);
        let (min, max) = min_max(x);
        let d = (max - min) / 15.0;
        let id = inverse(d);
        let mut qs = [0u8; HALF];
        for (j, q) in qs.iter_mut().enumerate() {
            *q = trunc_clamp((x[j] - min) * id + 0.5, 15) | trunc_clamp((x[j + HALF] - min) * id + 0.5, 15) << 4;
        }
        BlockQ4_1 { d: f2h(d), m: f2h(min), qs }
    }
}

impl Block for BlockQ5_0 {
    const DTYPE: DType = DType::Q5_0;
    const VALUES: usize = QK;

    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK);
        let d = h2f(self.d);
        for (y, q) in dst.iter_mut().zip(unpack5(&self.qs, self.qh)) {
            *y = (q as i32 - 16) as f32 * d;
        }
    }
}

impl Quantize for BlockQ5_0 {
    fn quantize(x: &[f32]) -> Self {
        assert_eq!(x.len(), QK);
        let d = signed_absmax(x) / -16.0;
        let id = inverse(d);
        let mut q = [0u8; QK];
        for (q, &v) in q.iter_mut().zip(x) {
            *q = trunc_clamp(v * id + 16.5, 31);
        }
        let (qs, qh) = pack5(&q);
        BlockQ5_0 { d: f2h(d), qh, qs }
    }
}

impl Block for BlockQ5_1 {
    const DTYPE: DType = DType::Q5_1;
    const VALUES: usize = QK;

    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK);
        let (d, m) = (h2f(self.d), h2f(self.m));
        for (y, q) in dst.iter_mut().zip(unpack5(&self.qs, self.qh)) {
            *y = q as f32 * d + m;
        }
    }
}

impl Quantize for BlockQ5_1 {
    fn quantize(x: &[f32]) -> Self {
        assert_eq!(x.len(), QK);
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = inverse(d);
        let mut q = [0u8; QK];
        for (q, &v) in q.iter_mut().zip(x) {
            *q = trunc_clamp((v - min) * id + 0.5, 31);
        }
        let (qs, qh) = pack5(&q);
        BlockQ5_1 { d: f2h(d), m: f2h(min), qh, qs }
    }
}

/// Q8_0's scale and quants: `d = amax/127`, `q = round(x/d)` (half away from zero).
fn quantize_q8(x: &[f32]) -> (f32, [i8; QK]) {
    assert_eq!(x.len(), QK);
    // ggml's MAX(a, b): `a > b ? a : b`
    let amax = x.iter().fold(0f32, |a, v| if a > v.abs() { a } else { v.abs() });
    let d = amax / 127.0;
    let id = inverse(d);
    let mut qs = [0i8; QK];
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = (v * id).round() as i8;
    }
    (d, qs)
}

impl Block for BlockQ8_0 {
    const DTYPE: DType = DType::Q8_0;
    const VALUES: usize = QK;

    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK);
        let d = h2f(self.d);
        for (y, &q) in dst.iter_mut().zip(&self.qs) {
            *y = q as f32 * d;
        }
    }
}

impl Quantize for BlockQ8_0 {
    fn quantize(x: &[f32]) -> Self {
        let (d, qs) = quantize_q8(x);
        BlockQ8_0 { d: f2h(d), qs }
    }
}

impl Block for BlockQ8_1 {
    const DTYPE: DType = DType::Q8_1;
    const VALUES: usize = QK;

    /// `d * q`; the stored sum `s` is not needed to recover the values.
    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK);
        let d = h2f(self.d);
        for (y, &q) in dst.iter_mut().zip(&self.qs) {
            *y = q as f32 * d;
        }
    }
}

impl Quantize for BlockQ8_1 {
    fn quantize(x: &[f32]) -> Self {
        let (d, qs) = quantize_q8(x);
        let sum: i32 = qs.iter().map(|&q| i32::from(q)).sum();
        BlockQ8_1 { d: f2h(d), s: f2h(sum as f32 * d), qs }
    }
}
