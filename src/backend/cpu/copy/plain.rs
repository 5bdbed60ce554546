//! Copies between plain (not block-quantized) types, in logical order.
//!
//! Paths, fastest first: one flat memcpy (both packed, same type); per-row
//! conversion (rows packed); a cache-blocked tile copy when the source is
//! transposed (its unit-stride dim is not dim 0); a strided element loop.

use half::{bf16, f16, slice::HalfFloatSliceExt};

use super::halves;
use crate::backend::cpu::mem::{Exec, Scalar, Strided, StridedMut};
use crate::backend::cpu::stream;
use crate::error::Result;

/// Side of the square tiles of the transposing copy (elements).
const TILE: usize = 64;

/// Copies every element of `src` into `dst` (same element count, plain types).
pub(super) fn copy(ex: &Exec, op: &'static str, dst: StridedMut, src: Strided) -> Result<()> {
    let (sd, ss) = (Scalar::of(op, dst.l.dtype)?, Scalar::of(op, src.l.dtype)?);
    let n = dst.l.nelements();
    if n == 0 || src.same_as(&dst) {
        return Ok(());
    }
    let same_shape = dst.l.ne == src.l.ne;
    if sd == ss && dst.l.is_contiguous() && src.l.is_contiguous() {
        let bytes = dst.l.nbytes();
        ex.for_ranges(bytes.div_ceil(4096), 4096, |r| {
            let (lo, hi) = (r.start * 4096, (r.end * 4096).min(bytes));
            // SAFETY: both tensors are packed, inside their buffers, and do not
            // overlap (a write never partly overlaps its source; `same_as` returned above).
            unsafe { std::ptr::copy_nonoverlapping(src.ptr().add(lo), dst.ptr().add(lo), hi - lo) };
        });
        return Ok(());
    }
    if same_shape && dst.packed_rows() && !src.packed_rows() {
        if let Some(k) = (1..4).find(|&k| src.l.nb[k] == src.l.dtype.type_size() && src.l.ne[k] > 1) {
            tiled_copy(ex, dst, sd, src, ss, k);
            return Ok(());
        }
    }
    if dst.l.ne[0] == src.l.ne[0] {
        // element k = r*ne0 + i0 in both: row r maps to row r
        let (ne0, nrows) = (dst.l.ne[0] as usize, dst.l.nrows());
        let streamed = (ss, sd) == (Scalar::F32, Scalar::F16)
            && dst.packed_rows()
            && src.packed_rows()
            && stream::pays(dst.l.nbytes().saturating_add(src.l.nbytes()));
        ex.for_ranges(nrows as usize, ne0, |rows| {
            for r in rows {
                let r = r as i64;
                // SAFETY: row r exists in both (same row count), lies in its buffer,
                // and this thread alone writes dst's row r; packed where streamed.
                unsafe {
                    let done = streamed
                        && halves::from_f32_streamed(
                            std::slice::from_raw_parts_mut(dst.row_at(r).cast::<f16>(), ne0),
                            std::slice::from_raw_parts(src.row_at(r).cast::<f32>(), ne0),
                        );
                    if !done {
                        convert_row(dst.row_at(r), sd, dst.l.nb[0], src.row_at(r), ss, src.l.nb[0], ne0);
                    }
                }
            }
            if streamed {
                stream::fence();
            }
        });
        return Ok(());
    }
    element_copy(ex, dst, sd, src, ss);
    Ok(())
}

/// Converts `n` elements from `s` (stride `snb`) to `d` (stride `dnb`).
///
/// # Safety
/// Both rows must be valid for `n` elements at their strides, and `d`'s
/// elements written by this thread alone; they may not partly overlap.
#[inline]
unsafe fn convert_row(d: *mut u8, sd: Scalar, dnb: usize, s: *const u8, ss: Scalar, snb: usize, n: usize) {
    let (dsz, ssz) = (dnb == elem_size(sd) || n <= 1, snb == elem_size(ss) || n <= 1);
    // SAFETY: per the contract; packed rows of n elements form valid, disjoint slices.
    unsafe {
        if dsz && ssz {
            match (ss, sd) {
                _ if ss == sd => std::ptr::copy(s, d, n * elem_size(sd)),
                (Scalar::F32, Scalar::F16) => halves::from_f32(
                    std::slice::from_raw_parts_mut(d.cast::<f16>(), n),
                    std::slice::from_raw_parts(s.cast::<f32>(), n),
                ),
                (Scalar::F16, Scalar::F32) => halves::to_f32(
                    std::slice::from_raw_parts_mut(d.cast::<f32>(), n),
                    std::slice::from_raw_parts(s.cast::<f16>(), n),
                ),
                (Scalar::F32, Scalar::BF16) => std::slice::from_raw_parts_mut(d.cast::<bf16>(), n)
                    .convert_from_f32_slice(std::slice::from_raw_parts(s.cast::<f32>(), n)),
                (Scalar::BF16, Scalar::F32) => std::slice::from_raw_parts(s.cast::<bf16>(), n)
                    .convert_to_f32_slice(std::slice::from_raw_parts_mut(d.cast::<f32>(), n)),
                _ => {
                    for i in 0..n {
                        sd.store(d.add(i * dnb), ss.load(s.add(i * snb)));
                    }
                }
            }
        } else {
            for i in 0..n {
                sd.store(d.wrapping_add(i * dnb), ss.load(s.wrapping_add(i * snb)));
            }
        }
    }
}

fn elem_size(s: Scalar) -> usize {
    match s {
        Scalar::F64 | Scalar::I64 => 8,
        Scalar::F32 | Scalar::I32 => 4,
        Scalar::F16 | Scalar::BF16 | Scalar::I16 => 2,
        Scalar::I8 => 1,
    }
}

/// Same-shape copy from a source whose unit-stride dim is `k` (not 0) into a
/// destination with packed rows, in `TILE`×`TILE` tiles over dims 0 and `k` so
/// both sides stream whole cache lines.
fn tiled_copy(ex: &Exec, dst: StridedMut, sd: Scalar, src: Strided, ss: Scalar, k: usize) {
    let ne = dst.l.ne;
    let others: Vec<usize> = (1..4).filter(|&d| d != k).collect();
    let (p, q) = (others[0], others[1]);
    let kt = (ne[k] as usize).div_ceil(TILE);
    let items = ne[p] as usize * ne[q] as usize * kt;
    let (ne0, nek) = (ne[0] as usize, ne[k] as usize);
    ex.for_ranges(items, TILE * ne0, |range| {
        for item in range {
            let kb = (item % kt) * TILE;
            let iq = (item / kt) / ne[p] as usize;
            let ip = (item / kt) % ne[p] as usize;
            let mut idx = [0usize; 4];
            idx[p] = ip;
            idx[q] = iq;
            let offset = |nb: &[usize; 4], i0: usize, ik: usize| {
                let mut ix = idx;
                ix[k] = ik;
                i0 * nb[0] + ix[1] * nb[1] + ix[2] * nb[2] + ix[3] * nb[3]
            };
            for i0b in (0..ne0).step_by(TILE) {
                for ik in kb..(kb + TILE).min(nek) {
                    let d = dst.ptr().wrapping_add(offset(&dst.l.nb, i0b, ik));
                    let s = src.ptr().wrapping_add(offset(&src.l.nb, i0b, ik));
                    let n = TILE.min(ne0 - i0b);
                    // SAFETY: elements (i0b..i0b+n, ik) exist in both tensors (same
                    // shape) and this item alone writes dst's k-strip kb..kb+TILE.
                    unsafe { move_strip(d, sd, dst.l.nb[0], s, ss, src.l.nb[0], n) };
                }
            }
        }
    });
}

/// `n` elements along dim 0 into a packed destination: typed moves when the
/// types match, else conversion.
///
/// # Safety
/// As [`convert_row`]; `d` must be packed (`dnb` is the element size).
#[inline(always)]
unsafe fn move_strip(d: *mut u8, sd: Scalar, dnb: usize, s: *const u8, ss: Scalar, snb: usize, n: usize) {
    // SAFETY: per the contract.
    unsafe {
        match (sd == ss, elem_size(sd)) {
            (true, 4) => strided_to_packed(d.cast::<u32>(), s.cast::<u32>(), snb / 4, n),
            (true, 2) => strided_to_packed(d.cast::<u16>(), s.cast::<u16>(), snb / 2, n),
            _ => (0..n).for_each(|i| sd.store(d.add(i * dnb), ss.load(s.add(i * snb)))),
        }
    }
}

/// `d[i] = s[i * stride]` for `i < n`.
///
/// # Safety
/// `d` holds `n` elements, `s` holds elements at `0, stride, …, (n-1)·stride`;
/// they do not overlap.
#[inline(always)]
unsafe fn strided_to_packed<T: Copy>(d: *mut T, s: *const T, stride: usize, n: usize) {
    // SAFETY: per the contract.
    unsafe {
        for i in 0..n {
            *d.add(i) = *s.add(i * stride);
        }
    }
}

/// The general case: element `k` of `src` (logical order) to element `k` of `dst`.
fn element_copy(ex: &Exec, dst: StridedMut, sd: Scalar, src: Strided, ss: Scalar) {
    let (dne, sne) = (dst.l.ne, src.l.ne);
    let ne0 = dne[0] as usize;
    ex.for_ranges(dst.l.nrows() as usize, ne0, |rows| {
        for r in rows {
            let drow = dst.row_at(r as i64);
            for i0 in 0..dne[0] {
                let k = r as i64 * dne[0] + i0;
                let s0 = k % sne[0];
                let srow = src.row_at(k / sne[0]);
                // SAFETY: k < nelements, so both indices are in range; this thread
                // alone writes dst's row r.
                unsafe {
                    sd.store(
                        drow.wrapping_add(i0 as usize * dst.l.nb[0]),
                        ss.load(srow.wrapping_add(s0 as usize * src.l.nb[0])),
                    );
                }
            }
        }
    });
}
