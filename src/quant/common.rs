//! What the block kernels of this module share with its entry points: the
//! per-block traits ([`Block`], [`Quantize`]) and the half-precision
//! conversions of the scale fields.

use bytemuck::Pod;
use half::f16;

use crate::dtype::DType;

/// One block of a ggml block-quantized type: the per-block kernel behind
/// [`dequantize_row`](super::dequantize_row), which checks the lengths (a
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
}

/// A block type with a quantizer: the per-block kernel behind
/// [`quantize_row`](super::quantize_row).
pub(crate) trait Quantize: Block {
    /// Quantizes `src` with ggml's reference quantizer for this type.
    ///
    /// # Panics
    /// If `src.len() != Self::VALUES`.
    fn quantize(src: &[f32]) -> Self;
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
pub(super) fn h2f(h: f16) -> f32 {
    f16_to_f32(h.to_bits())
}

/// An f32 scale as an f16 field.
#[inline]
pub(super) fn f2h(x: f32) -> f16 {
    f16::from_bits(f32_to_f16(x))
}
