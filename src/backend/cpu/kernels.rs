//! The CPU's [`Kernels`]: each op family's kernel module, called by the
//! executor loop with bound operands.

use std::collections::hash_map::Entry;

use super::mem::{self, Bytes, Exec, Strided, StridedMut};
use super::{attention, back, copy, elementwise, matmul, matmul_id, norm, reduce, rope, rows, shape, softmax, sort};
use crate::backend::exec::{Extra, Kernels, Region, SoftMax};
use crate::context::Context;
use crate::error::Result;
use crate::host::HostBuffer;
use crate::op::{BinaryOp, GluOp, RopeParams, UnaryOp};
use crate::plan::{Place, Plan};
use crate::tensor::TensorId;

/// One compute on the CPU: the pool split, the plan buffer (for poison
/// mode) and, with repacked weights on, the storage's repacked matrices.
pub(super) struct CpuKernels<'a> {
    pub ex: Exec<'a>,
    pub ctx: &'a Context,
    pub plan: &'a Plan,
    /// The plan buffer's first byte and length.
    pub buf: (*mut u8, usize),
    /// Repacked weights by leaf (`None` when repacking is off).
    pub packed: Option<&'a mut crate::id::IdMap<Option<HostBuffer>>>,
}

impl CpuKernels<'_> {
    /// The repacked form of weight leaf `a`, made on first use; `None` when
    /// repacking is off or `a` does not qualify ([`matmul::repack`]).
    fn packed(&mut self, a: TensorId) -> Result<Option<&[u8]>> {
        let Some(packed) = self.packed.as_deref_mut() else { return Ok(None) };
        let p = match packed.entry(a) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let in_place = self.plan.place(a) == Some(Place::Leaf);
                let p = if in_place { matmul::repack(&self.ex, self.ctx, a)? } else { None };
                if p.is_some() {
                    // only the copy is read from now on: the mapped pages need not stay resident
                    self.ctx.release_mapped_pages(a);
                }
                e.insert(p)
            }
        };
        Ok(p.as_ref().map(HostBuffer::as_bytes))
    }
}

impl Kernels for CpuKernels<'_> {
    type Base = Bytes;
    type Src = Strided;
    type Dst = StridedMut;

    #[inline(always)]
    fn src(r: &Region<Bytes>, offs: usize, l: crate::layout::Layout) -> Result<Strided> {
        let base = match r.base {
            Bytes::Read(p) => p,
            Bytes::Write(p) => p.cast_const(),
        };
        Strided::new(base, r.len, offs, l)
    }
    #[inline(always)]
    fn dst(r: &Region<Bytes>, offs: usize, l: crate::layout::Layout) -> Result<StridedMut> {
        match r.base {
            Bytes::Write(p) => StridedMut::new(p, r.len, offs, l),
            Bytes::Read(_) => Err(crate::error::Error::internal("a destination in read-only bytes")),
        }
    }
    fn fill_nan(&mut self, offset: usize, len: usize) -> Result<()> {
        mem::fill(self.buf.0, self.buf.1, offset, len, 0xFF);
        Ok(())
    }

    fn copy(&mut self, op: &'static str, dst: StridedMut, src: Strided) -> Result<()> {
        copy::copy(&self.ex, op, dst, src)
    }
    fn binary(&mut self, op: BinaryOp, dst: StridedMut, a: Strided, b: Strided) -> Result<()> {
        elementwise::binary(&self.ex, op, dst, a, b)
    }
    fn scale(&mut self, s: f32, dst: StridedMut, a: Strided) -> Result<()> {
        elementwise::scale(&self.ex, s, dst, a)
    }
    fn unary(&mut self, op: UnaryOp, dst: StridedMut, a: Strided) -> Result<()> {
        elementwise::unary(&self.ex, op, dst, a)
    }
    fn glu(&mut self, op: GluOp, dst: StridedMut, a: Strided, b: Strided) -> Result<()> {
        elementwise::glu(&self.ex, op, dst, a, b)
    }
    fn sum_rows(&mut self, dst: StridedMut, a: Strided) -> Result<()> {
        reduce::sum_rows(&self.ex, dst, a)
    }
    fn mean(&mut self, dst: StridedMut, a: Strided) -> Result<()> {
        reduce::mean(&self.ex, dst, a)
    }
    fn argmax(&mut self, dst: StridedMut, a: Strided) -> Result<()> {
        reduce::argmax(&self.ex, dst, a)
    }
    fn count_equal(&mut self, dst: StridedMut, a: Strided, b: Strided) -> Result<()> {
        reduce::count_equal(&self.ex, dst, a, b)
    }
    fn cross_entropy_loss(&mut self, dst: StridedMut, logits: Strided, labels: Strided) -> Result<()> {
        reduce::cross_entropy_loss(&self.ex, dst, logits, labels)
    }
    fn sum(&mut self, dst: StridedMut, a: Strided) -> Result<()> {
        reduce::sum(&self.ex, dst, a)
    }
    fn mul_mat(&mut self, dst: StridedMut, a: Strided, b: Strided, weights: TensorId) -> Result<()> {
        let ex = self.ex;
        let packed = self.packed(weights)?;
        matmul::mul_mat(&ex, dst, a, b, packed)
    }
    fn mul_mat_id(&mut self, dst: StridedMut, a: Strided, b: Strided, ids: Strided, weights: TensorId) -> Result<()> {
        let ex = self.ex;
        let packed = self.packed(weights)?;
        matmul_id::mul_mat_id(&ex, dst, a, b, ids, packed)
    }
    fn argsort(&mut self, descending: bool, dst: StridedMut, a: Strided) -> Result<()> {
        sort::argsort(&self.ex, descending, dst, a)
    }
    fn get_rows(&mut self, dst: StridedMut, table: Strided, index: Strided) -> Result<()> {
        rows::get_rows(&self.ex, dst, table, index)
    }
    fn set_rows(&mut self, dst: StridedMut, rows: Strided, index: Strided) -> Result<()> {
        rows::set_rows(&self.ex, dst, rows, index)
    }
    fn rms_norm(&mut self, eps: f32, dst: StridedMut, a: Strided, w: Option<Strided>) -> Result<()> {
        norm::rms_norm(&self.ex, eps, dst, a, w)
    }
    fn norm(&mut self, eps: f32, dst: StridedMut, a: Strided) -> Result<()> {
        norm::norm(&self.ex, eps, dst, a)
    }
    fn soft_max(&mut self, p: SoftMax, dst: StridedMut, a: Strided, extra: Extra<Strided>) -> Result<()> {
        softmax::soft_max(&self.ex, p, dst, a, extra)
    }
    fn diag_mask_inf(&mut self, n_past: i32, dst: StridedMut, a: Strided) -> Result<()> {
        softmax::diag_mask_inf(&self.ex, n_past, dst, a)
    }
    fn rope(
        &mut self,
        p: &RopeParams,
        back: bool,
        dst: StridedMut,
        a: Strided,
        pos: Strided,
        freq: Option<Strided>,
    ) -> Result<()> {
        rope::rope(&self.ex, p, back, dst, a, pos, freq)
    }
    fn concat(&mut self, dim: usize, dst: StridedMut, a: Strided, b: Strided) -> Result<()> {
        shape::concat(&self.ex, dim, dst, a, b)
    }
    fn repeat(&mut self, dst: StridedMut, a: Strided) -> Result<()> {
        shape::repeat(&self.ex, dst, a)
    }
    fn flash_attn(&mut self, p: SoftMax, dst: StridedMut, qkv: [Strided; 3], extra: Extra<Strided>) -> Result<()> {
        attention::flash_attn(&self.ex, p, dst, qkv, extra)
    }
    fn repeat_back(&mut self, dst: StridedMut, a: Strided) -> Result<()> {
        back::repeat_back(&self.ex, dst, a)
    }
    fn unary_back(&mut self, op: UnaryOp, dst: StridedMut, x: Strided, g: Strided) -> Result<()> {
        back::unary_back(&self.ex, op, dst, x, g)
    }
    fn get_rows_back(&mut self, dst: StridedMut, g: Strided, index: Strided) -> Result<()> {
        back::get_rows_back(&self.ex, dst, g, index)
    }
    fn view_back(&mut self, nb: [usize; 4], offset: usize, dst: StridedMut, g: Strided) -> Result<()> {
        back::view_back(&self.ex, nb, offset, dst, g)
    }
    fn rms_norm_back(&mut self, eps: f32, dst: StridedMut, x: Strided, g: Strided) -> Result<()> {
        back::rms_norm_back(&self.ex, eps, dst, x, g)
    }
    fn adamw_moment(&mut self, square: bool, dst: StridedMut, m: Strided, g: Strided, h: Strided) -> Result<()> {
        back::adamw_moment(&self.ex, square, dst, m, g, h)
    }
    fn adamw_update(&mut self, dst: StridedMut, pmv: [Strided; 3], h: Strided) -> Result<()> {
        back::adamw_update(&self.ex, dst, pmv, h)
    }
}
