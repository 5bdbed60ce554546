//! The 256-value "k-quant" super-block formats: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K.
//!
//! Each super-block is split into groups (16 of 16 values, or 8 of 32) with
//! their own small integer scale (and minimum), themselves scaled by one or two
//! f16 super-scales. The quantizers are ggml's reference ones
//! (`quantize_row_q*_K_ref`): search a float scale per group (see
//! [`super::search`]), quantize the group scales against the largest one, then
//! requantize every value against the scale the dequantizer will actually see.

use super::blocks::{BlockQ2_K, BlockQ3_K, BlockQ4_K, BlockQ5_K, BlockQ6_K, BlockQ8_K, QK_K};
use super::common::{f2h, h2f, Block, Quantize};
use super::search::{affine, nearest_int, scale_min_k4, symmetric_q3, symmetric_weighted, Affine, GROUP_MAX_EPS};
use crate::dtype::DType;
use bytemuck::Zeroable;

/// Packs 2-bit levels: in each 128-value half, byte `l` holds values `l`, `l+32`, `l+64`, `l+96`.
fn pack2(levels: &[u8; QK_K], qs: &mut [u8; QK_K / 4]) {
    for (h, out) in qs.chunks_exact_mut(32).enumerate() {
        let l = &levels[128 * h..];
        for (i, q) in out.iter_mut().enumerate() {
            *q = l[i] | (l[i + 32] << 2) | (l[i + 64] << 4) | (l[i + 96] << 6);
        }
    }
}

/// The 2-bit field of value `i` in the Q2_K/Q3_K packing.
#[inline]
fn low2(qs: &[u8; QK_K / 4], i: usize) -> u8 {
    let (h, r) = (i / 128, i % 128);
    (qs[32 * h + r % 32] >> (2 * (r / 32))) & 3
}

/// Q3_K's 16 six-bit scales (still offset by 32).
fn q3_scales(sc: &[u8; 12]) -> [i32; 16] {
    let mut out = [0i32; 16];
    for (j, s) in out.iter_mut().enumerate() {
        let low = if j < 8 { sc[j] & 0x0f } else { sc[j - 8] >> 4 };
        let high = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
        *s = i32::from(low | (high << 4));
    }
    out
}

impl Block for BlockQ2_K {
    const DTYPE: DType = DType::Q2_K;
    const VALUES: usize = QK_K;

    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK_K);
        let (d, min) = (h2f(self.d), h2f(self.dmin));
        for (g, ys) in dst.chunks_exact_mut(16).enumerate() {
            let sc = self.scales[g];
            let dl = d * (sc & 0x0f) as f32;
            let ml = min * (sc >> 4) as f32;
            for (i, y) in ys.iter_mut().enumerate() {
                *y = dl * low2(&self.qs, 16 * g + i) as f32 - ml;
            }
        }
    }
}

impl Quantize for BlockQ2_K {
    fn quantize(x: &[f32]) -> Self {
        assert_eq!(x.len(), QK_K);
        const Q4SCALE: f32 = 15.0;
        let p = Affine { nmax: 3, rmin: -0.5, rdelta: 0.1, nstep: 15, use_mad: true };
        let mut levels = [0u8; QK_K];
        let (mut scales, mut mins) = ([0f32; 16], [0f32; 16]);
        let (mut aux, mut weights) = ([0u8; 16], [0f32; 16]);
        let (mut max_scale, mut max_min) = (0f32, 0f32);
        for j in 0..16 {
            let xs = &x[16 * j..16 * j + 16];
            for (w, v) in weights.iter_mut().zip(xs) {
                *w = v.abs();
            }
            (scales[j], mins[j]) = affine(&p, xs, &weights, &mut levels[16 * j..16 * j + 16], &mut aux);
            if scales[j] > max_scale {
                max_scale = scales[j];
            }
            if mins[j] > max_min {
                max_min = mins[j];
            }
        }
        let mut y = BlockQ2_K::zeroed();
        if max_scale > 0.0 {
            let iscale = Q4SCALE / max_scale;
            for (b, s) in y.scales.iter_mut().zip(&scales) {
                *b = nearest_int(iscale * s) as u8;
            }
            y.d = f2h(max_scale / Q4SCALE);
        }
        if max_min > 0.0 {
            let iscale = Q4SCALE / max_min;
            for (b, m) in y.scales.iter_mut().zip(&mins) {
                *b |= (nearest_int(iscale * m) << 4) as u8;
            }
            y.dmin = f2h(max_min / Q4SCALE);
        }
        for j in 0..16 {
            let d = h2f(y.d) * (y.scales[j] & 0x0f) as f32;
            if d == 0.0 {
                continue;
            }
            let dm = h2f(y.dmin) * (y.scales[j] >> 4) as f32;
            for i in 16 * j..16 * j + 16 {
                levels[i] = nearest_int((x[i] + dm) / d).clamp(0, 3) as u8;
            }
        }
        pack2(&levels, &mut y.qs);
        y
    }
}

impl Block for BlockQ3_K {
    const DTYPE: DType = DType::Q3_K;
    const VALUES: usize = QK_K;

    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK_K);
        let d_all = h2f(self.d);
        let scales = q3_scales(&self.scales);
        for (g, ys) in dst.chunks_exact_mut(16).enumerate() {
            let dl = d_all * (scales[g] - 32) as f32;
            for (i, y) in ys.iter_mut().enumerate() {
                let k = 16 * g + i;
                // a clear high bit means "subtract 4"
                let high = (self.hmask[k % 32] >> (k / 32)) & 1;
                let q = i32::from(low2(&self.qs, k)) - if high != 0 { 0 } else { 4 };
                *y = dl * q as f32;
            }
        }
    }
}

impl Quantize for BlockQ3_K {
    fn quantize(x: &[f32]) -> Self {
        assert_eq!(x.len(), QK_K);
        let mut levels = [0i8; QK_K];
        let mut scales = [0f32; 16];
        let (mut max_scale, mut amax) = (0f32, 0f32);
        for j in 0..16 {
            scales[j] = symmetric_q3(4, &x[16 * j..16 * j + 16], &mut levels[16 * j..16 * j + 16]);
            if scales[j].abs() > amax {
                amax = scales[j].abs();
                max_scale = scales[j];
            }
        }
        let mut y = BlockQ3_K::zeroed();
        if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            for (j, s) in scales.iter().enumerate() {
                let l = (i32::from(nearest_int(iscale * s) as i8).clamp(-32, 31) + 32) as u8;
                if j < 8 {
                    y.scales[j] = l & 0x0f;
                } else {
                    y.scales[j - 8] |= (l & 0x0f) << 4;
                }
                y.scales[8 + j % 4] |= (l >> 4) << (2 * (j / 4));
            }
            y.d = f2h(1.0 / iscale);
        }
        for (j, sc) in q3_scales(&y.scales).into_iter().enumerate() {
            let d = h2f(y.d) * (sc - 32) as f32;
            if d == 0.0 {
                continue;
            }
            for i in 16 * j..16 * j + 16 {
                levels[i] = (nearest_int(x[i] / d).clamp(-4, 3) + 4) as i8;
            }
        }
        // the third bit of value k goes to byte k % 32, bit k / 32
        let mut low = [0u8; QK_K];
        for (k, (&l, lo)) in levels.iter().zip(low.iter_mut()).enumerate() {
            let mut l = l;
            if l > 3 {
                y.hmask[k % 32] |= 1 << (k / 32);
                l -= 4;
            }
            *lo = l as u8;
        }
        pack2(&low, &mut y.qs);
        y
    }
}

/// Q4_K/Q5_K: per-group affine search, then 6-bit scales and mins packed into `sc`.
/// Returns the levels (`0..=nmax`) requantized against the stored scales, and the super-scales.
fn quantize_k4(x: &[f32], p: &Affine, sc: &mut [u8; 12]) -> ([u8; QK_K], f32, f32) {
    let mut levels = [0u8; QK_K];
    let (mut scales, mut mins) = ([0f32; 8], [0f32; 8]);
    let (mut aux, mut weights) = ([0u8; 32], [0f32; 32]);
    let (mut max_scale, mut max_min) = (0f32, 0f32);
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0f32;
        for v in xs {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        for (w, v) in weights.iter_mut().zip(xs) {
            *w = av_x + v.abs();
        }
        (scales[j], mins[j]) = affine(p, xs, &weights, &mut levels[32 * j..32 * j + 32], &mut aux);
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }
    let inv_scale = if max_scale > 0.0 { 63.0 / max_scale } else { 0.0 };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    for j in 0..8 {
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        if j < 4 {
            sc[j] = ls;
            sc[j + 4] = lm;
        } else {
            sc[j + 4] = (ls & 0x0f) | ((lm & 0x0f) << 4);
            sc[j - 4] |= (ls >> 4) << 6;
            sc[j] |= (lm >> 4) << 6;
        }
    }
    let (d, dmin) = (max_scale / 63.0, max_min / 63.0);
    let (dh, dminh) = (h2f(f2h(d)), h2f(f2h(dmin)));
    for j in 0..8 {
        let (s, m) = scale_min_k4(j, sc);
        let d = dh * s as f32;
        if d == 0.0 {
            continue;
        }
        let dm = dminh * m as f32;
        for i in 32 * j..32 * j + 32 {
            levels[i] = nearest_int((x[i] + dm) / d).clamp(0, p.nmax) as u8;
        }
    }
    (levels, d, dmin)
}

impl Block for BlockQ4_K {
    const DTYPE: DType = DType::Q4_K;
    const VALUES: usize = QK_K;

    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK_K);
        let (d, min) = (h2f(self.d), h2f(self.dmin));
        for (g, ys) in dst.chunks_exact_mut(32).enumerate() {
            let (sc, m) = scale_min_k4(g, &self.scales);
            let (dl, ml) = (d * sc as f32, min * m as f32);
            let (qs, shift) = (&self.qs[32 * (g / 2)..], 4 * (g % 2));
            for (y, &q) in ys.iter_mut().zip(qs) {
                *y = dl * ((q >> shift) & 0x0f) as f32 - ml;
            }
        }
    }
}

impl Quantize for BlockQ4_K {
    fn quantize(x: &[f32]) -> Self {
        assert_eq!(x.len(), QK_K);
        let p = Affine { nmax: 15, rmin: -1.0, rdelta: 0.1, nstep: 20, use_mad: false };
        let mut y = BlockQ4_K::zeroed();
        let (levels, d, dmin) = quantize_k4(x, &p, &mut y.scales);
        (y.d, y.dmin) = (f2h(d), f2h(dmin));
        for (c, out) in y.qs.chunks_exact_mut(32).enumerate() {
            for (i, q) in out.iter_mut().enumerate() {
                *q = levels[64 * c + i] | (levels[64 * c + 32 + i] << 4);
            }
        }
        y
    }
}

impl Block for BlockQ5_K {
    const DTYPE: DType = DType::Q5_K;
    const VALUES: usize = QK_K;

    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK_K);
        let (d, min) = (h2f(self.d), h2f(self.dmin));
        for (g, ys) in dst.chunks_exact_mut(32).enumerate() {
            let (sc, m) = scale_min_k4(g, &self.scales);
            let (dl, ml) = (d * sc as f32, min * m as f32);
            let (qs, shift) = (&self.qs[32 * (g / 2)..], 4 * (g % 2));
            for (i, y) in ys.iter_mut().enumerate() {
                let high = if self.qh[i] & (1 << g) != 0 { 16 } else { 0 };
                *y = dl * (((qs[i] >> shift) & 0x0f) + high) as f32 - ml;
            }
        }
    }
}

impl Quantize for BlockQ5_K {
    fn quantize(x: &[f32]) -> Self {
        assert_eq!(x.len(), QK_K);
        let p = Affine { nmax: 31, rmin: -0.5, rdelta: 0.1, nstep: 15, use_mad: false };
        let mut y = BlockQ5_K::zeroed();
        let (levels, d, dmin) = quantize_k4(x, &p, &mut y.scales);
        (y.d, y.dmin) = (f2h(d), f2h(dmin));
        // value k: low nibble in qs like Q4_K, fifth bit in qh[k % 32] bit k / 32
        for (c, out) in y.qs.chunks_exact_mut(32).enumerate() {
            for (i, q) in out.iter_mut().enumerate() {
                let (a, b) = (levels[64 * c + i], levels[64 * c + 32 + i]);
                *q = (a & 0x0f) | ((b & 0x0f) << 4);
                y.qh[i] |= ((a >> 4) << (2 * c)) | ((b >> 4) << (2 * c + 1));
            }
        }
        y
    }
}

impl Block for BlockQ6_K {
    const DTYPE: DType = DType::Q6_K;
    const VALUES: usize = QK_K;

    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK_K);
        let d = h2f(self.d);
        for (k, y) in dst.iter_mut().enumerate() {
            let (h, r) = (k / 128, k % 128);
            let (quarter, l) = (r / 32, r % 32);
            let low = (self.ql[64 * h + 32 * (quarter % 2) + l] >> (4 * (quarter / 2))) & 0x0f;
            let high = (self.qh[32 * h + l] >> (2 * quarter)) & 3;
            let q = i32::from(low | (high << 4)) - 32;
            *y = d * self.scales[k / 16] as f32 * q as f32;
        }
    }
}

impl Quantize for BlockQ6_K {
    fn quantize(x: &[f32]) -> Self {
        assert_eq!(x.len(), QK_K);
        let mut levels = [0i8; QK_K];
        let mut scales = [0f32; 16];
        let (mut max_scale, mut max_abs) = (0f32, 0f32);
        for j in 0..16 {
            scales[j] = symmetric_weighted(32, &x[16 * j..16 * j + 16], &mut levels[16 * j..16 * j + 16]);
            if scales[j].abs() > max_abs {
                max_abs = scales[j].abs();
                max_scale = scales[j];
            }
        }
        let mut y = BlockQ6_K::zeroed();
        if max_abs < GROUP_MAX_EPS {
            return y;
        }
        let iscale = -128.0 / max_scale;
        y.d = f2h(1.0 / iscale);
        for (b, s) in y.scales.iter_mut().zip(&scales) {
            *b = nearest_int(iscale * s).min(127) as i8;
        }
        for j in 0..16 {
            let d = h2f(y.d) * y.scales[j] as f32;
            if d == 0.0 {
                continue;
            }
            for i in 16 * j..16 * j + 16 {
                levels[i] = (nearest_int(x[i] / d).clamp(-32, 31) + 32) as i8;
            }
        }
        for (k, &l) in levels.iter().enumerate() {
            let l = l as u8;
            let (h, r) = (k / 128, k % 128);
            let (quarter, i) = (r / 32, r % 32);
            y.ql[64 * h + 32 * (quarter % 2) + i] |= (l & 0x0f) << (4 * (quarter / 2));
            y.qh[32 * h + i] |= (l >> 4) << (2 * quarter);
        }
        y
    }
}

impl Block for BlockQ8_K {
    const DTYPE: DType = DType::Q8_K;
    const VALUES: usize = QK_K;

    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK_K);
        for (y, &q) in dst.iter_mut().zip(&self.qs) {
            *y = self.d * q as f32;
        }
    }
}

impl Quantize for BlockQ8_K {
    /// ggml leaves `bsums` unwritten for an all-zero block; here they are 0.
    fn quantize(x: &[f32]) -> Self {
        assert_eq!(x.len(), QK_K);
        let (mut max, mut amax) = (0f32, 0f32);
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        let mut y = BlockQ8_K::zeroed();
        if amax == 0.0 {
            return y;
        }
        let iscale = -127.0 / max;
        for (q, &v) in y.qs.iter_mut().zip(x) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (s, qs) in y.bsums.iter_mut().zip(y.qs.chunks_exact(16)) {
            *s = qs.iter().map(|&q| i32::from(q)).sum::<i32>() as i16;
        }
        y.d = 1.0 / iscale;
        y
    }
}
