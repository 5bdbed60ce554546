//! Reductions: over dim 0, and over every element. Sums run in f64; a
//! reduction over rows computes each row's value in parallel and adds them in
//! row order, so the bits do not depend on the thread count. Sums start from
//! +0.0, as ggml's loops do (Rust's float `sum` starts from -0.0).

use super::mem::{Exec, Scalar, SharedBytes, Strided, StridedMut};
use crate::error::Result;

/// `dst[0, i1, i2, i3] = Σ_i0 a[i0, i1, i2, i3]`, accumulated in f64 like ggml.
pub(crate) fn sum_rows(ex: &Exec, dst: StridedMut, a: Strided) -> Result<()> {
    row_sums(ex, "sum_rows", dst, a, 1.0)
}

/// `dst[0, i1, i2, i3] = Σ_i0 a[i0, i1, i2, i3] / ne0` (ggml's `mean`), summed
/// and divided in f64.
pub(crate) fn mean(ex: &Exec, dst: StridedMut, a: Strided) -> Result<()> {
    row_sums(ex, "mean", dst, a, a.l.ne[0].max(1) as f64)
}

/// Each row's f64 sum divided by `div`, stored in `dst`'s type.
fn row_sums(ex: &Exec, op: &'static str, dst: StridedMut, a: Strided, div: f64) -> Result<()> {
    let (sd, sa) = (Scalar::of(op, dst.l.dtype)?, Scalar::of(op, a.l.dtype)?);
    ex.for_ranges(a.l.nrows() as usize, a.l.ne[0] as usize, |rows| {
        for r in rows {
            let [i1, i2, i3] = a.l.row_index(r as i64);
            let acc = row_sum(sa, &a, r);
            // SAFETY: the single output element of row (i1,i2,i3) exists and is written by this thread alone.
            unsafe { sd.store(dst.row(i1, i2, i3), (acc / div) as f32) };
        }
    });
    Ok(())
}

/// The f64 sum of row `r` (in logical row order) of `a`, read as `sa`.
fn row_sum(sa: Scalar, a: &Strided, r: usize) -> f64 {
    let [i1, i2, i3] = a.l.row_index(r as i64);
    let (x, an) = (a.row(i1, i2, i3), a.l.nb[0]);
    // SAFETY: row (i1,i2,i3) of a holds ne0 elements of `sa`'s type at stride an.
    (0..a.l.ne[0] as usize).map(|i0| unsafe { sa.load(x.add(i0 * an)) } as f64).fold(0.0, |s, v| s + v)
}

/// `value(r)` for every row `r < nrows` (each costing about `cost`),
/// computed in parallel and returned in row order.
fn per_row(ex: &Exec, nrows: usize, cost: usize, value: impl Fn(usize) -> f64 + Sync) -> Vec<f64> {
    let mut out = vec![0f64; nrows];
    let shared = SharedBytes::new(bytemuck::cast_slice_mut(&mut out));
    ex.for_ranges(nrows, cost, |rows| {
        for r in rows {
            let v = value(r);
            // SAFETY: slot r (8 bytes of `out`) is written by this thread alone.
            if let Some(slot) = unsafe { shared.range(8 * r, 8) } {
                slot.copy_from_slice(&v.to_ne_bytes());
            }
        }
    });
    out
}

/// `dst[0] = Σ a` over every element, in f64: the row sums ([`row_sum`]) in row order.
pub(crate) fn sum(ex: &Exec, dst: StridedMut, a: Strided) -> Result<()> {
    let (sd, sa) = (Scalar::of("sum", dst.l.dtype)?, Scalar::of("sum", a.l.dtype)?);
    let sums = per_row(ex, a.l.nrows() as usize, a.l.ne[0] as usize, |r| row_sum(sa, &a, r));
    let total = sums.iter().fold(0.0, |s, v| s + v);
    // SAFETY: dst is one element of its type.
    unsafe { sd.store(dst.row(0, 0, 0), total as f32) };
    Ok(())
}

/// `dst[i1] = the index of row i1's first largest value` (I32; a NaN never
/// compares larger, so it is passed over unless the row starts with one).
pub(crate) fn argmax(ex: &Exec, dst: StridedMut, a: Strided) -> Result<()> {
    let sa = Scalar::of("argmax", a.l.dtype)?;
    let (ne0, an, nrows) = (a.l.ne[0] as usize, a.l.nb[0], a.l.ne[1] as usize);
    ex.for_ranges(nrows, ne0, |rows| {
        for r in rows {
            let x = a.row(r as i64, 0, 0);
            // SAFETY: row r of the matrix a holds ne0 elements at stride an; element r
            // of dst (I32, ne = [nrows]) is written by this thread alone.
            unsafe {
                let (mut best, mut idx) = (sa.load(x), 0i32);
                for i0 in 1..ne0 {
                    let v = sa.load(x.add(i0 * an));
                    if v > best {
                        (best, idx) = (v, i0 as i32);
                    }
                }
                dst.row(0, 0, 0).add(r * dst.l.nb[0]).cast::<i32>().write_unaligned(idx);
            }
        }
    });
    Ok(())
}

/// `dst[0] = #{i : a[i] == b[i]}` over the I32 tensors `a` and `b` (one
/// shape), an I64 count (each row's count exact in f64).
pub(crate) fn count_equal(ex: &Exec, dst: StridedMut, a: Strided, b: Strided) -> Result<()> {
    let (ne0, an, bn) = (a.l.ne[0] as usize, a.l.nb[0], b.l.nb[0]);
    let counts = per_row(ex, a.l.nrows() as usize, ne0, |r| {
        let [i1, i2, i3] = a.l.row_index(r as i64);
        let (x, y) = (a.row(i1, i2, i3), b.row(i1, i2, i3));
        // SAFETY: row (i1,i2,i3) of a and of b holds ne0 I32 at strides an, bn.
        let equal = |i0: usize| unsafe {
            x.add(i0 * an).cast::<i32>().read_unaligned() == y.add(i0 * bn).cast::<i32>().read_unaligned()
        };
        (0..ne0).filter(|&i0| equal(i0)).count() as f64
    });
    let total: u64 = counts.iter().map(|&c| c as u64).sum();
    // SAFETY: dst is one I64 element.
    unsafe { dst.row(0, 0, 0).cast::<i64>().write_unaligned(total as i64) };
    Ok(())
}

/// `dst[0] = -(1/rows) Σ_rows Σ_i labels[i] · (logits[i] - logsumexp(row))`,
/// in f64 (both operands F32, checked at construction).
pub(crate) fn cross_entropy_loss(ex: &Exec, dst: StridedMut, logits: Strided, labels: Strided) -> Result<()> {
    let (ne0, an, bn, nrows) = (logits.l.ne[0] as usize, logits.l.nb[0], labels.l.nb[0], logits.l.nrows() as usize);
    let terms = per_row(ex, nrows, 4 * ne0, |r| {
        let [i1, i2, i3] = logits.l.row_index(r as i64);
        let (x, y) = (logits.row(i1, i2, i3), labels.row(i1, i2, i3));
        // SAFETY: row (i1,i2,i3) of both operands holds ne0 f32 at strides an, bn.
        let at = |p: *const u8, stride: usize, i: usize| {
            f64::from(unsafe { p.add(i * stride).cast::<f32>().read_unaligned() })
        };
        let max = (0..ne0).map(|i| at(x, an, i)).fold(f64::NEG_INFINITY, f64::max);
        let lse = max + (0..ne0).map(|i| (at(x, an, i) - max).exp()).fold(0.0, |s, v| s + v).ln();
        (0..ne0).map(|i| at(y, bn, i) * (at(x, an, i) - lse)).fold(0.0, |s, v| s + v)
    });
    let total = terms.iter().fold(0.0, |s, v| s + v);
    // SAFETY: dst is one F32 element.
    unsafe { dst.row(0, 0, 0).cast::<f32>().write_unaligned((-total / nrows.max(1) as f64) as f32) };
    Ok(())
}
