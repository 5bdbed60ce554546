//! Block types on the device, host side: the copies where either side is
//! block-quantized (`cont`/`dup`/`cpy`), and `set_rows` into block types.
//! The device code is `kernels/quant.cuh` (included by `copy.cu` and `rows.cu`).
//!
//! The paths mirror `src/backend/cpu/copy/quant.rs` so the bytes agree with
//! the CPU's: a same-type copy whose blocks line up moves blocks byte for byte
//! (never requantizing); any other copy from a block type dequantizes each
//! value exactly as the CPU does; a copy into Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 or
//! Q8_1 quantizes each destination block from its 32 values with the CPU's
//! reference quantizer, operation for operation. Quantizing into a k-quant is
//! [`Error::Unsupported`]: the CPU uses ggml's search quantizers there, and
//! ggml's own CUDA backend does not quantize to k-quants either.

use super::device::Device;
use super::launch::{flat, launch, per_row, Bound, BoundMut};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;

use super::kernels::KTensor;

/// True for the block types the device kernels can quantize into.
pub fn can_quantize(dtype: DType) -> bool {
    matches!(dtype, DType::Q4_0 | DType::Q4_1 | DType::Q5_0 | DType::Q5_1 | DType::Q8_0 | DType::Q8_1)
}

/// Storage units (blocks, or elements for plain types) of `l`.
fn units(l: &Layout) -> i64 {
    (0..4).map(|d| if l.dtype.is_quantized() { l.units(d) } else { l.ne[d] }).product()
}

/// As the CPU's `rows_packed`: rows are runs of whole packed blocks.
fn rows_packed(l: &Layout) -> bool {
    (!l.dtype.is_quantized() || l.block_dim == 0) && (l.nb[0] == l.dtype.type_size() || l.units0() <= 1)
}

/// The kernel view of an operand read row by row (`get_rows`' table,
/// `set_rows`' source): plain, or a block type blocked along dim 0.
pub(crate) fn rows_view<A>(op: &'static str, b: &Bound<A>) -> Result<KTensor> {
    if b.l.dtype.is_quantized() && b.l.block_dim != 0 {
        return Err(Error::NotContiguous { op, ne: b.l.ne, nb: b.l.nb, dtype: b.l.dtype });
    }
    b.q(op)
}

/// Copies `src` into `dst` (same element count, logical order) when either
/// side is a block type; plain-to-plain copies never come here.
pub(crate) fn copy(dev: &Device, dst: BoundMut, src: Bound) -> Result<()> {
    let n = dst.l.nelements();
    if n != src.l.nelements() {
        return Err(Error::internal(format!("copy of {:?} into {:?}", src.l.ne, dst.l.ne)));
    }
    if n == 0 || (dst.ptr == src.ptr && dst.l.same_places(&src.l)) {
        return Ok(());
    }
    let (dk, sk) = (dst.q("cpy")?, src.q("cpy")?);
    if dst.l.dtype == src.l.dtype {
        let same_units = dst.l.ne == src.l.ne && dst.l.block_dim == src.l.block_dim;
        let same_rows = dst.l.ne[0] == src.l.ne[0] && rows_packed(&dst.l) && rows_packed(&src.l);
        if same_units || same_rows {
            let nblocks = units(&dst.l);
            launch!(dev, "copy", "rg_copy_blocks", flat(nblocks); dst.ptr, dk, src.ptr, sk, nblocks);
            return Ok(());
        }
    }
    if dst.l.dtype.is_quantized() {
        if !can_quantize(dst.l.dtype) {
            return Err(Error::Unsupported { op: "cpy (quantizing on CUDA)", dtype: dst.l.dtype });
        }
        let nblocks = units(&dst.l);
        launch!(dev, "copy", "rg_copy_q", flat(nblocks); dst.ptr, dk, src.ptr, sk, nblocks);
    } else {
        launch!(dev, "copy", "rg_copy_dq", flat(n); dst.ptr, dk, src.ptr, sk, n);
    }
    Ok(())
}

/// `dst[:, idx[i1, i2, i3], i2, i3] = x[:, i1, i2, i3]`, converting (and for a
/// block-type `dst`, quantizing, or moving blocks of the same type). An index
/// outside `dst`'s rows, or two rows to one place, sets `*err_ptr` on the
/// device before anything is written, and then nothing is; `claims_ptr` is
/// `dst.nrows()` zeroed ints of this node's own.
pub(crate) fn set_rows(dev: &Device, dst: BoundMut, x: Bound, idx: Bound, err_ptr: u64, claims_ptr: u64) -> Result<()> {
    let (dk, xk, ik) = (rows_view("set_rows", &dst)?, rows_view("set_rows", &x)?, idx.p("set_rows")?);
    if x.l.ne[0] != dst.l.ne[0] {
        return Err(Error::internal(format!("set_rows of {:?} into {:?}", x.l.ne, dst.l.ne)));
    }
    let nrows = x.l.nrows();
    launch!(dev, "rows", "rg_set_rows_claim", flat(nrows); claims_ptr, dk, xk, idx.ptr, ik, err_ptr, nrows);
    if !dst.l.dtype.is_quantized() {
        launch!(dev, "rows", "rg_set_rows", per_row(nrows, 0)?;
            dst.ptr, dk, x.ptr, xk, idx.ptr, ik, err_ptr);
        return Ok(());
    }
    if x.l.dtype != dst.l.dtype && !can_quantize(dst.l.dtype) {
        return Err(Error::Unsupported { op: "set_rows (quantizing on CUDA)", dtype: dst.l.dtype });
    }
    let nblocks = nrows * (dst.l.ne[0] / dst.l.dtype.block_size() as i64);
    launch!(dev, "rows", "rg_set_rows_q", flat(nblocks);
        dst.ptr, dk, x.ptr, xk, idx.ptr, ik, err_ptr, nblocks);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant;
    use cudarc::driver::DevicePtrMut;

    #[test]
    fn writable_block_types() {
        let all = DType::QUANTIZED;
        let w: Vec<DType> = all.into_iter().filter(|&d| can_quantize(d)).collect();
        assert_eq!(w, all[..6]);
        assert!(!can_quantize(DType::F32));
    }

    #[test]
    fn rows_packed_matches_the_cpu_rule() {
        let l = Layout::contiguous(DType::Q4_0, [64, 3, 1, 1]).unwrap();
        assert!(rows_packed(&l));
        let t = Layout { ne: [3, 64, 1, 1], nb: [l.nb[1], l.nb[0], l.nb[2], l.nb[3]], block_dim: 1, ..l };
        assert!(!rows_packed(&t));
        assert_eq!(units(&t), 6);
        assert_eq!(units(&l), 6);
    }

    /// Test data with the awkward blocks: all zero, constant, one huge value,
    /// exact halves (ties for the rounding), then random values.
    fn awkward(n: usize) -> Vec<f32> {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        (0..n)
            .map(|i| match i / 32 {
                0 => 0.0,
                1 => 1.25,
                2 if i % 32 == 5 => 1e30,
                3 => (i % 32) as f32 * 0.5 - 8.0,
                _ => {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 6.0
                }
            })
            .collect()
    }

    /// The device quantizers give the CPU's bytes, field for field (Q8_1's sum
    /// included, which reading values back could not check).
    #[test]
    fn device_quantizers_are_byte_identical_to_the_cpu() {
        let b = match super::super::CudaBackend::new(0) {
            Ok(b) => b,
            Err(e) => {
                println!("SKIP: CUDA: {e}");
                return;
            }
        };
        let dev = &*b.dev;
        let n = 32 * 37;
        let x = awkward(n);
        for dtype in [DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q8_1] {
            let mut want = vec![0u8; dtype.row_size(n as i64).unwrap()];
            quant::quantize_row(dtype, &x, &mut want).unwrap();
            let mut xs = dev.stream.clone_htod(&x).unwrap();
            let mut out = dev.stream.alloc_zeros::<u8>(want.len()).unwrap();
            let xp = xs.device_ptr_mut(&dev.stream).0;
            let op = out.device_ptr_mut(&dev.stream).0;
            let src = Bound::new(xp, n * 4, 0, Layout::contiguous(DType::F32, [n as i64, 1, 1, 1]).unwrap()).unwrap();
            let dl = Layout::contiguous(dtype, [n as i64, 1, 1, 1]).unwrap();
            let dst = Bound::new(op, want.len(), 0, dl).unwrap();
            copy(dev, dst, src).unwrap();
            let got = dev.stream.clone_dtoh(&out).unwrap();
            let bs = dtype.type_size();
            for (k, (g, w)) in got.chunks(bs).zip(want.chunks(bs)).enumerate() {
                assert_eq!(g, w, "{dtype} block {k}");
            }
        }
    }
}
