//! The device kernels of the elementwise, row and shape ops: each function
//! checks what its kernel assumes and launches it (the faster paths of
//! `fast.rs` first where they apply).

use super::device::Device;
use super::fast;
use super::kernels::{self, alibi_params, glu_code, KRope};
use super::launch::{flat, launch, per_row, Bound, BoundMut};
use crate::backend::exec::{Extra, SoftMax};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::op::{BinaryOp, GluOp, RopeParams};

/// `dst = a op b`, `b` tiled over `a`.
pub(crate) fn binary(dev: &Device, op: BinaryOp, dst: BoundMut, a: Bound, b: Bound) -> Result<()> {
    let code = match op {
        BinaryOp::Add => kernels::BINARY_ADD,
        BinaryOp::Sub => kernels::BINARY_SUB,
        BinaryOp::Mul => kernels::BINARY_MUL,
        BinaryOp::Div => kernels::BINARY_DIV,
    };
    if !fast::binary(dev, code, &dst, &a, &b)? {
        let (name, n) = (op.name(), dst.l.nelements());
        launch!(dev, "binary", "rg_binary", flat(n);
            code, dst.ptr, dst.k(name)?, a.ptr, a.k(name)?, b.ptr, b.k(name)?, n);
    }
    Ok(())
}

/// `dst = f(a)` for a unary op code (`param`: the factor of `scale`).
pub(crate) fn unary(dev: &Device, code: i32, param: f32, dst: BoundMut, a: Bound) -> Result<()> {
    if !fast::unary(dev, code, param, &dst, &a)? {
        let n = dst.l.nelements();
        launch!(dev, "unary", "rg_unary", flat(n); code, param, dst.ptr, dst.p("unary")?, a.ptr, a.p("unary")?, n);
    }
    Ok(())
}

/// `dst = f(a) * b`, all of one shape.
pub(crate) fn glu(dev: &Device, op: GluOp, dst: BoundMut, a: Bound, b: Bound) -> Result<()> {
    if a.l.ne != dst.l.ne || b.l.ne != dst.l.ne {
        return Err(Error::internal(format!("{} of {:?} and {:?} into {:?}", op.name(), a.l.ne, b.l.ne, dst.l.ne)));
    }
    let (name, n, code) = (op.name(), dst.l.nelements(), glu_code(op));
    launch!(dev, "unary", "rg_glu", flat(n);
        code, dst.ptr, dst.p(name)?, a.ptr, a.p(name)?, b.ptr, b.p(name)?, n);
    Ok(())
}

/// `dst[.., 0] = Σ a[.., i0]`.
pub(crate) fn sum_rows(dev: &Device, dst: BoundMut, a: Bound) -> Result<()> {
    launch!(dev, "reduce", "rg_sum_rows", per_row(a.l.nrows(), 0)?;
        dst.ptr, dst.p("sum_rows")?, a.ptr, a.p("sum_rows")?, 1.0f64);
    Ok(())
}

/// `dst[.., 0] = Σ a[.., i0] / ne0`.
pub(crate) fn mean(dev: &Device, dst: BoundMut, a: Bound) -> Result<()> {
    launch!(dev, "reduce", "rg_sum_rows", per_row(a.l.nrows(), 0)?;
        dst.ptr, dst.p("mean")?, a.ptr, a.p("mean")?, a.l.ne[0].max(1) as f64);
    Ok(())
}

/// `dst[0] = Σ a`: one block, each thread a fixed stride of the rows, so the
/// f64 sum's order (and its bits) does not depend on the device.
pub(crate) fn sum(dev: &Device, dst: BoundMut, a: Bound) -> Result<()> {
    launch!(dev, "reduce", "rg_sum", per_row(1, 0)?;
        dst.ptr, dst.p("sum")?, a.ptr, a.p("sum")?, a.l.nrows());
    Ok(())
}

/// `dst[i1] = argmax a[.., i1]`: a thread per row (rows are short: classes).
pub(crate) fn argmax(dev: &Device, dst: BoundMut, a: Bound) -> Result<()> {
    let n = a.l.ne[1];
    launch!(dev, "reduce", "rg_argmax", flat(n); dst.ptr, dst.p("argmax")?, a.ptr, a.p("argmax")?, n);
    Ok(())
}

/// `dst[0] = #{i : a[i] == b[i]}` (I32 operands, an I64 count): one block.
pub(crate) fn count_equal(dev: &Device, dst: BoundMut, a: Bound, b: Bound) -> Result<()> {
    launch!(dev, "reduce", "rg_count_equal", per_row(1, 0)?;
        dst.ptr, a.ptr, a.p("count_equal")?, b.ptr, b.p("count_equal")?, a.l.nelements());
    Ok(())
}

/// `dst[0] = -(1/rows) Σ labels · log softmax(logits)`: one block, each
/// thread a fixed stride of the rows (in f64), so the bits do not depend on the device.
pub(crate) fn cross_entropy_loss(dev: &Device, dst: BoundMut, logits: Bound, labels: Bound) -> Result<()> {
    const OP: &str = "cross_entropy_loss";
    launch!(dev, "reduce", "rg_cross_entropy_loss", per_row(1, 0)?;
        dst.ptr, dst.p(OP)?, logits.ptr, logits.p(OP)?, labels.ptr, labels.p(OP)?, logits.l.nrows());
    Ok(())
}

/// `rms_norm` of each row, times the broadcast weight `w` if given.
pub(crate) fn rms_norm(dev: &Device, eps: f32, dst: BoundMut, a: Bound, w: Option<Bound>) -> Result<()> {
    let rows = per_row(a.l.nrows(), 0)?;
    let (wp, wk) = match w {
        Some(w) => (w.ptr, w.p("rms_norm")?),
        None => (0u64, a.p("rms_norm")?),
    };
    launch!(dev, "norm", "rg_rms_norm", rows;
        eps, dst.ptr, dst.p("rms_norm")?, a.ptr, a.p("rms_norm")?, wp, wk, i32::from(w.is_some()));
    Ok(())
}

/// `norm` of each row.
pub(crate) fn norm(dev: &Device, eps: f32, dst: BoundMut, a: Bound) -> Result<()> {
    let rows = per_row(a.l.nrows(), 0)?;
    launch!(dev, "norm", "rg_norm", rows; eps, dst.ptr, dst.p("norm")?, a.ptr, a.p("norm")?);
    Ok(())
}

/// Row softmax of `a*scale + slope*mask`, with head `i2`'s sink in its rows' sums.
pub(crate) fn soft_max(dev: &Device, p: SoftMax, dst: BoundMut, a: Bound, extra: Extra<Bound>) -> Result<()> {
    let (scale, (nhl2, m0, m1)) = (p.scale, alibi_params(a.l.ne[2], p.max_bias));
    let (mp, mk) = match extra.mask {
        Some(m) => (m.ptr, m.p("soft_max")?),
        None => (0u64, a.p("soft_max")?),
    };
    let sp = sinks_ptr(extra.sinks, a.l.ne[2])?;
    launch!(dev, "softmax", "rg_soft_max", per_row(a.l.nrows(), 0)?;
        scale, nhl2, m0, m1, dst.ptr, dst.p("soft_max")?, a.ptr, a.p("soft_max")?, mp, mk,
        i32::from(extra.mask.is_some()), sp);
    Ok(())
}

/// The device address of `n_head` packed F32 sinks, or 0 without them.
pub(crate) fn sinks_ptr(sinks: Option<Bound>, n_head: i64) -> Result<u64> {
    match sinks {
        None => Ok(0),
        Some(s) if s.l.dtype == DType::F32 && s.l.ne[0] == n_head && s.l.is_contiguous() => Ok(s.ptr),
        Some(s) => Err(Error::internal(format!("sinks ne={:?} {} for {n_head} heads", s.l.ne, s.l.dtype))),
    }
}

/// Elements past the causal diagonal set to `-inf`.
pub(crate) fn diag_mask_inf(dev: &Device, n_past: i32, dst: BoundMut, a: Bound) -> Result<()> {
    launch!(dev, "softmax", "rg_diag_mask_inf", flat(a.l.nelements());
        n_past, dst.ptr, dst.p("diag_mask_inf")?, a.ptr, a.p("diag_mask_inf")?, a.l.nelements());
    Ok(())
}

/// Rows of `table` at the I32 `index`; a bad index sets the flag at `err_ptr`.
pub(crate) fn get_rows(dev: &Device, dst: BoundMut, table: Bound, index: Bound, err_ptr: u64) -> Result<()> {
    check_index(&index, "get_rows")?;
    launch!(dev, "rows", "rg_get_rows", per_row(dst.l.nrows(), 0)?;
        dst.ptr, dst.p("get_rows")?, table.ptr, super::quant::rows_view("get_rows", &table)?, index.ptr,
        index.p("get_rows")?, err_ptr);
    Ok(())
}

/// `a` and `b` joined along `dim`.
pub(crate) fn concat(dev: &Device, dim: usize, dst: BoundMut, a: Bound, b: Bound) -> Result<()> {
    let size = same_size("concat", &[&dst.l, &a.l, &b.l])?;
    if dim >= 4 {
        return Err(Error::internal(format!("concat along dim {dim}")));
    }
    let n = dst.l.nelements();
    launch!(dev, "shape", "rg_concat", flat(n);
        dim as i32, size, dst.ptr, dst.p("concat")?, a.ptr, a.p("concat")?, b.ptr, b.p("concat")?, n);
    Ok(())
}

/// `a` tiled to `dst`'s shape.
pub(crate) fn repeat(dev: &Device, dst: BoundMut, a: Bound) -> Result<()> {
    let size = same_size("repeat", &[&dst.l, &a.l])?;
    if !dst.l.is_empty() && (0..4).any(|i| a.l.ne[i] == 0 || dst.l.ne[i] % a.l.ne[i] != 0) {
        return Err(Error::internal(format!("repeat of {:?} into {:?}", a.l.ne, dst.l.ne)));
    }
    let n = dst.l.nelements();
    launch!(dev, "shape", "rg_repeat", flat(n); size, dst.ptr, dst.p("repeat")?, a.ptr, a.p("repeat")?, n);
    Ok(())
}

/// Rotary embedding of `a` at `pos` (`back`: rotated the other way), with optional frequency factors.
pub(crate) fn rope(
    dev: &Device,
    p: &RopeParams,
    back: bool,
    dst: BoundMut,
    a: Bound,
    pos: Bound,
    ff: Option<Bound>,
) -> Result<()> {
    let n_dims = i64::from(p.n_dims);
    if n_dims < 2 || n_dims % 2 != 0 || n_dims > a.l.ne[0] || pos.l.nelements() != a.l.ne[2] {
        return Err(Error::internal(format!("rope n_dims={} for ne={:?}", p.n_dims, a.l.ne)));
    }
    if pos.l.dtype != DType::I32 || ff.is_some_and(|f| f.l.dtype != DType::F32 || f.l.ne[0] < n_dims / 2) {
        return Err(Error::internal("rope positions or frequency factors do not fit"));
    }
    let (fp, fk) = match ff {
        Some(f) => (f.ptr, f.p("rope")?),
        None => (0u64, pos.p("rope")?),
    };
    let shared = (n_dims / 2 * 4) as u32;
    launch!(dev, "rope", "rg_rope", per_row(a.l.nrows(), shared)?;
        KRope::of(p).back(back), dst.ptr, dst.p("rope")?, a.ptr, a.p("rope")?, pos.ptr, pos.p("rope")?, fp, fk,
        i32::from(ff.is_some()));
    Ok(())
}

/// The element size shared by `ts` (all of one plain type), for the exact copies of concat/repeat.
fn same_size(op: &'static str, ts: &[&Layout]) -> Result<i32> {
    let dtype = ts[0].dtype;
    if let Some(t) = ts.iter().find(|t| t.dtype != dtype) {
        return Err(Error::DTypeMismatch { what: op.into(), expected: dtype, found: t.dtype });
    }
    Ok(dtype.type_size() as i32)
}

/// Errors unless the indices are I32.
pub(crate) fn check_index(idx: &Bound, op: &'static str) -> Result<()> {
    if idx.l.dtype == DType::I32 {
        Ok(())
    } else {
        Err(Error::Unsupported { op, dtype: idx.l.dtype })
    }
}
