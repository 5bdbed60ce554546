//! The block structs of ggml's non-linear (IQ4_NL, IQ4_XS), microscaling
//! (MXFP4), i-quant (IQ1_S … IQ3_S) and ternary (TQ1_0, TQ2_0) formats, byte
//! for byte as `ggml-common.h` lays them out (little-endian hosts; sizes and
//! alignments are checked at compile time against [`DType`]).
//!
//! The grids and tables the indices point into are in `iq_grids.rs` and
//! `iq1s_grid.rs`. "Value `k`" below counts from 0 within the block.

use std::mem::{align_of, size_of};

use bytemuck::{Pod, Zeroable};
use half::f16;

use super::blocks::{QK, QK_K};
use crate::dtype::DType;

/// IQ4_NL: 32 values `x = d * KVALUES_IQ4NL[i]`, `i` a 4-bit index.
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..2 | `d` | f16 scale |
/// | 2..18 | `qs` | byte `j`: index of value `j` (low nibble) and of value `j + 16` (high nibble) |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockIQ4_NL {
    /// Scale.
    pub d: f16,
    /// Indices: low nibbles = values 0..16, high = 16..32.
    pub qs: [u8; QK / 2],
}

/// IQ4_XS: 256 values in 8 groups of 32, `x = d * (ls - 32) * KVALUES_IQ4NL[i]`,
/// `ls` a 6-bit group scale.
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..2 | `d` | f16 super-scale |
/// | 2..4 | `scales_h` | u16: bits `2g..2g+2` are the top two bits of group `g`'s scale |
/// | 4..8 | `scales_l` | byte `g/2`: low four bits of group `g`'s scale (low nibble for even `g`) |
/// | 8..136 | `qs` | group `g`'s 16 bytes at `16g`, packed as IQ4_NL's |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockIQ4_XS {
    /// Super-block scale.
    pub d: f16,
    /// Top two bits of the 8 group scales.
    pub scales_h: u16,
    /// Low four bits of the 8 group scales.
    pub scales_l: [u8; QK_K / 64],
    /// Indices.
    pub qs: [u8; QK_K / 2],
}

/// MXFP4: 32 values `x = 2^(e - 128) * KVALUES_MXFP4[i]` (the table holds the E2M1
/// values doubled, so this is `2^(e - 127)` times the E2M1 value).
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0 | `e` | E8M0 exponent (no sign, no mantissa); 0 and 1 give subnormal f32 scales |
/// | 1..17 | `qs` | E2M1 codes (sign bit 3), packed as IQ4_NL's indices |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockMXFP4 {
    /// Shared exponent.
    pub e: u8,
    /// Codes: low nibbles = values 0..16, high = 16..32.
    pub qs: [u8; QK / 2],
}

/// IQ1_S: 256 values in 8 groups of 32, each 4 grid points of 8 values:
/// `x = d * (2s + 1) * (g + δ)`, `g` in {-1, 0, 1} from `IQ1S_GRID`, `δ = ±1/8`.
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..2 | `d` | f16 scale |
/// | 2..34 | `qs` | low 8 bits of the grid index of point `4g + l` at byte `4g + l` |
/// | 34..50 | `qh` | u16 per group: bits `3l..3l+3` are the top bits of point `l`'s index, bits 12..15 the 3-bit scale `s`, bit 15 set makes `δ = -1/8` |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockIQ1_S {
    /// Scale.
    pub d: f16,
    /// Low index bits.
    pub qs: [u8; QK_K / 8],
    /// High index bits, group scales and shift signs.
    pub qh: [u16; QK_K / 32],
}

/// IQ1_M: IQ1_S's grid with a 3-bit scale per 16 values and a shift sign per 8;
/// the f16 super-scale is split over the top nibbles of the four scale words.
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..32 | `qs` | low 8 bits of the grid index of point `k` at byte `k` |
/// | 32..48 | `qh` | byte `k/2`, nibble `k%2`: bits 0..3 the top index bits of point `k`, bit 3 set makes its `δ = -1/8` |
/// | 48..56 | `scales` | four LE u16 words: word `w` bits `6h + 3i..` (h, i in 0..2) the scale of 16-value run `4w + 2h + i`; bits 12..16 of word `w` are bits `4w..4w+4` of the f16 `d` |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockIQ1_M {
    /// Low index bits.
    pub qs: [u8; QK_K / 8],
    /// High index bits and shift signs.
    pub qh: [u8; QK_K / 16],
    /// 3-bit scales and the pieces of the f16 super-scale.
    pub scales: [u8; QK_K / 32],
}

/// IQ2_XXS: 256 values in 8 groups of 32, each 4 grid points of 8 magnitudes
/// with one of 128 even-parity sign patterns: `x = d * (0.5 + s) / 4 * ±g`.
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..2 | `d` | f16 scale |
/// | 2..66 | `qs` | per group two LE u32: the first holds the 4 `IQ2XXS_GRID` indices (a byte each), the second 4 × 7 sign bits (`KSIGNS_IQ2XS` indices) and the 4-bit scale `s` in bits 28..32 |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockIQ2_XXS {
    /// Scale.
    pub d: f16,
    /// Grid indices, signs and scales, as u16 words.
    pub qs: [u16; QK_K / 8],
}

/// IQ2_XS: 256 values, 32 grid points of 8 magnitudes, each a u16 of a 9-bit
/// `IQ2XS_GRID` index and a 7-bit sign pattern; a 4-bit scale per 16 values:
/// `x = d * (0.5 + s) / 4 * ±g`.
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..2 | `d` | f16 scale |
/// | 2..66 | `qs` | u16 per point: bits 0..9 the grid index, bits 9..16 the `KSIGNS_IQ2XS` index |
/// | 66..74 | `scales` | byte `g`: the scale of values `32g..32g+16` (low nibble) and `32g+16..32g+32` (high) |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockIQ2_XS {
    /// Scale.
    pub d: f16,
    /// Grid indices and sign patterns.
    pub qs: [u16; QK_K / 8],
    /// 4-bit scales.
    pub scales: [u8; QK_K / 32],
}

/// IQ2_S: 256 values, 32 points of a 1024-point grid with explicit sign bits:
/// `x = d * (0.5 + s) / 4 * ±g`.
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..2 | `d` | f16 scale |
/// | 2..34 | `qs[0..32]` | low 8 bits of point `k`'s `IQ2S_GRID` index |
/// | 34..66 | `qs[32..64]` | sign bits of point `k` (bit `j` set negates value `j`) |
/// | 66..74 | `qh` | byte `g`: bits `2l..2l+2` are the top index bits of point `4g + l` |
/// | 74..82 | `scales` | byte `g`: 4-bit scales of the two 16-value halves of group `g` |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockIQ2_S {
    /// Scale.
    pub d: f16,
    /// Low index bits, then the sign bytes.
    pub qs: [u8; QK_K / 4],
    /// High index bits.
    pub qh: [u8; QK_K / 32],
    /// 4-bit scales.
    pub scales: [u8; QK_K / 32],
}

/// IQ3_XXS: 256 values in 8 groups of 32, each 8 grid points of 4 magnitudes
/// with 4 even-parity sign patterns: `x = d * (0.5 + s) / 2 * ±g`.
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..2 | `d` | f16 scale |
/// | 2..66 | `qs[0..64]` | point `k`'s `IQ3XXS_GRID` index |
/// | 66..98 | `qs[64..96]` | per group a LE u32: 4 × 7 sign bits for its 4 runs of 8 values, the scale `s` in bits 28..32 |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockIQ3_XXS {
    /// Scale.
    pub d: f16,
    /// Grid indices, then signs and scales.
    pub qs: [u8; 3 * QK_K / 8],
}

/// IQ3_S: 256 values, 64 points of a 512-point grid of 4 magnitudes, explicit
/// signs, a 4-bit scale per 32 values: `x = d * (1 + 2s) * ±g`.
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..2 | `d` | f16 scale |
/// | 2..66 | `qs` | low 8 bits of point `k`'s `IQ3S_GRID` index |
/// | 66..74 | `qh` | byte `g`, bit `i`: the ninth index bit of point `8g + i` |
/// | 74..106 | `signs` | bit `j` of byte `b` negates value `8b + j` |
/// | 106..110 | `scales` | byte `p`: scale of group `2p` (low nibble) and `2p + 1` (high) |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockIQ3_S {
    /// Scale.
    pub d: f16,
    /// Low index bits.
    pub qs: [u8; QK_K / 4],
    /// Ninth index bits.
    pub qh: [u8; QK_K / 32],
    /// Sign bits.
    pub signs: [u8; QK_K / 8],
    /// 4-bit scales.
    pub scales: [u8; QK_K / 64],
}

/// TQ1_0: 256 ternary values `x = d * (t - 1)`, `t` in {0, 1, 2}, five (four in
/// `qh`) packed per byte as the fixed-point fraction `⌈t·256/243⌉` of their
/// base-3 number: the `n`-th trit of byte `q` is `((q·3^n mod 256)·3) >> 8`.
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..32 | `qs[0..32]` | byte `m`: trits of values `m + 32n`, n < 5 |
/// | 32..48 | `qs[32..48]` | byte `32 + m`: trits of values `160 + m + 16n`, n < 5 |
/// | 48..52 | `qh` | byte `j`: trits of values `240 + j + 4n`, n < 4 |
/// | 52..54 | `d` | f16 scale |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockTQ1_0 {
    /// Five trits per byte.
    pub qs: [u8; (QK_K - 4 * QK_K / 64) / 5],
    /// Four trits per byte.
    pub qh: [u8; QK_K / 64],
    /// Scale.
    pub d: f16,
}

/// TQ2_0: 256 ternary values `x = d * (q - 1)`, `q` a 2-bit field (3 reads as 2).
///
/// | bytes | field | meaning |
/// |---|---|---|
/// | 0..64 | `qs` | in each 128-value half `h`, byte `m` bits `2n..2n+2` hold value `128h + 32n + m` |
/// | 64..66 | `d` | f16 scale |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockTQ2_0 {
    /// 2-bit fields, four per byte.
    pub qs: [u8; QK_K / 4],
    /// Scale.
    pub d: f16,
}

macro_rules! check_layout {
    ($($t:ty => $d:expr, $bytes:expr),* $(,)?) => {$(
        const _: () = assert!(size_of::<$t>() == $d.type_size());
        const _: () = assert!(align_of::<$t>() == $d.align());
        // ggml's own byte counts, independent of the DType table
        const _: () = assert!(size_of::<$t>() == $bytes);
    )*};
}

check_layout! {
    BlockIQ4_NL => DType::IQ4_NL, 2 + QK / 2,
    BlockIQ4_XS => DType::IQ4_XS, 2 + 2 + QK_K / 64 + QK_K / 2,
    BlockMXFP4 => DType::MXFP4, 1 + QK / 2,
    BlockIQ1_S => DType::IQ1_S, 2 + QK_K / 8 + QK_K / 16,
    BlockIQ1_M => DType::IQ1_M, QK_K / 8 + QK_K / 16 + QK_K / 32,
    BlockIQ2_XXS => DType::IQ2_XXS, 2 + QK_K / 4,
    BlockIQ2_XS => DType::IQ2_XS, 2 + QK_K / 4 + QK_K / 32,
    BlockIQ2_S => DType::IQ2_S, 2 + QK_K / 4 + QK_K / 16,
    BlockIQ3_XXS => DType::IQ3_XXS, 2 + 3 * QK_K / 8,
    BlockIQ3_S => DType::IQ3_S, 2 + 13 * QK_K / 32 + QK_K / 64,
    BlockTQ1_0 => DType::TQ1_0, 2 + QK_K / 64 + (QK_K - 4 * QK_K / 64) / 5,
    BlockTQ2_0 => DType::TQ2_0, 2 + QK_K / 4,
}
