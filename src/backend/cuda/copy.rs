//! Copies and conversions on the device: `cont`/`dup`/`cpy` between any
//! layouts and types (the packed, vectorized, transposing and block-type
//! paths), and any tensor as packed F32 rows (for `mul_mat` and read-back).

use cudarc::driver::{CudaSlice, DevicePtrMut};

use super::device::Device;
use super::launch::{cuda_err, flat, launch, Bound, BoundMut};
use super::{fast, quant};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;

/// `src` as packed F32 rows in a new device buffer (dequantized/converted;
/// any layout, any of the 12 block types blocked along any dim).
pub(crate) fn to_f32_rows(dev: &Device, src: &Bound) -> Result<(CudaSlice<f32>, Layout)> {
    // SAFETY: `to_f32_into` writes every element before the caller reads any.
    let mut out = unsafe { dev.stream.alloc::<f32>(src.l.nelements().max(1) as usize) }.map_err(cuda_err("alloc"))?;
    let (p, _sync) = out.device_ptr_mut(&dev.stream);
    let l = to_f32_into(dev, p, src)?;
    drop(_sync);
    Ok((out, l))
}

/// `src` as packed F32 rows at `dst` (room for every element of `src`); returns their layout.
pub(crate) fn to_f32_into(dev: &Device, dst: u64, src: &Bound) -> Result<Layout> {
    launch!(dev, "rows", "rg_to_f32", flat(src.l.nelements()); dst, src.ptr, src.q("to_f32")?);
    Layout::contiguous(DType::F32, src.l.ne)
}

/// `cont`/`dup`/`cpy`: element `i` of `dst` in logical order takes element `i`
/// of `src` (block types through [`quant::copy`]).
pub(crate) fn copy(dev: &Device, dst: BoundMut, src: Bound) -> Result<()> {
    let n = dst.l.nelements();
    if n != src.l.nelements() {
        return Err(Error::internal(format!("copy of {:?} into {:?}", src.l.ne, dst.l.ne)));
    }
    if dst.l.dtype == src.l.dtype && dst.l.is_contiguous() && src.l.is_contiguous() {
        return fast::copy_packed(dev, &dst, &src);
    }
    if fast::convert_packed(dev, &dst, &src)? {
        return Ok(());
    }
    if dst.l.dtype.is_quantized() || src.l.dtype.is_quantized() {
        return quant::copy(dev, dst, src);
    }
    if let Some(k) = fast::transpose_dim(&dst.l, &src.l) {
        return fast::copy_transposed(dev, &dst, &src, k);
    }
    launch!(dev, "copy", "rg_copy", flat(n); dst.ptr, dst.p("cpy")?, src.ptr, src.p("cpy")?, n);
    Ok(())
}
