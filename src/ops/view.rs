//! Metadata-only ops: views, reshapes, transpose, permute, expand. Each makes a
//! new header over the source's storage; none moves a byte, and each is checked
//! at build time so its byte extent lies inside the storage.

use super::grad_node::{GradNode, Grads};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::tensor::{Op, Tensor, TensorId};

impl Context {
    /// A header with `layout` over `src`'s storage, `offset` bytes past `src`'s
    /// start. Checks alignment, block alignment and that the strided extent
    /// lies inside the root storage.
    fn view_tensor(&self, op: Op, layout: Layout, offset: usize) -> Result<TensorId> {
        let src = *op.operands().first().ok_or_else(|| Error::internal("a view without a source"))?;
        let name = op.name();
        let s = self.tensor(src)?;
        let root = s.view_src.unwrap_or(src);
        let offs =
            s.view_offs.checked_add(offset).ok_or_else(|| Error::view(name, format!("offset {offset} overflows")))?;
        if layout.ne.iter().any(|&n| n < 0) {
            return Err(Error::view(name, format!("negative dimension in ne={:?}", layout.ne)));
        }
        if layout.ne.iter().try_fold(1i64, |acc, &n| acc.checked_mul(n)).is_none() {
            return Err(Error::view(name, format!("element count of ne={:?} overflows", layout.ne)));
        }
        let d = layout.dtype;
        let bd = layout.block_dim;
        if bd > 3 || layout.ne[bd] % d.block_size() as i64 != 0 {
            return Err(Error::view(
                name,
                format!(
                    "ne[{bd}]={} is not a whole number of {} blocks of {}",
                    layout.ne[bd.min(3)],
                    d,
                    d.block_size()
                ),
            ));
        }
        let a = d.align();
        if !offs.is_multiple_of(a) || (0..4).any(|i| layout.ne[i] > 1 && !layout.nb[i].is_multiple_of(a)) {
            return Err(Error::view(
                name,
                format!("offset {offs} and strides nb={:?} must be multiples of {}'s alignment {a}", layout.nb, d),
            ));
        }
        let storage = self.tensor(root)?.layout.nbytes();
        let end = layout.checked_nbytes().and_then(|n| n.checked_add(offs));
        match end {
            Some(end) if end <= storage => {}
            _ => {
                return Err(Error::view(
                    name,
                    format!(
                    "ne={:?} nb={:?} at byte offset {offs} reaches byte {} but the storage of {} holds {storage} bytes",
                    layout.ne,
                    layout.nb,
                    end.map_or("overflow".to_string(), |e| e.to_string()),
                    self.label(root)
                ),
                ))
            }
        }
        let mut t = Tensor::new(layout, op);
        t.view_src = Some(root);
        t.view_offs = offs;
        self.push(t)
    }

    /// `ne0` contiguous values starting `offset` bytes into `a` (ggml's `view_1d`).
    pub fn view_1d(&self, a: TensorId, ne0: i64, offset: usize) -> Result<TensorId> {
        let dtype = self.layout(a)?.dtype;
        let ts = dtype.type_size();
        let row = row_bytes("view_1d", dtype, ne0)?;
        let l = Layout { dtype, ne: [ne0, 1, 1, 1], nb: [ts, row, row, row], block_dim: 0 };
        self.view_tensor(Op::View { src: a }, l, offset)
    }
    /// A 2-d window: rows of `ne0` values, `nb1` bytes apart (ggml's `view_2d`).
    pub fn view_2d(&self, a: TensorId, ne0: i64, ne1: i64, nb1: usize, offset: usize) -> Result<TensorId> {
        let dtype = self.layout(a)?.dtype;
        let nb2 = mul("view_2d", nb1, ne1)?;
        let l = Layout { dtype, ne: [ne0, ne1, 1, 1], nb: [dtype.type_size(), nb1, nb2, nb2], block_dim: 0 };
        self.view_tensor(Op::View { src: a }, l, offset)
    }
    /// A 3-d window (ggml's `view_3d`).
    pub fn view_3d(&self, a: TensorId, ne: [i64; 3], nb1: usize, nb2: usize, offset: usize) -> Result<TensorId> {
        let dtype = self.layout(a)?.dtype;
        let nb3 = mul("view_3d", nb2, ne[2])?;
        let l = Layout { dtype, ne: [ne[0], ne[1], ne[2], 1], nb: [dtype.type_size(), nb1, nb2, nb3], block_dim: 0 };
        self.view_tensor(Op::View { src: a }, l, offset)
    }
    /// A 4-d window with strides `nb1, nb2, nb3` (ggml's `view_4d`).
    pub fn view_4d(&self, a: TensorId, ne: [i64; 4], nb: [usize; 3], offset: usize) -> Result<TensorId> {
        let dtype = self.layout(a)?.dtype;
        let l = Layout { dtype, ne, nb: [dtype.type_size(), nb[0], nb[1], nb[2]], block_dim: 0 };
        self.view_tensor(Op::View { src: a }, l, offset)
    }
    /// Any window: shape `ne`, all four strides `nb` (`nb[0]` may differ from the
    /// type size), `offset` bytes into `a`. Bounds-checked like every view.
    pub fn view_strided(&self, a: TensorId, ne: [i64; 4], nb: [usize; 4], offset: usize) -> Result<TensorId> {
        let dtype = self.layout(a)?.dtype;
        if dtype.is_quantized() && nb[0] != dtype.type_size() {
            return Err(Error::view("view", format!("{dtype}: blocks along dim 0 must be packed (nb[0]={})", nb[0])));
        }
        // (views address dim 0 in blocks, whatever the source's block dim)
        self.view_tensor(Op::View { src: a }, Layout { dtype, ne, nb, block_dim: 0 }, offset)
    }

    /// `a` with a new shape (1–4 dims); `a` must be contiguous and hold the same
    /// number of elements (ggml's `reshape`). Never copies.
    pub fn reshape(&self, a: TensorId, ne: &[i64]) -> Result<TensorId> {
        let l = self.layout(a)?;
        if !l.is_contiguous() {
            return Err(Error::NotContiguous { op: "reshape", ne: l.ne, nb: l.nb, dtype: l.dtype });
        }
        if ne.is_empty() || ne.len() > 4 {
            return Err(Error::shape("reshape", format!("1 to 4 dims, got {}", ne.len())));
        }
        let mut ne4 = [1i64; 4];
        ne4[..ne.len()].copy_from_slice(ne);
        let count = ne4.iter().try_fold(1i64, |acc, &n| if n < 0 { None } else { acc.checked_mul(n) });
        if count != Some(l.nelements()) {
            return Err(Error::shape(
                "reshape",
                format!("cannot reshape ne={:?} ({} elements) to {ne:?}", l.ne, l.nelements()),
            ));
        }
        let new = Layout::contiguous(l.dtype, ne4).map_err(|e| Error::shape("reshape", e.to_string()))?;
        self.view_tensor(Op::Reshape { src: a }, new, 0)
    }
    /// [`Context::reshape`] to 1 dim.
    pub fn reshape_1d(&self, a: TensorId, ne0: i64) -> Result<TensorId> {
        self.reshape(a, &[ne0])
    }
    /// [`Context::reshape`] to 2 dims.
    pub fn reshape_2d(&self, a: TensorId, ne0: i64, ne1: i64) -> Result<TensorId> {
        self.reshape(a, &[ne0, ne1])
    }
    /// [`Context::reshape`] to 3 dims.
    pub fn reshape_3d(&self, a: TensorId, ne0: i64, ne1: i64, ne2: i64) -> Result<TensorId> {
        self.reshape(a, &[ne0, ne1, ne2])
    }
    /// [`Context::reshape`] to 4 dims.
    pub fn reshape_4d(&self, a: TensorId, ne0: i64, ne1: i64, ne2: i64, ne3: i64) -> Result<TensorId> {
        self.reshape(a, &[ne0, ne1, ne2, ne3])
    }

    /// Swaps dims 0 and 1 (ne and nb). Zero bytes moved.
    pub fn transpose(&self, a: TensorId) -> Result<TensorId> {
        self.permute_op(a, [1, 0, 2, 3], Op::Transpose { src: a })
    }
    /// Reorders dims, ggml's convention: **source dim `i` moves to position
    /// `axes[i]`** (`ne_out[axes[i]] = ne[i]`). `permute(a, [1, 0, 2, 3])` is a
    /// transpose; `permute(a, [0, 2, 1, 3])` swaps dims 1 and 2. `axes` must be a
    /// permutation of 0..4.
    pub fn permute(&self, a: TensorId, axes: [usize; 4]) -> Result<TensorId> {
        self.permute_op(a, axes, Op::Permute { src: a, axes })
    }
    fn permute_op(&self, a: TensorId, axes: [usize; 4], op: Op) -> Result<TensorId> {
        let mut seen = [false; 4];
        for &ax in &axes {
            if ax >= 4 || seen[ax] {
                return Err(Error::view(op.name(), format!("axes {axes:?} are not a permutation of 0..4")));
            }
            seen[ax] = true;
        }
        let l = self.layout(a)?;
        let mut out = l;
        for (i, &ax) in axes.iter().enumerate() {
            out.ne[ax] = l.ne[i];
            out.nb[ax] = l.nb[i];
        }
        // block types: the blocked dim moves with its data (plain types keep 0,
        // so equal layouts stay equal)
        if l.dtype.is_quantized() {
            out.block_dim = axes[l.block_dim];
        }
        self.view_tensor(op, out, 0)
    }

    /// Broadcasts `a` to shape `ne` without copying: dims where `a` has size 1
    /// get stride 0. Dims of other sizes must match. The result is read-only:
    /// writing into it is an [`Error::OverlappingWrite`].
    pub fn expand(&self, a: TensorId, ne: [i64; 4]) -> Result<TensorId> {
        let l = self.layout(a)?;
        let mut out = l;
        for i in 0..4 {
            if ne[i] == l.ne[i] {
                continue;
            }
            if l.ne[i] != 1 || ne[i] < 0 || (i == l.block_dim && l.dtype.is_quantized()) {
                return Err(Error::shape(
                    "expand",
                    format!(
                        "cannot expand ne={:?} to {ne:?}: dim {i} has size {} (only size-1 dims broadcast)",
                        l.ne, l.ne[i]
                    ),
                ));
            }
            out.ne[i] = ne[i];
            out.nb[i] = 0;
        }
        self.view_tensor(Op::Expand { src: a }, out, 0)
    }
}

fn row_bytes(op: &'static str, dtype: crate::dtype::DType, ne0: i64) -> Result<usize> {
    dtype.row_size(ne0).ok_or_else(|| {
        Error::view(op, format!("ne0={ne0} is not a whole number of {dtype} blocks of {}", dtype.block_size()))
    })
}

fn mul(op: &'static str, nb: usize, ne: i64) -> Result<usize> {
    usize::try_from(ne)
        .ok()
        .and_then(|n| nb.checked_mul(n))
        .ok_or_else(|| Error::view(op, format!("stride {nb} × {ne} overflows")))
}

impl Context {
    /// The gradient rules of the views (see [`Context::operand_grads`]).
    pub(super) fn grad_view(&self, n: &GradNode, g: TensorId, out: &mut Grads) -> Result<bool> {
        match n.op {
            Op::Reshape { .. } => out.put(0, || self.reshape(self.packed(g)?, &self.layout(n.x[0])?.ne))?,
            Op::View { .. } => out.put(0, || self.view_grad(n.id, n.x[0], g))?,
            Op::Transpose { .. } => out.put(0, || self.transpose(g))?,
            Op::Permute { axes, .. } => {
                let mut inverse = [0; 4];
                for (i, &a) in axes.iter().enumerate() {
                    inverse[a] = i;
                }
                out.put(0, || self.permute(g, inverse))?
            }
            Op::Expand { .. } => out.put(0, || self.repeat_back(g, self.layout(n.x[0])?.ne))?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The gradient of `src` through the view `view` of it.
    fn view_grad(&self, view: TensorId, src: TensorId, g: TensorId) -> Result<TensorId> {
        let (v, s) = (self.tensor(view)?, self.tensor(src)?);
        let offset = v
            .view_offs()
            .checked_sub(s.view_offs())
            .ok_or_else(|| self.no_gradient(view, "a view before its source"))?;
        if v.layout().ne == s.layout().ne && offset == 0 && v.layout().same_places(s.layout()) {
            return Ok(g);
        }
        if !s.layout().is_contiguous() {
            return Err(self.no_gradient(view, "a view of a strided tensor"));
        }
        self.view_back(g, s.layout().ne, v.layout().nb, offset)
    }
}
