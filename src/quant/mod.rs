//! ggml's block-quantized formats, bit-exact.
//!
//! A quantized row is a run of blocks; each block stores
//! [`DType::block_size`] values in [`DType::type_size`] bytes. The block
//! structs in this module ([`BlockQ4_0`] … [`BlockQ8_K`]) have ggml's exact byte
//! layout, documented on each struct.
//!
//! - [`dequantize_row`] turns the bytes of a row (any of the 12 block types, or
//!   F32/F16/BF16) into f32. It is bit-identical to ggml's `dequantize_row_*`
//!   and to gguf-py's `gguf.quants.dequantize`, and accepts unaligned bytes (a
//!   GGUF file with `general.alignment = 1` mapped in place).
//! - [`quantize_row`] turns f32 into the bytes of a row. Q4_0, Q4_1, Q5_0, Q5_1
//!   and Q8_0 are byte-identical to gguf-py's `gguf.quants.quantize` (which
//!   matches ggml's `quantize_row_*_ref`); Q8_1, Q8_K and the k-quants Q2_K …
//!   Q6_K follow ggml's reference quantizers (`quantize_row_*_ref`, without an
//!   importance matrix), step by step in the same f32 arithmetic. Rust never
//!   fuses a multiply and an add, so the bytes are those of ggml built without
//!   FP contraction (a baseline x86-64 build, or `-ffp-contract=off`); a build
//!   that fuses them (`-march=native` on FMA hardware, many aarch64 builds)
//!   gives slightly different k-quant bytes itself.
//!
//! The layouts assume a little-endian host (as GGUF files and ggml do).
//!
//! Half-precision conversions follow the references exactly: an f16 is widened
//! bit for bit (a signaling NaN stays signaling, as numpy does), a scale is
//! narrowed to f16 with round-to-nearest-even, overflow to ±inf and NaN to
//! ggml's canonical quiet NaN, and bf16 rounds to nearest even with NaN kept
//! quiet (ggml's `ggml_compute_fp32_to_bf16`).

use std::mem::size_of;

use bytemuck::Pod;
use half::{bf16, f16};

use crate::dtype::DType;
use crate::error::{Error, Result};

#[allow(non_camel_case_types)]
mod blocks;
pub mod dot;
mod k;
mod legacy;
mod search;
#[cfg(test)]
mod tests;
pub mod tile;

pub use blocks::{
    BlockQ2_K, BlockQ3_K, BlockQ4_0, BlockQ4_1, BlockQ4_K, BlockQ5_0, BlockQ5_1, BlockQ5_K, BlockQ6_K, BlockQ8_0,
    BlockQ8_1, BlockQ8_K, K_SCALE_SIZE, QK, QK_K,
};

/// One block of a ggml block-quantized type: the per-block kernels behind
/// [`quantize_row`] and [`dequantize_row`], which check the lengths (a
/// crate-internal interface: its methods assert them).
pub(crate) trait Block: Pod {
    /// The element type this block belongs to (checked against the type
    /// table by the unit tests).
    #[cfg_attr(not(test), allow(dead_code))]
    const DTYPE: DType;
    /// Values per block (`DTYPE.block_size()`).
    const VALUES: usize;

    /// Writes the block's values into `dst`.
    ///
    /// # Panics
    /// If `dst.len() != Self::VALUES`.
    fn dequantize(&self, dst: &mut [f32]);

    /// Quantizes `src` with ggml's reference quantizer for this type.
    ///
    /// # Panics
    /// If `src.len() != Self::VALUES`.
    fn quantize(src: &[f32]) -> Self;
}

/// Checks `dst`/`src` lengths for a row of `n` values stored in `bytes` bytes.
fn check_row(op: &'static str, dtype: DType, n: usize, bytes: usize) -> Result<()> {
    if matches!(dtype, DType::I8 | DType::I16 | DType::I32) {
        return Err(Error::Unsupported { op, dtype });
    }
    let bs = dtype.block_size();
    if !n.is_multiple_of(bs) {
        return Err(Error::shape(op, format!("{n} values of {dtype} are not a whole number of {bs}-value blocks")));
    }
    match dtype.row_size(n as i64) {
        Some(want) if want == bytes => Ok(()),
        Some(want) => {
            Err(Error::shape(op, format!("{n} values of {dtype} take {want} bytes, but the byte slice holds {bytes}")))
        }
        None => Err(Error::shape(op, format!("a row of {n} values of {dtype} is too large"))),
    }
}

/// Converts one row of `dtype` bytes into `dst.len()` f32 values.
///
/// `src.len()` must be `dtype.row_size(dst.len())`; `src` may start at any
/// address. Accepts the 12 block types and F32, F16 and BF16; the integer
/// types are [`Error::Unsupported`], wrong lengths [`Error::Shape`].
pub fn dequantize_row(dtype: DType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    check_row("dequantize_row", dtype, dst.len(), src.len())?;
    match dtype {
        DType::F32 => {
            for (y, b) in dst.iter_mut().zip(src.chunks_exact(4)) {
                *y = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        DType::F16 => {
            for (y, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *y = f16_to_f32(u16::from_le_bytes([b[0], b[1]]));
            }
        }
        DType::BF16 => {
            for (y, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *y = f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16);
            }
        }
        DType::Q4_0 => dequantize_blocks::<BlockQ4_0>(src, dst),
        DType::Q4_1 => dequantize_blocks::<BlockQ4_1>(src, dst),
        DType::Q5_0 => dequantize_blocks::<BlockQ5_0>(src, dst),
        DType::Q5_1 => dequantize_blocks::<BlockQ5_1>(src, dst),
        DType::Q8_0 => dequantize_blocks::<BlockQ8_0>(src, dst),
        DType::Q8_1 => dequantize_blocks::<BlockQ8_1>(src, dst),
        DType::Q2_K => dequantize_blocks::<BlockQ2_K>(src, dst),
        DType::Q3_K => dequantize_blocks::<BlockQ3_K>(src, dst),
        DType::Q4_K => dequantize_blocks::<BlockQ4_K>(src, dst),
        DType::Q5_K => dequantize_blocks::<BlockQ5_K>(src, dst),
        DType::Q6_K => dequantize_blocks::<BlockQ6_K>(src, dst),
        DType::Q8_K => dequantize_blocks::<BlockQ8_K>(src, dst),
        DType::I8 | DType::I16 | DType::I32 => unreachable!("refused by check_row"),
    }
    Ok(())
}

/// Converts `src.len()` f32 values into one row of `dtype` bytes.
///
/// `dst.len()` must be `dtype.row_size(src.len())`; `dst` may start at any
/// address. Accepts the 12 block types (ggml's reference quantizers) and F32,
/// F16 (round to nearest even) and BF16 (ggml's `ggml_compute_fp32_to_bf16`);
/// the integer types are [`Error::Unsupported`], wrong lengths [`Error::Shape`].
pub fn quantize_row(dtype: DType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    check_row("quantize_row", dtype, src.len(), dst.len())?;
    match dtype {
        DType::F32 => {
            for (b, x) in dst.chunks_exact_mut(4).zip(src) {
                b.copy_from_slice(&x.to_le_bytes());
            }
        }
        DType::F16 => {
            for (b, x) in dst.chunks_exact_mut(2).zip(src) {
                b.copy_from_slice(&f16::from_f32(*x).to_bits().to_le_bytes());
            }
        }
        DType::BF16 => {
            for (b, x) in dst.chunks_exact_mut(2).zip(src) {
                b.copy_from_slice(&bf16::from_f32(*x).to_bits().to_le_bytes());
            }
        }
        DType::Q4_0 => quantize_blocks::<BlockQ4_0>(src, dst),
        DType::Q4_1 => quantize_blocks::<BlockQ4_1>(src, dst),
        DType::Q5_0 => quantize_blocks::<BlockQ5_0>(src, dst),
        DType::Q5_1 => quantize_blocks::<BlockQ5_1>(src, dst),
        DType::Q8_0 => quantize_blocks::<BlockQ8_0>(src, dst),
        DType::Q8_1 => quantize_blocks::<BlockQ8_1>(src, dst),
        DType::Q2_K => quantize_blocks::<BlockQ2_K>(src, dst),
        DType::Q3_K => quantize_blocks::<BlockQ3_K>(src, dst),
        DType::Q4_K => quantize_blocks::<BlockQ4_K>(src, dst),
        DType::Q5_K => quantize_blocks::<BlockQ5_K>(src, dst),
        DType::Q6_K => quantize_blocks::<BlockQ6_K>(src, dst),
        DType::Q8_K => quantize_blocks::<BlockQ8_K>(src, dst),
        DType::I8 | DType::I16 | DType::I32 => unreachable!("refused by check_row"),
    }
    Ok(())
}

/// Dequantizes whole blocks; lengths were checked by the caller.
fn dequantize_blocks<B: Block>(src: &[u8], dst: &mut [f32]) {
    let outs = dst.chunks_exact_mut(B::VALUES);
    match bytemuck::try_cast_slice::<u8, B>(src) {
        Ok(blocks) => blocks.iter().zip(outs).for_each(|(b, y)| b.dequantize(y)),
        // unaligned bytes: copy each block out before reading it
        Err(_) => src
            .chunks_exact(size_of::<B>())
            .zip(outs)
            .for_each(|(bytes, y)| bytemuck::pod_read_unaligned::<B>(bytes).dequantize(y)),
    }
}

/// Quantizes whole blocks into bytes at any alignment; lengths were checked by the caller.
fn quantize_blocks<B: Block>(src: &[f32], dst: &mut [u8]) {
    for (x, bytes) in src.chunks_exact(B::VALUES).zip(dst.chunks_exact_mut(size_of::<B>())) {
        bytes.copy_from_slice(bytemuck::bytes_of(&B::quantize(x)));
    }
}

/// Widens an f16 (raw bits) to f32 exactly, keeping a NaN's payload and its
/// signaling bit (numpy's conversion, which gguf-py uses).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exp = u32::from(h >> 10) & 0x1f;
    let man = u32::from(h & 0x3ff);
    let bits = match exp {
        0 if man == 0 => sign,
        0 => {
            // subnormal: value = man * 2^-24; normalize the mantissa
            let shift = man.leading_zeros() - 21; // brings the top set bit to bit 10
            let man = (man << shift) & 0x3ff;
            let exp = 127 - 15 + 1 - shift;
            sign | (exp << 23) | (man << 13)
        }
        0x1f => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// Narrows an f32 to f16 (raw bits) as ggml's `GGML_FP32_TO_FP16` does: round to
/// nearest even, overflow to ±inf, any NaN to the quiet NaN `0x7e00` (with its sign).
pub fn f32_to_f16(x: f32) -> u16 {
    if x.is_nan() {
        return ((x.to_bits() >> 16) as u16 & 0x8000) | 0x7e00;
    }
    f16::from_f32(x).to_bits()
}

/// An f16 scale field as f32.
#[inline]
fn h2f(h: f16) -> f32 {
    f16_to_f32(h.to_bits())
}

/// An f32 scale as an f16 field.
#[inline]
fn f2h(x: f32) -> f16 {
    f16::from_bits(f32_to_f16(x))
}
