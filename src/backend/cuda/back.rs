//! The gradient ops' device kernels (`kernels/back.cu`): each function checks
//! what its kernel assumes and launches it.

use super::device::Device;
use super::kernels::unary_code;
use super::launch::{flat, launch, per_row, Bound, BoundMut};
use crate::error::{Error, Result};
use crate::op::UnaryOp;

/// `a` summed into `dst`'s smaller shape.
pub(crate) fn repeat_back(dev: &Device, dst: BoundMut, a: Bound) -> Result<()> {
    if !dst.l.is_empty() && (0..4).any(|i| dst.l.ne[i] == 0 || a.l.ne[i] % dst.l.ne[i] != 0) {
        return Err(Error::internal(format!("repeat_back of {:?} into {:?}", a.l.ne, dst.l.ne)));
    }
    let n = dst.l.nelements();
    launch!(dev, "back", "rg_repeat_back", flat(n); dst.ptr, dst.p("repeat_back")?, a.ptr, a.p("repeat_back")?, n);
    Ok(())
}

/// `dst = g · f'(x)`.
pub(crate) fn unary_back(dev: &Device, op: UnaryOp, dst: BoundMut, x: Bound, g: Bound) -> Result<()> {
    if x.l.ne != dst.l.ne || g.l.ne != dst.l.ne {
        return Err(Error::internal(format!("unary_back of {:?} and {:?} into {:?}", x.l.ne, g.l.ne, dst.l.ne)));
    }
    let (name, n, code) = ("unary_back", dst.l.nelements(), unary_code(op));
    launch!(dev, "back", "rg_unary_back", flat(n);
        code, dst.ptr, dst.p(name)?, x.ptr, x.p(name)?, g.ptr, g.p(name)?, n);
    Ok(())
}

/// `dst = 0`, then row `i` of `g` added into row `index[i]`; a bad index sets the flag at `err_ptr`.
pub(crate) fn get_rows_back(dev: &Device, dst: BoundMut, g: Bound, index: Bound, err_ptr: u64) -> Result<()> {
    super::ops::check_index(&index, "get_rows_back")?;
    if g.l.ne[1] != index.l.ne[0] || g.l.ne[0] != dst.l.ne[0] {
        return Err(Error::internal(format!("get_rows_back of {:?} into {:?}", g.l.ne, dst.l.ne)));
    }
    let name = "get_rows_back";
    launch!(dev, "back", "rg_get_rows_back", per_row(dst.l.ne[1], 0)?;
        dst.ptr, dst.p(name)?, g.ptr, g.p(name)?, index.ptr, index.p(name)?, err_ptr);
    Ok(())
}

/// The gradient of `rms_norm(x, eps)` given `g`.
pub(crate) fn rms_norm_back(dev: &Device, eps: f32, dst: BoundMut, x: Bound, g: Bound) -> Result<()> {
    if x.l.ne != dst.l.ne || g.l.ne != dst.l.ne {
        return Err(Error::internal(format!("rms_norm_back of {:?} and {:?} into {:?}", x.l.ne, g.l.ne, dst.l.ne)));
    }
    let name = "rms_norm_back";
    launch!(dev, "back", "rg_rms_norm_back", per_row(dst.l.nrows(), 0)?;
        eps, dst.ptr, dst.p(name)?, x.ptr, x.p(name)?, g.ptr, g.p(name)?);
    Ok(())
}

/// `dst = 0`, then element `i` of `g` at byte `offset + Σ i_k·nb[k]` of the packed F32 `dst`.
pub(crate) fn view_back(dev: &Device, nb: [usize; 4], offset: usize, dst: BoundMut, g: Bound) -> Result<()> {
    if dst.l.dtype != crate::dtype::DType::F32 || !dst.l.is_contiguous() {
        return Err(Error::internal("view_back into a strided or non-F32 tensor"));
    }
    let (name, n, total) = ("view_back", dst.l.nelements(), g.l.nelements());
    let [nb0, nb1, nb2, nb3] = nb.map(|b| b as i64);
    let off = offset as i64;
    launch!(dev, "back", "rg_zero_f32", flat(n); dst.ptr, n);
    launch!(dev, "back", "rg_view_back", flat(total);
        dst.ptr, nb0, nb1, nb2, nb3, off, g.ptr, g.p(name)?, total);
    Ok(())
}

/// The operands of AdamW's fused steps: F32, one shape, at most 4 factors.
fn adamw_check(name: &str, dst: &BoundMut, srcs: &[&Bound], h: &Bound) -> Result<()> {
    let f32s = srcs.iter().map(|s| s.l.dtype).chain([dst.l.dtype, h.l.dtype]).all(|t| t == crate::dtype::DType::F32);
    if !f32s || srcs.iter().any(|s| s.l.ne != dst.l.ne) || h.l.nelements() > 4 {
        return Err(Error::internal(format!("{name} into {:?}", dst.l.ne)));
    }
    Ok(())
}

/// `dst = h0·m + h1·g` (`g²` with `square`), in F32 steps.
pub(crate) fn adamw_moment(dev: &Device, square: bool, dst: BoundMut, m: Bound, g: Bound, h: Bound) -> Result<()> {
    let (name, n) = ("adamw_moment", dst.l.nelements());
    adamw_check(name, &dst, &[&m, &g], &h)?;
    launch!(dev, "back", "rg_adamw_moment", flat(n);
        i32::from(square), dst.ptr, dst.p(name)?, m.ptr, m.p(name)?, g.ptr, g.p(name)?, h.ptr, h.p(name)?, n);
    Ok(())
}

/// `dst = h0·p − (h1·m) / (sqrt(h2·v) + h3)`, in F32 steps.
pub(crate) fn adamw_update(dev: &Device, dst: BoundMut, pmv: [Bound; 3], h: Bound) -> Result<()> {
    let (name, n) = ("adamw_update", dst.l.nelements());
    let [p, m, v] = pmv;
    adamw_check(name, &dst, &[&p, &m, &v], &h)?;
    launch!(dev, "back", "rg_adamw_update", flat(n);
        dst.ptr, dst.p(name)?, p.ptr, p.p(name)?, m.ptr, m.p(name)?, v.ptr, v.p(name)?, h.ptr, h.p(name)?, n);
    Ok(())
}
