//! ggml's block structs, byte for byte.
//!
//! Every struct is `#[repr(C)]` without padding, so its bytes are exactly the
//! bytes a GGUF file stores for one block (little-endian hosts). Field order
//! and sizes follow ggml's `ggml-common.h`; the sizes are checked at compile
//! time against [`DType::type_size`].
//!
//! Notation used below: `d` is a scale ("delta"), `m`/`dmin` a minimum; "f16"
//! is IEEE binary16 (ggml's `ggml_half`).

use std::mem::{align_of, size_of};

use bytemuck::{Pod, Zeroable};
use half::f16;

use crate::dtype::DType;

/// Values in a k-quant super-block.
pub const QK_K: usize = 256;
/// Bytes of the packed 6-bit scales and mins of Q4_K and Q5_K (and of Q3_K's 6-bit scales).
pub const K_SCALE_SIZE: usize = 12;
/// Values in a legacy (Q4_0 … Q8_1) block.
pub const QK: usize = 32;

/// Q4_0: 32 values `x = d * (q - 8)`, `q` a 4-bit unsigned quant.
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..2 | `d` | f16 scale |
/// | 2..18 | `qs` | byte `j` holds value `j` in its low nibble and value `j + 16` in its high nibble |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ4_0 {
    /// Scale.
    pub d: f16,
    /// Nibbles: low = values 0..16, high = values 16..32.
    pub qs: [u8; QK / 2],
}

/// Q4_1: 32 values `x = d * q + m`, `q` a 4-bit unsigned quant.
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..2 | `d` | f16 scale |
/// | 2..4 | `m` | f16 minimum (added) |
/// | 4..20 | `qs` | nibbles as in Q4_0 |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ4_1 {
    /// Scale.
    pub d: f16,
    /// Minimum.
    pub m: f16,
    /// Nibbles: low = values 0..16, high = values 16..32.
    pub qs: [u8; QK / 2],
}

/// Q5_0: 32 values `x = d * (q - 16)`, `q` a 5-bit unsigned quant.
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..2 | `d` | f16 scale |
/// | 2..6 | `qh` | little-endian u32; bit `i` is the fifth bit of value `i` |
/// | 6..22 | `qs` | low four bits, nibbles as in Q4_0 |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ5_0 {
    /// Scale.
    pub d: f16,
    /// Fifth bits, a little-endian u32 (bit i = value i).
    pub qh: [u8; 4],
    /// Low nibbles: low = values 0..16, high = values 16..32.
    pub qs: [u8; QK / 2],
}

/// Q5_1: 32 values `x = d * q + m`, `q` a 5-bit unsigned quant.
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..2 | `d` | f16 scale |
/// | 2..4 | `m` | f16 minimum |
/// | 4..8 | `qh` | fifth bits as in Q5_0 |
/// | 8..24 | `qs` | low four bits as in Q5_0 |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ5_1 {
    /// Scale.
    pub d: f16,
    /// Minimum.
    pub m: f16,
    /// Fifth bits, a little-endian u32 (bit i = value i).
    pub qh: [u8; 4],
    /// Low nibbles: low = values 0..16, high = values 16..32.
    pub qs: [u8; QK / 2],
}

/// Q8_0: 32 values `x = d * q`, `q` a signed byte.
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..2 | `d` | f16 scale |
/// | 2..34 | `qs` | one i8 per value, in order |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ8_0 {
    /// Scale.
    pub d: f16,
    /// Quants, in order.
    pub qs: [i8; QK],
}

/// Q8_1: Q8_0 plus `s = d * Σq` (f16), the dot-product partner of Q4_1/Q5_1.
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..2 | `d` | f16 scale |
/// | 2..4 | `s` | f16 of `d * sum(qs)` |
/// | 4..36 | `qs` | one i8 per value, in order |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ8_1 {
    /// Scale.
    pub d: f16,
    /// `d` times the sum of the quants.
    pub s: f16,
    /// Quants, in order.
    pub qs: [i8; QK],
}

/// Q2_K: 256 values in 16 groups of 16, `x = d*sc * q - dmin*mn`, `q` 2-bit.
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..16 | `scales` | group `g`: low nibble = scale `sc`, high nibble = min `mn` (4 bits each) |
/// | 16..80 | `qs` | two 128-value halves of 32 bytes; in half `h`, byte `l` bits `2k..2k+2` hold value `128h + 32k + l` |
/// | 80..82 | `d` | f16 super-scale of the scales |
/// | 82..84 | `dmin` | f16 super-scale of the mins |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ2_K {
    /// Per-group 4-bit scale (low nibble) and min (high nibble).
    pub scales: [u8; QK_K / 16],
    /// 2-bit quants, four per byte.
    pub qs: [u8; QK_K / 4],
    /// Super-block scale of the scales.
    pub d: f16,
    /// Super-block scale of the mins.
    pub dmin: f16,
}

/// Q3_K: 256 values in 16 groups of 16, `x = d*(sc - 32) * (q - 4)`, `q` 3-bit.
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..32 | `hmask` | third bit of the quants: bit `k` of byte `l` belongs to value `32k + l`; a SET bit means no offset, a CLEAR bit subtracts 4 |
/// | 32..96 | `qs` | low two bits, packed as in Q2_K |
/// | 96..108 | `scales` | 16 6-bit scales (stored +32): bytes 0..8 hold the low nibbles (groups 0..8 low, 8..16 high nibble); bytes 8..12 hold the top two bits, group `g` at byte `8 + g%4`, bits `2*(g/4)` |
/// | 108..110 | `d` | f16 super-scale |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ3_K {
    /// High (third) bits.
    pub hmask: [u8; QK_K / 8],
    /// Low two bits, four per byte.
    pub qs: [u8; QK_K / 4],
    /// Packed 6-bit scales.
    pub scales: [u8; K_SCALE_SIZE],
    /// Super-block scale.
    pub d: f16,
}

/// Q4_K: 256 values in 8 groups of 32, `x = d*sc * q - dmin*mn`, `q` 4-bit.
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..2 | `d` | f16 super-scale of the scales |
/// | 2..4 | `dmin` | f16 super-scale of the mins |
/// | 4..16 | `scales` | 8 6-bit scales and 8 6-bit mins: for groups `g < 4`, `sc = b[g] & 63`, `mn = b[g+4] & 63`; for `g ≥ 4`, `sc = b[g+4] & 15 | (b[g-4] >> 6) << 4`, `mn = b[g+4] >> 4 | (b[g] >> 6) << 4` |
/// | 16..144 | `qs` | four 64-value chunks of 32 bytes: byte `l` low nibble = value `64c + l`, high nibble = value `64c + 32 + l` |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ4_K {
    /// Super-block scale of the scales.
    pub d: f16,
    /// Super-block scale of the mins.
    pub dmin: f16,
    /// Packed 6-bit scales and mins.
    pub scales: [u8; K_SCALE_SIZE],
    /// 4-bit quants.
    pub qs: [u8; QK_K / 2],
}

/// Q5_K: Q4_K with a fifth bit per quant, `q` 5-bit.
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..2 | `d` | f16 super-scale of the scales |
/// | 2..4 | `dmin` | f16 super-scale of the mins |
/// | 4..16 | `scales` | packed as in Q4_K |
/// | 16..48 | `qh` | fifth bits: bit `k` of byte `l` belongs to value `32k + l` |
/// | 48..176 | `qs` | low four bits, packed as in Q4_K |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ5_K {
    /// Super-block scale of the scales.
    pub d: f16,
    /// Super-block scale of the mins.
    pub dmin: f16,
    /// Packed 6-bit scales and mins.
    pub scales: [u8; K_SCALE_SIZE],
    /// Fifth bits.
    pub qh: [u8; QK_K / 8],
    /// Low four bits.
    pub qs: [u8; QK_K / 2],
}

/// Q6_K: 256 values in 16 groups of 16, `x = d*sc * (q - 32)`, `q` 6-bit, `sc` an i8.
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..128 | `ql` | low four bits: two 128-value halves of 64 bytes; in half `h`, byte `l < 32` low nibble = value `128h + l`, high nibble = value `128h + 64 + l`; byte `32 + l` low = `128h + 32 + l`, high = `128h + 96 + l` |
/// | 128..192 | `qh` | top two bits: in half `h`, byte `l` bits `2k..2k+2` belong to value `128h + 32k + l` |
/// | 192..208 | `scales` | i8 scale per group of 16 |
/// | 208..210 | `d` | f16 super-scale |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ6_K {
    /// Low four bits.
    pub ql: [u8; QK_K / 2],
    /// Top two bits.
    pub qh: [u8; QK_K / 4],
    /// Per-group signed scales.
    pub scales: [i8; QK_K / 16],
    /// Super-block scale.
    pub d: f16,
}

/// Q8_K: 256 values `x = d * q` with an f32 scale and per-16 sums, the dot-product
/// partner of the k-quants (never stored in model files).
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..4 | `d` | f32 scale |
/// | 4..260 | `qs` | one i8 per value, in order |
/// | 260..292 | `bsums` | i16 sum of each group of 16 quants |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ8_K {
    /// Scale (f32, unlike the other types).
    pub d: f32,
    /// Quants, in order.
    pub qs: [i8; QK_K],
    /// Sums of the quants in groups of 16.
    pub bsums: [i16; QK_K / 16],
}

macro_rules! check_layout {
    ($($t:ty => $d:expr),* $(,)?) => {$(
        const _: () = assert!(size_of::<$t>() == $d.type_size());
        const _: () = assert!(align_of::<$t>() == $d.align());
    )*};
}

check_layout! {
    BlockQ4_0 => DType::Q4_0,
    BlockQ4_1 => DType::Q4_1,
    BlockQ5_0 => DType::Q5_0,
    BlockQ5_1 => DType::Q5_1,
    BlockQ8_0 => DType::Q8_0,
    BlockQ8_1 => DType::Q8_1,
    BlockQ2_K => DType::Q2_K,
    BlockQ3_K => DType::Q3_K,
    BlockQ4_K => DType::Q4_K,
    BlockQ5_K => DType::Q5_K,
    BlockQ6_K => DType::Q6_K,
    BlockQ8_K => DType::Q8_K,
}

// ggml's own byte counts, independent of the DType table.
const _: () = assert!(size_of::<BlockQ4_0>() == 18);
const _: () = assert!(size_of::<BlockQ4_1>() == 20);
const _: () = assert!(size_of::<BlockQ5_0>() == 22);
const _: () = assert!(size_of::<BlockQ5_1>() == 24);
const _: () = assert!(size_of::<BlockQ8_0>() == 34);
const _: () = assert!(size_of::<BlockQ8_1>() == 36);
const _: () = assert!(size_of::<BlockQ2_K>() == 2 * 2 + QK_K / 16 + QK_K / 4);
const _: () = assert!(size_of::<BlockQ3_K>() == 2 + QK_K / 4 + QK_K / 8 + 12);
const _: () = assert!(size_of::<BlockQ4_K>() == 2 * 2 + K_SCALE_SIZE + QK_K / 2);
const _: () = assert!(size_of::<BlockQ5_K>() == 2 * 2 + K_SCALE_SIZE + QK_K / 2 + QK_K / 8);
const _: () = assert!(size_of::<BlockQ6_K>() == 2 + QK_K / 16 + 3 * QK_K / 4);
const _: () = assert!(size_of::<BlockQ8_K>() == 4 + QK_K + QK_K / 16 * 2);
