//! Copy kernels: `cont`, `dup`, `cpy` and reading tensors out. Values move in
//! logical order (`ne[0]` fastest); plain types convert in [`plain`], and a
//! block-quantized side goes through f32 in [`quant`].

mod halves;
mod plain;
mod quant;

pub(crate) use halves::to_f32 as f16_to_f32;

use super::mem::{Exec, Strided, StridedMut};
use crate::error::Result;

/// Copies every element of `src` into `dst` (same element count).
pub(crate) fn copy(ex: &Exec, op: &'static str, dst: StridedMut, src: Strided) -> Result<()> {
    if dst.l.dtype.is_quantized() || src.l.dtype.is_quantized() {
        quant::copy(ex, op, dst, src)
    } else {
        plain::copy(ex, op, dst, src)
    }
}

/// Reads any float tensor into a `Vec<f32>` in logical order.
pub(crate) fn read_f32(src: Strided) -> Result<Vec<f32>> {
    let mut out = vec![0f32; src.l.nelements() as usize];
    let dst = StridedMut::of_f32(&mut out, src.l.ne)?;
    copy(&Exec::ONE, "read", dst, src)?;
    Ok(out)
}
