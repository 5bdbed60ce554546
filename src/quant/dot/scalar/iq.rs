//! The portable kernels of IQ4_NL, IQ4_XS, MXFP4, the i-quants and the ternary
//! types: ggml's `ggml_vec_dot_*_generic`, with the same integer sums and the
//! same f32 operations in the same order (so the results are ggml's scalar
//! build's bit for bit, where that build does not fuse multiply-adds).
//!
//! IQ1_S's kernel reads Q8_K's `bsums` for its shift term, as ggml's does.

use std::mem::size_of;

use super::super::super::blocks::{BlockQ8_0, BlockQ8_K, QK, QK_K};
use super::super::super::blocks_iq::{
    BlockIQ1_M, BlockIQ1_S, BlockIQ2_S, BlockIQ2_XS, BlockIQ2_XXS, BlockIQ3_S, BlockIQ3_XXS, BlockIQ4_NL, BlockIQ4_XS,
    BlockMXFP4, BlockTQ1_0, BlockTQ2_0,
};
use super::super::super::iq::IQ1_DELTA;
use super::super::super::iq4::e8m0_half;
use super::super::super::iq_grids::{KVALUES_IQ4NL, KVALUES_MXFP4};
use super::super::common::{blocks, f16t, DotFn};
use super::loops::{each_block, h, kquant, legacy};
use crate::dtype::DType;

/// The kernel of a type of this module.
pub(super) fn kernel(w: DType) -> Option<DotFn> {
    Some(match w {
        DType::IQ4_NL => iq4_nl_q8_0,
        DType::IQ4_XS => iq4_xs_q8_k,
        DType::MXFP4 => mxfp4_q8_0,
        DType::IQ1_S => iq1_s_q8_k,
        DType::IQ1_M => iq1_m_q8_k,
        DType::IQ2_XXS => iq2_xxs_q8_k,
        DType::IQ2_XS => iq2_xs_q8_k,
        DType::IQ2_S => iq2_s_q8_k,
        DType::IQ3_XXS => iq3_xxs_q8_k,
        DType::IQ3_S => iq3_s_q8_k,
        DType::TQ1_0 => tq1_0_q8_k,
        DType::TQ2_0 => tq2_0_q8_k,
        _ => return None,
    })
}

/// `Σ_j table[nibble_j] · y[j]` over a 32-value block packed as IQ4_NL's.
#[inline(always)]
fn table_dot(table: &[i8; 16], qs: &[u8], y: &[i8]) -> i32 {
    let (mut s1, mut s2) = (0i32, 0i32);
    for j in 0..QK / 2 {
        s1 += i32::from(y[j]) * i32::from(table[usize::from(qs[j] & 0x0f)]);
        s2 += i32::from(y[j + QK / 2]) * i32::from(table[usize::from(qs[j] >> 4)]);
    }
    s1 + s2
}

fn iq4_nl_q8_0(n: usize, w: &[u8], a: &[u8]) -> f32 {
    legacy(n, w, a, |x: &BlockIQ4_NL, y: &BlockQ8_0| (h(y.d) * h(x.d)) * table_dot(&KVALUES_IQ4NL, &x.qs, &y.qs) as f32)
}

fn mxfp4_q8_0(n: usize, w: &[u8], a: &[u8]) -> f32 {
    legacy(n, w, a, |x: &BlockMXFP4, y: &BlockQ8_0| {
        (h(y.d) * e8m0_half(x.e)) * table_dot(&KVALUES_MXFP4, &x.qs, &y.qs) as f32
    })
}

fn iq4_xs_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let nb = blocks(n, w, a, QK_K, size_of::<BlockIQ4_XS>(), size_of::<BlockQ8_K>());
    // ggml adds every group's term to the running sum (not a sum per super-block)
    let mut sumf = 0f32;
    each_block(nb, w, a, |x: &BlockIQ4_XS, y: &BlockQ8_K| {
        let d4d8 = h(x.d) * y.d;
        for g in 0..QK_K / QK {
            let dl = d4d8 * (x.scale(g) - 32) as f32;
            sumf += dl * table_dot(&KVALUES_IQ4NL, &x.qs[16 * g..], &y.qs[32 * g..]) as f32;
        }
    });
    sumf
}

/// `Σ_j mag[j] · y[j] · ±1` over one 8-value grid point (a set sign bit negates).
#[inline(always)]
fn point_dot(mag: [u8; 8], signs: u8, y: &[i8]) -> i32 {
    (0..8)
        .map(|j| {
            let p = i32::from(mag[j]) * i32::from(y[j]);
            if signs & (1 << j) != 0 {
                -p
            } else {
                p
            }
        })
        .sum()
}

/// `Σ_g scale(g) · Σ_l point_dot(point(g, l))` over the 8 groups of 4 points
/// of 8 values of IQ2_XXS, IQ3_XXS and IQ3_S.
#[inline(always)]
fn grouped_points(y: &[i8; QK_K], scale: impl Fn(usize) -> i32, point: impl Fn(usize, usize) -> ([u8; 8], u8)) -> i32 {
    (0..8)
        .map(|g| {
            let sumi: i32 = (0..4)
                .map(|l| {
                    let (mag, signs) = point(g, l);
                    point_dot(mag, signs, &y[32 * g + 8 * l..])
                })
                .sum();
            sumi * scale(g)
        })
        .sum()
}

fn iq2_xxs_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let sumf = kquant(n, w, a, |x: &BlockIQ2_XXS, y| {
        let bsum = grouped_points(&y.qs, |g| 2 * (x.words(g).1 >> 28) as i32 + 1, |g, l| x.point(g, l));
        (h(x.d) * y.d) * bsum as f32
    });
    0.125 * sumf
}

/// `Σ_h (2·scale(h) + 1) · Σ_{points 2h, 2h+1}` for the IQ2 types with a
/// 4-bit scale per 16 values and a decoder `point(p)`.
#[inline(always)]
fn iq2_scaled(y: &[i8; QK_K], scale: impl Fn(usize) -> u8, point: impl Fn(usize) -> ([u8; 8], u8)) -> i32 {
    (0..16)
        .map(|h| {
            let sumi: i32 = (2 * h..2 * h + 2)
                .map(|p| {
                    let (mag, signs) = point(p);
                    point_dot(mag, signs, &y[8 * p..])
                })
                .sum();
            (2 * i32::from(scale(h)) + 1) * sumi
        })
        .sum()
}

fn iq2_xs_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let sumf =
        kquant(n, w, a, |x: &BlockIQ2_XS, y| (h(x.d) * y.d) * iq2_scaled(&y.qs, |i| x.scale(i), |p| x.point(p)) as f32);
    0.125 * sumf
}

fn iq2_s_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let sumf =
        kquant(n, w, a, |x: &BlockIQ2_S, y| (h(x.d) * y.d) * iq2_scaled(&y.qs, |i| x.scale(i), |p| x.point(p)) as f32);
    0.125 * sumf
}

fn iq3_xxs_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let sumf = kquant(n, w, a, |x: &BlockIQ3_XXS, y| {
        let bsum = grouped_points(&y.qs, |g| 2 * (x.word(g) >> 28) as i32 + 1, |g, l| x.point(g, l));
        (h(x.d) * y.d) * bsum as f32
    });
    0.25 * sumf
}

fn iq3_s_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    kquant(n, w, a, |x: &BlockIQ3_S, y| {
        let bsum = grouped_points(&y.qs, |g| 2 * i32::from(x.scale(g)) + 1, |g, l| x.point(g, l));
        (h(x.d) * y.d) * bsum as f32
    })
}

/// `Σ_j grid[j] · y[j]` over one 8-value IQ1 point.
#[inline(always)]
fn grid_dot(grid: [i8; 8], y: &[i8]) -> i32 {
    (0..8).map(|j| i32::from(grid[j]) * i32::from(y[j])).sum()
}

fn iq1_s_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    kquant(n, w, a, |x: &BlockIQ1_S, y| {
        let (mut sumi, mut sumi1) = (0i32, 0i32);
        for g in 0..8 {
            let (ls, negative) = x.scale(g);
            let lsum: i32 = (0..4).map(|l| grid_dot(x.point(g, l), &y.qs[32 * g + 8 * l..])).sum();
            let delta = if negative { -1 } else { 1 };
            sumi += ls * lsum;
            sumi1 += ls * delta * (i32::from(y.bsums[2 * g]) + i32::from(y.bsums[2 * g + 1]));
        }
        (h(x.d) * y.d) * (sumi as f32 + IQ1_DELTA * sumi1 as f32)
    })
}

fn iq1_m_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    kquant(n, w, a, |x: &BlockIQ1_M, y| {
        let (mut sumi1, mut sumi2) = (0i32, 0i32);
        for r in 0..16 {
            let (mut s1, mut s2) = (0i32, 0i32);
            for p in 2 * r..2 * r + 2 {
                let (grid, negative) = x.point(p);
                let q = &y.qs[8 * p..8 * p + 8];
                s1 += grid_dot(grid, q);
                let lsum2: i32 = q.iter().map(|&v| i32::from(v)).sum();
                s2 += if negative { -lsum2 } else { lsum2 };
            }
            let ls = x.scale(r);
            sumi1 += s1 * ls;
            sumi2 += s2 * ls;
        }
        (f16t(x.d_bits()) * y.d) * (sumi1 as f32 + IQ1_DELTA * sumi2 as f32)
    })
}

fn tq1_0_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    kquant(n, w, a, |x: &BlockTQ1_0, y| {
        let sum: i32 = x.trits().iter().zip(&y.qs).map(|(&t, &q)| (i32::from(t) - 1) * i32::from(q)).sum();
        sum as f32 * (h(x.d) * y.d)
    })
}

fn tq2_0_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    kquant(n, w, a, |x: &BlockTQ2_0, y| {
        let sumi: i32 = (0..QK_K).map(|k| i32::from(y.qs[k]) * (x.field(k) - 1)).sum();
        sumi as f32 * (y.d * h(x.d))
    })
}
