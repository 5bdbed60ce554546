//! The portable tiles: each weight block of `MR` rows is unpacked once and
//! dotted with every activation row; per element, the blocks are summed in
//! order exactly as the scalar dot kernels do, so the results are their bits.
//! Q4_0 and Q4_K have one; a Q8_0 block needs no unpacking, so there is
//! nothing to share and the scalar dot kernel is as fast.

use super::super::search::scale_min_k4;
use super::super::{QK, QK_K};
use super::PREPARED_BLOCK;

/// Weight rows per call.
pub(super) const MR: usize = 4;

/// An f16 scale field (little-endian bytes) as f32.
fn f16_at(b: &[u8]) -> f32 {
    super::super::f16_to_f32(u16::from_le_bytes([b[0], b[1]]))
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
                    let qa: &[u8; QK] = blk[..QK].try_into().expect("a whole block");
                    let isum: i32 = q[i][c].iter().zip(qa).map(|(&x, &y)| i32::from(x) * i32::from(y as i8)).sum();
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

/// Q4_K weights with Q8_K activations (safe: every access is bounds-checked).
pub(super) fn q4_k(nb: usize, w: &[&[u8]], a: &[&[u8]], out: &mut [f32], stride: usize) {
    const WB: usize = 144;
    const AB: usize = 292;
    let m = w.len().min(MR);
    for j in 0..a.len() {
        out[j * stride..j * stride + m].fill(0.0);
    }
    let mut q = [[0i8; QK_K]; MR];
    let (mut sc, mut mn) = ([[0i32; 8]; MR], [[0i32; 8]; MR]);
    let (mut d, mut dmin) = ([0f32; MR], [0f32; MR]);
    for b in 0..nb {
        for i in 0..m {
            let blk = &w[i][b * WB..(b + 1) * WB];
            (d[i], dmin[i]) = (f16_at(blk), f16_at(&blk[2..]));
            let packed: &[u8; 12] = blk[4..16].try_into().expect("12 bytes");
            for g in 0..8 {
                let (s, mi) = scale_min_k4(g, packed);
                (sc[i][g], mn[i][g]) = (i32::from(s), i32::from(mi));
            }
            // value k: byte 32·(k / 64) + k % 32, the high nibble for odd groups of 32
            for (k, v) in q[i].iter_mut().enumerate() {
                *v = ((blk[16 + 32 * (k / 64) + k % 32] >> (4 * ((k / 32) % 2))) & 0x0f) as i8;
            }
        }
        for (j, row) in a.iter().enumerate() {
            let y = &row[b * AB..(b + 1) * AB];
            let yd = f32::from_le_bytes([y[0], y[1], y[2], y[3]]);
            let yq: &[u8; QK_K] = y[4..4 + QK_K].try_into().expect("a whole block");
            let bsum = |g: usize| i32::from(i16::from_le_bytes([y[260 + 2 * g], y[261 + 2 * g]]));
            for i in 0..m {
                let mut isum = 0i32;
                for g in 0..8 {
                    let (x, y) = (&q[i][32 * g..32 * g + 32], &yq[32 * g..32 * g + 32]);
                    isum += sc[i][g] * x.iter().zip(y).map(|(&x, &y)| i32::from(x) * i32::from(y as i8)).sum::<i32>();
                }
                let mins: i32 = (0..8).map(|g| mn[i][g] * (bsum(2 * g) + bsum(2 * g + 1))).sum();
                out[j * stride + i] += (d[i] * yd) * isum as f32 - (dmin[i] * yd) * mins as f32;
            }
        }
    }
}
