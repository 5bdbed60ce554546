//! `soft_max_ext` (scale, broadcast mask, ALiBi slopes) and `diag_mask_inf`,
//! row by row on the shared row driver.

use super::mem::{Exec, Scalar, Strided, StridedMut};
use super::norm::map_rows;
use crate::backend::exec::{Extra, SoftMax};
use crate::error::{Error, Result};

/// ggml's ALiBi slope of every head `h < n_head`: `m0^(h+1)` for the first
/// `n_head_log2` heads, `m1^(2(h - n_head_log2) + 1)` after; all 1 without ALiBi.
pub(super) fn alibi_slopes(n_head: u32, max_bias: f32) -> Vec<f32> {
    if max_bias <= 0.0 || n_head == 0 {
        return vec![1.0; n_head as usize];
    }
    // the largest power of two <= n_head, as ggml computes it
    let n_head_log2 = 1u32 << (f64::from(n_head).log2().floor() as u32);
    let m0 = 2.0f32.powf(-max_bias / n_head_log2 as f32);
    let m1 = 2.0f32.powf(-(max_bias / 2.0) / n_head_log2 as f32);
    (0..n_head)
        .map(|h| if h < n_head_log2 { m0.powf((h + 1) as f32) } else { m1.powf((2 * (h - n_head_log2) + 1) as f32) })
        .collect()
}

/// `dst = softmax(a*scale + slope*mask)` per row. The mask row for row
/// `(i1, i2, i3)` is `(i1, i2 % m.ne2, i3 % m.ne3)`; the slope is head `i2`'s.
/// As ggml: the masked value is `x*scale + slope*m` in f32 (one fused
/// multiply-add, as ggml compiled with FMA does it), exponentials of
/// `v - max` in f32 summed in f64, and the row scaled by `1/sum` rounded to
/// f32. A row whose maximum is `-inf` (every value `-inf`) becomes zeros.
/// With sinks, head `i2`'s sink joins the maximum and the sum, as ggml's.
pub(crate) fn soft_max(ex: &Exec, p: SoftMax, dst: StridedMut, a: Strided, extra: Extra<Strided>) -> Result<()> {
    let (SoftMax { scale, max_bias }, mask) = (p, extra.mask);
    let sinks = head_sinks(extra.sinks, a.l.ne[2])?;
    let sm = mask.map(|m| Scalar::of("soft_max", m.l.dtype)).transpose()?;
    if let Some(m) = mask {
        let (mne, ane) = (m.l.ne, a.l.ne);
        if !a.l.is_empty() && (mne[0] != ane[0] || mne[1] < ane[1] || mne[2] == 0 || mne[3] == 0) {
            return Err(Error::internal(format!("soft_max mask ne={mne:?} for ne={ane:?}")));
        }
    }
    let slopes = alibi_slopes(u32::try_from(a.l.ne[2]).unwrap_or(u32::MAX), max_bias);
    map_rows(
        ex,
        "soft_max",
        dst,
        a,
        8,
        || (),
        |_, [i1, i2, i3], x, y| {
            for (o, &v) in y.iter_mut().zip(x) {
                *o = v * scale;
            }
            if let (Some(m), Some(sm)) = (mask, sm) {
                let slope = slopes[i2 as usize];
                let p = m.row(i1, i2 % m.l.ne[2], i3 % m.l.ne[3]);
                let nb0 = m.l.nb[0];
                for (i, o) in y.iter_mut().enumerate() {
                    // SAFETY: the mask has ne0 == a.ne0 values per row, and row
                    // (i1, i2 % ne2, i3 % ne3) exists (i1 < a.ne1 <= mask.ne1).
                    let mv = unsafe { sm.load(p.add(i * nb0)) };
                    // fused, as compilers contract ggml's `w += slope*m`
                    *o = slope.mul_add(mv, *o);
                }
            }
            // ggml's MAX(max, v): a NaN value replaces the running maximum
            let max = y.iter().fold(f32::NEG_INFINITY, |m, &v| if m > v { m } else { v });
            let sink = sinks.as_ref().map(|s| s[i2 as usize]);
            let max = sink.map_or(max, |s| max.max(s));
            if max == f32::NEG_INFINITY {
                y.fill(0.0);
                return;
            }
            let mut sum = 0f64;
            for o in y.iter_mut() {
                *o = (*o - max).exp();
                sum += f64::from(*o);
            }
            if let Some(s) = sink {
                sum += f64::from((s - max).exp());
            }
            let inv = (1.0 / sum) as f32;
            for o in y.iter_mut() {
                *o *= inv;
            }
        },
    )
}

/// The `n_head` sinks of a softmax or an attention, read once, if it has them.
pub(super) fn head_sinks(sinks: Option<Strided>, n_head: i64) -> Result<Option<Vec<f32>>> {
    let Some(s) = sinks else { return Ok(None) };
    if s.l.ne[0] != n_head || s.l.dtype != crate::dtype::DType::F32 || !s.packed_rows() {
        return Err(Error::internal(format!("sinks ne={:?} {} for {n_head} heads", s.l.ne, s.l.dtype)));
    }
    // SAFETY: n_head packed f32 inside the sinks' tensor (checked above and when the op was made).
    Ok(Some(unsafe { std::slice::from_raw_parts(s.ptr().cast::<f32>(), n_head as usize) }.to_vec()))
}

/// `dst = a` with every element `i0 > n_past + i1` set to `-inf`. `dst` may be
/// `a` itself (in place): each row is read whole before it is written.
pub(crate) fn diag_mask_inf(ex: &Exec, n_past: i32, dst: StridedMut, a: Strided) -> Result<()> {
    let n_past = i64::from(n_past);
    map_rows(
        ex,
        "diag_mask_inf",
        dst,
        a,
        1,
        || (),
        move |_, [i1, _, _], x, y| {
            for (i0, (o, &v)) in y.iter_mut().zip(x).enumerate() {
                *o = if i0 as i64 > n_past + i1 { f32::NEG_INFINITY } else { v };
            }
        },
    )
}
