//! `argsort`: each row's element indices in value order.

use super::mem::{Exec, Scalar, Strided, StridedMut};
use crate::error::Result;

/// `dst[:, r] = the indices of row r of a, by value` (descending: largest
/// first); equal values keep index order, `-0` equals `0`, NaN sorts last.
pub(crate) fn argsort(ex: &Exec, descending: bool, dst: StridedMut, a: Strided) -> Result<()> {
    let sa = Scalar::of("argsort", a.l.dtype)?;
    let ne0 = a.l.ne[0] as usize;
    ex.for_ranges(a.l.nrows() as usize, ne0 * 8, |rows| {
        let (mut keys, mut idx) = (vec![0f32; ne0], Vec::with_capacity(ne0));
        for r in rows {
            let [i1, i2, i3] = a.l.row_index(r as i64);
            let (x, d) = (a.row(i1, i2, i3), dst.row(i1, i2, i3));
            for (i0, key) in keys.iter_mut().enumerate() {
                // SAFETY: row (i1, i2, i3) of `a` holds ne0 elements at stride nb[0].
                let v = unsafe { sa.load(x.add(i0 * a.l.nb[0])) };
                // ascending keys either way: a stable sort then keeps index order for ties
                let v = if descending { -v } else { v };
                *key = if v.is_nan() { f32::INFINITY } else { v + 0.0 };
            }
            idx.clear();
            idx.extend(0..ne0 as i32);
            idx.sort_by(|&i, &j| keys[i as usize].total_cmp(&keys[j as usize]));
            for (i0, &v) in idx.iter().enumerate() {
                // SAFETY: dst has a's shape (I32); row (i1, i2, i3) is written by this thread alone.
                unsafe { d.add(i0 * dst.l.nb[0]).cast::<i32>().write_unaligned(v) };
            }
        }
    });
    Ok(())
}
