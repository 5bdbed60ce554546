//! Reductions: over dim 0, and over every element.

use super::mem::{Exec, Scalar, Strided, StridedMut};
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
    let ne = a.l.ne;
    let (ne0, an) = (ne[0] as usize, a.l.nb[0]);
    ex.for_ranges(a.l.nrows() as usize, ne0, |rows| {
        for r in rows {
            let [i1, i2, i3] = a.l.row_index(r as i64);
            let x = a.row(i1, i2, i3);
            let mut acc = 0f64;
            // SAFETY: row (i1,i2,i3) of a holds ne0 elements at stride an; the
            // single output element of this row is written by this thread alone.
            unsafe {
                for i0 in 0..ne0 {
                    acc += sa.load(x.add(i0 * an)) as f64;
                }
                sd.store(dst.row(i1, i2, i3), (acc / div) as f32);
            }
        }
    });
    Ok(())
}

/// `dst[0] = Σ a` over every element, in f64: each row summed in order (rows
/// in parallel), then the row sums in row order, so the bits do not depend on
/// the thread count.
pub(crate) fn sum(ex: &Exec, dst: StridedMut, a: Strided) -> Result<()> {
    let (sd, sa) = (Scalar::of("sum", dst.l.dtype)?, Scalar::of("sum", a.l.dtype)?);
    let (ne0, an, nrows) = (a.l.ne[0] as usize, a.l.nb[0], a.l.nrows() as usize);
    let mut sums = vec![0f64; nrows];
    let shared = super::mem::SharedBytes::new(bytemuck::cast_slice_mut(&mut sums));
    ex.for_ranges(nrows, ne0, |rows| {
        for r in rows {
            let [i1, i2, i3] = a.l.row_index(r as i64);
            let x = a.row(i1, i2, i3);
            let mut acc = 0f64;
            // SAFETY: row (i1,i2,i3) of a holds ne0 elements at stride an; slot r
            // of `sums` (8 bytes, inside it) is written by this thread alone.
            unsafe {
                for i0 in 0..ne0 {
                    acc += sa.load(x.add(i0 * an)) as f64;
                }
                if let Some(slot) = shared.range(8 * r, 8) {
                    slot.copy_from_slice(&acc.to_ne_bytes());
                }
            }
        }
    });
    let total: f64 = sums.iter().sum();
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
/// shape), an I64 count: rows counted in parallel, then added in row order.
pub(crate) fn count_equal(ex: &Exec, dst: StridedMut, a: Strided, b: Strided) -> Result<()> {
    let ne0 = a.l.ne[0] as usize;
    let (an, bn, nrows) = (a.l.nb[0], b.l.nb[0], a.l.nrows() as usize);
    let mut counts = vec![0u64; nrows];
    let shared = super::mem::SharedBytes::new(bytemuck::cast_slice_mut(&mut counts));
    ex.for_ranges(nrows, ne0, |rows| {
        for r in rows {
            let [i1, i2, i3] = a.l.row_index(r as i64);
            let (x, y) = (a.row(i1, i2, i3), b.row(i1, i2, i3));
            // SAFETY: row (i1,i2,i3) of a and of b holds ne0 I32 at strides an, bn;
            // slot r of `counts` is written by this thread alone.
            unsafe {
                let n = (0..ne0)
                    .filter(|&i0| {
                        x.add(i0 * an).cast::<i32>().read_unaligned() == y.add(i0 * bn).cast::<i32>().read_unaligned()
                    })
                    .count() as u64;
                if let Some(slot) = shared.range(8 * r, 8) {
                    slot.copy_from_slice(&n.to_ne_bytes());
                }
            }
        }
    });
    let total: u64 = counts.iter().sum();
    // SAFETY: dst is one I64 element.
    unsafe { dst.row(0, 0, 0).cast::<i64>().write_unaligned(total as i64) };
    Ok(())
}

/// `dst[0] = -(1/rows) Σ_rows Σ_i labels[i] · (logits[i] - logsumexp(row))`,
/// in f64: rows in parallel, their terms added in row order.
pub(crate) fn cross_entropy_loss(ex: &Exec, dst: StridedMut, logits: Strided, labels: Strided) -> Result<()> {
    let (ne0, an, bn, nrows) = (logits.l.ne[0] as usize, logits.l.nb[0], labels.l.nb[0], logits.l.nrows() as usize);
    let mut terms = vec![0f64; nrows];
    let shared = super::mem::SharedBytes::new(bytemuck::cast_slice_mut(&mut terms));
    ex.for_ranges(nrows, 4 * ne0, |rows| {
        for r in rows {
            let [i1, i2, i3] = logits.l.row_index(r as i64);
            let (x, y) = (logits.row(i1, i2, i3), labels.row(i1, i2, i3));
            // SAFETY: row (i1,i2,i3) of both operands holds ne0 f32 at strides an, bn
            // (checked F32 at construction); slot r of `terms` is this thread's alone.
            unsafe {
                let at = |i: usize| f64::from(x.add(i * an).cast::<f32>().read_unaligned());
                let max = (0..ne0).map(at).fold(f64::NEG_INFINITY, f64::max);
                let lse = max + (0..ne0).map(|i| (at(i) - max).exp()).sum::<f64>().ln();
                let t: f64 =
                    (0..ne0).map(|i| f64::from(y.add(i * bn).cast::<f32>().read_unaligned()) * (at(i) - lse)).sum();
                if let Some(slot) = shared.range(8 * r, 8) {
                    slot.copy_from_slice(&t.to_ne_bytes());
                }
            }
        }
    });
    let total: f64 = terms.iter().sum();
    // SAFETY: dst is one F32 element.
    unsafe { dst.row(0, 0, 0).cast::<f32>().write_unaligned((-total / nrows.max(1) as f64) as f32) };
    Ok(())
}
