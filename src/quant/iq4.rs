//! IQ4_NL and IQ4_XS (ggml's non-linear 4-bit formats: indices into the fixed
//! table [`KVALUES_IQ4NL`]) and MXFP4 (OCP microscaling: E2M1 codes under a
//! shared power-of-two scale).
//!
//! Dequantization is bit-identical to ggml's `dequantize_row_*` and gguf-py.
//! The quantizers follow ggml's reference ones without an importance matrix
//! (`quantize_row_iq4_nl_impl` behind `quantize_row_iq4_nl_ref`,
//! `quantize_iq4_nl` and `quantize_iq4_xs`; `quantize_row_mxfp4_ref`) in the
//! same f32 operations and order.

use super::blocks::{QK, QK_K};
use super::blocks_iq::{BlockIQ4_NL, BlockIQ4_XS, BlockMXFP4};
use super::common::{f2h, h2f, Block, Quantize};
use super::iq_grids::{KVALUES_IQ4NL, KVALUES_MXFP4};
use super::search::{nearest_int, GROUP_MAX_EPS};
use crate::dtype::DType;

/// The level of IQ4_NL's table as f32.
#[inline(always)]
fn level(i: u8) -> f32 {
    f32::from(KVALUES_IQ4NL[usize::from(i & 0x0f)])
}

/// 32 values of IQ4_NL indices `qs` (IQ4_NL's packing) times `d`.
#[inline(always)]
fn dequantize32(d: f32, qs: &[u8], dst: &mut [f32]) {
    for (j, &b) in qs[..QK / 2].iter().enumerate() {
        dst[j] = d * level(b);
        dst[j + QK / 2] = d * level(b >> 4);
    }
}

/// The index of the table level nearest `x` (ggml's `best_index_int8`: the
/// lower one on a tie, the ends below and above the table; a NaN gives 15).
fn best_index(x: f32) -> u8 {
    let v = |i: usize| f32::from(KVALUES_IQ4NL[i]);
    if x <= v(0) {
        return 0;
    }
    if x >= v(15) {
        return 15;
    }
    let (mut lo, mut hi) = (0usize, 15usize);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if x < v(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    if x - v(hi - 1) < v(hi) - x {
        (hi - 1) as u8
    } else {
        hi as u8
    }
}

/// `Σ w·q·x` and `Σ w·q²` of the levels `best_index(id·x)` (weights `x²`), in
/// ggml's order; writes the indices into `out` when given.
fn fit(id: f32, xb: &[f32], mut out: Option<&mut [u8]>) -> (f32, f32) {
    let (mut sumqx, mut sumq2) = (0f32, 0f32);
    for (j, &x) in xb.iter().enumerate() {
        let l = best_index(id * x);
        if let Some(o) = out.as_deref_mut() {
            o[j] = l;
        }
        let (q, w) = (level(l), x * x);
        sumqx += w * q * x;
        sumq2 += w * q * q;
    }
    (sumqx, sumq2)
}

/// The scale ggml's `quantize_row_iq4_nl_impl` picks for one 32-value group
/// (no importance matrix, so the weights are `x²`), with its first-pass
/// indices in `l`; `None` for a group below [`GROUP_MAX_EPS`] (whose indices
/// ggml leaves unwritten). `ntry` candidate inverse scales on each side of
/// `-127/max` are tried after the first (`-1`: none, as the reference
/// quantizer; 7 for the file quantizers).
fn group_scale(xb: &[f32], ntry: i32, l: &mut [u8]) -> Option<f32> {
    let (mut amax, mut max) = (0f32, 0f32);
    for &x in xb {
        if x.abs() > amax {
            amax = x.abs();
            max = x;
        }
    }
    if amax < GROUP_MAX_EPS {
        return None;
    }
    let v0 = level(0);
    let d = if ntry > 0 { -max / v0 } else { max / v0 };
    let (sumqx, sumq2) = fit(1.0 / d, xb, Some(l));
    let mut d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
    let mut best = d * sumqx;
    for itry in -ntry..=ntry {
        let id = (itry + i32::from(KVALUES_IQ4NL[0])) as f32 / max;
        let (sumqx, sumq2) = fit(id, xb, None);
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    Some(d)
}

/// The index ggml's quantizers write for a value when the scale is 0
/// (`best_index(0)`: the level 1, nearest zero).
const ZERO_INDEX: u8 = 8;

/// Packs 32 indices as IQ4_NL's nibbles.
fn pack32(l: &[u8], qs: &mut [u8]) {
    for j in 0..QK / 2 {
        qs[j] = l[j] | (l[j + QK / 2] << 4);
    }
}

/// One IQ4_NL block as ggml's `quantize_row_iq4_nl_impl` with `ntry` makes it.
///
/// With `ntry <= 0` (the reference quantizer) ggml stores the indices of the
/// first pass; for a block below [`GROUP_MAX_EPS`] it stores `d = 0` and
/// leaves the indices as they were (the previous block's, or uninitialised
/// memory): rgml writes [`ZERO_INDEX`], which the searching quantizer writes
/// too. The values (all zero) are the same either way.
fn iq4_nl_block(x: &[f32], ntry: i32) -> BlockIQ4_NL {
    assert_eq!(x.len(), QK);
    let mut l = [ZERO_INDEX; QK];
    let scale = group_scale(x, ntry, &mut l).unwrap_or(0.0);
    if ntry > 0 {
        let id = if scale != 0.0 { 1.0 / scale } else { 0.0 };
        for (q, &v) in l.iter_mut().zip(x) {
            *q = best_index(id * v);
        }
    }
    let mut qs = [0u8; QK / 2];
    pack32(&l, &mut qs);
    BlockIQ4_NL { d: f2h(scale), qs }
}

/// IQ4_NL as ggml's file quantizer `quantize_iq4_nl` writes it (no importance
/// matrix): 7 candidate scales on each side, indices requantized at the end.
pub(super) fn quantize_iq4_nl_searched(x: &[f32]) -> BlockIQ4_NL {
    iq4_nl_block(x, 7)
}

impl Block for BlockIQ4_NL {
    const DTYPE: DType = DType::IQ4_NL;
    const VALUES: usize = QK;

    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK);
        dequantize32(h2f(self.d), &self.qs, dst);
    }
}

impl Quantize for BlockIQ4_NL {
    /// ggml's `quantize_row_iq4_nl_ref` (one scale, no search).
    fn quantize(x: &[f32]) -> Self {
        iq4_nl_block(x, -1)
    }
}

impl BlockIQ4_XS {
    /// The 6-bit scale of group `g` (0..8), still offset by 32.
    #[inline(always)]
    pub(crate) fn scale(&self, g: usize) -> i32 {
        let low = (self.scales_l[g / 2] >> (4 * (g % 2))) & 0x0f;
        let high = ((self.scales_h >> (2 * g)) & 3) as u8;
        i32::from(low | (high << 4))
    }
}

impl Block for BlockIQ4_XS {
    const DTYPE: DType = DType::IQ4_XS;
    const VALUES: usize = QK_K;

    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK_K);
        let d = h2f(self.d);
        for (g, ys) in dst.chunks_exact_mut(QK).enumerate() {
            dequantize32(d * (self.scale(g) - 32) as f32, &self.qs[16 * g..], ys);
        }
    }
}

impl Quantize for BlockIQ4_XS {
    /// ggml's `quantize_iq4_xs` without an importance matrix (what
    /// `quantize_row_iq4_xs_ref` calls): a searched scale per group, 6-bit
    /// group scales against the largest, indices requantized against them.
    fn quantize(x: &[f32]) -> Self {
        assert_eq!(x.len(), QK_K);
        let mut l = [ZERO_INDEX; QK_K];
        let mut scales = [0f32; QK_K / QK];
        let (mut max_scale, mut amax_scale) = (0f32, 0f32);
        for (g, (xb, lb)) in x.chunks_exact(QK).zip(l.chunks_exact_mut(QK)).enumerate() {
            let Some(d) = group_scale(xb, 7, lb) else { continue };
            scales[g] = d;
            if d.abs() > amax_scale {
                amax_scale = d.abs();
                max_scale = d;
            }
        }
        let d = -max_scale / 32.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let (mut scales_h, mut scales_l) = (0u16, [0u8; QK_K / 64]);
        for (g, (xb, lb)) in x.chunks_exact(QK).zip(l.chunks_exact_mut(QK)).enumerate() {
            let ls = nearest_int(id * scales[g]).clamp(-32, 31);
            let dl = d * ls as f32;
            let idl = if dl != 0.0 { 1.0 / dl } else { 0.0 };
            for (q, &v) in lb.iter_mut().zip(xb) {
                *q = best_index(idl * v);
            }
            let ls = (ls + 32) as u8;
            scales_l[g / 2] |= (ls & 0x0f) << (4 * (g % 2));
            scales_h |= u16::from(ls >> 4) << (2 * g);
        }
        let mut qs = [0u8; QK_K / 2];
        for (lb, q) in l.chunks_exact(QK).zip(qs.chunks_exact_mut(QK / 2)) {
            pack32(lb, q);
        }
        BlockIQ4_XS { d: f2h(d), scales_h, scales_l, qs }
    }
}

/// MXFP4's scale: half of `2^(e - 127)` as f32 (ggml's `ggml_e8m0_to_fp32_half`;
/// `e` 0 and 1 are the subnormals 2^-128 and 2^-127).
#[inline(always)]
pub(crate) const fn e8m0_half(e: u8) -> f32 {
    f32::from_bits(if e < 2 { 0x0020_0000 << e } else { (e as u32 - 1) << 23 })
}

/// [`e8m0_half`] of every byte: one load per block in the SIMD kernels.
pub(crate) static E8M0_HALF: [f32; 256] = {
    let mut t = [0f32; 256];
    let mut e = 0;
    while e < 256 {
        t[e] = e8m0_half(e as u8);
        e += 1;
    }
    t
};

/// The code of MXFP4's table whose value times `d` is nearest `x` (the first
/// on ties; ggml's `best_index_mxfp4`).
fn best_mxfp4(x: f32, d: f32) -> u8 {
    let err = |i: usize| (f32::from(KVALUES_MXFP4[i]) * d - x).abs();
    let (mut best, mut best_err) = (0, err(0));
    for i in 1..16 {
        let e = err(i);
        if e < best_err {
            (best, best_err) = (i, e);
        }
    }
    best as u8
}

impl Block for BlockMXFP4 {
    const DTYPE: DType = DType::MXFP4;
    const VALUES: usize = QK;

    fn dequantize(&self, dst: &mut [f32]) {
        assert_eq!(dst.len(), QK);
        let d = e8m0_half(self.e);
        for (j, &b) in self.qs.iter().enumerate() {
            dst[j] = f32::from(KVALUES_MXFP4[usize::from(b & 0x0f)]) * d;
            dst[j + QK / 2] = f32::from(KVALUES_MXFP4[usize::from(b >> 4)]) * d;
        }
    }
}

impl Quantize for BlockMXFP4 {
    /// ggml's `quantize_row_mxfp4_ref`: `e = floor(log2(amax)) - 2 + 127` (so
    /// that the largest E2M1 value, 6, covers `amax`), each value to its
    /// nearest code. `log2` is the C library's `log2f`, as in ggml. C leaves
    /// the conversion of an out-of-range `e` to `uint8_t` undefined; rgml
    /// gives what x86-64 builds of ggml do (the low byte of `cvttss2si`: a
    /// block whose largest magnitude is below 2^-125 wraps, one holding an
    /// infinity gets `e = 0`).
    fn quantize(x: &[f32]) -> Self {
        assert_eq!(x.len(), QK);
        let mut amax = 0f32;
        for &v in x {
            if amax < v.abs() {
                amax = v.abs();
            }
        }
        let e = if amax > 0.0 {
            let v = amax.log2().floor() - 2.0 + 127.0;
            // cvttss2si: out-of-range and non-finite values give i32::MIN, whose low byte is 0
            if v.is_finite() && v.abs() < 2_147_483_648.0 {
                v as i32 as u8
            } else {
                0
            }
        } else {
            0
        };
        let d = e8m0_half(e);
        let mut qs = [0u8; QK / 2];
        for (j, q) in qs.iter_mut().enumerate() {
            *q = best_mxfp4(x[j], d) | (best_mxfp4(x[j + QK / 2], d) << 4);
        }
        BlockMXFP4 { e, qs }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_index_matches_a_linear_search() {
        // the nearest level, the lower one on an exact tie (ggml compares `<`)
        for k in -3000..3000 {
            let x = k as f32 * 0.05;
            let want = (0..16)
                .min_by(|&a, &b| {
                    let (ea, eb) = ((level(a) - x).abs(), (level(b) - x).abs());
                    ea.partial_cmp(&eb).unwrap().then(a.cmp(&b).reverse())
                })
                .unwrap();
            let got = best_index(x);
            let (eg, ew) = ((level(got) - x).abs(), (level(want) - x).abs());
            assert_eq!(eg, ew, "x={x}: got {got}, nearest {want}");
        }
        assert_eq!(best_index(f32::NAN), 15);
        assert_eq!(best_index(0.0), ZERO_INDEX);
        assert_eq!(best_index(-1e30), 0);
    }

    #[test]
    fn e8m0_scales() {
        for e in 0..=255u8 {
            assert_eq!(E8M0_HALF[usize::from(e)].to_bits(), e8m0_half(e).to_bits());
            assert_eq!(f64::from(e8m0_half(e)), 2f64.powi(i32::from(e) - 128), "{e}");
        }
        assert_eq!(e8m0_half(127), 0.5);
        assert_eq!(e8m0_half(128), 1.0);
        assert_eq!(e8m0_half(0), 2f32.powi(-128));
        assert_eq!(e8m0_half(1), 2f32.powi(-127));
        assert_eq!(e8m0_half(2), 2f32.powi(-126));
        assert_eq!(e8m0_half(255), 2f32.powi(127));
    }

    #[test]
    fn non_finite_and_tiny_blocks_are_defined() {
        let mut x = [0.5f32; QK];
        x[3] = f32::INFINITY;
        assert_eq!(BlockMXFP4::quantize(&x).e, 0);
        x[3] = f32::NAN;
        let b = BlockMXFP4::quantize(&x);
        assert_eq!(b.e, 124); // NaN never wins the amax comparison: amax = 0.5
        let tiny = [1e-40f32; QK];
        // floor(log2(1e-40)) = -133: -8 wraps to 248
        assert_eq!(BlockMXFP4::quantize(&tiny).e, 248);
        for q in [BlockIQ4_NL::quantize(&[0.0; QK]), quantize_iq4_nl_searched(&[0.0; QK])] {
            assert_eq!((q.d.to_bits(), q.qs), (0, [0x88; QK / 2]));
        }
        // an all-zero IQ4_XS super-block stores d = -0.0, as ggml's `-max_scale / 32` does
        let z = BlockIQ4_XS::quantize(&[0.0; QK_K]);
        assert_eq!((z.d.to_bits(), z.scales_h, z.scales_l, z.qs), (0x8000, 0xaaaa, [0; 4], [0x88; QK_K / 2]));
        // NaNs poison the group's sums: the group's scale is 0, never NaN
        let mut y = [f32::NAN; QK_K];
        y[7] = 1.0;
        let mut out = [0f32; QK_K];
        BlockIQ4_XS::quantize(&y).dequantize(&mut out);
        assert!(out.iter().all(|v| v.is_finite()), "{out:?}");
    }
}
