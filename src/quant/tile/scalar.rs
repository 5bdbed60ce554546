//! The portable tiles: each weight block of `MR` rows is unpacked once and
//! dotted with every activation row; per element, the blocks are summed in
//! order exactly as the scalar dot kernels do, so the results are their bits.
//! Q4_0 and the k-quants Q4_K, Q5_K, Q6_K have one; a Q8_0 block needs no
//! unpacking, so there is nothing to share and the scalar dot kernel is as fast.

use super::super::blocks::{QK, QK_K};
use super::super::common::f16_to_f32;
use super::super::search::scale_min_k4;
use super::common::PREPARED_BLOCK;

/// Weight rows per call.
pub(super) const MR: usize = 4;

/// An f16 scale field (little-endian bytes) as f32.
fn f16_at(b: &[u8]) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[0], b[1]]))
}

/// Blocks unpacked at a time.
const KC: usize = 8;

/// The tile loop: `unpack` turns a weight block into its signed quants and
/// scale, `scale(isum, d_w, d_a)` is one block's contribution. Each element
/// adds its blocks' contributions in order, starting from 0.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn tile(
    nb: usize,
    wb: usize,
    w: &[&[u8]],
    a: &[&[u8]],
    out: &mut [f32],
    stride: usize,
    unpack: impl Fn(&[u8], &mut [i8; QK]) -> f32,
    scale: impl Fn(i32, f32, f32) -> f32,
) {
    let m = w.len().min(MR);
    for j in 0..a.len() {
        out[j * stride..j * stride + m].fill(0.0);
    }
    let mut q = [[[0i8; QK]; KC]; MR];
    let mut dw = [[0f32; KC]; MR];
    for b0 in (0..nb).step_by(KC) {
        let kc = KC.min(nb - b0);
        for i in 0..m {
            for c in 0..kc {
                let b = b0 + c;
                dw[i][c] = unpack(&w[i][b * wb..(b + 1) * wb], &mut q[i][c]);
            }
        }
        for (j, row) in a.iter().enumerate() {
            let row = &row[b0 * PREPARED_BLOCK..(b0 + kc) * PREPARED_BLOCK];
            for i in 0..m {
                let mut sum = out[j * stride + i];
                for (c, blk) in row.chunks_exact(PREPARED_BLOCK).enumerate() {
                    let da = f32::from_le_bytes([blk[QK], blk[QK + 1], blk[QK + 2], blk[QK + 3]]);
                    let isum: i32 =
                        q[i][c].iter().zip(&blk[..QK]).map(|(&x, &y)| i32::from(x) * i32::from(y as i8)).sum();
                    sum += scale(isum, dw[i][c], da);
                }
                out[j * stride + i] = sum;
            }
        }
    }
}

/// Q4_0 weights (safe: every access is bounds-checked).
pub(super) fn q4_0(nb: usize, w: &[&[u8]], a: &[&[u8]], out: &mut [f32], stride: usize) {
    let unpack = |blk: &[u8], q: &mut [i8; QK]| {
        for (j, &x) in blk[2..2 + QK / 2].iter().enumerate() {
            q[j] = (x & 0x0f) as i8 - 8;
            q[j + QK / 2] = (x >> 4) as i8 - 8;
        }
        f16_at(blk)
    };
    tile(nb, 18, w, a, out, stride, unpack, |isum, dw, da| isum as f32 * dw * da);
}

/// One unpacked k-quant super-block of a weight row: the quants (Q6_K's
/// already less 32), the group scales (16 for Q6_K, 8 for Q4_K/Q5_K), the mins
/// (Q4_K/Q5_K) and the f16 fields as f32.
struct KBlock {
    q: [i8; QK_K],
    sc: [i32; 16],
    mins: [i32; 8],
    d: f32,
    dmin: f32,
}

/// The k-quant tile loop with Q8_K activations: groups of `G` values, `wb`
/// bytes per super-block, `unpack` filling a [`KBlock`]. Per element and
/// super-block: `(d·d_a)·isum - (dmin·d_a)·mins` when `MINS` (Q4_K, Q5_K),
/// `(d·d_a)·isum` otherwise (Q6_K), added in order from 0, as the scalar dot
/// kernels do.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn k_tile<const G: usize, const MINS: bool>(
    nb: usize,
    wb: usize,
    w: &[&[u8]],
    a: &[&[u8]],
    out: &mut [f32],
    stride: usize,
    unpack: impl Fn(&[u8], &mut KBlock),
) {
    const AB: usize = 292;
    let m = w.len().min(MR);
    for j in 0..a.len() {
        out[j * stride..j * stride + m].fill(0.0);
    }
    let mut kb: [KBlock; MR] =
        std::array::from_fn(|_| KBlock { q: [0; QK_K], sc: [0; 16], mins: [0; 8], d: 0.0, dmin: 0.0 });
    for b in 0..nb {
        for i in 0..m {
            unpack(&w[i][b * wb..(b + 1) * wb], &mut kb[i]);
        }
        for (j, row) in a.iter().enumerate() {
            let y = &row[b * AB..(b + 1) * AB];
            let yd = f32::from_le_bytes([y[0], y[1], y[2], y[3]]);
            let yq = &y[4..4 + QK_K];
            let bsum = |g: usize| i32::from(i16::from_le_bytes([y[260 + 2 * g], y[261 + 2 * g]]));
            for (i, x) in kb[..m].iter().enumerate() {
                let mut isum = 0i32;
                for g in 0..QK_K / G {
                    let (xq, yq) = (&x.q[G * g..G * g + G], &yq[G * g..G * g + G]);
                    isum += x.sc[g] * xq.iter().zip(yq).map(|(&x, &y)| i32::from(x) * i32::from(y as i8)).sum::<i32>();
                }
                out[j * stride + i] += if MINS {
                    let mins: i32 = (0..8).map(|g| x.mins[g] * (bsum(2 * g) + bsum(2 * g + 1))).sum();
                    (x.d * yd) * isum as f32 - (x.dmin * yd) * mins as f32
                } else {
                    (x.d * yd) * isum as f32
                };
            }
        }
    }
}

/// The f16 fields and 6-bit scales and mins of a Q4_K/Q5_K super-block.
fn k4_head(blk: &[u8], x: &mut KBlock) {
    (x.d, x.dmin) = (f16_at(blk), f16_at(&blk[2..]));
    let packed: [u8; 12] = std::array::from_fn(|i| blk[4 + i]);
    for g in 0..8 {
        let (s, mi) = scale_min_k4(g, &packed);
        (x.sc[g], x.mins[g]) = (i32::from(s), i32::from(mi));
    }
}

/// Q4_K weights with Q8_K activations (safe: every access is bounds-checked).
pub(super) fn q4_k(nb: usize, w: &[&[u8]], a: &[&[u8]], out: &mut [f32], stride: usize) {
    k_tile::<32, true>(nb, 144, w, a, out, stride, |blk, x| {
        k4_head(blk, x);
        // value k: byte 32·(k / 64) + k % 32, the high nibble for odd groups of 32
        for (k, v) in x.q.iter_mut().enumerate() {
            *v = ((blk[16 + 32 * (k / 64) + k % 32] >> (4 * ((k / 32) % 2))) & 0x0f) as i8;
        }
    });
}

/// Q5_K weights with Q8_K activations (safe: every access is bounds-checked).
pub(super) fn q5_k(nb: usize, w: &[&[u8]], a: &[&[u8]], out: &mut [f32], stride: usize) {
    k_tile::<32, true>(nb, 176, w, a, out, stride, |blk, x| {
        k4_head(blk, x);
        // the Q4_K nibbles (from byte 48), plus bit k / 32 of qh byte k % 32 as the fifth bit
        for (k, v) in x.q.iter_mut().enumerate() {
            let low = (blk[48 + 32 * (k / 64) + k % 32] >> (4 * ((k / 32) % 2))) & 0x0f;
            *v = (low | (((blk[16 + k % 32] >> (k / 32)) & 1) << 4)) as i8;
        }
    });
}

/// Q6_K weights with Q8_K activations (safe: every access is bounds-checked).
pub(super) fn q6_k(nb: usize, w: &[&[u8]], a: &[&[u8]], out: &mut [f32], stride: usize) {
    k_tile::<16, false>(nb, 210, w, a, out, stride, |blk, x| {
        // value 128h + 32q + l: a nibble of ql byte 64h + 32(q % 2) + l, bits 2q..2q + 2 of qh byte 32h + l
        for (k, v) in x.q.iter_mut().enumerate() {
            let (h, q, l) = (k / 128, (k % 128) / 32, k % 32);
            let low = (blk[64 * h + 32 * (q % 2) + l] >> (4 * (q / 2))) & 0x0f;
            let high = (blk[128 + 32 * h + l] >> (2 * q)) & 3;
            *v = (low | (high << 4)) as i8 - 32;
        }
        for (s, &b) in x.sc.iter_mut().zip(&blk[192..208]) {
            *s = i32::from(b as i8);
        }
        x.d = f16_at(&blk[208..]);
    });
}
