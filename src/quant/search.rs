//! The scale searches behind ggml's reference k-quant quantizers.
//!
//! Each function picks a scale (and for the "affine" types a minimum) for one
//! small group of values and the integer levels that go with it, doing the
//! same f32 operations in the same order as ggml's reference C (no fused
//! multiply-adds), so the chosen levels and scales agree bit for bit.

/// Groups whose largest magnitude is below this are treated as all zero.
pub(super) const GROUP_MAX_EPS: f32 = 1e-15;

/// Rounds to the nearest integer, ties to even, by adding 1.5 * 2^23 and
/// reading the mantissa (valid for |x| < 2^22; other inputs give the same
/// garbage as ggml's `nearest_int`).
#[inline]
pub(super) fn nearest_int(x: f32) -> i32 {
    let v = x + 12_582_912.0;
    (v.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// The value of largest magnitude (first one on ties) and that magnitude.
fn signed_absmax(x: &[f32]) -> (f32, f32) {
    let (mut max, mut amax) = (0f32, 0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    (max, amax)
}

/// Symmetric levels in `-nmax..nmax`, weighted by `x²`; the scale that
/// minimizes the weighted error over 19 candidate inverse scales around
/// `-nmax/max` (ggml's `make_qx_quants` with `rmse_type = 1`, no importance).
///
/// Writes `level + nmax` into `levels` and returns the scale.
pub(super) fn symmetric_weighted(nmax: i32, x: &[f32], levels: &mut [i8]) -> f32 {
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let level = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    // Σ w·x·l and Σ w·l² with w = x², in ggml's association order
    let sums = |iscale: f32| {
        let (mut sumlx, mut suml2) = (0f32, 0f32);
        for &v in x {
            let l = level(iscale, v) as f32;
            let w = v * v;
            sumlx += w * v * l;
            suml2 += w * l * l;
        }
        (sumlx, suml2)
    };
    let mut iscale = -(nmax as f32) / max;
    for (q, &v) in levels.iter_mut().zip(x) {
        *q = (level(iscale, v) + nmax) as i8;
    }
    let (sumlx, suml2) = sums(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in (-9..=9).filter(|&is| is != 0) {
        iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        let (sumlx, suml2) = sums(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (q, &v) in levels.iter_mut().zip(x) {
                *q = (level(iscale, v) + nmax) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// Q3_K's symmetric levels in `-nmax..nmax` (ggml's `make_q3_quants` with
/// `do_rmse`): start from `-nmax/max`, then up to five passes that move single
/// levels while that lowers the `x²`-weighted error.
///
/// Writes `level + nmax` into `levels` (all 0 for an all-zero group) and returns the scale.
pub(super) fn symmetric_q3(nmax: i32, x: &[f32], levels: &mut [i8]) -> f32 {
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    let (mut sumlx, mut suml2) = (0f32, 0f32);
    for (q, &v) in levels.iter_mut().zip(x) {
        let l = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        *q = l as i8;
        let w = v * v;
        sumlx += w * v * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    for _ in 0..5 {
        let mut changed = false;
        for (q, &v) in levels.iter_mut().zip(x) {
            let w = v * v;
            let old = *q as f32;
            let mut slx = sumlx - w * v * old;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * old * old;
                let new = nearest_int(v * sl2 / slx).clamp(-nmax, nmax - 1);
                if new != i32::from(*q) {
                    slx += w * v * new as f32;
                    sl2 += w * new as f32 * new as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *q = new as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    for q in levels.iter_mut() {
        *q += nmax as i8;
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// Parameters of the affine search (ggml's `make_qkx2_quants` arguments).
pub(super) struct Affine {
    /// Largest level.
    pub nmax: i32,
    /// First candidate offset added to `nmax`.
    pub rmin: f32,
    /// Step between candidates.
    pub rdelta: f32,
    /// Candidates tried after the first guess: `nstep + 1`.
    pub nstep: i32,
    /// Weigh absolute instead of squared errors.
    pub use_mad: bool,
}

/// Affine levels `0..=nmax` with `x ≈ scale·l - min` (ggml's
/// `make_qkx2_quants`): a weighted least-squares fit of scale and minimum for
/// each candidate inverse scale, keeping the best weighted error.
///
/// Writes the levels into `levels` (`aux` is scratch of the same length) and
/// returns `(scale, min)` with `min ≥ 0` the amount subtracted.
pub(super) fn affine(p: &Affine, x: &[f32], weights: &[f32], levels: &mut [u8], aux: &mut [u8]) -> (f32, f32) {
    let n = x.len();
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        levels.fill(0);
        return (0.0, -min);
    }
    let err = |d: f32| if p.use_mad { d.abs() } else { d * d };
    let nmax = p.nmax as f32;
    let iscale = nmax / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0f32;
    for i in 0..n {
        levels[i] = nearest_int(iscale * (x[i] - min)).clamp(0, p.nmax) as u8;
        let diff = scale * levels[i] as f32 + min - x[i];
        best_error += weights[i] * err(diff);
    }
    if p.nstep < 1 {
        return (scale, -min);
    }
    for is in 0..=p.nstep {
        let iscale = (p.rmin + p.rdelta * is as f32 + nmax) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0f32, 0f32, 0f32);
        for i in 0..n {
            let l = nearest_int(iscale * (x[i] - min)).clamp(0, p.nmax);
            aux[i] = l as u8;
            let (w, l) = (weights[i], l as f32);
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0f32;
            for i in 0..n {
                let diff = this_scale * aux[i] as f32 + this_min - x[i];
                cur_error += weights[i] * err(diff);
            }
            if cur_error < best_error {
                levels[..n].copy_from_slice(&aux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// Group `j`'s 6-bit scale and min from Q4_K/Q5_K's 12 packed bytes.
#[inline]
pub(super) fn scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}
