//! The CUDA backend's [`Kernels`]: each op family's launches, on the
//! device's one stream, for the executor loop.

use super::copy::copy;
use super::device::Device;
use super::kernels::{self, unary_code, UNARY_SCALE};
use super::launch::{Bound, BoundMut};
use super::matmul::{self, QuantPath};
use super::{back, ops, quant, sort};
use crate::backend::exec::{Extra, Kernels, Region, SoftMax};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::layout::Layout;
use crate::op::{BinaryOp, GluOp, RopeParams, UnaryOp};
use crate::tensor::TensorId;

/// One run of a graph's nodes on the device.
pub(crate) struct CudaKernels<'a> {
    pub dev: &'a Device,
    pub quant: QuantPath,
    /// The index-error flag of `get_rows`/`set_rows`/`mul_mat_id` (0: the graph has none).
    pub err_ptr: u64,
    /// Where the next `set_rows`' claims go (one int per destination row).
    pub claims_ptr: u64,
    /// The plan buffer (address, bytes), for poison mode.
    pub buf: (u64, usize),
}

impl Kernels for CudaKernels<'_> {
    type Base = u64;
    type Src = Bound;
    type Dst = BoundMut;

    fn src(r: &Region<u64>, offs: usize, l: Layout) -> Result<Bound> {
        Bound::new(r.base, r.len, offs, l)
    }
    fn dst(r: &Region<u64>, offs: usize, l: Layout) -> Result<BoundMut> {
        Bound::new(r.base, r.len, offs, l)
    }
    fn fill_nan(&mut self, offset: usize, len: usize) -> Result<()> {
        self.dev.fill(self.buf, offset, len, 0xFF)
    }
    fn node_done(&mut self) -> Result<()> {
        // the node's kernels are queued: its scratch may serve the next node
        self.dev.scratch.release()
    }

    fn copy(&mut self, _op: &'static str, dst: BoundMut, src: Bound) -> Result<()> {
        copy(self.dev, dst, src)
    }
    fn binary(&mut self, op: BinaryOp, dst: BoundMut, a: Bound, b: Bound) -> Result<()> {
        ops::binary(self.dev, op, dst, a, b)
    }
    fn scale(&mut self, s: f32, dst: BoundMut, a: Bound) -> Result<()> {
        ops::unary(self.dev, UNARY_SCALE, s, dst, a)
    }
    fn unary(&mut self, op: UnaryOp, dst: BoundMut, a: Bound) -> Result<()> {
        ops::unary(self.dev, unary_code(op), 0.0, dst, a)
    }
    fn glu(&mut self, op: GluOp, dst: BoundMut, a: Bound, b: Bound) -> Result<()> {
        ops::glu(self.dev, op, dst, a, b)
    }
    fn sum_rows(&mut self, dst: BoundMut, a: Bound) -> Result<()> {
        ops::sum_rows(self.dev, dst, a)
    }
    fn mean(&mut self, dst: BoundMut, a: Bound) -> Result<()> {
        ops::mean(self.dev, dst, a)
    }
    fn argmax(&mut self, dst: BoundMut, a: Bound) -> Result<()> {
        ops::argmax(self.dev, dst, a)
    }
    fn count_equal(&mut self, dst: BoundMut, a: Bound, b: Bound) -> Result<()> {
        ops::count_equal(self.dev, dst, a, b)
    }
    fn cross_entropy_loss(&mut self, dst: BoundMut, logits: Bound, labels: Bound) -> Result<()> {
        ops::cross_entropy_loss(self.dev, dst, logits, labels)
    }
    fn sum(&mut self, dst: BoundMut, a: Bound) -> Result<()> {
        ops::sum(self.dev, dst, a)
    }
    fn mul_mat(&mut self, dst: BoundMut, a: Bound, b: Bound, _weights: TensorId) -> Result<()> {
        matmul::mul_mat(self.dev, dst, a, b, self.quant)
    }
    fn mul_mat_id(&mut self, dst: BoundMut, a: Bound, b: Bound, ids: Bound, _weights: TensorId) -> Result<()> {
        matmul::moe::mul_mat_id(self.dev, dst, a, b, ids, self.err_ptr, self.quant)
    }
    fn argsort(&mut self, descending: bool, dst: BoundMut, a: Bound) -> Result<()> {
        sort::argsort(self.dev, descending, dst, a)
    }
    fn get_rows(&mut self, dst: BoundMut, table: Bound, index: Bound) -> Result<()> {
        ops::get_rows(self.dev, dst, table, index, self.err_ptr)
    }
    fn set_rows(&mut self, dst: BoundMut, rows: Bound, index: Bound) -> Result<()> {
        ops::check_index(&index, "set_rows")?;
        let n = dst.l.nrows();
        quant::set_rows(self.dev, dst, rows, index, self.err_ptr, self.claims_ptr)?;
        self.claims_ptr += 4 * n as u64;
        Ok(())
    }
    fn rms_norm(&mut self, eps: f32, dst: BoundMut, a: Bound, w: Option<Bound>) -> Result<()> {
        ops::rms_norm(self.dev, eps, dst, a, w)
    }
    fn norm(&mut self, eps: f32, dst: BoundMut, a: Bound) -> Result<()> {
        ops::norm(self.dev, eps, dst, a)
    }
    fn soft_max(&mut self, p: SoftMax, dst: BoundMut, a: Bound, extra: Extra<Bound>) -> Result<()> {
        ops::soft_max(self.dev, p, dst, a, extra)
    }
    fn diag_mask_inf(&mut self, n_past: i32, dst: BoundMut, a: Bound) -> Result<()> {
        ops::diag_mask_inf(self.dev, n_past, dst, a)
    }
    fn rope(
        &mut self,
        p: &RopeParams,
        back: bool,
        dst: BoundMut,
        a: Bound,
        pos: Bound,
        freq: Option<Bound>,
    ) -> Result<()> {
        ops::rope(self.dev, p, back, dst, a, pos, freq)
    }
    fn concat(&mut self, dim: usize, dst: BoundMut, a: Bound, b: Bound) -> Result<()> {
        ops::concat(self.dev, dim, dst, a, b)
    }
    fn repeat(&mut self, dst: BoundMut, a: Bound) -> Result<()> {
        ops::repeat(self.dev, dst, a)
    }
    fn flash_attn(&mut self, p: SoftMax, dst: BoundMut, qkv: [Bound; 3], extra: Extra<Bound>) -> Result<()> {
        super::attention::flash_attn(self.dev, p, dst, qkv, extra)
    }
    fn repeat_back(&mut self, dst: BoundMut, a: Bound) -> Result<()> {
        back::repeat_back(self.dev, dst, a)
    }
    fn unary_back(&mut self, op: UnaryOp, dst: BoundMut, x: Bound, g: Bound) -> Result<()> {
        back::unary_back(self.dev, op, dst, x, g)
    }
    fn get_rows_back(&mut self, dst: BoundMut, g: Bound, index: Bound) -> Result<()> {
        back::get_rows_back(self.dev, dst, g, index, self.err_ptr)
    }
    fn view_back(&mut self, nb: [usize; 4], offset: usize, dst: BoundMut, g: Bound) -> Result<()> {
        back::view_back(self.dev, nb, offset, dst, g)
    }
    fn rms_norm_back(&mut self, eps: f32, dst: BoundMut, x: Bound, g: Bound) -> Result<()> {
        back::rms_norm_back(self.dev, eps, dst, x, g)
    }
    fn adamw_moment(&mut self, square: bool, dst: BoundMut, m: Bound, g: Bound, h: Bound) -> Result<()> {
        back::adamw_moment(self.dev, square, dst, m, g, h)
    }
    fn adamw_update(&mut self, dst: BoundMut, pmv: [Bound; 3], h: Bound) -> Result<()> {
        back::adamw_update(self.dev, dst, pmv, h)
    }
}

/// Refuses, before anything is uploaded or launched, a graph in which a node
/// the device computes reads or writes a type the CUDA backend does not handle
/// ([`kernels::handles`]): an [`Error::Unsupported`] naming the op and the type.
/// Leaves and metadata ops (views, reshapes, permutes) of such types pass: no
/// kernel reads them.
pub(crate) fn check_types(ctx: &Context, graph: &Graph) -> Result<()> {
    for &id in graph.nodes() {
        node_types_ok(ctx, id)?;
    }
    Ok(())
}

/// [`check_types`] for one node; a copy that quantizes also needs a
/// quantizer on the device ([`can_quantize`](super::quant::can_quantize)).
pub(crate) fn node_types_ok(ctx: &Context, id: TensorId) -> Result<()> {
    let t = ctx.tensor(id)?;
    if !t.op().is_compute() {
        return Ok(());
    }
    for s in std::iter::once(id).chain(t.src().iter().copied()) {
        let dtype = ctx.layout(s)?.dtype;
        if !kernels::handles(dtype) {
            return Err(Error::Unsupported { op: t.op().name(), dtype });
        }
    }
    if let Some(k) = t.op().attention_keys() {
        let kt = ctx.layout(k)?.dtype;
        if super::attention::query_rounding(kt).is_none() {
            return Err(Error::Unsupported { op: "flash_attn_ext (CUDA keys)", dtype: kt });
        }
    }
    let Some(&first) = t.src().first() else { return Ok(()) };
    let (dst, src) = (t.layout().dtype, ctx.layout(first)?.dtype);
    if t.op().is_copy() && dst.is_quantized() && dst != src && !quant::can_quantize(dst) {
        return Err(Error::Unsupported { op: t.op().name(), dtype: dst });
    }
    Ok(())
}
