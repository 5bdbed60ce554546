//! The 32-value tiles: Q4_0, Q4_1, Q5_0, Q8_0 and IQ4_NL weights, prepared
//! Q8_0 activations (Q8_1 for Q4_1).
//!
//! - Q4_0 and Q4_1: the nibbles (`≤ 15`) times the broadcast activation
//!   quants; a pair is at most `2·15·128`, so the 8 products of a block add up
//!   in i16 without saturating, then `vpmaddwd` widens them once. Q4_1's min
//!   term `m_w · s_a` is summed apart and added at the end, as ggml does.
//! - Q5_0: five bits (`≤ 31`), so only four products add up in i16 (`4·2·31·128`).
//! - Q8_0 and IQ4_NL (its table values): `|q_w|` times the activation quants
//!   with the weight's sign (the dot kernels' `vpsignb` trick, with their
//!   `-128` caveat), widened per group.

// index loops read best over the lanes and vectors of a block
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;

use super::super::super::iq_grids::KVALUES_IQ4NL;
use super::super::common::{groups_of_run, rows_at, Blocks, Source, PREPARED_BLOCK as PB};
use super::lanes::{bcast, fifth_bit, load_acc, store_acc, Repacked, Rows, MR};

/// Blocks per packed chunk.
const KC: usize = 32;
/// Activation rows per register group.
const NR: usize = 4;

/// One packed block: 8 unsigned (or absolute) quant vectors, 8 signed ones
/// ([`SIGNED`]), the scales and (Q4_1) the mins (f32 bits).
type Packed = [__m256i; 18];
/// Where the scales and the mins are in a [`Packed`].
const SCALES: usize = 16;
const MINS_AT: usize = 17;

/// How a kind's products are summed (the `MODE` of [`group`]).
/// Nibbles, 8 products in i16, plus the prepared correction (Q4_0).
const NIBBLES: u8 = 0;
/// `|q_w| · ±q_a`, widened per vector (Q8_0, IQ4_NL).
const SIGNED: u8 = 1;
/// Five bits, 4 products in i16 twice, plus the correction (Q5_0).
const FIVE: u8 = 2;
/// Nibbles as [`NIBBLES`], no correction, plus `m_w · s_a` (Q4_1).
const MINS: u8 = 3;

/// Vector `e` of a block's nibbles (`e < 4`: the low ones, values `4e..`;
/// else the high ones, values `16 + 4(e - 4)..`) from a block's 16
/// transposed quant bytes ([`Source::t16`]).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn nibbles(t: &[__m256i; 4], e: usize) -> __m256i {
    let m4 = _mm256_set1_epi8(0x0f);
    if e < 4 {
        _mm256_and_si256(t[e], m4)
    } else {
        _mm256_and_si256(_mm256_srli_epi16::<4>(t[e - 4]), m4)
    }
}

/// Block `b` of 8 rows of 4-bit quants at byte `qs` of each block, scales
/// (f16) at byte 0: vector `t` lane `r` holds values `4t..4t + 4` of row `r`.
///
/// # Safety
/// Every row of `rows` must hold more than `b` blocks; the CPU must have AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn nibble_block(s: &impl Source<__m256i>, b: usize, qs: usize) -> Packed {
    let t = s.t16(b, qs);
    let mut out = [_mm256_setzero_si256(); 18];
    for e in 0..8 {
        out[e] = nibbles(&t, e);
    }
    out[SCALES] = s.half(b, 0);
    out
}

/// Block `b` of 8 Q4_0 rows ([`nibble_block`]).
///
/// # Safety
/// As for [`nibble_block`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack_q4_0(s: &impl Source<__m256i>, b: usize) -> Packed {
    nibble_block(s, b, 2)
}

/// Block `b` of 8 Q4_1 rows: the nibbles (unsigned already), the scales and the mins.
///
/// # Safety
/// As for [`nibble_block`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack_q4_1(s: &impl Source<__m256i>, b: usize) -> Packed {
    let mut out = nibble_block(s, b, 4);
    out[MINS_AT] = s.half(b, 2);
    out
}

/// Block `b` of 8 Q5_0 rows: the low four bits as for Q4_0, and bit 4 of
/// each quant from the rows' 32-bit `qh`. Repacked, vector `e`'s bits are bit
/// `e` of each byte ([`q5_0_high_bits`](super::super::q5_0_high_bits)),
/// a mask and a shift from bit 4 ([`fifth_bit`]);
/// in the GGUF order (bit `j` for value `j`), the byte of `qh` holding a
/// vector's four values' bits is spread over the four bytes of each lane and
/// tested bit by bit.
///
/// # Safety
/// As for [`nibble_block`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack_q5_0<S: Source<__m256i>>(s: &S, b: usize) -> Packed {
    let t = s.t16(b, 6);
    let qh = s.dword(b, 2);
    let bit4 = _mm256_set1_epi8(0x10);
    let mut out = [_mm256_setzero_si256(); 18];
    for e in 0..8 {
        let high = if S::REPACKED {
            fifth_bit(qh, e)
        } else {
            // values 4e..4e + 4: qh bits 4e..4e + 4, in byte e / 2 from bit 4 (e % 2)
            let sel = |q: i32| (4 * q + (e / 2) as i32) * 0x0101_0101;
            let ctrl = _mm_setr_epi32(sel(0), sel(1), sel(2), sel(3));
            let spread = _mm256_shuffle_epi8(qh, _mm256_set_m128i(ctrl, ctrl));
            let bits = _mm256_set1_epi32(i32::from_le_bytes([1u8, 2, 4, 8].map(|x| x << (4 * (e % 2)))));
            _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bits), bits), bit4)
        };
        out[e] = _mm256_or_si256(nibbles(&t, e), high);
    }
    out[SCALES] = s.half(b, 0);
    out
}

/// Block `b` of 8 IQ4_NL rows: the nibbles looked up in the IQ4_NL table
/// (one `vpshufb`), as `|q|` (0..8) and `q` (8..16), as for Q8_0.
///
/// # Safety
/// As for [`nibble_block`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack_iq4_nl(s: &impl Source<__m256i>, b: usize) -> Packed {
    let t = s.t16(b, 2);
    let table = _mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast());
    let table = _mm256_set_m128i(table, table);
    let mut out = [_mm256_setzero_si256(); 18];
    for e in 0..8 {
        let q = _mm256_shuffle_epi8(table, nibbles(&t, e));
        out[e] = _mm256_sign_epi8(q, q);
        out[8 + e] = q;
    }
    out[SCALES] = s.half(b, 0);
    out
}

/// Block `b` of 8 Q8_0 rows, transposed ([`transpose32`](super::lanes::transpose32)), as `|q|` (0..8) and `q` (8..16).
///
/// # Safety
/// Every row of `rows` must hold more than `b` blocks; the CPU must have AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack_q8_0(s: &impl Source<__m256i>, b: usize) -> Packed {
    let t = s.t32(b, 2);
    let mut out = [_mm256_setzero_si256(); 18];
    for e in 0..8 {
        out[e] = _mm256_sign_epi8(t[e], t[e]);
        out[8 + e] = t[e];
    }
    out[SCALES] = s.half(b, 0);
    out
}

/// The weight types of these tiles, as the `T` of [`Weights`].
const Q4_0: u8 = 0;
const Q4_1: u8 = 1;
const Q5_0: u8 = 2;
const Q8_0: u8 = 3;
const IQ4_NL: u8 = 4;

/// Weights of type `T` (one of the constants above) from a [`Source`],
/// decoded a block at a time.
struct Weights<const T: u8, S>(S);

impl<const T: u8, S: Source<__m256i>> Blocks<Packed> for Weights<T, S> {
    #[inline(always)]
    unsafe fn get(&self, b: usize) -> Packed {
        self.0.touch(b);
        match T {
            Q4_0 => pack_q4_0(&self.0, b),
            Q4_1 => pack_q4_1(&self.0, b),
            Q5_0 => pack_q5_0(&self.0, b),
            Q8_0 => pack_q8_0(&self.0, b),
            _ => pack_iq4_nl(&self.0, b),
        }
    }
}

/// `acc` plus one activation row's dots with the packed block `w` (the
/// prepared block at `p`), and Q4_1's `mins` plus its min terms: the 8 lanes'
/// products summed as `MODE` says ([`NIBBLES`], [`SIGNED`], [`FIVE`], [`MINS`]).
///
/// # Safety
/// `p` must point at a prepared block; the CPU must have AVX2+FMA.
#[inline(always)]
unsafe fn row_block<const MODE: u8>(w: &Packed, p: *const u8, acc: __m256, mins: __m256) -> (__m256, __m256) {
    let ones = _mm256_set1_epi16(1);
    let prod = |t: usize| _mm256_maddubs_epi16(w[t], bcast(p.add(4 * t)));
    let s = match MODE {
        SIGNED => {
            let mut s = _mm256_setzero_si256();
            for t in 0..8 {
                let y = _mm256_sign_epi8(bcast(p.add(4 * t)), w[8 + t]);
                s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(w[t], y), ones));
            }
            s
        }
        FIVE => {
            let lo = _mm256_add_epi16(_mm256_add_epi16(prod(0), prod(1)), _mm256_add_epi16(prod(2), prod(3)));
            let hi = _mm256_add_epi16(_mm256_add_epi16(prod(4), prod(5)), _mm256_add_epi16(prod(6), prod(7)));
            let s = _mm256_add_epi32(_mm256_madd_epi16(lo, ones), _mm256_madd_epi16(hi, ones));
            // plus the correction -16 · Σ q_a for the unsigned quants
            _mm256_add_epi32(s, bcast(p.add(36)))
        }
        _ => {
            let mut s16 = prod(0);
            for t in 1..8 {
                s16 = _mm256_add_epi16(s16, prod(t));
            }
            let s = _mm256_madd_epi16(s16, ones);
            // Q4_0: plus the correction -8 · Σ q_a for the unsigned nibbles
            if MODE == NIBBLES {
                _mm256_add_epi32(s, bcast(p.add(36)))
            } else {
                s
            }
        }
    };
    let (dw, da) = (_mm256_castsi256_ps(w[SCALES]), _mm256_set1_ps(p.add(32).cast::<f32>().read_unaligned()));
    let acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, da), acc);
    if MODE == MINS {
        // Q4_1: Σ (d_w q_w + m_w) d_a q_a = d_w d_a Σ q_w q_a + m_w s_a, s_a (f32) at 36
        let sa = _mm256_set1_ps(p.add(36).cast::<f32>().read_unaligned());
        return (acc, _mm256_fmadd_ps(_mm256_castsi256_ps(w[MINS_AT]), sa, mins));
    }
    (acc, mins)
}

/// Adds the packed blocks `pk` times the same blocks of `N` activation rows
/// (`a[j]` points at the first of them) to the 8-lane accumulators at `o[j]`
/// (starting from 0 when `first`); only the first `m` lanes are read or
/// written. Q4_1's min terms are summed apart and added at the end.
///
/// # Safety
/// `a[j]` must point at `pk.len()` prepared blocks; `m` values at `o[j]` must be
/// writable (and readable unless `first`); the CPU must have AVX2+FMA.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn group<const MODE: u8, const N: usize>(
    pk: &[Packed],
    a: [*const u8; N],
    o: [*mut f32; N],
    m: usize,
    first: bool,
) {
    let mut acc = load_acc(o, m, first);
    let mut mins = [_mm256_setzero_ps(); N];
    for (bi, w) in pk.iter().enumerate() {
        for j in 0..N {
            (acc[j], mins[j]) = row_block::<MODE>(w, a[j].add(bi * PB), acc[j], mins[j]);
        }
    }
    if MODE == MINS {
        for j in 0..N {
            acc[j] = _mm256_add_ps(acc[j], mins[j]);
        }
    }
    store_acc(o, m, acc);
}

/// Up to four activation rows (`a[j]`): each block is decoded in registers
/// and used at once by every row, where the chunk buffer would store it and
/// load it back per group of rows. Q4_1's min terms are added at every `KC`
/// blocks, as [`tile`]'s chunks add them, so a row gets the bits it gets
/// among others.
///
/// # Safety
/// As for [`tile`], with `N` activation rows in `a` and their `m` outputs at `o + j · stride`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn few<const MODE: u8, const N: usize>(
    nb: usize,
    w: &impl Blocks<Packed>,
    a: &[&[u8]],
    o: *mut f32,
    stride: usize,
    m: usize,
) {
    let (a, o) = rows_at::<N>(a, o, stride);
    let mut acc = [_mm256_setzero_ps(); N];
    for b0 in (0..nb).step_by(KC) {
        let mut mins = [_mm256_setzero_ps(); N];
        for b in b0..(b0 + KC).min(nb) {
            let p = w.get(b);
            for j in 0..N {
                (acc[j], mins[j]) = row_block::<MODE>(&p, a[j].add(b * PB), acc[j], mins[j]);
            }
        }
        if MODE == MINS {
            for j in 0..N {
                acc[j] = _mm256_add_ps(acc[j], mins[j]);
            }
        }
    }
    store_acc(o, m, acc);
}

/// The tile loop over the blocks of `w` (`rows` weight rows); `MODE` picks the products.
///
/// # Safety
/// The contract of `super::super::common::RawTile`, at this level, with `w` giving
/// `nb` blocks of `rows` weight rows.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile<const MODE: u8>(
    nb: usize,
    w: &impl Blocks<Packed>,
    rows: usize,
    a: &[&[u8]],
    out: &mut [f32],
    stride: usize,
) {
    let m = rows.min(MR);
    let o = out.as_mut_ptr();
    match a.len() {
        0 => return,
        1 => return few::<MODE, 1>(nb, w, a, o, stride, m),
        2 => return few::<MODE, 2>(nb, w, a, o, stride, m),
        3 => return few::<MODE, 3>(nb, w, a, o, stride, m),
        4 => return few::<MODE, 4>(nb, w, a, o, stride, m),
        _ => {}
    }
    // written before it is read: no need to zero it per call
    let mut buf = std::mem::MaybeUninit::<[Packed; KC]>::uninit();
    let base = buf.as_mut_ptr().cast::<Packed>();
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
                    group::<MODE, $n>(pk, ap, op, m, b0 == 0);
                    j += $n;
                }};
            }
            match a.len() - j {
                NR.. => run!(NR),
                2.. => run!(2),
                _ => run!(1),
            }
        }
        b0 += kc;
    }
}

/// Defines the kernel `$name` on weight rows in their GGUF layout and
/// `$packed` on a group repacked with `$head` bytes of each block before its
/// transposed body ([`Repacked`]), both decoding type `$t` and summing by `$mode`.
macro_rules! kernels {
    ($name:ident, $packed:ident, $t:ident, $mode:ident, $wb:expr, $head:expr) => {
        /// Weights in their GGUF layout.
        ///
        /// # Safety
        /// The contract of `super::super::common::RawTile`, at this level.
        pub(crate) unsafe fn $name(nb: usize, w: &[&[u8]], a: &[&[u8]], out: &mut [f32], stride: usize) {
            tile::<$mode>(nb, &Weights::<$t, _>(Rows::new(w, $wb)), w.len(), a, out, stride)
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
            // the group's geometry built inside the compiled form, so that its
            // constants reach the loop (as at AVX-512)
            #[target_feature(enable = "avx2,fma,f16c")]
            unsafe fn run(nb: usize, group: &[u8], rows: usize, a: &[&[u8]], out: &mut [f32], stride: usize) {
                for (at, first, n) in groups_of_run(nb * $wb * MR, MR, rows) {
                    let src = Repacked::new(group[at..].as_ptr(), $wb, $head, 0);
                    tile::<$mode>(nb, &Weights::<$t, _>(src), n, a, &mut out[first..], stride)
                }
            }
            run(nb, group, rows, a, out, stride)
        }
    };
}

kernels!(q4_0, q4_0_packed, Q4_0, NIBBLES, 18, 2);
kernels!(q4_1, q4_1_packed, Q4_1, MINS, 20, 0);
kernels!(q5_0, q5_0_packed, Q5_0, FIVE, 22, 2);
kernels!(q8_0, q8_0_packed, Q8_0, SIGNED, 34, 2);
kernels!(iq4_nl, iq4_nl_packed, IQ4_NL, SIGNED, 18, 2);
