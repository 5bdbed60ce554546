//! ggml's block-quantized formats, bit-exact.
//!
//! A quantized row is a run of blocks; each block stores
//! [`DType::block_size`] values in [`DType::type_size`] bytes. The block
//! structs in this module ([`BlockQ4_0`] … [`BlockQ8_K`], [`BlockIQ4_NL`] …
//! [`BlockTQ2_0`]) have ggml's exact byte layout, documented on each struct.
//!
//! - [`dequantize_row`] turns the bytes of a row (any of the 24 block types, or
//!   F32/F16/BF16/F64) into f32. It is bit-identical to ggml's `dequantize_row_*`
//!   and to gguf-py's `gguf.quants.dequantize`, and accepts unaligned bytes (a
//!   GGUF file with `general.alignment = 1` mapped in place).
//! - [`quantize_row`] turns f32 into the bytes of a row. Q4_0, Q4_1, Q5_0, Q5_1
//!   and Q8_0 are byte-identical to gguf-py's `gguf.quants.quantize` (which
//!   matches ggml's `quantize_row_*_ref`); Q8_1, Q8_K, the k-quants Q2_K …
//!   Q6_K, IQ4_NL, IQ4_XS, MXFP4, TQ1_0 and TQ2_0 follow ggml's reference
//!   quantizers (`quantize_row_*_ref`, without an importance matrix), step by
//!   step in the same f32 arithmetic. Rust never fuses a multiply and an add,
//!   so the bytes are those of ggml built without FP contraction (a baseline
//!   x86-64 build, or `-ffp-contract=off`); a build that fuses them
//!   (`-march=native` on FMA hardware, many aarch64 builds) gives slightly
//!   different k-quant bytes itself. The i-quants IQ1_S … IQ3_S have no
//!   quantizer here (ggml's need search tables built at start-up and, for
//!   IQ1_S, IQ2_XXS and IQ2_XS, an importance matrix): [`Error::Unsupported`].
//! - [`quantize_chunk`] is what llama.cpp's `llama-quantize` writes for a
//!   tensor without an importance matrix (ggml's `ggml_quantize_chunk`): the
//!   same as [`quantize_row`] except for IQ4_NL, whose file quantizer searches
//!   15 candidate scales per block where the reference one keeps the first.
//!
//! The layouts assume a little-endian host (as GGUF files and ggml do).
//!
//! Half-precision conversions follow the references exactly: an f16 is widened
//! bit for bit (a signaling NaN stays signaling, as numpy does), a scale is
//! narrowed to f16 with round-to-nearest-even, overflow to ±inf and NaN to
//! ggml's canonical quiet NaN, and bf16 rounds to nearest even with NaN kept
//! quiet (ggml's `ggml_compute_fp32_to_bf16`).

use std::mem::size_of;

use half::{bf16, f16};

use crate::dtype::DType;
use crate::error::{Error, Result};

#[allow(non_camel_case_types)]
mod blocks;
#[allow(non_camel_case_types)]
mod blocks_iq;
mod common;
pub mod dot;
mod iq;
#[rustfmt::skip] // generated, and kept compact
mod iq1s_grid;
mod iq4;
#[rustfmt::skip] // generated, and kept compact
mod iq_grids;
/// The i-quant tables, for the check of the CUDA kernels' copy of them.
#[cfg(all(test, feature = "cuda"))]
pub(crate) mod iq_tables {
    pub(crate) use super::iq1s_grid::IQ1S_GRID;
    pub(crate) use super::iq_grids::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS_IQ2XS};
}
mod k;
mod legacy;
pub mod prefetch;
mod search;
mod ternary;
#[cfg(test)]
mod tests;
pub mod tile;

pub use blocks::{
    BlockQ2_K, BlockQ3_K, BlockQ4_0, BlockQ4_1, BlockQ4_K, BlockQ5_0, BlockQ5_1, BlockQ5_K, BlockQ6_K, BlockQ8_0,
    BlockQ8_1, BlockQ8_K, K_SCALE_SIZE, QK, QK_K,
};
pub use blocks_iq::{
    BlockIQ1_M, BlockIQ1_S, BlockIQ2_S, BlockIQ2_XS, BlockIQ2_XXS, BlockIQ3_S, BlockIQ3_XXS, BlockIQ4_NL, BlockIQ4_XS,
    BlockMXFP4, BlockTQ1_0, BlockTQ2_0,
};
pub use common::{f16_to_f32, f32_to_f16};
use common::{Block, Quantize};

/// Checks `dst`/`src` lengths for a row of `n` values stored in `bytes` bytes.
fn check_row(op: &'static str, dtype: DType, n: usize, bytes: usize) -> Result<()> {
    if matches!(dtype, DType::I8 | DType::I16 | DType::I32 | DType::I64) {
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
/// address. Accepts the 24 block types and F32, F16, BF16 and F64 (rounded
/// to nearest); the integer types are [`Error::Unsupported`], wrong lengths
/// [`Error::Shape`]. Any bytes are accepted: NaN or infinite scales give NaN
/// or infinite values, never an error.
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
        DType::F64 => {
            for (y, b) in dst.iter_mut().zip(src.chunks_exact(8)) {
                *y = f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f32;
            }
        }
        DType::IQ4_NL => dequantize_blocks::<BlockIQ4_NL>(src, dst),
        DType::IQ4_XS => dequantize_blocks::<BlockIQ4_XS>(src, dst),
        DType::MXFP4 => dequantize_blocks::<BlockMXFP4>(src, dst),
        DType::IQ1_S => dequantize_blocks::<BlockIQ1_S>(src, dst),
        DType::IQ1_M => dequantize_blocks::<BlockIQ1_M>(src, dst),
        DType::IQ2_XXS => dequantize_blocks::<BlockIQ2_XXS>(src, dst),
        DType::IQ2_XS => dequantize_blocks::<BlockIQ2_XS>(src, dst),
        DType::IQ2_S => dequantize_blocks::<BlockIQ2_S>(src, dst),
        DType::IQ3_XXS => dequantize_blocks::<BlockIQ3_XXS>(src, dst),
        DType::IQ3_S => dequantize_blocks::<BlockIQ3_S>(src, dst),
        DType::TQ1_0 => dequantize_blocks::<BlockTQ1_0>(src, dst),
        DType::TQ2_0 => dequantize_blocks::<BlockTQ2_0>(src, dst),
        DType::I8 | DType::I16 | DType::I32 | DType::I64 => {
            return Err(Error::Unsupported { op: "dequantize_row", dtype });
        }
    }
    Ok(())
}

/// Converts `src.len()` f32 values into one row of `dtype` bytes.
///
/// `dst.len()` must be `dtype.row_size(src.len())`; `dst` may start at any
/// address. Accepts the block types with a quantizer (ggml's reference
/// quantizers: Q4_0 … Q8_K, IQ4_NL, IQ4_XS, MXFP4, TQ1_0, TQ2_0) and F32,
/// F16 (round to nearest even), BF16 (ggml's `ggml_compute_fp32_to_bf16`) and
/// F64 (exact); the integer types and the i-quants IQ1_S … IQ3_S (see
/// [`has_quantizer`]) are [`Error::Unsupported`], wrong lengths [`Error::Shape`].
pub fn quantize_row(dtype: DType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    check_row("quantize_row", dtype, src.len(), dst.len())?;
    if !has_quantizer(dtype) {
        return Err(Error::Unsupported { op: "quantize_row", dtype });
    }
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
        DType::F64 => {
            for (b, x) in dst.chunks_exact_mut(8).zip(src) {
                b.copy_from_slice(&f64::from(*x).to_le_bytes());
            }
        }
        DType::IQ4_NL => quantize_blocks::<BlockIQ4_NL>(src, dst),
        DType::IQ4_XS => quantize_blocks::<BlockIQ4_XS>(src, dst),
        DType::MXFP4 => quantize_blocks::<BlockMXFP4>(src, dst),
        DType::TQ1_0 => quantize_blocks::<BlockTQ1_0>(src, dst),
        DType::TQ2_0 => quantize_blocks::<BlockTQ2_0>(src, dst),
        DType::IQ1_S
        | DType::IQ1_M
        | DType::IQ2_XXS
        | DType::IQ2_XS
        | DType::IQ2_S
        | DType::IQ3_XXS
        | DType::IQ3_S
        | DType::I8
        | DType::I16
        | DType::I32
        | DType::I64 => return Err(Error::Unsupported { op: "quantize_row", dtype }),
    }
    Ok(())
}

/// Whether [`quantize_row`] (and so `cpy`/`cont` into the type, and
/// [`quantize_chunk`]) can produce `dtype`: every float and block type but the
/// integer types and the i-quants IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
/// IQ3_XXS and IQ3_S, whose ggml quantizers search grids with tables built at
/// start-up and (IQ1_S, IQ2_XXS, IQ2_XS) require an importance matrix.
pub const fn has_quantizer(dtype: DType) -> bool {
    !matches!(
        dtype,
        DType::I8
            | DType::I16
            | DType::I32
            | DType::I64
            | DType::IQ1_S
            | DType::IQ1_M
            | DType::IQ2_XXS
            | DType::IQ2_XS
            | DType::IQ2_S
            | DType::IQ3_XXS
            | DType::IQ3_S
    )
}

/// Quantizes `src` as llama.cpp's `llama-quantize` does without an importance
/// matrix (ggml's `ggml_quantize_chunk` with `imatrix = NULL`), into `dst`.
///
/// The same bytes as [`quantize_row`] for every type but IQ4_NL, where ggml's
/// file quantizer (`quantize_iq4_nl`) tries 15 scales per block and its
/// reference one (`quantize_row_iq4_nl_ref`, what ggml-cpu uses to convert
/// activations and for `cpy`) only one. Lengths and errors as for
/// [`quantize_row`].
pub fn quantize_chunk(dtype: DType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    if dtype != DType::IQ4_NL {
        return quantize_row(dtype, src, dst);
    }
    check_row("quantize_chunk", dtype, src.len(), dst.len())?;
    for (x, bytes) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(size_of::<BlockIQ4_NL>())) {
        bytes.copy_from_slice(bytemuck::bytes_of(&iq4::quantize_iq4_nl_searched(x)));
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
fn quantize_blocks<B: Quantize>(src: &[f32], dst: &mut [u8]) {
    for (x, bytes) in src.chunks_exact(B::VALUES).zip(dst.chunks_exact_mut(size_of::<B>())) {
        bytes.copy_from_slice(bytemuck::bytes_of(&B::quantize(x)));
    }
}
