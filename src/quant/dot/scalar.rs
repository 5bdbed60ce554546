//! The portable kernels: the reference for the SIMD ones, and the fallback on
//! CPUs without them.
//!
//! Each follows ggml's generic `ggml_vec_dot_*` (integer dot per block, exact in
//! i32, then scaled and summed in f32). The float kernels keep eight f32
//! partial sums (so the compiler can vectorize them) where ggml's scalar build
//! sums in f64; the difference is float reassociation.

use super::super::blocks::{
    BlockQ2_K, BlockQ3_K, BlockQ4_0, BlockQ4_1, BlockQ4_K, BlockQ5_0, BlockQ5_1, BlockQ5_K, BlockQ6_K, BlockQ8_0,
    BlockQ8_1, QK, QK_K,
};
use super::super::search::scale_min_k4;
use super::common::{blocks, f16t, DotFn};
use crate::dtype::DType;
use loops::{h, kquant, legacy};

mod iq;
mod loops;

/// The scalar kernel for weights of type `w`, if it has one.
pub(super) fn kernel(w: DType) -> Option<DotFn> {
    Some(match w {
        DType::F32 => f32_f32,
        DType::F16 => f16_f16,
        DType::BF16 => bf16_bf16,
        DType::Q4_0 => q4_0_q8_0,
        DType::Q4_1 => q4_1_q8_1,
        DType::Q5_0 => q5_0_q8_0,
        DType::Q5_1 => q5_1_q8_1,
        DType::Q8_0 => q8_0_q8_0,
        DType::Q2_K => q2_k_q8_k,
        DType::Q3_K => q3_k_q8_k,
        DType::Q4_K => q4_k_q8_k,
        DType::Q5_K => q5_k_q8_k,
        DType::Q6_K => q6_k_q8_k,
        _ => return iq::kernel(w),
    })
}

/// Dot of two runs of `n` floats of `WIDTH` bytes each, decoded by `load`,
/// in eight interleaved f32 partial sums.
#[inline(always)]
fn float_dot<const WIDTH: usize>(n: usize, w: &[u8], a: &[u8], load: impl Fn(&[u8]) -> f32) -> f32 {
    let n = blocks(n, w, a, 1, WIDTH, WIDTH);
    let (w, a) = (&w[..n * WIDTH], &a[..n * WIDTH]);
    let mut acc = [0f32; 8];
    let (wc, ac) = (w.chunks_exact(8 * WIDTH), a.chunks_exact(8 * WIDTH));
    let (wt, at) = (wc.remainder(), ac.remainder());
    for (x, y) in wc.zip(ac) {
        for (l, s) in acc.iter_mut().enumerate() {
            *s += load(&x[l * WIDTH..]) * load(&y[l * WIDTH..]);
        }
    }
    for (x, y) in wt.chunks_exact(WIDTH).zip(at.chunks_exact(WIDTH)) {
        acc[0] += load(x) * load(y);
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
}

fn f32_f32(n: usize, w: &[u8], a: &[u8]) -> f32 {
    float_dot::<4>(n, w, a, |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn f16_f16(n: usize, w: &[u8], a: &[u8]) -> f32 {
    float_dot::<2>(n, w, a, |b| f16t(u16::from_le_bytes([b[0], b[1]])))
}

fn bf16_bf16(n: usize, w: &[u8], a: &[u8]) -> f32 {
    float_dot::<2>(n, w, a, |b| f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16))
}

/// `Σ q_w·q_a` over a block whose weight quants are `q(j)` (j < 32).
#[inline(always)]
fn idot32(y: &[i8; QK], q: impl Fn(usize) -> i32) -> i32 {
    (0..QK).map(|j| q(j) * i32::from(y[j])).sum()
}

/// Low nibble of byte `j` for values `j < 16`, high nibble of byte `j - 16` above.
#[inline(always)]
fn nibble(qs: &[u8; QK / 2], j: usize) -> i32 {
    i32::from(if j < QK / 2 { qs[j] & 0x0f } else { qs[j - QK / 2] >> 4 })
}

/// The 5-bit quant `j` of a Q5_0/Q5_1 block.
#[inline(always)]
fn five(qs: &[u8; QK / 2], qh: [u8; 4], j: usize) -> i32 {
    nibble(qs, j) | (((u32::from_le_bytes(qh) >> j) & 1) << 4) as i32
}

fn q4_0_q8_0(n: usize, w: &[u8], a: &[u8]) -> f32 {
    legacy(n, w, a, |x: &BlockQ4_0, y: &BlockQ8_0| idot32(&y.qs, |j| nibble(&x.qs, j) - 8) as f32 * h(x.d) * h(y.d))
}

fn q4_1_q8_1(n: usize, w: &[u8], a: &[u8]) -> f32 {
    legacy(n, w, a, |x: &BlockQ4_1, y: &BlockQ8_1| {
        (h(x.d) * h(y.d)) * idot32(&y.qs, |j| nibble(&x.qs, j)) as f32 + h(x.m) * h(y.s)
    })
}

fn q5_0_q8_0(n: usize, w: &[u8], a: &[u8]) -> f32 {
    legacy(n, w, a, |x: &BlockQ5_0, y: &BlockQ8_0| {
        (h(x.d) * h(y.d)) * idot32(&y.qs, |j| five(&x.qs, x.qh, j) - 16) as f32
    })
}

fn q5_1_q8_1(n: usize, w: &[u8], a: &[u8]) -> f32 {
    legacy(n, w, a, |x: &BlockQ5_1, y: &BlockQ8_1| {
        (h(x.d) * h(y.d)) * idot32(&y.qs, |j| five(&x.qs, x.qh, j)) as f32 + h(x.m) * h(y.s)
    })
}

fn q8_0_q8_0(n: usize, w: &[u8], a: &[u8]) -> f32 {
    legacy(n, w, a, |x: &BlockQ8_0, y: &BlockQ8_0| idot32(&y.qs, |j| i32::from(x.qs[j])) as f32 * (h(x.d) * h(y.d)))
}

/// `Σ_g scale(g) · Σ_{i in group g} q(i)·y[i]` over groups of `G` values.
#[inline(always)]
fn grouped<const G: usize>(y: &[i8; QK_K], scale: impl Fn(usize) -> i32, q: impl Fn(usize) -> i32) -> i32 {
    (0..QK_K / G).map(|g| scale(g) * (G * g..G * g + G).map(|i| q(i) * i32::from(y[i])).sum::<i32>()).sum()
}

/// The 2-bit field of value `k` in the Q2_K/Q3_K packing.
#[inline(always)]
fn low2(qs: &[u8; QK_K / 4], k: usize) -> i32 {
    let (half, r) = (k / 128, k % 128);
    i32::from((qs[32 * half + r % 32] >> (2 * (r / 32))) & 3)
}

/// The 4-bit field of value `k` in the Q4_K/Q5_K packing.
#[inline(always)]
fn low4(qs: &[u8; QK_K / 2], k: usize) -> i32 {
    i32::from((qs[32 * (k / 64) + k % 32] >> (4 * ((k / 32) % 2))) & 0x0f)
}

/// Q3_K's 16 six-bit scales, still offset by 32.
#[inline(always)]
fn q3_scales(sc: &[u8; 12]) -> [i32; 16] {
    std::array::from_fn(|j| {
        let low = if j < 8 { sc[j] & 0x0f } else { sc[j - 8] >> 4 };
        let high = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
        i32::from(low | (high << 4))
    })
}

/// `Σ_g mins(g) · (bsums[2g] + bsums[2g+1])` for the 8 groups of 32 of Q4_K/Q5_K.
#[inline(always)]
fn k4_mins(sc: &[u8; 12], bsums: &[i16; 16]) -> i32 {
    (0..8).map(|g| i32::from(scale_min_k4(g, sc).1) * (i32::from(bsums[2 * g]) + i32::from(bsums[2 * g + 1]))).sum()
}

fn q2_k_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    kquant(n, w, a, |x: &BlockQ2_K, y| {
        let mins: i32 = (0..16).map(|g| i32::from(y.bsums[g]) * i32::from(x.scales[g] >> 4)).sum();
        let isum = grouped::<16>(&y.qs, |g| i32::from(x.scales[g] & 0x0f), |k| low2(&x.qs, k));
        (y.d * h(x.d)) * isum as f32 - (y.d * h(x.dmin)) * mins as f32
    })
}

fn q3_k_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    kquant(n, w, a, |x: &BlockQ3_K, y| {
        let scales = q3_scales(&x.scales);
        // a clear bit in hmask means "subtract 4"
        let q = |k: usize| low2(&x.qs, k) - if (x.hmask[k % 32] >> (k / 32)) & 1 != 0 { 0 } else { 4 };
        let isum = grouped::<16>(&y.qs, |g| scales[g] - 32, q);
        (h(x.d) * y.d) * isum as f32
    })
}

fn q4_k_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    kquant(n, w, a, |x: &BlockQ4_K, y| {
        let isum = grouped::<32>(&y.qs, |g| i32::from(scale_min_k4(g, &x.scales).0), |k| low4(&x.qs, k));
        (h(x.d) * y.d) * isum as f32 - (h(x.dmin) * y.d) * k4_mins(&x.scales, &y.bsums) as f32
    })
}

fn q5_k_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    kquant(n, w, a, |x: &BlockQ5_K, y| {
        let q = |k: usize| low4(&x.qs, k) | (i32::from((x.qh[k % 32] >> (k / 32)) & 1) << 4);
        let isum = grouped::<32>(&y.qs, |g| i32::from(scale_min_k4(g, &x.scales).0), q);
        (h(x.d) * y.d) * isum as f32 - (h(x.dmin) * y.d) * k4_mins(&x.scales, &y.bsums) as f32
    })
}

fn q6_k_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    kquant(n, w, a, |x: &BlockQ6_K, y| {
        let q = |k: usize| {
            let (half, r) = (k / 128, k % 128);
            let (quarter, l) = (r / 32, r % 32);
            let low = (x.ql[64 * half + 32 * (quarter % 2) + l] >> (4 * (quarter / 2))) & 0x0f;
            let high = (x.qh[32 * half + l] >> (2 * quarter)) & 3;
            i32::from(low | (high << 4)) - 32
        };
        let isum = grouped::<16>(&y.qs, |g| i32::from(x.scales[g]), q);
        (h(x.d) * y.d) * isum as f32
    })
}
