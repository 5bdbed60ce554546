//! Register-tiled `mul_mat` kernels: one call computes the dot products of up
//! to [`TileKernel::mr`] weight rows with any number of activation rows, so
//! each weight block is loaded and unpacked once per call instead of once per
//! output element, and no horizontal sums are needed.
//!
//! # How a call works (the SIMD levels)
//! The weight rows are packed a chunk of blocks at a time: for block `b`, the
//! `MR` rows' quants are transposed so that each 32-bit lane of a vector holds
//! four quants of one weight row (`MR = 16` lanes of a 512-bit vector, 8 of a
//! 256-bit one), as unsigned bytes (Q4_0's nibbles as they are, Q8_0's quants
//! and IQ4_NL's table values `+ 128`), with the rows' scales in one f32
//! vector. Every activation row then meets the packed chunk: per block, 8 multiply-adds of the packed vectors with
//! a broadcast group of four activation quants (`vpdpbusd`, or `vpmaddubsw`
//! on AVX2) give the exact integer dots of all `MR` rows at once, then one
//! conversion, one multiply (`d_w · d_a`) and one FMA add them to the row's f32
//! accumulator, whose lanes are the `MR` results. The unsigned bias is undone
//! through the activation block's precomputed `-off · Σ q_a` (the initial value
//! of the integer sum), so the integer part is exact for any bytes.
//!
//! Activation rows therefore come in a *prepared* form (see
//! [`TileKernel::prepare`]): per 32-value block, the 32 Q8_0 quants, the scale
//! as an f32 and that correction as an i32 (40 bytes). It is made once per row
//! from the [`vec_dot_type`] row that [`quantize_activations`] writes, and
//! shared by every weight row.
//!
//! The k-quants Q4_K, Q5_K and Q6_K (with Q8_K activations, whose rows are
//! their own prepared form) pack each 256-value super-block the same way:
//! Q4_K/Q5_K as 8 groups of 32 unsigned quants (Q5_K's fifth bit merged into
//! the nibbles), plus the sub-block scales and mins decoded into lanes; Q6_K as
//! 16 groups of 16 quants kept `+ 32` (unsigned), plus its signed 8-bit scales.
//! Per group, `vpdpbusd` (or `vpmaddubsw` summed in i16 as far as it cannot
//! saturate) gives the exact dot, which is scaled in integers (`vpmulld`, or
//! `vpmaddwd`); the mins, and Q6_K's `- 32 · Σ scale · bsum` correction, meet
//! Q8_K's `bsums` through `vpdpwssd`/`vpmaddwd`; per super-block,
//! `acc + d·d_a·isum - dmin·d_a·mins` (Q6_K: `acc + d·d_a·isum`) in f32 as in
//! the dot kernels.
//!
//! # Tile shapes
//! | weight | level | weight rows per call (`mr`) | activation rows per register group | `min_rows` |
//! |---|---|---|---|---|
//! | Q4_0 | AVX-512 VNNI | 16 (one `__m512` lane each) | 8, then 4/2/1 for the rest | 1 (2 on AMD: its dot kernel streams one row faster from weights in place) |
//! | Q8_0, Q5_0, Q4_1 | AVX-512 VNNI | 16 | 8, then 4/2/1 | 1 |
//! | IQ4_NL | AVX-512 VNNI | 16 | 8, then 4/2/1 | 2 |
//! | Q4_K | AVX-512 VNNI | 16 | 4, then 2/1 | 1 (2 on AMD, as Q4_0) |
//! | Q5_K | AVX-512 VNNI | 16 | 4, then 2/1 | 2 |
//! | Q6_K | AVX-512 VNNI | 16 | 4, then 2/1 | 3 |
//! | IQ4_XS | AVX-512 VNNI | 16 | 4, then 2/1 | 2 |
//! | Q4_0 | AVX2 | 8 (one `__m256` lane each) | 4, then 2/1 | 1 (2 on AMD, as at AVX-512) |
//! | Q8_0, Q4_1, Q5_0, IQ4_NL | AVX2 | 8 | 4, then 2/1 | 2 |
//! | Q4_K, Q5_K | AVX2 | 8 | 4, then 2/1 | 3 |
//! | Q6_K | AVX2 | 8 | 4, then 2/1 | 5 |
//! | Q4_0; Q4_K, Q5_K, Q6_K | scalar | 4 | 1 | 1; 2 |
//!
//! A call may pass fewer weight rows than `mr` (the missing lanes repeat row 0
//! and are never stored) and any number of activation rows. Packing a block
//! of `mr` rows costs about as much as a few per-row dot products, so a tile
//! only pays from [`TileKernel::min_rows`] activation rows (measured on an
//! AVX-512 VNNI Xeon and an AVX2 EPYC, 4096 × 4096 weights, against [`dot_fn`]
//! at the same level).
//! On weights repacked ahead of time (below) a product takes the tile at every
//! row count: with no per-call packing to amortize, one activation row is
//! faster by tile than by dots.
//!
//! # Results
//! `out[j * out_stride + i]` is the dot product of weight row `i` with
//! activation row `j`, as [`dot_fn`] defines it: the per-block integer dots are
//! exact, each is scaled by `d_w · d_a` and the blocks are summed in order in
//! f32. The scalar tiles give exactly the bits of [`dot_fn_scalar`]; the SIMD
//! ones differ only by rounding (the scaling is FMA). Q8_0 quants
//! of `-128` (never written by ggml's quantizers) are exact on every level but
//! AVX2, which has the same `vpsignb`/`vpmaddubsw` caveat as its dot kernel.
//!
//! # Repacked weights
//! Every AVX-512 VNNI and AVX2 tile also runs on
//! weights repacked ahead of time ([`TileKernel::pack_group`],
//! [`TileKernel::run_packed`]): a group of `mr` rows stored block by block as
//! the kernel reads them, each block's body (its bytes past a leading f16
//! scale, or before Q6_K's trailing one) transposed by dwords across the rows
//! and the scales after it ([`TileKernel::pack_group`] gives the layout). A
//! call then loads vectors instead of transposing, and reads one sequential
//! stream (with a software prefetch) instead of `mr` short ones, which the
//! hardware's stream prefetch follows poorly: weights streamed from memory
//! run at about the machine's read bandwidth repacked, well short of it in
//! place. The bits of the results are those of [`TileKernel::run`] on the
//! original rows, so a repacked product runs the tile at every row count.
//!
//! [`vec_dot_type`]: super::dot::vec_dot_type
//! [`quantize_activations`]: super::dot::quantize_activations
//! [`dot_fn`]: super::dot::dot_fn
//! [`dot_fn_scalar`]: super::dot::dot_fn_scalar

use super::blocks::{QK, QK_K};
use super::common::f16_to_f32;
use super::dot::{vec_dot_type, SimdLevel};
use crate::dtype::DType;
use crate::error::{Error, Result};

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod common;
mod scalar;

pub use common::{packed_q4_0_block, PREPARED_BLOCK};
use common::{RawPacked, RawTile};

/// A register-tiled kernel for one weight type at one SIMD level (see the
/// module docs). Cheap to copy; look it up once per matmul.
#[derive(Clone, Copy)]
pub struct TileKernel {
    w: DType,
    level: SimdLevel,
    mr: usize,
    min_rows: usize,
    raw: RawTile,
    packed: Option<RawPacked>,
}

impl std::fmt::Debug for TileKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TileKernel").field("w", &self.w).field("level", &self.level).field("mr", &self.mr).finish()
    }
}

/// The tile kernel for weights of type `w` at the best level this CPU has
/// ([`SimdLevel::detect`]), or `None` when `w` has none there (Q4_0, Q4_K,
/// Q5_K and Q6_K have one on every level, Q8_0, Q4_1, Q5_0 and IQ4_NL on the
/// SIMD levels, IQ4_XS at AVX-512).
pub fn tile_kernel(w: DType) -> Option<TileKernel> {
    tile_kernel_for(w, SimdLevel::detect())
}

/// The tile kernel for weights of type `w` written for `level`; `None` when
/// the CPU lacks `level` or there is no such kernel.
pub fn tile_kernel_for(w: DType, level: SimdLevel) -> Option<TileKernel> {
    if !level.is_supported() {
        return None;
    }
    // (weight rows per call, fewest activation rows worth a call, kernel); the
    // thresholds are measured against `dot_fn` on AVX-512 hardware (4096 × 4096);
    // AVX2's Q4_1/Q5_0/IQ4_NL tiles win at one row only on weights in cache: a
    // model's decode, streaming them from memory, runs faster on the dot kernels.
    // Q8_0 has no scalar tile: its scalar dot kernel (no unpacking to share) is as fast
    // AMD's cores stream one activation row faster through the dot kernels when
    // the weights are in place (one row at a time, the stream their prefetchers
    // follow; a tile reads its rows a block each)
    #[cfg(target_arch = "x86_64")]
    let one_row_tile = if crate::cpu_info::CpuInfo::get().is_amd() { 2 } else { 1 };
    let (mr, min_rows, raw): (usize, usize, RawTile) = match (level, w) {
        (SimdLevel::Scalar, DType::Q4_0) => (scalar::MR, 1, scalar::q4_0),
        (SimdLevel::Scalar, DType::Q4_K) => (scalar::MR, 2, scalar::q4_k),
        (SimdLevel::Scalar, DType::Q5_K) => (scalar::MR, 2, scalar::q5_k),
        (SimdLevel::Scalar, DType::Q6_K) => (scalar::MR, 2, scalar::q6_k),
        #[cfg(target_arch = "x86_64")]
        (SimdLevel::Avx2, DType::Q4_0) => (avx2::MR, one_row_tile, avx2::q4_0),
        #[cfg(target_arch = "x86_64")]
        (SimdLevel::Avx2, DType::Q8_0) => (avx2::MR, 2, avx2::q8_0),
        #[cfg(target_arch = "x86_64")]
        (SimdLevel::Avx2, DType::Q4_1) => (avx2::MR, 2, avx2::q4_1),
        #[cfg(target_arch = "x86_64")]
        (SimdLevel::Avx2, DType::Q5_0) => (avx2::MR, 2, avx2::q5_0),
        #[cfg(target_arch = "x86_64")]
        (SimdLevel::Avx2, DType::IQ4_NL) => (avx2::MR, 2, avx2::iq4_nl),
        #[cfg(target_arch = "x86_64")]
        (SimdLevel::Avx2, DType::Q4_K) => (avx2::MR, 3, avx2::q4_k),
        #[cfg(target_arch = "x86_64")]
        (SimdLevel::Avx2, DType::Q5_K) => (avx2::MR, 3, avx2::q5_k),
        #[cfg(target_arch = "x86_64")]
        (SimdLevel::Avx2, DType::Q6_K) => (avx2::MR, 5, avx2::q6_k),
        #[cfg(target_arch = "x86_64")]
        (SimdLevel::Avx512, DType::Q4_0) => (avx512::MR, one_row_tile, avx512::q4_0),
        #[cfg(target_arch = "x86_64")]
        (SimdLevel::Avx512, DType::Q8_0) => (avx512::MR, 1, avx512::q8_0),
        #[cfg(target_arch = "x86_64")]
        (SimdLevel::Avx512, DType::Q5_0) => (avx512::MR, 1, avx512::q5_0),
        #[cfg(target_arch = "x86_64")]
        (SimdLevel::Avx512, DType::Q4_1) => (avx512::MR, 1, avx512::q4_1),
        #[cfg(target_arch = "x86_64")]
        (SimdLevel::Avx512, DType::IQ4_NL) => (avx512::MR, 2, avx512::iq4_nl),
        #[cfg(target_arch = "x86_64")]
        (SimdLevel::Avx512, DType::Q4_K) => (avx512::MR, one_row_tile, avx512::q4_k),
        #[cfg(target_arch = "x86_64")]
        (SimdLevel::Avx512, DType::Q5_K) => (avx512::MR, 2, avx512::q5_k),
        #[cfg(target_arch = "x86_64")]
        (SimdLevel::Avx512, DType::Q6_K) => (avx512::MR, 3, avx512::q6_k),
        #[cfg(target_arch = "x86_64")]
        (SimdLevel::Avx512, DType::IQ4_XS) => (avx512::MR, 2, avx512::iq4_xs),
        _ => return None,
    };
    #[cfg(target_arch = "x86_64")]
    let packed: Option<RawPacked> = match (level, w) {
        (SimdLevel::Avx2, DType::Q4_0) => Some(avx2::q4_0_packed),
        (SimdLevel::Avx2, DType::Q4_1) => Some(avx2::q4_1_packed),
        (SimdLevel::Avx2, DType::Q5_0) => Some(avx2::q5_0_packed),
        (SimdLevel::Avx2, DType::Q8_0) => Some(avx2::q8_0_packed),
        (SimdLevel::Avx2, DType::IQ4_NL) => Some(avx2::iq4_nl_packed),
        (SimdLevel::Avx2, DType::Q4_K) => Some(avx2::q4_k_packed),
        (SimdLevel::Avx2, DType::Q5_K) => Some(avx2::q5_k_packed),
        (SimdLevel::Avx2, DType::Q6_K) => Some(avx2::q6_k_packed),
        (SimdLevel::Avx512, DType::Q4_0) => Some(avx512::q4_0_packed),
        (SimdLevel::Avx512, DType::Q4_1) => Some(avx512::q4_1_packed),
        (SimdLevel::Avx512, DType::Q5_0) => Some(avx512::q5_0_packed),
        (SimdLevel::Avx512, DType::Q8_0) => Some(avx512::q8_0_packed),
        (SimdLevel::Avx512, DType::IQ4_NL) => Some(avx512::iq4_nl_packed),
        (SimdLevel::Avx512, DType::Q4_K) => Some(avx512::q4_k_packed),
        (SimdLevel::Avx512, DType::Q5_K) => Some(avx512::q5_k_packed),
        (SimdLevel::Avx512, DType::Q6_K) => Some(avx512::q6_k_packed),
        (SimdLevel::Avx512, DType::IQ4_XS) => Some(avx512::iq4_xs_packed),
        _ => None,
    };
    #[cfg(not(target_arch = "x86_64"))]
    let packed: Option<RawPacked> = None;
    Some(TileKernel { w, level, mr, min_rows, raw, packed })
}

/// Repacks up to `mr` rows of `nb` blocks of `wb` bytes into `out` (`nb` ×
/// `wb · mr` bytes), each block split into `head` bytes, a body (a whole
/// number of dwords) and `tail` bytes: per block, dword `v` of row `r`'s body
/// at `4 · (mr · v + r)` (a transpose by dwords), then row `r`'s head and tail
/// bytes at `mr · body + (head + tail) · r`; rows past `w.len()` repeat row 0.
/// Lengths are the caller's to check.
fn pack_transposed(mr: usize, (wb, head, tail): (usize, usize, usize), nb: usize, w: &[&[u8]], out: &mut [u8]) {
    let body = wb - head - tail;
    for (b, dst) in out.chunks_exact_mut(wb * mr).take(nb).enumerate() {
        let (bodies, ends) = dst.split_at_mut(body * mr);
        for r in 0..mr {
            let src = &w.get(r).unwrap_or(&w[0])[b * wb..(b + 1) * wb];
            for (v, d) in src[head..head + body].chunks_exact(4).enumerate() {
                bodies[4 * (mr * v + r)..4 * (mr * v + r) + 4].copy_from_slice(d);
            }
            let end = &mut ends[(head + tail) * r..(head + tail) * (r + 1)];
            end[..head].copy_from_slice(&src[..head]);
            end[head..].copy_from_slice(&src[wb - tail..]);
        }
    }
}

/// A Q5_0 block's `qh` (bit `i`: bit 4 of value `i`) as a repacked group
/// keeps it: bit `e` of byte `j` is value `4e + j`'s. The tiles' vector `e`
/// holds values `4e..4e + 4` of each row in a lane's four bytes, so its high
/// bits are bit `e` of every byte: one shift and a mask (AVX2) or one test
/// (AVX-512) away, where the GGUF order takes a shuffle and a compare.
pub(crate) fn q5_0_high_bits(qh: u32) -> u32 {
    let mut out = 0;
    for e in 0..8 {
        for j in 0..4 {
            out |= (qh >> (4 * e + j) & 1) << (8 * j + e);
        }
    }
    out
}

/// The bytes of a block of `w` that a repacked group keeps outside its
/// transposed body (see [`pack_transposed`]): `(head, tail)`, so that the
/// body is whole dwords and the quants stay dword-aligned.
fn packed_split(w: DType) -> (usize, usize) {
    match w {
        // an f16 scale, then quants (Q5_0: the qh word, then quants)
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 | DType::IQ4_NL => (2, 0),
        // quants and scales, then the f16 `d`
        DType::Q6_K => (0, 2),
        // whole dwords already: Q4_1's `d, m`, the k-quants' and IQ4_XS's heads
        _ => (0, 0),
    }
}

/// Values per block of the weight type `w` and bytes per prepared activation
/// block: 32 and [`PREPARED_BLOCK`], or for the k-quants 256 and a Q8_K block.
fn format(w: DType) -> (usize, usize) {
    if k_quant(w) {
        (QK_K, DType::Q8_K.type_size())
    } else {
        (QK, PREPARED_BLOCK)
    }
}

/// The weight types with Q8_K activations, which are their own prepared rows.
fn k_quant(w: DType) -> bool {
    matches!(w, DType::Q4_K | DType::Q5_K | DType::Q6_K | DType::IQ4_XS)
}

/// The bias the kernels for weights `w` add to the weight quants to make them
/// unsigned (undone through the prepared correction).
fn weight_offset(w: DType) -> i32 {
    match w {
        DType::Q4_0 => 8,
        DType::Q5_0 => 16,
        _ => 128,
    }
}

impl TileKernel {
    /// The weight type.
    pub fn weight_type(&self) -> DType {
        self.w
    }

    /// The SIMD level the kernel is written for.
    pub fn level(&self) -> SimdLevel {
        self.level
    }

    /// The most weight rows one [`TileKernel::run`] takes.
    pub fn mr(&self) -> usize {
        self.mr
    }

    /// The fewest activation rows from which this kernel beats one
    /// [`dot_fn`](super::dot::dot_fn) call per element (measured on AVX-512
    /// hardware, 4096 × 4096 weights; see the module docs): below it, packing
    /// the weight rows costs more than it saves.
    pub fn min_rows(&self) -> usize {
        self.min_rows
    }

    /// Bytes of a prepared activation row of `k` values; `None` when `k` is
    /// not a whole number of blocks (32 values, 256 for the k-quants) or the size overflows.
    pub fn prepared_row_size(&self, k: usize) -> Option<usize> {
        let (bs, pb) = format(self.w);
        k.is_multiple_of(bs).then(|| (k / bs).checked_mul(pb)).flatten()
    }

    /// Prepares one activation row for [`TileKernel::run`]: `a` is a row of
    /// the weight type's dot partner (Q8_0; Q8_1 for Q4_1; Q8_K for the k-quants, as
    /// [`quantize_activations`](super::dot::quantize_activations) writes it),
    /// `out` receives [`TileKernel::prepared_row_size`] bytes (the format is
    /// the same on every level; for the k-quants it is the Q8_K row itself).
    ///
    /// Errors with [`Error::Shape`] when `a` is not whole blocks of the
    /// partner or `out` is not the matching size.
    pub fn prepare(&self, a: &[u8], out: &mut [u8]) -> Result<()> {
        const OP: &str = "tile::prepare";
        if k_quant(self.w) {
            let bytes = DType::Q8_K.type_size();
            if !a.len().is_multiple_of(bytes) || out.len() != a.len() {
                return Err(Error::shape(
                    OP,
                    format!(
                        "{} Q8_K bytes and {} prepared bytes do not make whole matching blocks",
                        a.len(),
                        out.len()
                    ),
                ));
            }
            out.copy_from_slice(a);
            return Ok(());
        }
        // the dot partner: Q8_1 (d, s = d·Σq, then the quants) for Q4_1, else Q8_0
        let partner = vec_dot_type(self.w);
        let (bytes, head) = (partner.type_size(), partner.type_size() - QK);
        let nb = a.len() / bytes;
        if !a.len().is_multiple_of(bytes) || out.len() != nb * PREPARED_BLOCK {
            return Err(Error::shape(
                OP,
                format!(
                    "{} {partner} bytes and {} prepared bytes do not make whole matching blocks",
                    a.len(),
                    out.len()
                ),
            ));
        }
        let off = weight_offset(self.w);
        for (blk, dst) in a.chunks_exact(bytes).zip(out.chunks_exact_mut(PREPARED_BLOCK)) {
            let f16_at = |i: usize| f16_to_f32(u16::from_le_bytes([blk[i], blk[i + 1]]));
            dst[..QK].copy_from_slice(&blk[head..]);
            dst[QK..QK + 4].copy_from_slice(&f16_at(0).to_le_bytes());
            if partner == DType::Q8_1 {
                // the min term's s (f32), in place of a correction
                dst[QK + 4..].copy_from_slice(&f16_at(2).to_le_bytes());
            } else {
                let sum: i32 = blk[head..].iter().map(|&q| i32::from(q as i8)).sum();
                dst[QK + 4..].copy_from_slice(&(-off * sum).to_le_bytes());
            }
        }
        Ok(())
    }

    /// True if this kernel can run on weights repacked ahead of time
    /// ([`TileKernel::pack_group`], [`TileKernel::run_packed`]): every type
    /// with a tile at AVX-512 VNNI and AVX2, where the repacked form skips
    /// the per-call transposes and streams sequentially.
    pub fn packs(&self) -> bool {
        self.packed.is_some()
    }

    /// Bytes of one repacked group of up to [`TileKernel::mr`] weight rows of
    /// `k` values; `None` if the kernel does not pack or `k` is not whole blocks.
    pub fn packed_group_size(&self, k: usize) -> Option<usize> {
        self.packed?;
        let (bs, block) = self.packed_block();
        k.is_multiple_of(bs).then(|| (k / bs).checked_mul(block)).flatten()
    }

    /// Values per block and bytes per repacked block of a group (`mr` rows).
    fn packed_block(&self) -> (usize, usize) {
        (format(self.w).0, self.w.type_size() * self.mr)
    }

    /// Repacks 1 to [`TileKernel::mr`] weight rows of `k` values (in the
    /// weight type's own layout) into `out`, which must be
    /// [`TileKernel::packed_group_size`] bytes: per block of the type (`wb`
    /// bytes a row, so `wb · mr` a group), the rows' bodies transposed by
    /// dwords (dword `v` of row `r`'s body at `4 · (mr · v + r)`), then each
    /// row's bytes outside its body (row `r`'s at `mr · body + 2r`). The body
    /// is the block less its leading f16 scale for Q4_0, Q5_0, Q8_0 and
    /// IQ4_NL, less its trailing `d` for Q6_K, and the whole block otherwise
    /// (Q4_1's `d, m` pair and the k-quants' heads are dwords already); Q5_0's
    /// `qh` dword is regrouped: value `4e + j`'s bit at bit `e` of byte `j`. Rows
    /// past `w.len()` repeat row 0. [`TileKernel::run_packed`] on the result
    /// gives the bits [`TileKernel::run`] gives on the rows.
    ///
    /// Errors with [`Error::Unsupported`] if the kernel does not pack, and with
    /// [`Error::Shape`] for a bad `k`, row count or length.
    pub fn pack_group(&self, k: usize, w: &[&[u8]], out: &mut [u8]) -> Result<()> {
        let size = self.packed_group_size(k).ok_or_else(|| self.no_packing(k))?;
        let (nb, wb) = (k / self.packed_block().0, self.w.type_size());
        let bad = |msg: String| Err(Error::shape("tile::pack_group", msg));
        if w.is_empty() || w.len() > self.mr {
            return bad(format!("{} weight rows, expected 1..={}", w.len(), self.mr));
        }
        if !w.iter().all(|r| r.len() / wb >= nb) {
            return bad(format!("a weight row is shorter than {k} values"));
        }
        if out.len() != size {
            return bad(format!("out holds {} bytes, a packed group {size}", out.len()));
        }
        let (head, tail) = packed_split(self.w);
        pack_transposed(self.mr, (wb, head, tail), nb, w, out);
        if self.w == DType::Q5_0 {
            // body dword 0 of each row: its `qh`
            for block in out.chunks_exact_mut(wb * self.mr) {
                for qh in block[..4 * self.mr].chunks_exact_mut(4) {
                    let v = q5_0_high_bits(u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]));
                    qh.copy_from_slice(&v.to_le_bytes());
                }
            }
        }
        Ok(())
    }

    /// [`TileKernel::run`] on `rows` weight rows of `k` values repacked by
    /// [`TileKernel::pack_group`] into consecutive groups (`group`: the
    /// `rows.div_ceil(mr)` groups, each [`TileKernel::packed_group_size`]
    /// bytes; all but the last hold `mr` rows): `out[j * out_stride + i]` for
    /// `i < rows`, bit for bit what `run` gives on the original rows, group by
    /// group. One call may take a whole matrix: a decode step's weights then
    /// stream through one kernel loop.
    ///
    /// Errors as [`TileKernel::pack_group`] and [`TileKernel::run`] do.
    pub fn run_packed(
        &self,
        k: usize,
        group: &[u8],
        rows: usize,
        a: &[&[u8]],
        out: &mut [f32],
        out_stride: usize,
    ) -> Result<()> {
        let (Some(raw), Some(size)) = (self.packed, self.packed_group_size(k)) else {
            return Err(self.no_packing(k));
        };
        let bad = |msg: String| Err(Error::shape("tile::run_packed", msg));
        if rows == 0 {
            return bad("no weight rows".into());
        }
        let groups = rows.div_ceil(self.mr);
        if size.checked_mul(groups) != Some(group.len()) {
            return bad(format!(
                "{} bytes are not {groups} packed groups of {k} values ({size} bytes each) for {rows} rows",
                group.len()
            ));
        }
        self.check_acts(k, rows, a, out, out_stride)?;
        if a.is_empty() {
            return Ok(());
        }
        if k == 0 {
            for j in 0..a.len() {
                out[j * out_stride..j * out_stride + rows].fill(0.0);
            }
            return Ok(());
        }
        // SAFETY: the checks above are the contract of `RawPacked`; the kernel
        // exists only where the CPU supports its level (`tile_kernel_for`).
        unsafe { raw(k / self.packed_block().0, group, rows, a, out, out_stride) };
        Ok(())
    }

    fn no_packing(&self, k: usize) -> Error {
        if self.packed.is_none() {
            Error::Unsupported { op: "tile::pack_group (no repacked kernel at this level)", dtype: self.w }
        } else {
            let bs = self.packed_block().0;
            Error::shape("tile::pack_group", format!("{k} values are not whole {bs}-value blocks"))
        }
    }

    /// The activation-side checks of [`TileKernel::run`]: rows of `k` values
    /// prepared, and `out` large enough for `rows` results per activation row.
    fn check_acts(&self, k: usize, rows: usize, a: &[&[u8]], out: &[f32], out_stride: usize) -> Result<()> {
        let (bs, pb) = format(self.w);
        let nb = k / bs;
        let bad = |msg: String| Err(Error::shape("tile", msg));
        if !a.iter().all(|r| r.len() / pb >= nb) {
            return bad(format!("an activation row is shorter than {k} values"));
        }
        if let Some(last) = a.len().checked_sub(1) {
            if last > 0 && out_stride < rows {
                return bad(format!("out_stride {out_stride} < {rows} weight rows"));
            }
            let need = last.checked_mul(out_stride).and_then(|v| v.checked_add(rows));
            if need.is_none_or(|n| n > out.len()) {
                return bad(format!("out holds {} values, too few", out.len()));
            }
        }
        Ok(())
    }

    /// `out[j * out_stride + i] = dot(w[i], a[j])` for every weight row
    /// `w[i]` (a row of `k` values of the weight type) and prepared activation
    /// row `a[j]` (see [`TileKernel::prepare`]); no other element of `out` is
    /// written. Takes 1 to [`TileKernel::mr`] weight rows and any number of
    /// activation rows.
    ///
    /// Errors with [`Error::Shape`] (and writes nothing) if `k` is not a whole
    /// number of blocks, `w` is empty or longer than `mr`, a row is shorter
    /// than `k` values, `out_stride < w.len()` (with more than one activation
    /// row), or `out` is too short.
    pub fn run(&self, k: usize, w: &[&[u8]], a: &[&[u8]], out: &mut [f32], out_stride: usize) -> Result<()> {
        let bs = format(self.w).0;
        let nb = k / bs;
        let wb = self.w.type_size();
        let bad = |msg: String| Err(Error::shape("tile", msg));
        if !k.is_multiple_of(bs) {
            return bad(format!("{k} values are not whole {bs}-value blocks"));
        }
        if w.is_empty() || w.len() > self.mr {
            return bad(format!("{} weight rows, expected 1..={}", w.len(), self.mr));
        }
        // divisions, so that no length can overflow past the checks
        if !w.iter().all(|r| r.len() / wb >= nb) {
            return bad(format!("a weight row is shorter than {k} values"));
        }
        self.check_acts(k, w.len(), a, out, out_stride)?;
        if a.is_empty() {
            return Ok(());
        }
        if nb == 0 {
            for j in 0..a.len() {
                out[j * out_stride..j * out_stride + w.len()].fill(0.0);
            }
            return Ok(());
        }
        // SAFETY: the checks above are the contract of `RawTile`; the kernel was
        // only built (`tile_kernel_for`) when the CPU supports its level.
        unsafe { (self.raw)(nb, w, a, out, out_stride) };
        Ok(())
    }
}
