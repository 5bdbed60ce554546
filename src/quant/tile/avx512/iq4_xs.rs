//! The IQ4_XS tile, with Q8_K activations (their own prepared rows): per
//! super-block, 8 groups of 32 IQ4_NL table values made unsigned (`+ 128`) as
//! 8 vectors each, the signed group scales `ls - 32` in lanes (and as i16
//! pairs). Per group, 8 `vpdpbusd` and a `vpmulld` by the scale; the `+ 128`
//! comes back off as `128 · Σ_g scale_g · (bsum_2g + bsum_2g+1)` (`vpdpwssd`),
//! so the integer dot of the super-block is exact; then `acc + d·d_a·isum`.
//! Sums stay inside i32: at most `8 · 31 · 32 · 255 · 128`.

// index loops read best over the lanes and vectors of a block
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;

use super::super::super::iq_grids::KVALUES_IQ4NL;
use super::super::common::{Blocks, Source};
use super::k::{load_acc, KC_K, NR_K, QB};
use super::lanes::{bcast, Repacked, Rows};

/// One packed IQ4_XS super-block of 16 rows: group `g`'s values `+ 128` as 8
/// vectors (lane `r` of vector `e`: values `4e..4e + 4` of row `r`), the
/// scales as i32 lanes and as two i16 per lane, `d` as f32.
#[derive(Clone, Copy)]
struct PackedXs {
    q: [[__m512i; 8]; 8],
    sc: [__m512i; 8],
    pairs: [__m512i; 8],
    d: __m512,
}

/// Super-block `b` of 16 IQ4_XS rows (136 bytes: `d`, `scales_h`, `scales_l`,
/// then group `g`'s 16 index bytes at `8 + 16g`).
///
/// # Safety
/// Every row of `rows` must hold more than `b` super-blocks; the CPU must have AVX-512 F/BW.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn pack_iq4_xs(s: &impl Source<__m512i>, b: usize) -> PackedXs {
    // lane r: h[0] = d | scales_h << 16, h[1] = the four scales_l bytes
    let h = s.t16(b, 0);
    let table = _mm512_broadcast_i32x4(_mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast()));
    let (m4, bias) = (_mm512_set1_epi8(0x0f), _mm512_set1_epi8(-128));
    let scales_h = _mm512_srli_epi32::<16>(h[0]);
    let mut out = PackedXs {
        q: [[_mm512_setzero_si512(); 8]; 8],
        sc: [_mm512_setzero_si512(); 8],
        pairs: [_mm512_setzero_si512(); 8],
        d: _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h[0])),
    };
    for g in 0..8 {
        let t = s.t16(b, 8 + 16 * g);
        for e in 0..4 {
            let (lo, hi) = (_mm512_and_si512(t[e], m4), _mm512_and_si512(_mm512_srli_epi16::<4>(t[e]), m4));
            out.q[g][e] = _mm512_xor_si512(_mm512_shuffle_epi8(table, lo), bias);
            out.q[g][e + 4] = _mm512_xor_si512(_mm512_shuffle_epi8(table, hi), bias);
        }
        let low = _mm512_and_si512(_mm512_srlv_epi32(h[1], _mm512_set1_epi32(4 * g as i32)), _mm512_set1_epi32(0x0f));
        let top = _mm512_and_si512(_mm512_srlv_epi32(scales_h, _mm512_set1_epi32(2 * g as i32)), _mm512_set1_epi32(3));
        let sc = _mm512_sub_epi32(_mm512_or_si512(low, _mm512_slli_epi32::<4>(top)), _mm512_set1_epi32(32));
        out.sc[g] = sc;
        out.pairs[g] = _mm512_or_si512(_mm512_and_si512(sc, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32::<16>(sc));
    }
    out
}

/// The super-blocks of IQ4_XS weights from a [`Source`].
struct Iq4Xs<S>(S);

impl<S: Source<__m512i>> Blocks<PackedXs> for Iq4Xs<S> {
    #[inline(always)]
    unsafe fn get(&self, b: usize) -> PackedXs {
        self.0.touch(b);
        pack_iq4_xs(&self.0, b)
    }
}

/// Adds the packed super-blocks `pk` times the same super-blocks of `N`
/// activation rows (`a[j]` points at the first Q8_K block) to the 16-lane
/// accumulators at `o[j]` (from 0 when `first`); lanes outside `mask` are
/// neither read nor written.
///
/// # Safety
/// `a[j]` must point at `pk.len()` Q8_K blocks; the lanes of `o[j]` in `mask`
/// must be writable (and readable unless `first`); the CPU must have AVX-512 VNNI.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn group_xs<const N: usize>(pk: &[PackedXs], a: [*const u8; N], o: [*mut f32; N], mask: __mmask16, first: bool) {
    let mut acc = load_acc(o, mask, first);
    for (bi, w) in pk.iter().enumerate() {
        let (mut isum, mut corr) = ([_mm512_setzero_si512(); N], [_mm512_setzero_si512(); N]);
        for g in 0..8 {
            for j in 0..N {
                let y = a[j].add(bi * QB);
                let mut s = _mm512_setzero_si512();
                for (e, q) in w.q[g].iter().enumerate() {
                    s = _mm512_dpbusd_epi32(s, *q, bcast(y.add(4 + 32 * g + 4 * e)));
                }
                isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(s, w.sc[g]));
                // the group's two bsums (values 32g..32g + 32)
                corr[j] = _mm512_dpwssd_epi32(corr[j], w.pairs[g], bcast(y.add(260 + 4 * g)));
            }
        }
        for j in 0..N {
            let y = a[j].add(bi * QB);
            let isum = _mm512_sub_epi32(isum[j], _mm512_slli_epi32::<7>(corr[j]));
            let da = _mm512_set1_ps(y.cast::<f32>().read_unaligned());
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(w.d, da), acc[j]);
        }
    }
    for j in 0..N {
        _mm512_mask_storeu_ps(o[j], mask, acc[j]);
    }
}

k_kernels!(iq4_xs, iq4_xs_packed, Iq4Xs, 136, 0, PackedXs, group_xs);
