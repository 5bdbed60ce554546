//! `concat` and `repeat`: values copied bit for bit (no conversion) from any
//! strided source into a contiguous result, split across threads by rows.

use super::mem::{Exec, Scalar, Strided, StridedMut};
use crate::error::{Error, Result};
use crate::layout::Layout;

/// Copies `n` elements of `ts` bytes from `s` (stride `snb`) to `d` (stride `dnb`).
///
/// # Safety
/// Both must hold `n` valid elements at their strides; `d`'s are written by
/// this thread alone and do not overlap `s`'s.
#[inline]
unsafe fn copy_elems(d: *mut u8, dnb: usize, s: *const u8, snb: usize, n: usize, ts: usize) {
    if n == 0 {
        return;
    }
    // SAFETY: per the contract.
    unsafe {
        if dnb == ts && snb == ts {
            std::ptr::copy_nonoverlapping(s, d, n * ts);
        } else {
            for i in 0..n {
                std::ptr::copy_nonoverlapping(s.add(i * snb), d.add(i * dnb), ts);
            }
        }
    }
}

/// Errors unless `t` has a plain (non-block) type; returns its element size.
fn plain(op: &'static str, l: &Layout) -> Result<usize> {
    Scalar::of(op, l.dtype)?;
    Ok(l.dtype.type_size())
}

/// `dst = a ++ b` along `dim`: element `i` of dst comes from `a[i]` when
/// `i[dim] < a.ne[dim]`, else from `b[i - a.ne[dim]]` (along `dim`).
pub(crate) fn concat(ex: &Exec, dim: usize, dst: StridedMut, a: Strided, b: Strided) -> Result<()> {
    let ts = plain("concat", &dst.l)?;
    if plain("concat", &a.l)? != ts || plain("concat", &b.l)? != ts || dim >= 4 {
        return Err(Error::internal("concat operands do not match the result"));
    }
    if dst.l.is_empty() {
        return Ok(());
    }
    let (ne, split) = (dst.l.ne, a.l.ne[dim]);
    let ne0 = ne[0] as usize;
    let dnb0 = dst.l.nb[0];
    ex.for_ranges(dst.l.nrows() as usize, ne0, |rows| {
        for r in rows {
            let [i1, i2, i3] = dst.l.row_index(r as i64);
            let d = dst.row(i1, i2, i3);
            // SAFETY: dst is a fresh tensor of shape ne (this thread alone writes
            // row r); a and b hold the rows addressed below because they agree
            // with dst in every dim but `dim`, where a covers 0..split and b the rest.
            unsafe {
                if dim == 0 {
                    let na = split as usize;
                    copy_elems(d, dnb0, a.row(i1, i2, i3), a.l.nb[0], na, ts);
                    copy_elems(d.add(na * dnb0), dnb0, b.row(i1, i2, i3), b.l.nb[0], ne0 - na, ts);
                } else {
                    let mut i = [i1, i2, i3];
                    let (src, nb0) = if i[dim - 1] < split {
                        (a.row(i[0], i[1], i[2]), a.l.nb[0])
                    } else {
                        i[dim - 1] -= split;
                        (b.row(i[0], i[1], i[2]), b.l.nb[0])
                    };
                    copy_elems(d, dnb0, src, nb0, ne0, ts);
                }
            }
        }
    });
    Ok(())
}

/// `dst[i] = a[i % a.ne]` in every dim (`a` tiled to dst's shape).
pub(crate) fn repeat(ex: &Exec, dst: StridedMut, a: Strided) -> Result<()> {
    let ts = plain("repeat", &dst.l)?;
    let (ne, ane) = (dst.l.ne, a.l.ne);
    if plain("repeat", &a.l)? != ts {
        return Err(Error::internal("repeat changes the element type"));
    }
    if dst.l.is_empty() {
        return Ok(());
    }
    if (0..4).any(|i| ane[i] == 0 || ne[i] % ane[i] != 0) {
        return Err(Error::internal(format!("repeat of ne={ane:?} into ne={ne:?}")));
    }
    let (ne0, an0) = (ne[0] as usize, ane[0] as usize);
    let dnb0 = dst.l.nb[0];
    ex.for_ranges(dst.l.nrows() as usize, ne0, |rows| {
        for r in rows {
            let [i1, i2, i3] = dst.l.row_index(r as i64);
            let d = dst.row(i1, i2, i3);
            let s = a.row(i1 % ane[1], i2 % ane[2], i3 % ane[3]);
            for k in 0..ne0 / an0 {
                // SAFETY: dst row r holds ne0 = k_max * an0 elements, written by
                // this thread alone; the tiled source row exists and holds an0.
                unsafe { copy_elems(d.add(k * an0 * dnb0), dnb0, s, a.l.nb[0], an0, ts) };
            }
        }
    });
    Ok(())
}
