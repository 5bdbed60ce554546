//! `mul_mat` on the CPU: a simple, correct, threaded kernel. Sources whose rows
//! are not packed F32 are first converted to packed F32 rows; the product then
//! runs over blocks of `a` rows so each block is reused across all of `b`.

use super::copy;
use super::mem::{Exec, Strided};
use crate::dtype::DType;
use crate::error::Result;

/// Rows of `a` per work item.
const A_BLOCK: usize = 16;

/// `dst[i3,i2,i1,i0] = Σ_k a[i3/r3, i2/r2, i0, k] · b[i3, i2, i1, k]`.
pub(crate) fn mul_mat(ex: &Exec, dst: Strided, a: Strided, b: Strided) -> Result<()> {
    let (ne, ane, bne) = (dst.l.ne, a.l.ne, b.l.ne);
    if dst.l.is_empty() {
        return Ok(());
    }
    let k = ane[0] as usize;
    let mut a_tmp = Vec::new();
    let mut b_tmp = Vec::new();
    let a = packed_f32(ex, a, &mut a_tmp)?;
    let b = packed_f32(ex, b, &mut b_tmp)?;
    let (r2, r3) = (bne[2] / ane[2], bne[3] / ane[3]);
    let m = ne[0] as usize;
    let blocks = m.div_ceil(A_BLOCK);
    let batches = (ne[2] * ne[3]) as usize;
    ex.for_ranges(batches * blocks, A_BLOCK * k * ne[1] as usize, |items| {
        for item in items {
            let (batch, blk) = (item / blocks, item % blocks);
            let (i2, i3) = ((batch % ne[2] as usize) as i64, (batch / ne[2] as usize) as i64);
            let rows = blk * A_BLOCK..((blk + 1) * A_BLOCK).min(m);
            for i1 in 0..ne[1] {
                let brow = b.row(i1, i2, i3).cast::<f32>();
                for i0 in rows.clone() {
                    let arow = a.row(i0 as i64, i2 / r2, i3 / r3).cast::<f32>();
                    // SAFETY: a and b rows hold k packed floats (packed_f32);
                    // dst element (i0,i1,i2,i3) exists and only this item writes it
                    // (items partition i0 within each batch).
                    unsafe {
                        let v = dot(std::slice::from_raw_parts(arow, k), std::slice::from_raw_parts(brow, k));
                        dst.row(i1, i2, i3).add(i0 * dst.l.nb[0]).cast::<f32>().write(v);
                    }
                }
            }
        }
    });
    Ok(())
}

/// `t` itself when its rows are packed F32, else a packed F32 copy in `tmp`.
fn packed_f32(ex: &Exec, t: Strided, tmp: &mut Vec<f32>) -> Result<Strided> {
    if t.l.dtype == DType::F32 && t.packed_rows() {
        return Ok(t);
    }
    tmp.resize(t.l.nelements() as usize, 0.0);
    let out = Strided::of_f32(tmp, t.l.ne)?;
    copy::copy(ex, "mul_mat", out, t)?;
    Ok(out)
}

/// Dot product with eight independent accumulators (vectorizes).
#[inline]
pub(crate) fn dot(x: &[f32], y: &[f32]) -> f32 {
    let n = x.len().min(y.len());
    let (xc, yc) = (x[..n].chunks_exact(8), y[..n].chunks_exact(8));
    let (xr, yr) = (xc.remainder(), yc.remainder());
    let mut acc = [0f32; 8];
    for (a, b) in xc.zip(yc) {
        for j in 0..8 {
            acc[j] += a[j] * b[j];
        }
    }
    let mut s = (acc[0] + acc[4]) + (acc[1] + acc[5]) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (a, b) in xr.iter().zip(yr) {
        s += a * b;
    }
    s
}
