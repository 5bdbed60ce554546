//! The ternary formats TQ1_0 and TQ2_0 (values `d · {-1, 0, 1}`, for
//! BitNet-style models): dequantization bit-identical to ggml and gguf-py, and
//! ggml's reference quantizers `quantize_row_tq1_0_ref`/`quantize_row_tq2_0_ref`
//! (which need no importance matrix).

use super::blocks::QK_K;
use super::blocks_iq::{BlockTQ1_0, BlockTQ2_0};
use super::common::{f2h, h2f, Block, Quantize};
use crate::dtype::DType;

/// Bytes of TQ1_0's five-trit part.
const QS: usize = (QK_K - 4 * QK_K / 64) / 5;
/// Of those, the bytes packed along runs of 32 values (the rest go along 16).
const QS32: usize = QS - QS % 32;

/// Trit `n` (0..5) of a TQ1_0 byte: `((q · 3^n mod 256) · 3) >> 8`, in 0..=2.
#[inline(always)]
pub(crate) fn trit(q: u8, n: usize) -> i32 {
    const POW3: [u8; 5] = [1, 3, 9, 27, 81];
    i32::from((u16::from(q.wrapping_mul(POW3[n])) * 3) >> 8)
}

impl BlockTQ1_0 {
    /// The 256 values' trits `t` (value `d · (t - 1)`), in order.
    pub(crate) fn trits(&self) -> [i8; QK_K] {
        let mut t = [0i8; QK_K];
        // value (5 bytes of 32 or 16 per chunk): chunk start + n·width + m
        for (n, run) in t[..5 * QS32].chunks_exact_mut(32).enumerate() {
            for (m, v) in run.iter_mut().enumerate() {
                *v = trit(self.qs[m], n) as i8;
            }
        }
        for (n, run) in t[5 * QS32..5 * QS].chunks_exact_mut(16).enumerate() {
            for (m, v) in run.iter_mut().enumerate() {
                *v = trit(self.qs[QS32 + m], n) as i8;
            }
        }
        for (n, run) in t[5 * QS..].chunks_exact_mut(4).enumerate() {
            for (j, v) in run.iter_mut().enumerate() {
                *v = trit(self.qh[j], n) as i8;
            }
        }
        t
    }
}

impl Block for BlockTQ1_0 {
    const DTYPE: DType = DType::TQ1_0;
    const VALUES: usize = QK_K;

    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK_K);
        let d = h2f(self.d);
        for (y, t) in dst.iter_mut().zip(self.trits()) {
            *y = f32::from(t - 1) * d;
        }
    }
}

/// ggml's `MAX(amax, |v|)` over `x` (`a > b ? a : b`) and the ternary level
/// `lroundf(v / amax) + 1` of each value (0, 1, 2).
fn ternary_levels(x: &[f32]) -> (f32, [u8; QK_K]) {
    let amax = x.iter().fold(0f32, |a, v| if a > v.abs() { a } else { v.abs() });
    let id = if amax != 0.0 { 1.0 / amax } else { 0.0 };
    let mut t = [1u8; QK_K];
    for (t, &v) in t.iter_mut().zip(x) {
        let r = (v * id).round();
        // C leaves lroundf of a NaN or infinity undefined; x86-64 glibc returns
        // LONG_MIN, and `+ 1` then truncated to int gives 1: a zero trit
        *t = if r.is_finite() { (r as i32 + 1).clamp(0, 2) as u8 } else { 1 };
    }
    (amax, t)
}

/// Five trits (most significant first) as the fixed-point byte `⌈q·256/243⌉`.
#[inline(always)]
fn pack5(t: impl Iterator<Item = u8>) -> u8 {
    let q = t.fold(0u8, |q, t| q.wrapping_mul(3).wrapping_add(t));
    (u16::from(q) * 256).div_ceil(243) as u8
}

impl Quantize for BlockTQ1_0 {
    fn quantize(x: &[f32]) -> Self {
        assert_eq!(x.len(), QK_K);
        let (amax, t) = ternary_levels(x);
        let mut y = BlockTQ1_0 { qs: [0; QS], qh: [0; QK_K / 64], d: f2h(amax) };
        for m in 0..QS32 {
            y.qs[m] = pack5((0..5).map(|n| t[m + 32 * n]));
        }
        for m in 0..QS - QS32 {
            y.qs[QS32 + m] = pack5((0..5).map(|n| t[5 * QS32 + m + 16 * n]));
        }
        for j in 0..QK_K / 64 {
            // four trits, then a zero one in the least significant place
            y.qh[j] = pack5((0..4).map(|n| t[5 * QS + j + 4 * n]).chain([0]));
        }
        y
    }
}

impl BlockTQ2_0 {
    /// The 2-bit field `q` of value `k` (value `d · (q - 1)`).
    #[inline(always)]
    pub(crate) fn field(&self, k: usize) -> i32 {
        let (h, r) = (k / 128, k % 128);
        i32::from((self.qs[32 * h + r % 32] >> (2 * (r / 32))) & 3)
    }
}

impl Block for BlockTQ2_0 {
    const DTYPE: DType = DType::TQ2_0;
    const VALUES: usize = QK_K;

    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK_K);
        let d = h2f(self.d);
        for (k, y) in dst.iter_mut().enumerate() {
            *y = (self.field(k) - 1) as f32 * d;
        }
    }
}

impl Quantize for BlockTQ2_0 {
    fn quantize(x: &[f32]) -> Self {
        assert_eq!(x.len(), QK_K);
        let (amax, t) = ternary_levels(x);
        let mut y = BlockTQ2_0 { qs: [0; QK_K / 4], d: f2h(amax) };
        for (h, half) in t.chunks_exact(128).enumerate() {
            for m in 0..32 {
                y.qs[32 * h + m] = (0..4).fold(0u8, |q, n| q | (half[m + 32 * n] << (2 * n)));
            }
        }
        y
    }
}
