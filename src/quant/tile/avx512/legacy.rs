//! The 32-value tiles: Q4_0, Q5_0, Q8_0 and IQ4_NL weights with prepared
//! Q8_0 activations, Q4_1 weights with prepared Q8_1 activations.
//!
//! Per chunk of [`KC`] blocks the weight rows are packed (see [`pack_q4_0`],
//! [`pack_q8_0`]): block `b` becomes 8 vectors whose lane `r` holds four
//! unsigned quants of row `r` (vector `t` pairs with activation quants
//! `4t..4t + 4`), plus the 16 scales as f32. Each activation row then costs,
//! per block, 8 `vpdpbusd` with a broadcast group of its quants, a conversion,
//! a multiply and an FMA (see [`group`]), for 16 × 32 multiply-adds.
//!
//! Every type also runs on weights repacked ahead of time
//! (`TileKernel::pack_group`, a [`Repacked`] source): the blocks of 16 rows
//! stored transposed by dwords, so a block costs loads instead of the
//! transposes and the scale gathering, and the stream is one sequential run
//! (with a software prefetch) instead of 16 short ones.
//! There the kernels run compiled with GFNI where the CPU has it
//! ([`tile_gfni`]), which splits off the high nibbles in one instruction
//! ([`high_nibbles`]).

// index loops read best over the lanes and vectors of a block
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;

use super::super::super::iq_grids::KVALUES_IQ4NL;
use super::super::common::{groups_of_run, rows_at, Blocks, Source, PREPARED_BLOCK as PB};
use super::lanes::{bcast, lanes_mask, Repacked, Rows, MR};

/// Blocks per packed chunk (32 × 576 bytes of stack, in L1).
const KC: usize = 32;
/// Activation rows per register group (accumulators + 9 packed vectors + temporaries fit in 32 registers).
const NR: usize = 8;

/// One packed block: 8 quant vectors and the scales (f32 bits).
type Packed = [__m512i; 9];

/// A packed block of 16 Q4_1 rows: quants and scales as [`Packed`], and the
/// rows' mins (f32).
#[derive(Clone, Copy)]
struct WithMins(Packed, __m512);

/// What the tile loop needs of a packed block: its 16 lanes' dots with one
/// prepared activation block, added to `acc`.
trait Dot: Copy {
    /// The running sums of one activation row's 16 lanes.
    type Acc: Copy;
    /// Sums that start from `init`.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F.
    unsafe fn start(init: __m512) -> Self::Acc;
    /// `acc` plus this block's dots with the prepared block at `p`.
    ///
    /// # Safety
    /// `p` must point at a prepared block; the CPU must have AVX-512 VNNI.
    unsafe fn dot(&self, acc: Self::Acc, p: *const u8) -> Self::Acc;
    /// The 16 lanes' totals.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F.
    unsafe fn finish(acc: Self::Acc) -> __m512;
}

impl Dot for Packed {
    type Acc = __m512;
    #[inline(always)]
    unsafe fn start(init: __m512) -> __m512 {
        init
    }
    #[inline(always)]
    unsafe fn dot(&self, acc: __m512, p: *const u8) -> __m512 {
        // the correction -off · Σ q_a undoes the unsigned bias
        block(acc, self, p, bcast(p.add(36)))
    }
    #[inline(always)]
    unsafe fn finish(acc: __m512) -> __m512 {
        acc
    }
}

impl Dot for WithMins {
    /// The scaled quant terms and the min terms, apart until the end (as
    /// ggml's `q4_1_q8_1` keeps them).
    type Acc = (__m512, __m512);
    #[inline(always)]
    unsafe fn start(init: __m512) -> (__m512, __m512) {
        (init, _mm512_setzero_ps())
    }
    #[inline(always)]
    unsafe fn dot(&self, acc: (__m512, __m512), p: *const u8) -> (__m512, __m512) {
        // Σ (d_w q_w + m_w) d_a q_a = d_w d_a Σ q_w q_a + m_w s_a, with s_a (f32) at 36
        let mins = _mm512_fmadd_ps(self.1, _mm512_set1_ps(p.add(36).cast::<f32>().read_unaligned()), acc.1);
        (block(acc.0, &self.0, p, _mm512_setzero_si512()), mins)
    }
    #[inline(always)]
    unsafe fn finish(acc: (__m512, __m512)) -> __m512 {
        _mm512_add_ps(acc.0, acc.1)
    }
}

/// Block `b` of 16 Q4_0 rows: the 16 quant bytes of each row are transposed
/// by dwords (lane `r` of vector `t < 4` holds bytes `4t..4t + 4` of row `r`),
/// then split into low nibbles (values `4t..`) and high nibbles (values
/// `16 + 4t..`, vector `t + 4`); by GFNI where `G` ([`high_nibbles`]).
///
/// # Safety
/// Every row of `rows` must hold more than `b` blocks; the CPU must have AVX-512 F/BW (and GFNI if `G`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn pack_q4_0<const G: bool, S: Source<__m512i>>(s: &S, b: usize) -> Packed {
    nibble_block::<G>(s, b, 2)
}

/// The high nibble of each byte of `t`, moved down: a shift and a mask, or
/// where `G` one bit-matrix product (`vgf2p8affineqb`: output bit `i < 4` is
/// input bit `i + 4`), an instruction fewer per vector, which lets more of a
/// weight stream be in flight (one thread from memory, Q4_0: 25 → 30 GB/s in a
/// kernel of this shape).
///
/// # Safety
/// The CPU must have AVX-512 BW, and GFNI if `G`.
#[inline(always)]
unsafe fn high_nibbles<const G: bool>(t: __m512i) -> __m512i {
    if G {
        _mm512_gf2p8affine_epi64_epi8::<0>(t, _mm512_set1_epi64(0x1020_4080_0000_0000))
    } else {
        _mm512_and_si512(_mm512_srli_epi16::<4>(t), _mm512_set1_epi8(0x0f))
    }
}

/// Block `b` of 16 rows of 4-bit quants at byte `qs` of each block, scales
/// (f16) at byte 0: the transposed quants split into nibbles, and the scales.
///
/// # Safety
/// As for [`pack_q4_0`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn nibble_block<const G: bool>(s: &impl Source<__m512i>, b: usize, qs: usize) -> Packed {
    let t = s.t16(b, qs);
    let m4 = _mm512_set1_epi8(0x0f);
    let mut out = [_mm512_setzero_si512(); 9];
    for e in 0..4 {
        out[e] = _mm512_and_si512(t[e], m4);
        out[e + 4] = high_nibbles::<G>(t[e]);
    }
    out[8] = s.half(b, 0);
    out
}

/// Block `b` of 16 Q4_1 rows: the quants as for Q4_0 ([`pack_q4_0`]; Q4_1's
/// are unsigned already), the scales, and the mins.
///
/// # Safety
/// Every row of `rows` must hold more than `b` blocks; the CPU must have AVX-512 F/BW.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn pack_q4_1<const G: bool, S: Source<__m512i>>(s: &S, b: usize) -> WithMins {
    let mins = s.half(b, 2);
    WithMins(nibble_block::<G>(s, b, 4), _mm512_castsi512_ps(mins))
}

/// Block `b` of 16 Q5_0 rows: the low four bits as for Q4_0 ([`pack_q4_0`]),
/// and bit 4 of each quant from the rows' 32-bit `qh` words. Repacked,
/// vector `e`'s bits are bit `e` of each byte
/// ([`q5_0_high_bits`](super::super::q5_0_high_bits)): one test. In the GGUF
/// order (bit `j` for value `j`), the byte of `qh` that holds a vector's four
/// values' bits is spread over the four bytes of its lane and tested bit by bit.
///
/// # Safety
/// Every row of `rows` must hold more than `b` blocks; the CPU must have AVX-512 F/BW.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn pack_q5_0<const G: bool, S: Source<__m512i>>(s: &S, b: usize) -> Packed {
    let t = s.t16(b, 6);
    let qh = s.dword(b, 2);
    let (m4, bit4) = (_mm512_set1_epi8(0x0f), _mm512_set1_epi8(0x10));
    let mut out = [_mm512_setzero_si512(); 9];
    for e in 0..8 {
        let low = if e < 4 { _mm512_and_si512(t[e], m4) } else { high_nibbles::<G>(t[e - 4]) };
        let high = if S::REPACKED {
            _mm512_test_epi8_mask(qh, _mm512_set1_epi8(1 << e))
        } else {
            // values 4e..4e + 4: qh bits 4e..4e + 4, in byte e / 2 from bit 4 (e % 2)
            let sel = |q: i32| (4 * q + (e / 2) as i32) * 0x0101_0101;
            let spread =
                _mm512_shuffle_epi8(qh, _mm512_broadcast_i32x4(_mm_setr_epi32(sel(0), sel(1), sel(2), sel(3))));
            _mm512_test_epi8_mask(
                spread,
                _mm512_set1_epi32(i32::from_le_bytes([1u8, 2, 4, 8].map(|x| x << (4 * (e % 2))))),
            )
        };
        out[e] = _mm512_mask_add_epi8(low, high, low, bit4);
    }
    out[8] = s.half(b, 0);
    out
}

/// Block `b` of 16 IQ4_NL rows: the nibbles as for Q4_0 ([`pack_q4_0`]),
/// each looked up in the IQ4_NL table (one `vpshufb`) and made unsigned
/// (`+ 128`, as Q8_0's quants).
///
/// # Safety
/// As for [`pack_q4_0`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn pack_iq4_nl<const G: bool, S: Source<__m512i>>(s: &S, b: usize) -> Packed {
    let mut out = nibble_block::<G>(s, b, 2);
    let table = _mm512_broadcast_i32x4(_mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast()));
    let bias = _mm512_set1_epi8(-128);
    for v in &mut out[..8] {
        *v = _mm512_xor_si512(_mm512_shuffle_epi8(table, *v), bias);
    }
    out
}

/// Block `b` of 16 Q8_0 rows: the quants transposed ([`transpose32`](super::lanes::transpose32)) and made
/// unsigned (`+ 128`).
///
/// # Safety
/// Every row of `rows` must hold more than `b` blocks; the CPU must have AVX-512 F/BW.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn pack_q8_0<const G: bool, S: Source<__m512i>>(s: &S, b: usize) -> Packed {
    let t = s.t32(b, 2);
    let bias = _mm512_set1_epi8(-128);
    let mut out = [_mm512_setzero_si512(); 9];
    for e in 0..8 {
        out[e] = _mm512_xor_si512(t[e], bias);
    }
    out[8] = s.half(b, 0);
    out
}

/// Adds the packed blocks `pk` times the same blocks of `N` activation rows
/// (`a[j]` points at the first of them) to the 16-lane accumulators at `o[j]`
/// (starting from 0 when `first`); lanes outside `mask` are neither read nor written.
///
/// # Safety
/// `a[j]` must point at `pk.len()` prepared blocks; the lanes of `o[j]` in
/// `mask` must be writable (and readable unless `first`); the CPU must have AVX-512 VNNI.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn group<const N: usize, P: Dot>(pk: &[P], a: [*const u8; N], o: [*mut f32; N], mask: __mmask16, first: bool) {
    let mut acc = [P::start(_mm512_setzero_ps()); N];
    if !first {
        for j in 0..N {
            acc[j] = P::start(_mm512_maskz_loadu_ps(mask, o[j]));
        }
    }
    for (bi, w) in pk.iter().enumerate() {
        for j in 0..N {
            acc[j] = w.dot(acc[j], a[j].add(bi * PB));
        }
    }
    for j in 0..N {
        _mm512_mask_storeu_ps(o[j], mask, P::finish(acc[j]));
    }
}

/// `acc` plus the 16 lanes' dots of the packed block `w` with the prepared
/// activation block at `p`, the integer sums starting from `init`.
///
/// # Safety
/// `p` must point at a prepared block; the CPU must have AVX-512 VNNI.
#[inline(always)]
unsafe fn block(acc: __m512, w: &Packed, p: *const u8, init: __m512i) -> __m512 {
    // two chains of 4 `vpdpbusd` (not one of 8), so that a single activation
    // row does not wait on their latency
    let (mut s0, mut s1) = (init, _mm512_setzero_si512());
    for t in 0..4 {
        s0 = _mm512_dpbusd_epi32(s0, w[2 * t], bcast(p.add(8 * t)));
        s1 = _mm512_dpbusd_epi32(s1, w[2 * t + 1], bcast(p.add(8 * t + 4)));
    }
    let s = _mm512_add_epi32(s0, s1);
    let d = _mm512_mul_ps(_mm512_castsi512_ps(w[8]), _mm512_set1_ps(p.add(32).cast::<f32>().read_unaligned()));
    _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), d, acc)
}

/// The blocks of Q4_0 weights from a [`Source`] (18-byte blocks), the high
/// nibbles by GFNI where `G` ([`high_nibbles`]).
struct Q4_0<S, const G: bool = false>(S);
/// Q4_1 weights (20-byte blocks).
struct Q4_1<S, const G: bool = false>(S);
/// Q5_0 weights (22-byte blocks).
struct Q5_0<S, const G: bool = false>(S);
/// Q8_0 weights (34-byte blocks; no nibbles, `G` unused).
struct Q8_0<S, const G: bool = false>(S);
/// IQ4_NL weights (18-byte blocks).
struct Iq4Nl<S, const G: bool = false>(S);

/// `Blocks` for a weight wrapper `$ty` whose blocks `$pack` decodes into `$p`.
macro_rules! source_blocks {
    ($ty:ident, $p:ty, $pack:ident) => {
        impl<S: Source<__m512i>, const G: bool> Blocks<$p> for $ty<S, G> {
            #[inline(always)]
            unsafe fn get(&self, b: usize) -> $p {
                self.0.touch(b);
                $pack::<G, S>(&self.0, b)
            }
        }
    };
}

source_blocks!(Q4_0, Packed, pack_q4_0);
source_blocks!(Q4_1, WithMins, pack_q4_1);
source_blocks!(Q5_0, Packed, pack_q5_0);
source_blocks!(Q8_0, Packed, pack_q8_0);
source_blocks!(Iq4Nl, Packed, pack_iq4_nl);

/// Up to four activation rows (`a[j]`): each block is packed in registers
/// and used at once by every row, where the chunk buffer would store it and
/// load it back per group of rows. The sums restart and finish at every `KC`
/// blocks as [`tile`]'s chunks do, so that a row gets the bits it gets among
/// others (Q4_1's separate min terms are added at each chunk's end).
///
/// # Safety
/// As for [`tile`], with `N` activation rows in `a` and their 16-lane outputs at `o + j · stride`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn few<const N: usize, P: Dot>(
    nb: usize,
    w: &impl Blocks<P>,
    a: &[&[u8]],
    o: *mut f32,
    stride: usize,
    mask: __mmask16,
) {
    let (a, o) = rows_at::<N>(a, o, stride);
    let mut sum = [_mm512_setzero_ps(); N];
    for b0 in (0..nb).step_by(KC) {
        let mut acc = [P::start(_mm512_setzero_ps()); N];
        for j in 0..N {
            acc[j] = P::start(sum[j]);
        }
        for b in b0..(b0 + KC).min(nb) {
            let p = w.get(b);
            for j in 0..N {
                acc[j] = p.dot(acc[j], a[j].add(b * PB));
            }
        }
        for j in 0..N {
            sum[j] = P::finish(acc[j]);
        }
    }
    for j in 0..N {
        _mm512_mask_storeu_ps(o[j], mask, sum[j]);
    }
}

/// The tile loop over the blocks of `w` (`rows` weight rows).
///
/// # Safety
/// The contract of `super::super::common::RawTile`, at this level, with `w` giving
/// `nb` blocks of `rows` weight rows.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn tile<P: Dot>(nb: usize, w: &impl Blocks<P>, rows: usize, a: &[&[u8]], out: &mut [f32], stride: usize) {
    let mask = lanes_mask(rows);
    let o = out.as_mut_ptr();
    match a.len() {
        0 => return,
        1 => return few::<1, P>(nb, w, a, o, stride, mask),
        2 => return few::<2, P>(nb, w, a, o, stride, mask),
        3 => return few::<3, P>(nb, w, a, o, stride, mask),
        4 => return few::<4, P>(nb, w, a, o, stride, mask),
        _ => {}
    }
    // written before it is read: no need to zero 18 KiB per call
    let mut buf = std::mem::MaybeUninit::<[P; KC]>::uninit();
    let base = buf.as_mut_ptr().cast::<P>();
    let mut b0 = 0;
    while b0 < nb {
        let kc = KC.min(nb - b0);
        for bi in 0..kc {
            let p = w.get(b0 + bi);
            // SAFETY: bi < KC, inside `buf`
            base.add(bi).write(p);
        }
        // SAFETY: the first `kc` entries were just written
        let pk = std::slice::from_raw_parts(base.cast_const(), kc);
        let mut j = 0;
        while j < a.len() {
            macro_rules! run {
                ($n:expr) => {{
                    let (mut ap, mut op) = ([std::ptr::null::<u8>(); $n], [std::ptr::null_mut::<f32>(); $n]);
                    for jj in 0..$n {
                        ap[jj] = a[j + jj].as_ptr().add(b0 * PB);
                        op[jj] = o.add((j + jj) * stride);
                    }
                    group::<$n, P>(pk, ap, op, mask, b0 == 0);
                    j += $n;
                }};
            }
            match a.len() - j {
                NR.. => run!(NR),
                4.. => run!(4),
                2.. => run!(2),
                _ => run!(1),
            }
        }
        b0 += kc;
    }
}

/// [`tile`] compiled with GFNI, for weights whose nibbles it splits
/// ([`high_nibbles`]); the same bits.
///
/// # Safety
/// As for [`tile`], and the CPU must have GFNI.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,gfni")]
unsafe fn tile_gfni<P: Dot>(nb: usize, w: &impl Blocks<P>, rows: usize, a: &[&[u8]], out: &mut [f32], stride: usize) {
    tile(nb, w, rows, a, out, stride)
}

/// Defines the kernel `$name` on weight rows in their GGUF layout and
/// `$packed` on a group repacked with `$head` and `$tail` bytes of each block
/// outside its transposed body ([`Repacked`]), both decoding with `$ty`.
macro_rules! kernels {
    ($name:ident, $packed:ident, $ty:ident, $wb:expr, $head:expr, $tail:expr) => {
        /// Weights in their GGUF layout.
        ///
        /// # Safety
        /// The contract of `super::super::common::RawTile`, at this level.
        pub(crate) unsafe fn $name(nb: usize, w: &[&[u8]], a: &[&[u8]], out: &mut [f32], stride: usize) {
            tile(nb, &$ty::<_, false>(Rows::new(w, $wb)), w.len(), a, out, stride)
        }

        /// A run of groups of weight rows repacked by `TileKernel::pack_group`.
        ///
        /// # Safety
        /// The contract of `super::super::common::RawPacked`, at this level.
        pub(crate) unsafe fn $packed(
            nb: usize,
            group: &[u8],
            rows: usize,
            a: &[&[u8]],
            out: &mut [f32],
            stride: usize,
        ) {
            // The group's geometry is built inside each compiled form, so that its
            // constants reach the loop (the block offsets, where the scales lie)
            // instead of being read and branched on per block.
            #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,gfni")]
            unsafe fn with_gfni(nb: usize, group: &[u8], rows: usize, a: &[&[u8]], out: &mut [f32], stride: usize) {
                for (at, first, n) in groups_of_run(nb * $wb * MR, MR, rows) {
                    let g = Repacked::new(group[at..].as_ptr(), $wb, $head, $tail);
                    tile_gfni(nb, &$ty::<_, true>(g), n, a, &mut out[first..], stride)
                }
            }
            #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
            unsafe fn without(nb: usize, group: &[u8], rows: usize, a: &[&[u8]], out: &mut [f32], stride: usize) {
                for (at, first, n) in groups_of_run(nb * $wb * MR, MR, rows) {
                    let g = Repacked::new(group[at..].as_ptr(), $wb, $head, $tail);
                    tile(nb, &$ty::<_, false>(g), n, a, &mut out[first..], stride)
                }
            }
            if std::arch::is_x86_feature_detected!("gfni") {
                with_gfni(nb, group, rows, a, out, stride)
            } else {
                without(nb, group, rows, a, out, stride)
            }
        }
    };
}

kernels!(q4_0, q4_0_packed, Q4_0, 18, 2, 0);
kernels!(q4_1, q4_1_packed, Q4_1, 20, 0, 0);
kernels!(q5_0, q5_0_packed, Q5_0, 22, 2, 0);
kernels!(q8_0, q8_0_packed, Q8_0, 34, 2, 0);
kernels!(iq4_nl, iq4_nl_packed, Iq4Nl, 18, 2, 0);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::quant::dot::{quantize_activations, SimdLevel};
    use crate::quant::tile::tile_kernel_for;

    /// The nibble types on a repacked group, one and three activation rows: the
    /// shift-and-mask and the GFNI forms of the high nibbles give the same bits,
    /// and those of the tile on the rows in place. Random bytes (an xorshift),
    /// each block's f16 scale (and Q4_1's min) kept finite.
    #[test]
    fn both_nibble_forms_give_the_tiles_bits() {
        if !SimdLevel::Avx512.is_supported() {
            eprintln!("skipped: no AVX-512 VNNI");
            return;
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let k = 5 * 32;
        for (dt, wb, head) in [(DType::Q4_0, 18, 2), (DType::Q4_1, 20, 0), (DType::Q5_0, 22, 2), (DType::IQ4_NL, 18, 2)]
        {
            let t = tile_kernel_for(dt, SimdLevel::Avx512).unwrap();
            let rows: Vec<Vec<u8>> = (0..MR_ROWS)
                .map(|_| {
                    let mut r: Vec<u8> = (0..5 * wb).map(|_| next() as u8).collect();
                    for b in r.chunks_exact_mut(wb) {
                        // small positive f16s (exponent below all-ones)
                        b[..2].copy_from_slice(&[0x00, 0x2c]);
                        if dt == DType::Q4_1 {
                            b[2..4].copy_from_slice(&[0x00, 0x28]);
                        }
                    }
                    r
                })
                .collect();
            let acts: Vec<Vec<u8>> = (0..3)
                .map(|_| {
                    let a: Vec<f32> = (0..k).map(|_| (next() % 2001) as f32 / 1000.0 - 1.0).collect();
                    let mut q = vec![0u8; crate::quant::dot::vec_dot_type(dt).row_size(k as i64).unwrap()];
                    quantize_activations(dt, &a, &mut q).unwrap();
                    let mut p = vec![0u8; t.prepared_row_size(k).unwrap()];
                    t.prepare(&q, &mut p).unwrap();
                    p
                })
                .collect();
            let w: Vec<&[u8]> = rows.iter().map(|r| &r[..]).collect();
            let mut group = vec![0u8; t.packed_group_size(k).unwrap()];
            t.pack_group(k, &w, &mut group).unwrap();
            for n in [1, 3] {
                let a: Vec<&[u8]> = acts[..n].iter().map(|r| &r[..]).collect();
                let mut want = vec![0f32; n * MR_ROWS];
                t.run(k, &w, &a, &mut want, MR_ROWS).unwrap();
                let mut outs = Vec::new();
                for gfni in [false, true] {
                    if gfni && !std::arch::is_x86_feature_detected!("gfni") {
                        continue;
                    }
                    let mut o = vec![0f32; n * MR_ROWS];
                    let g = Repacked::new(group.as_ptr(), wb, head, 0);
                    // SAFETY: `group` holds 5 repacked blocks of 16 rows, each activation
                    // row 5 prepared blocks, `o` n · 16 floats; AVX-512 VNNI (and GFNI
                    // where used) checked above.
                    unsafe {
                        macro_rules! both {
                            ($ty:ident) => {
                                if gfni {
                                    tile_gfni(5, &$ty::<_, true>(g), MR_ROWS, &a, &mut o, MR_ROWS)
                                } else {
                                    tile(5, &$ty::<_, false>(g), MR_ROWS, &a, &mut o, MR_ROWS)
                                }
                            };
                        }
                        match dt {
                            DType::Q4_0 => both!(Q4_0),
                            DType::Q4_1 => both!(Q4_1),
                            DType::Q5_0 => both!(Q5_0),
                            _ => both!(Iq4Nl),
                        }
                    }
                    outs.push(o);
                }
                for o in outs {
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&o), bits(&want), "{dt}, {n} activation rows");
                }
            }
        }
    }

    /// Weight rows of a group.
    const MR_ROWS: usize = super::super::lanes::MR;
}
