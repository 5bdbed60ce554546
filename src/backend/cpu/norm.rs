//! Row normalisations (`rms_norm`, `norm`), and the row driver the other
//! row kernels (softmax, rope, diag_mask) share: each thread takes a range of
//! rows, gathers a row into an f32 buffer, computes into a second buffer and
//! scatters it to the destination, so any strides and types work and a
//! destination equal to its source (in place) is read before it is written.

use super::mem::{Exec, Scalar, Strided, StridedMut};
use crate::error::{Error, Result};

/// Reads the `buf.len()` values of the row at `p` (element stride `nb0`) as f32.
///
/// # Safety
/// `p` must hold `buf.len()` readable, aligned elements of type `s` at stride `nb0`.
#[inline]
pub(super) unsafe fn load_row(buf: &mut [f32], p: *const u8, nb0: usize, s: Scalar) {
    // SAFETY: per the contract; `buf` is our own memory, so it cannot overlap `p`.
    unsafe {
        if s == Scalar::F32 && nb0 == 4 {
            std::ptr::copy_nonoverlapping(p.cast::<f32>(), buf.as_mut_ptr(), buf.len());
        } else {
            for (i, v) in buf.iter_mut().enumerate() {
                *v = s.load(p.add(i * nb0));
            }
        }
    }
}

/// Writes `buf` to the row at `p` (element stride `nb0`), converting to type `s`.
///
/// # Safety
/// `p` must hold `buf.len()` writable, aligned elements of type `s` at stride
/// `nb0` that no other thread accesses.
#[inline]
pub(super) unsafe fn store_row(buf: &[f32], p: *mut u8, nb0: usize, s: Scalar) {
    // SAFETY: per the contract; `buf` is our own memory, so it cannot overlap `p`.
    unsafe {
        if s == Scalar::F32 && nb0 == 4 {
            std::ptr::copy_nonoverlapping(buf.as_ptr(), p.cast::<f32>(), buf.len());
        } else {
            for (i, &v) in buf.iter().enumerate() {
                s.store(p.add(i * nb0), v);
            }
        }
    }
}

/// Runs `f`, compiled with FMA enabled when the CPU has it, so that the
/// kernels' `mul_add` (which mirror the multiply-adds a C compiler fuses in
/// ggml's kernels) is one instruction; elsewhere `mul_add` calls libm's `fmaf`,
/// which gives the same results, only slower.
#[inline(always)]
pub(super) fn with_fma<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "fma")]
        unsafe fn fused<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        if crate::quant::dot::SimdLevel::cap() >= crate::quant::dot::SimdLevel::Avx2
            && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU supports the FMA instructions `fused` may use.
            return unsafe { fused(f) };
        }
    }
    f()
}

/// Calls `f(state, [i1, i2, i3], x, y)` for every row of `a` (same shape as
/// `dst`): `x` holds the row of `a` as f32, and what `f` leaves in `y` is
/// written to the same row of `dst`. Rows are split across threads; each range
/// of rows gets its own `state` from `init`. `cost` is the work per element.
pub(super) fn map_rows<S, I, F>(
    ex: &Exec,
    op: &'static str,
    dst: StridedMut,
    a: Strided,
    cost: usize,
    init: I,
    f: F,
) -> Result<()>
where
    I: Fn() -> S + Sync + Send,
    F: Fn(&mut S, [i64; 3], &[f32], &mut [f32]) + Sync + Send,
{
    let (sd, sa) = (Scalar::of(op, dst.l.dtype)?, Scalar::of(op, a.l.dtype)?);
    if dst.l.ne != a.l.ne {
        return Err(Error::internal(format!("{op} result ne={:?} for input ne={:?}", dst.l.ne, a.l.ne)));
    }
    if dst.l.is_empty() {
        return Ok(());
    }
    let ne = a.l.ne;
    let n = ne[0] as usize;
    ex.for_ranges(a.l.nrows() as usize, n.saturating_mul(cost), |rows| {
        with_fma(|| {
            let (mut x, mut y) = (vec![0f32; n], vec![0f32; n]);
            let mut state = init();
            for r in rows {
                let [i1, i2, i3] = a.l.row_index(r as i64);
                // SAFETY: row (i1, i2, i3) exists in both tensors (same shape) and
                // lies in its buffer; this thread alone owns that row of dst, and a
                // dst equal to `a` (in place) is fully read before it is written.
                unsafe { load_row(&mut x, a.row(i1, i2, i3), a.l.nb[0], sa) };
                f(&mut state, [i1, i2, i3], &x, &mut y);
                // SAFETY: as above.
                unsafe { store_row(&y, dst.row(i1, i2, i3), dst.l.nb[0], sd) };
            }
        })
    });
    Ok(())
}

/// `y = x / sqrt(mean(x²) + eps)` per row: squares in f32 summed in f64, the
/// mean rounded to f32, the scale `1/sqrt(mean + eps)` in f32 (as ggml); then,
/// with a weight `w` (rows broadcast as `mul`'s), `y·w` rounded as `mul` rounds it.
pub(crate) fn rms_norm(ex: &Exec, eps: f32, dst: StridedMut, a: Strided, w: Option<Strided>) -> Result<()> {
    let sw = w.map(|w| Scalar::of("rms_norm", w.l.dtype)).transpose()?;
    map_rows(
        ex,
        "rms_norm",
        dst,
        a,
        3,
        || (),
        move |_, [i1, i2, i3], x, y| {
            let sum: f64 = x.iter().map(|&v| f64::from(v * v)).sum();
            let mean = (sum / x.len() as f64) as f32;
            let scale = 1.0f32 / (mean + eps).sqrt();
            for (o, &v) in y.iter_mut().zip(x) {
                *o = v * scale;
            }
            if let (Some(w), Some(sw)) = (w, sw) {
                let (ne, nb0) = (w.l.ne, w.l.nb[0]);
                let row = w.row(i1 % ne[1], i2 % ne[2], i3 % ne[3]);
                if w.l.dtype == crate::dtype::DType::F32 && nb0 == 4 && ne[0] as usize == y.len() {
                    // a model's norm weight: one packed f32 row as long as the row
                    // SAFETY: that row is ne[0] packed f32 inside w's tensor.
                    let wr = unsafe { std::slice::from_raw_parts(row.cast::<f32>(), y.len()) };
                    y.iter_mut().zip(wr).for_each(|(o, &v)| *o *= v);
                    return;
                }
                for (i, o) in y.iter_mut().enumerate() {
                    // SAFETY: the weight row has ne[0] values, and ne[0] divides the row
                    // length (checked when the op was made).
                    *o *= unsafe { sw.load(row.add((i % ne[0] as usize) * nb0)) };
                }
            }
        },
    )
}

/// `y = (x - mean) / sqrt(var + eps)` per row, as ggml's contiguous path:
/// the sum in f64 rounded to f32 before dividing by `n` in f32; the squared
/// deviations (f32) summed in f64, the variance rounded to f32.
pub(crate) fn norm(ex: &Exec, eps: f32, dst: StridedMut, a: Strided) -> Result<()> {
    map_rows(
        ex,
        "norm",
        dst,
        a,
        5,
        || (),
        move |_, _, x, y| {
            let n = x.len();
            let sum = x.iter().map(|&v| f64::from(v)).sum::<f64>() as f32;
            let mean = sum / n as f32;
            let mut sq = 0f64;
            for (o, &v) in y.iter_mut().zip(x) {
                let d = v - mean;
                *o = d;
                sq += f64::from(d * d);
            }
            let var = (sq / n as f64) as f32;
            let scale = 1.0f32 / (var + eps).sqrt();
            for o in y.iter_mut() {
                *o *= scale;
            }
        },
    )
}
