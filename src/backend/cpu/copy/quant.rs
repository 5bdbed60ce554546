//! Copies where either side is block-quantized: dequantize on the way out,
//! quantize on the way in. Rows of whole blocks on both sides go row by row;
//! any other layout (a transposed or permuted quantized tensor, a reshaping
//! `cpy`) goes block by block through a packed f32 copy in logical order.

use super::plain;
use crate::backend::cpu::mem::{Exec, FirstError, Strided, StridedMut};
use crate::error::Result;
use crate::layout::{unravel_units, Layout};
use crate::quant;

/// True if `t`'s rows are runs of whole packed blocks (or packed plain elements).
fn rows_packed(l: &Layout) -> bool {
    (!l.dtype.is_quantized() || l.block_dim == 0) && (l.nb[0] == l.dtype.type_size() || l.units0() <= 1)
}

/// Copies `src` into `dst` (same element count, logical order) when either is quantized.
pub(super) fn copy(ex: &Exec, op: &'static str, dst: StridedMut, src: Strided) -> Result<()> {
    let n = dst.l.nelements() as usize;
    if n == 0 || src.same_as(&dst) {
        return Ok(());
    }
    if dst.l.dtype == src.l.dtype && dst.l.ne == src.l.ne && dst.l.block_dim == src.l.block_dim {
        // same type, same blocks: move the bytes, never requantize
        let ts = src.l.dtype.type_size();
        return each_block(ex, &dst.l, |_, u, offset, _| {
            let from = src.ptr().wrapping_add(src.l.unit_offset(u));
            // SAFETY: both blocks lie inside their tensors and do not overlap
            // (a copy never partly overlaps its source; `same_as` returned above).
            unsafe { std::ptr::copy_nonoverlapping(from, dst.ptr().add(offset), ts) };
            Ok(())
        });
    }
    if dst.l.ne[0] == src.l.ne[0] && rows_packed(&dst.l) && rows_packed(&src.l) {
        return rowwise(ex, dst, src);
    }
    // the values in logical order, seen with src's and with dst's shape
    let mut tmp = vec![0f32; n];
    let as_src = StridedMut::of_f32(&mut tmp, src.l.ne)?;
    let as_dst = as_src.as_src().reshaped(dst.l.ne)?;
    if src.l.dtype.is_quantized() {
        each_block(ex, &src.l, |l, u, offset, vals| {
            // SAFETY: `offset` is that of one block of src, inside its extent.
            let block = unsafe { std::slice::from_raw_parts(src.ptr().add(offset), l.dtype.type_size()) };
            quant::dequantize_row(l.dtype, block, vals)?;
            for (j, &v) in vals.iter().enumerate() {
                // SAFETY: the logical index is < n, and each block writes its own elements.
                unsafe { as_src.ptr().cast::<f32>().add(logical_index(l, u, j)).write(v) };
            }
            Ok(())
        })?;
    } else {
        plain::copy(ex, op, as_src, src)?;
    }
    if dst.l.dtype.is_quantized() {
        each_block(ex, &dst.l, |l, u, offset, vals| {
            for (j, v) in vals.iter_mut().enumerate() {
                // SAFETY: the logical index is < n.
                *v = unsafe { as_dst.ptr().cast::<f32>().add(logical_index(l, u, j)).read() };
            }
            // SAFETY: `offset` is that of one block of dst, written by this call only.
            let block = unsafe { std::slice::from_raw_parts_mut(dst.ptr().add(offset), l.dtype.type_size()) };
            quant::quantize_row(l.dtype, vals, block)
        })
    } else {
        plain::copy(ex, op, dst, as_dst)
    }
}

/// Linear (logical-order) index of value `j` of the block at unit index `u`.
fn logical_index(l: &Layout, u: [usize; 4], j: usize) -> usize {
    let mut i = u;
    i[l.block_dim] = u[l.block_dim] * l.dtype.block_size() + j;
    let ne = l.ne.map(|x| x as usize);
    ((i[3] * ne[2] + i[2]) * ne[1] + i[1]) * ne[0] + i[0]
}

/// Calls `f(layout, unit index, block byte offset, scratch for its values)`
/// for every block of a tensor of layout `l`, in parallel.
fn each_block<F>(ex: &Exec, l: &Layout, f: F) -> Result<()>
where
    F: Fn(&Layout, [usize; 4], usize, &mut [f32]) -> Result<()> + Sync + Send,
{
    let bs = l.dtype.block_size();
    let errors = FirstError::default();
    let counts = l.unit_counts();
    ex.for_ranges(counts.iter().product(), bs, |range| {
        let mut vals = vec![0f32; bs];
        for k in range {
            let idx = unravel_units(k, counts);
            errors.keep(f(l, idx, l.unit_offset(idx), &mut vals));
        }
    });
    errors.into_result()
}

/// Same `ne[0]`, rows of whole blocks: one row at a time through an f32 row.
fn rowwise(ex: &Exec, dst: StridedMut, src: Strided) -> Result<()> {
    let ne0 = dst.l.ne[0] as usize;
    let errors = FirstError::default();
    ex.for_ranges(dst.l.nrows() as usize, ne0, |rows| {
        let mut row = vec![0f32; ne0];
        for r in rows {
            errors.keep(row_through_f32(dst.row_tensor(r as i64), src.row_tensor(r as i64), &mut row));
        }
    });
    errors.into_result()
}

/// One row: `src` → f32 → `dst`.
fn row_through_f32(dst: StridedMut, src: Strided, row: &mut [f32]) -> Result<()> {
    let one = Exec::ONE;
    let ne = [row.len() as i64, 1, 1, 1];
    if dst.l.dtype == src.l.dtype {
        // SAFETY: packed rows of the same type: `row_size` bytes each, not overlapping.
        unsafe { std::ptr::copy_nonoverlapping(src.ptr(), dst.ptr(), dst.l.row_size()) };
        return Ok(());
    }
    if src.l.dtype.is_quantized() {
        // SAFETY: a packed row of src: `row_size` bytes inside its buffer.
        quant::dequantize_row(src.l.dtype, unsafe { std::slice::from_raw_parts(src.ptr(), src.l.row_size()) }, row)?;
    } else {
        plain::copy(&one, "cpy", StridedMut::of_f32(row, ne)?, src)?;
    }
    if dst.l.dtype.is_quantized() {
        // SAFETY: a packed row of dst, `row_size` bytes, written by this thread only.
        quant::quantize_row(dst.l.dtype, row, unsafe { std::slice::from_raw_parts_mut(dst.ptr(), dst.l.row_size()) })
    } else {
        plain::copy(&one, "cpy", dst, Strided::of_f32(row, ne)?)
    }
}
