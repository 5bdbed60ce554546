//! The gradient ops' kernels ([`crate::op::BackOp`]): F32, sums in f64, each
//! output element computed by one thread in a fixed order, so the bits do not
//! depend on the thread count.

use super::elementwise::zip_f32;
use super::mem::{Exec, Scalar, Strided, StridedMut};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::UnaryOp;

/// Element `(i0, i1, i2, i3)` of `t` as f64.
///
/// # Safety
/// The index must lie inside `t`'s shape.
#[inline]
unsafe fn at(s: Scalar, t: &Strided, i: [i64; 4]) -> f64 {
    // SAFETY: the caller's index is inside t, whose extent was checked when bound.
    unsafe { s.load(t.row(i[1], i[2], i[3]).add(i[0] as usize * t.l.nb[0])) as f64 }
}

/// `dst[j] = Σ_{i : i % dst.ne = j} a[i]` (ggml's `repeat_back`).
pub(crate) fn repeat_back(ex: &Exec, dst: StridedMut, a: Strided) -> Result<()> {
    let (sd, sa) = (Scalar::of("repeat_back", dst.l.dtype)?, Scalar::of("repeat_back", a.l.dtype)?);
    let (ne, ane) = (dst.l.ne, a.l.ne);
    if dst.l.is_empty() {
        return Ok(());
    }
    if (0..4).any(|i| ne[i] == 0 || ane[i] % ne[i] != 0) {
        return Err(Error::internal(format!("repeat_back of ne={ane:?} into ne={ne:?}")));
    }
    let tiles: [i64; 4] = std::array::from_fn(|i| ane[i] / ne[i]);
    let per_row = (a.l.nelements() / dst.l.nrows().max(1)) as usize;
    if tiles[0] == 1 && dst.l.dtype == DType::F32 && a.l.dtype == DType::F32 && dst.packed_rows() && a.packed_rows() {
        // whole rows of `a` summed into each row of dst, in the order of the general loop
        let n0 = ne[0] as usize;
        ex.for_ranges(dst.l.nrows() as usize, per_row, |rows| {
            let mut acc = vec![0f64; n0];
            for r in rows {
                let [i1, i2, i3] = dst.l.row_index(r as i64);
                acc.fill(0.0);
                for t3 in 0..tiles[3] {
                    for t2 in 0..tiles[2] {
                        for t1 in 0..tiles[1] {
                            let src = a.row(i1 + t1 * ne[1], i2 + t2 * ne[2], i3 + t3 * ne[3]).cast::<f32>();
                            // SAFETY: a packed F32 row of a (inside a's shape) holds n0 values.
                            let row = unsafe { std::slice::from_raw_parts(src, n0) };
                            acc.iter_mut().zip(row).for_each(|(s, &v)| *s += v as f64);
                        }
                    }
                }
                // SAFETY: dst's row r is n0 packed F32 values, written by this thread alone.
                let out = unsafe { std::slice::from_raw_parts_mut(dst.row(i1, i2, i3).cast::<f32>(), n0) };
                out.iter_mut().zip(&acc).for_each(|(o, &s)| *o = s as f32);
            }
        });
        return Ok(());
    }
    ex.for_ranges(dst.l.nrows() as usize, per_row, |rows| {
        for r in rows {
            let [i1, i2, i3] = dst.l.row_index(r as i64);
            for i0 in 0..ne[0] {
                let mut acc = 0.0f64;
                for t3 in 0..tiles[3] {
                    for t2 in 0..tiles[2] {
                        for t1 in 0..tiles[1] {
                            for t0 in 0..tiles[0] {
                                let i = [i0 + t0 * ne[0], i1 + t1 * ne[1], i2 + t2 * ne[2], i3 + t3 * ne[3]];
                                // SAFETY: i < a.ne in every dim (t < ane / ne).
                                acc += unsafe { at(sa, &a, i) };
                            }
                        }
                    }
                }
                // SAFETY: (i0, i1, i2, i3) is inside dst; this thread alone writes dst's row r.
                unsafe { sd.store(dst.row(i1, i2, i3).add(i0 as usize * dst.l.nb[0]), acc as f32) };
            }
        }
    });
    Ok(())
}

/// `f'(x)` in f64: the derivatives of [`UnaryOp`]'s functions (GELU's of its
/// tanh approximation).
pub(crate) fn derivative(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Relu => f64::from(u8::from(x > 0.0)),
        UnaryOp::Gelu => {
            const C: f64 = 0.797_884_560_802_865_4; // sqrt(2 / pi)
            const A: f64 = 0.044_715;
            let t = (C * (x + A * x * x * x)).tanh();
            0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * C * (1.0 + 3.0 * A * x * x)
        }
        UnaryOp::Silu => {
            let s = 1.0 / (1.0 + (-x).exp());
            s * (1.0 + x * (1.0 - s))
        }
        UnaryOp::Neg => -1.0,
        UnaryOp::Sqr => 2.0 * x,
        UnaryOp::Sqrt => 0.5 / x.sqrt(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Sigmoid => {
            let s = 1.0 / (1.0 + (-x).exp());
            s * (1.0 - s)
        }
    }
}

/// `dst = g · f'(x)`, all of one shape.
pub(crate) fn unary_back(ex: &Exec, op: UnaryOp, dst: StridedMut, x: Strided, g: Strided) -> Result<()> {
    let name = "unary_back";
    let (sd, sx, sg) = (Scalar::of(name, dst.l.dtype)?, Scalar::of(name, x.l.dtype)?, Scalar::of(name, g.l.dtype)?);
    if x.l.ne != dst.l.ne || g.l.ne != dst.l.ne {
        return Err(Error::internal(format!("{name} of {:?} and {:?} into {:?}", x.l.ne, g.l.ne, dst.l.ne)));
    }
    let ne0 = dst.l.ne[0];
    let f32s = [dst.l.dtype, x.l.dtype, g.l.dtype].iter().all(|&t| t == DType::F32);
    if f32s && dst.packed_rows() && x.packed_rows() && g.packed_rows() {
        let n0 = ne0 as usize;
        ex.for_ranges(dst.l.nrows() as usize, n0, |rows| {
            for r in rows {
                let [i1, i2, i3] = dst.l.row_index(r as i64);
                // SAFETY: row (i1, i2, i3) of each is n0 packed F32 values; this
                // thread alone writes dst's, which equals x's or g's exactly or neither.
                unsafe {
                    let (d, xr, gr) = (
                        dst.row(i1, i2, i3).cast::<f32>(),
                        x.row(i1, i2, i3).cast::<f32>(),
                        g.row(i1, i2, i3).cast::<f32>(),
                    );
                    for i0 in 0..n0 {
                        let (xv, gv) = (*xr.add(i0), *gr.add(i0));
                        *d.add(i0) = match op {
                            UnaryOp::Relu => gv * f32::from(u8::from(xv > 0.0)),
                            _ => (gv as f64 * derivative(op, xv as f64)) as f32,
                        };
                    }
                }
            }
        });
        return Ok(());
    }
    ex.for_ranges(dst.l.nrows() as usize, ne0 as usize, |rows| {
        for r in rows {
            let [i1, i2, i3] = dst.l.row_index(r as i64);
            for i0 in 0..ne0 {
                let i = [i0, i1, i2, i3];
                // SAFETY: i is inside all three (one shape); this thread alone writes dst's row r.
                unsafe {
                    let v = at(sg, &g, i) * derivative(op, at(sx, &x, i));
                    sd.store(dst.row(i1, i2, i3).add(i0 as usize * dst.l.nb[0]), v as f32);
                }
            }
        }
    });
    Ok(())
}

/// `dst = 0`, then row `i` of `g` added into row `index[i]` (in order of `i`).
pub(crate) fn get_rows_back(ex: &Exec, dst: StridedMut, g: Strided, index: Strided) -> Result<()> {
    let name = "get_rows_back";
    let (sd, sg) = (Scalar::of(name, dst.l.dtype)?, Scalar::of(name, g.l.dtype)?);
    let (n_rows, n_idx, ne0) = (dst.l.ne[1], index.l.ne[0], dst.l.ne[0]);
    if g.l.ne[1] != n_idx || g.l.ne[0] != ne0 {
        return Err(Error::internal(format!("{name} of g {:?} with {n_idx} indices into {:?}", g.l.ne, dst.l.ne)));
    }
    // each destination row's sources, read and checked first
    let mut sources: Vec<Vec<i64>> = vec![Vec::new(); n_rows as usize];
    for i in 0..n_idx {
        // SAFETY: i < index.ne0: an aligned I32 element of the index tensor.
        let row = unsafe { index.row(0, 0, 0).add(i as usize * index.l.nb[0]).cast::<i32>().read_unaligned() };
        let slot = usize::try_from(row).ok().and_then(|r| sources.get_mut(r));
        let Some(slot) = slot else {
            return Err(Error::Invalid(format!("{name}: index {row} is outside the {n_rows} rows of the table")));
        };
        slot.push(i);
    }
    ex.for_ranges(n_rows as usize, ne0 as usize, |rows| {
        for r in rows {
            for i0 in 0..ne0 {
                // SAFETY: every source row is inside g (i < n_idx = g.ne1); this
                // thread alone writes dst's row r.
                unsafe {
                    let v = sources[r].iter().fold(0.0f32, |acc, &i| acc + at(sg, &g, [i0, i, 0, 0]) as f32);
                    sd.store(dst.row(r as i64, 0, 0).add(i0 as usize * dst.l.nb[0]), v);
                }
            }
        }
    });
    Ok(())
}

/// Per row: `dx = (g - x · Σ(g·x) / (n · (mean(x²) + eps))) / sqrt(mean(x²) + eps)`.
pub(crate) fn rms_norm_back(ex: &Exec, eps: f32, dst: StridedMut, x: Strided, g: Strided) -> Result<()> {
    let name = "rms_norm_back";
    let (sd, sx, sg) = (Scalar::of(name, dst.l.dtype)?, Scalar::of(name, x.l.dtype)?, Scalar::of(name, g.l.dtype)?);
    if x.l.ne != dst.l.ne || g.l.ne != dst.l.ne {
        return Err(Error::internal(format!("{name} of {:?} and {:?} into {:?}", x.l.ne, g.l.ne, dst.l.ne)));
    }
    let ne0 = dst.l.ne[0];
    ex.for_ranges(dst.l.nrows() as usize, 3 * ne0 as usize, |rows| {
        for r in rows {
            let [i1, i2, i3] = dst.l.row_index(r as i64);
            let el = |t: &Strided, s: Scalar, i0: i64| {
                // SAFETY: i0 < ne0 of a tensor of dst's shape.
                unsafe { at(s, t, [i0, i1, i2, i3]) }
            };
            let (mut sum_xx, mut sum_gx) = (0.0f64, 0.0f64);
            for i0 in 0..ne0 {
                let (xv, gv) = (el(&x, sx, i0), el(&g, sg, i0));
                sum_xx += xv * xv;
                sum_gx += gv * xv;
            }
            let ms = sum_xx / ne0.max(1) as f64 + eps as f64;
            let (inv, k) = (1.0 / ms.sqrt(), sum_gx / (ne0.max(1) as f64 * ms));
            for i0 in 0..ne0 {
                let v = (el(&g, sg, i0) - el(&x, sx, i0) * k) * inv;
                // SAFETY: (i0, i1, i2, i3) is inside dst; this thread alone writes dst's row r.
                unsafe { sd.store(dst.row(i1, i2, i3).add(i0 as usize * dst.l.nb[0]), v as f32) };
            }
        }
    });
    Ok(())
}

/// `dst = 0` (packed F32), then element `i` of `g` at byte `offset + Σ i_k·nb[k]` of `dst`.
pub(crate) fn view_back(ex: &Exec, nb: [usize; 4], offset: usize, dst: StridedMut, g: Strided) -> Result<()> {
    let sg = Scalar::of("view_back", g.l.dtype)?;
    if dst.l.dtype != DType::F32 || !dst.l.is_contiguous() {
        return Err(Error::internal("view_back into a strided or non-F32 tensor"));
    }
    let (base, len) = (dst.ptr(), dst.l.nbytes());
    // SAFETY: dst is `len` packed bytes, written by this call alone.
    unsafe { std::ptr::write_bytes(base, 0, len) };
    let ne = g.l.ne;
    let last = (0..4).map(|k| (ne[k].max(1) as usize - 1) * nb[k]).sum::<usize>() + offset;
    if !g.l.is_empty() && last + 4 > len {
        return Err(Error::internal(format!("view_back: byte {last} outside {len}")));
    }
    let shared = super::mem::SharedBytes::new(
        // SAFETY: as above; the closure below writes disjoint elements of it.
        unsafe { std::slice::from_raw_parts_mut(base, len) },
    );
    ex.for_ranges(g.l.nrows() as usize, ne[0] as usize, |rows| {
        for r in rows {
            let [i1, i2, i3] = g.l.row_index(r as i64);
            for i0 in 0..ne[0] {
                let at_byte =
                    offset + i0 as usize * nb[0] + i1 as usize * nb[1] + i2 as usize * nb[2] + i3 as usize * nb[3];
                // SAFETY: (i0..i3) is inside g; the view maps no two elements to one place (checked
                // when built), so this thread alone writes the 4 bytes at `at_byte` (< len, above).
                unsafe {
                    let v = at(sg, &g, [i0, i1, i2, i3]) as f32;
                    if let Some(slot) = shared.range(at_byte, 4) {
                        slot.copy_from_slice(&v.to_ne_bytes());
                    }
                }
            }
        }
    });
    Ok(())
}

/// `dst = h0·m + h1·g` (`g²` with `square`): AdamW's moment, in F32 steps.
pub(crate) fn adamw_moment(ex: &Exec, square: bool, dst: StridedMut, m: Strided, g: Strided, h: Strided) -> Result<()> {
    let h = adamw_factors("adamw_moment", &dst, &[&m, &g], &h)?;
    let f = move |m: f32, g: f32| m * h[0] + if square { g * g } else { g } * h[1];
    if !packed(&dst, &[&m, &g]) {
        return strided_map(ex, dst, [m, g], |[m, g]| f(m, g));
    }
    packed_chunks(ex, &dst, |lo, w| {
        let (d, mp, gp) = (dst.ptr().cast::<f32>(), m.ptr().cast::<f32>(), g.ptr().cast::<f32>());
        // SAFETY: values lo..lo + w of packed F32 tensors of one shape; d is m's bytes or apart from both.
        unsafe { zip_f32(d.add(lo), mp.add(lo), gp.add(lo), w, f) }
    });
    Ok(())
}

/// `dst = h0·p − (h1·m) / (sqrt(h2·v) + h3)`: AdamW's update, in F32 steps.
pub(crate) fn adamw_update(ex: &Exec, dst: StridedMut, pmv: [Strided; 3], h: Strided) -> Result<()> {
    let [p, m, v] = pmv;
    let h = adamw_factors("adamw_update", &dst, &[&p, &m, &v], &h)?;
    let step = move |m: f32, v: f32| (m * h[1]) / ((v * h[2]).sqrt() + h[3]);
    let update = move |p: f32, s: f32| p * h[0] - s;
    if !packed(&dst, &[&p, &m, &v]) {
        return strided_map(ex, dst, pmv, |[p, m, v]| update(p, step(m, v)));
    }
    packed_chunks(ex, &dst, |lo, w| {
        let (d, pp) = (dst.ptr().cast::<f32>(), p.ptr().cast::<f32>());
        let (mp, vp) = (m.ptr().cast::<f32>(), v.ptr().cast::<f32>());
        let mut s = [0f32; CHUNK];
        // SAFETY: values lo..lo + w (w ≤ CHUNK) of packed F32 tensors of one shape;
        // s is apart from them, d is p's bytes or apart from all.
        unsafe {
            zip_f32(s.as_mut_ptr(), mp.add(lo), vp.add(lo), w, step);
            zip_f32(d.add(lo), pp.add(lo), s.as_ptr(), w, update);
        }
    });
    Ok(())
}

/// Values per chunk of the fused AdamW steps.
const CHUNK: usize = 1024;

/// The factors in `h` (at most 4 F32 values), once the operands are checked:
/// F32, `dst`'s shape.
fn adamw_factors(name: &'static str, dst: &StridedMut, srcs: &[&Strided], h: &Strided) -> Result<[f32; 4]> {
    let all = srcs.iter().map(|s| &s.l).chain([&dst.l, &h.l]);
    if all.clone().any(|l| l.dtype != DType::F32) || srcs.iter().any(|s| s.l.ne != dst.l.ne) || h.l.nelements() > 4 {
        return Err(Error::internal(format!("{name} of operands unlike its destination {:?}", dst.l.ne)));
    }
    let mut hv = [0f32; 4];
    for (k, v) in hv.iter_mut().enumerate().take(h.l.nelements() as usize) {
        // SAFETY: k is inside h's shape (at most 4 values, checked above).
        *v = unsafe { at(Scalar::of(name, DType::F32)?, h, [k as i64, 0, 0, 0]) } as f32;
    }
    Ok(hv)
}

fn packed(dst: &StridedMut, srcs: &[&Strided]) -> bool {
    dst.l.is_contiguous() && srcs.iter().all(|s| s.l.is_contiguous())
}

/// `f(lo, w)` on chunks of at most [`CHUNK`] values covering `dst`'s elements.
fn packed_chunks(ex: &Exec, dst: &StridedMut, f: impl Fn(usize, usize) + Sync + Send) {
    let n = dst.l.nelements() as usize;
    ex.for_ranges(n.div_ceil(CHUNK), CHUNK, |chunks| {
        for c in chunks {
            let lo = c * CHUNK;
            f(lo, CHUNK.min(n - lo));
        }
    });
}

/// `dst[i] = f(srcs[·][i])` over one shape of any strides, element by element.
/// `dst` may be the bytes of `srcs[0]` (each element is read before it is
/// written, by one thread).
fn strided_map<const N: usize>(
    ex: &Exec,
    dst: StridedMut,
    srcs: [Strided; N],
    f: impl Fn([f32; N]) -> f32 + Sync,
) -> Result<()> {
    let ne0 = dst.l.ne[0];
    ex.for_ranges(dst.l.nrows() as usize, ne0 as usize, |rows| {
        for r in rows {
            let [i1, i2, i3] = dst.l.row_index(r as i64);
            for i0 in 0..ne0 {
                let el = |t: &Strided| {
                    // SAFETY: (i0, i1, i2, i3) is inside every operand (one shape).
                    unsafe { t.row(i1, i2, i3).add(i0 as usize * t.l.nb[0]).cast::<f32>().read_unaligned() }
                };
                let v = f(srcs.each_ref().map(el));
                // SAFETY: as above; this thread alone writes dst's row r.
                unsafe { dst.row(i1, i2, i3).add(i0 as usize * dst.l.nb[0]).cast::<f32>().write_unaligned(v) };
            }
        }
    });
    Ok(())
}
