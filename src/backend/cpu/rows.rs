//! `get_rows`: each output row is a copy (dequantized or converted) of the
//! source row its index names; indices are checked as they are read.

use super::copy;
use super::mem::{Exec, FirstError, Strided, StridedMut};
use crate::error::{Error, Result};

/// `dst[:, i1, i2, i3] = a[:, idx[i1, i2, i3], i2, i3]`.
pub(crate) fn get_rows(ex: &Exec, dst: StridedMut, a: Strided, idx: Strided) -> Result<()> {
    let n_rows = a.l.ne[1];
    let failed = FirstError::default();
    let ne = dst.l.ne;
    let nb = idx.l.nb;
    ex.for_ranges(dst.l.nrows() as usize, ne[0] as usize, |rows| {
        let one = Exec::ONE;
        for r in rows {
            let [i1, i2, i3] = dst.l.row_index(r as i64);
            let at = idx.ptr().wrapping_add(i1 as usize * nb[0] + i2 as usize * nb[1] + i3 as usize * nb[2]);
            // SAFETY: (i1, i2, i3) < (b.ne0, b.ne1, b.ne2): an aligned I32 element of the index tensor.
            let row = i64::from(unsafe { at.cast::<i32>().read() });
            let r = if (0..n_rows).contains(&row) {
                copy::copy(
                    &one,
                    "get_rows",
                    dst.row_tensor(r as i64),
                    a.row_tensor(row + n_rows * (i2 + a.l.ne[2] * i3)),
                )
            } else {
                Err(Error::Invalid(format!("get_rows: index {row} is outside the {n_rows} rows of the source")))
            };
            failed.keep(r);
        }
    });
    failed.into_result()
}

/// `dst[:, idx[i1, i2, i3], i2, i3] = b[:, i1, i2, i3]` (dst is the destination's view).
pub(crate) fn set_rows(ex: &Exec, dst: StridedMut, b: Strided, idx: Strided) -> Result<()> {
    let n_rows = dst.l.ne[1];
    let ne = b.l.ne;
    let nb = idx.l.nb;
    // every index is read and checked first: two rows to one place would race
    let mut targets = Vec::with_capacity(b.l.nrows() as usize);
    for r in 0..b.l.nrows() {
        let [i1, i2, i3] = b.l.row_index(r);
        let at = idx.ptr().wrapping_add(i1 as usize * nb[0] + i2 as usize * nb[1] + i3 as usize * nb[2]);
        // SAFETY: (i1, i2, i3) < (idx.ne0, idx.ne1, idx.ne2): an aligned I32 element of the index tensor.
        let row = i64::from(unsafe { at.cast::<i32>().read() });
        if !(0..n_rows).contains(&row) {
            return Err(Error::Invalid(format!(
                "set_rows: index {row} is outside the {n_rows} rows of the destination"
            )));
        }
        targets.push(row + n_rows * (i2 + dst.l.ne[2] * i3));
    }
    let mut seen = targets.clone();
    seen.sort_unstable();
    if seen.windows(2).any(|w| w[0] == w[1]) {
        return Err(Error::Invalid("set_rows: two rows are written to the same place".into()));
    }
    let failed = FirstError::default();
    ex.for_ranges(targets.len(), ne[0] as usize, |rows| {
        let one = Exec::ONE;
        for r in rows {
            let res = copy::copy(&one, "set_rows", dst.row_tensor(targets[r]), b.row_tensor(r as i64));
            failed.keep(res);
        }
    });
    failed.into_result()
}
