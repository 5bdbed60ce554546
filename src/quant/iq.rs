//! The i-quants IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S:
//! dequantization (bit-identical to ggml's `dequantize_row_iq*` and gguf-py),
//! and the decoding of their grid points shared with the dot kernels.
//!
//! Each super-block of 256 values is a run of grid points: 8 values (4 for
//! IQ3) looked up by index in a fixed grid ([`super::iq_grids`]), with signs
//! and small integer scales alongside. The methods below decode one point;
//! the dequantizers and `quant::dot`'s scalar kernels both use them. There are
//! no quantizers (ggml's need search tables and, for some, an importance matrix).

use half::f16;

use super::blocks::QK_K;
use super::blocks_iq::{BlockIQ1_M, BlockIQ1_S, BlockIQ2_S, BlockIQ2_XS, BlockIQ2_XXS, BlockIQ3_S, BlockIQ3_XXS};
use super::common::{f16_to_f32, h2f, Block};
use super::iq1s_grid::IQ1S_GRID;
use super::iq_grids::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS_IQ2XS};
use crate::dtype::DType;

/// IQ1_S's and IQ1_M's shift of the grid values, ±1/8.
pub(crate) const IQ1_DELTA: f32 = 0.125;

/// The 8 bytes of a u64 grid entry.
#[inline(always)]
fn bytes8(g: u64) -> [u8; 8] {
    g.to_le_bytes()
}

/// The magnitudes of 8 values from two u32 grid entries.
#[inline(always)]
fn bytes4x2(a: u32, b: u32) -> [u8; 8] {
    let (a, b) = (a.to_le_bytes(), b.to_le_bytes());
    [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]]
}

/// `±1` for value `j` of a sign mask (a set bit negates).
#[inline(always)]
fn sign(mask: u8, j: usize) -> f32 {
    if mask & (1 << j) != 0 {
        -1.0
    } else {
        1.0
    }
}

/// Writes the 8 values `db · mag[j] · ±1` of one point.
#[inline(always)]
fn signed8(db: f32, mag: [u8; 8], signs: u8, dst: &mut [f32]) {
    for (j, y) in dst[..8].iter_mut().enumerate() {
        *y = db * f32::from(mag[j]) * sign(signs, j);
    }
}

impl BlockIQ2_XXS {
    /// Group `g` (0..8)'s two LE u32 words: the grid indices, then signs and scale.
    #[inline(always)]
    pub(crate) fn words(&self, g: usize) -> (u32, u32) {
        let w = |k: usize| u32::from(self.qs[4 * g + k]);
        (w(0) | (w(1) << 16), w(2) | (w(3) << 16))
    }
    /// Point `l` (0..4) of group `g`: 8 magnitudes and the sign mask.
    #[inline(always)]
    pub(crate) fn point(&self, g: usize, l: usize) -> ([u8; 8], u8) {
        let (a0, a1) = self.words(g);
        let grid = IQ2XXS_GRID[((a0 >> (8 * l)) & 0xff) as usize];
        (bytes8(grid), KSIGNS_IQ2XS[((a1 >> (7 * l)) & 127) as usize])
    }
}

impl Block for BlockIQ2_XXS {
    const DTYPE: DType = DType::IQ2_XXS;
    const VALUES: usize = QK_K;

    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK_K);
        let d = h2f(self.d);
        for g in 0..8 {
            let db = d * (0.5 + (self.words(g).1 >> 28) as f32) * 0.25;
            for l in 0..4 {
                let (mag, signs) = self.point(g, l);
                signed8(db, mag, signs, &mut dst[32 * g + 8 * l..]);
            }
        }
    }
}

/// Dequantizes an IQ2_XS or IQ2_S super-block of scale `d` into `dst`: its 32
/// points `point(p)` of 8 values, each times `d · (0.5 + scale(p / 2)) · 0.25`.
///
/// # Panics
/// If `dst.len() != QK_K`.
#[inline(always)]
fn iq2_points(d: f16, dst: &mut [f32], scale: impl Fn(usize) -> u8, point: impl Fn(usize) -> ([u8; 8], u8)) {
    assert_eq!(dst.len(), QK_K);
    let d = h2f(d);
    for p in 0..32 {
        let db = d * (0.5 + f32::from(scale(p / 2))) * 0.25;
        let (mag, signs) = point(p);
        signed8(db, mag, signs, &mut dst[8 * p..]);
    }
}

impl BlockIQ2_XS {
    /// Point `p` (0..32): 8 magnitudes and the sign mask.
    #[inline(always)]
    pub(crate) fn point(&self, p: usize) -> ([u8; 8], u8) {
        let q = self.qs[p];
        (bytes8(IQ2XS_GRID[usize::from(q & 511)]), KSIGNS_IQ2XS[usize::from(q >> 9)])
    }
    /// The 4-bit scale of the 16 values of points `2h, 2h + 1` (h in 0..16).
    #[inline(always)]
    pub(crate) fn scale(&self, h: usize) -> u8 {
        (self.scales[h / 2] >> (4 * (h % 2))) & 0x0f
    }
}

impl Block for BlockIQ2_XS {
    const DTYPE: DType = DType::IQ2_XS;
    const VALUES: usize = QK_K;

    fn dequantize(&self, dst: &mut [f32]) {
        iq2_points(self.d, dst, |h| self.scale(h), |p| self.point(p));
    }
}

impl BlockIQ2_S {
    /// Point `p` (0..32): 8 magnitudes and the sign mask.
    #[inline(always)]
    pub(crate) fn point(&self, p: usize) -> ([u8; 8], u8) {
        let (g, l) = (p / 4, p % 4);
        let high = (usize::from(self.qh[g]) << (8 - 2 * l)) & 0x300;
        (bytes8(IQ2S_GRID[usize::from(self.qs[p]) | high]), self.qs[QK_K / 8 + p])
    }
    /// The 4-bit scale of the 16 values of points `2h, 2h + 1` (h in 0..16).
    #[inline(always)]
    pub(crate) fn scale(&self, h: usize) -> u8 {
        (self.scales[h / 2] >> (4 * (h % 2))) & 0x0f
    }
}

impl Block for BlockIQ2_S {
    const DTYPE: DType = DType::IQ2_S;
    const VALUES: usize = QK_K;

    fn dequantize(&self, dst: &mut [f32]) {
        iq2_points(self.d, dst, |h| self.scale(h), |p| self.point(p));
    }
}

impl BlockIQ3_XXS {
    /// Group `g` (0..8)'s LE u32 of signs and scale.
    #[inline(always)]
    pub(crate) fn word(&self, g: usize) -> u32 {
        let at = QK_K / 4 + 4 * g;
        u32::from_le_bytes([self.qs[at], self.qs[at + 1], self.qs[at + 2], self.qs[at + 3]])
    }
    /// Run `l` (0..4) of 8 values of group `g`: magnitudes and the sign mask.
    #[inline(always)]
    pub(crate) fn point(&self, g: usize, l: usize) -> ([u8; 8], u8) {
        let grid = |k: usize| IQ3XXS_GRID[usize::from(self.qs[8 * g + 2 * l + k])];
        (bytes4x2(grid(0), grid(1)), KSIGNS_IQ2XS[((self.word(g) >> (7 * l)) & 127) as usize])
    }
}

impl Block for BlockIQ3_XXS {
    const DTYPE: DType = DType::IQ3_XXS;
    const VALUES: usize = QK_K;

    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK_K);
        let d = h2f(self.d);
        for g in 0..8 {
            let db = d * (0.5 + (self.word(g) >> 28) as f32) * 0.5;
            for l in 0..4 {
                let (mag, signs) = self.point(g, l);
                signed8(db, mag, signs, &mut dst[32 * g + 8 * l..]);
            }
        }
    }
}

impl BlockIQ3_S {
    /// Run `l` (0..4) of 8 values of group `g` (0..8): magnitudes and sign mask.
    #[inline(always)]
    pub(crate) fn point(&self, g: usize, l: usize) -> ([u8; 8], u8) {
        let h = usize::from(self.qh[g]);
        let i1 = usize::from(self.qs[8 * g + 2 * l]) | ((h << (8 - 2 * l)) & 256);
        let i2 = usize::from(self.qs[8 * g + 2 * l + 1]) | ((h << (7 - 2 * l)) & 256);
        (bytes4x2(IQ3S_GRID[i1], IQ3S_GRID[i2]), self.signs[4 * g + l])
    }
    /// The 4-bit scale of group `g` (0..8).
    #[inline(always)]
    pub(crate) fn scale(&self, g: usize) -> u8 {
        (self.scales[g / 2] >> (4 * (g % 2))) & 0x0f
    }
}

impl Block for BlockIQ3_S {
    const DTYPE: DType = DType::IQ3_S;
    const VALUES: usize = QK_K;

    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK_K);
        let d = h2f(self.d);
        for g in 0..8 {
            let db = d * (1 + 2 * i32::from(self.scale(g))) as f32;
            for l in 0..4 {
                let (mag, signs) = self.point(g, l);
                signed8(db, mag, signs, &mut dst[32 * g + 8 * l..]);
            }
        }
    }
}

/// The 8 values (-1, 0, 1) of IQ1_S/IQ1_M grid point `idx` (an 11-bit index).
#[inline(always)]
pub(crate) fn iq1_point(idx: usize) -> [i8; 8] {
    bytes8(IQ1S_GRID[idx & 0x7ff]).map(|b| b as i8)
}

/// Writes the 8 values `dl · (grid[j] + delta)` of one IQ1 point.
#[inline(always)]
fn shifted8(dl: f32, grid: [i8; 8], delta: f32, dst: &mut [f32]) {
    for (y, &g) in dst[..8].iter_mut().zip(&grid) {
        *y = dl * (f32::from(g) + delta);
    }
}

impl BlockIQ1_S {
    /// Point `l` (0..4) of group `g` (0..8): its 8 grid values.
    #[inline(always)]
    pub(crate) fn point(&self, g: usize, l: usize) -> [i8; 8] {
        let high = ((usize::from(self.qh[g]) >> (3 * l)) & 7) << 8;
        iq1_point(usize::from(self.qs[4 * g + l]) | high)
    }
    /// Group `g`'s odd scale `2s + 1` and whether its shift is negative.
    #[inline(always)]
    pub(crate) fn scale(&self, g: usize) -> (i32, bool) {
        let h = self.qh[g];
        (2 * i32::from((h >> 12) & 7) + 1, h & 0x8000 != 0)
    }
}

impl Block for BlockIQ1_S {
    const DTYPE: DType = DType::IQ1_S;
    const VALUES: usize = QK_K;

    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK_K);
        let d = h2f(self.d);
        for g in 0..8 {
            let (ls, negative) = self.scale(g);
            let dl = d * ls as f32;
            let delta = if negative { -IQ1_DELTA } else { IQ1_DELTA };
            for l in 0..4 {
                shifted8(dl, self.point(g, l), delta, &mut dst[32 * g + 8 * l..]);
            }
        }
    }
}

impl BlockIQ1_M {
    /// The scale words.
    #[inline(always)]
    fn word(&self, w: usize) -> u16 {
        u16::from_le_bytes([self.scales[2 * w], self.scales[2 * w + 1]])
    }
    /// The f16 super-scale (raw bits), gathered from the top nibbles of the scale words.
    #[inline(always)]
    pub(crate) fn d_bits(&self) -> u16 {
        (self.word(0) >> 12) | ((self.word(1) >> 8) & 0x00f0) | ((self.word(2) >> 4) & 0x0f00) | (self.word(3) & 0xf000)
    }
    /// Point `p` (0..32): its 8 grid values and whether its shift is negative.
    #[inline(always)]
    pub(crate) fn point(&self, p: usize) -> ([i8; 8], bool) {
        let h = usize::from(self.qh[p / 2]);
        let shift = 4 * (p % 2);
        let idx = usize::from(self.qs[p]) | (((h << 8) >> shift) & 0x700);
        (iq1_point(idx), h & (0x08 << shift) != 0)
    }
    /// The odd scale `2s + 1` of the 16 values of points `2r, 2r + 1` (r in 0..16).
    #[inline(always)]
    pub(crate) fn scale(&self, r: usize) -> i32 {
        let (g, half) = (r / 2, r % 2);
        2 * i32::from((self.word(g / 2) >> (6 * (g % 2) + 3 * half)) & 7) + 1
    }
}

impl Block for BlockIQ1_M {
    const DTYPE: DType = DType::IQ1_M;
    const VALUES: usize = QK_K;

    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK_K);
        let d = f16_to_f32(self.d_bits());
        for p in 0..32 {
            let dl = d * self.scale(p / 2) as f32;
            let (grid, negative) = self.point(p);
            shifted8(dl, grid, if negative { -IQ1_DELTA } else { IQ1_DELTA }, &mut dst[8 * p..]);
        }
    }
}
