//! One activation row against repacked Q4_K/Q5_K groups (decode's products):
//! each super-block's quants are split and used as they are loaded, and only
//! its scales and mins ([`HeadK`](super::k::HeadK)) are decoded whole. A whole [`super::k`]
//! tile block, which one row would not reuse, would cost a 4 KiB store per
//! super-block. Q5_K's fifth bit is merged into each nibble vector: under a
//! byte mask, or where the CPU has GFNI by one `vgf2p8affineqb`, which also
//! moves the high nibbles down in one instruction.

use std::arch::x86_64::*;

use super::super::common::{groups_of_run, prefetch_ahead};
use super::k::{decode_head, finish_k4, q4_k_tiled_packed, q5_k_tiled_packed, QB};
use super::lanes::{bcast, lanes_mask, MR};

/// The low and high nibbles of the bytes of `t`, each in the low half of its byte.
///
/// # Safety
/// The CPU must have AVX-512 BW.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn nibbles(t: __m512i) -> (__m512i, __m512i) {
    let m4 = _mm512_set1_epi8(0x0f);
    (_mm512_and_si512(t, m4), _mm512_and_si512(_mm512_srli_epi16::<4>(t), m4))
}

/// Bit `g` of each byte of `qh`, as 16 or 0.
///
/// # Safety
/// The CPU must have AVX-512 BW.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn fifth_bit(qh: __m512i, g: usize) -> __m512i {
    _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(qh, _mm512_set1_epi8(1 << g)), _mm512_set1_epi8(16))
}

/// [`nibbles`] with the high ones moved down by one bit-matrix product
/// (`vgf2p8affineqb`: output bit `i < 4` is input bit `i + 4`).
///
/// # Safety
/// The CPU must have AVX-512 BW and GFNI.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,gfni")]
unsafe fn nibbles_gfni(t: __m512i) -> (__m512i, __m512i) {
    let high = _mm512_set1_epi64(0x1020_4080_0000_0000);
    (_mm512_and_si512(t, _mm512_set1_epi8(0x0f)), _mm512_gf2p8affine_epi64_epi8::<0>(t, high))
}

/// [`fifth_bit`] by one bit-matrix product (output bit 4 is input bit `g`).
///
/// # Safety
/// The CPU must have AVX-512 BW and GFNI.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,gfni")]
unsafe fn fifth_bit_gfni(qh: __m512i, g: usize) -> __m512i {
    _mm512_gf2p8affine_epi64_epi8::<0>(qh, _mm512_set1_epi64((1i64 << g) << 24))
}

/// One activation row against a repacked Q4_K group (`FIVE`: Q5_K), by the
/// bit helpers given, with the arithmetic of the tile's `group_k4` in its
/// order (the same bits).
macro_rules! single_k4_kernel {
    ($name:ident, $features:literal, $nibbles:ident, $fifth:ident) => {
        /// # Safety
        /// `p` must hold `nb` repacked super-blocks, `a` point at `nb` Q8_K
        /// blocks, and the lanes of `o` in `mask` be writable; the CPU must
        /// have the features enabled here.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn $name<const FIVE: bool>(nb: usize, p: *const u8, a: *const u8, o: *mut f32, mask: __mmask16) {
            let block = if FIVE { 176 } else { 144 } * MR;
            // body vectors: the 4 of the heads, Q5_K's 8 of fifth bits, then the nibbles
            let qs = if FIVE { 12 } else { 4 };
            let mut acc = _mm512_setzero_ps();
            for b in 0..nb {
                let (q, y) = (p.add(b * block), a.add(b * QB));
                prefetch_ahead(q, block);
                let ld = |v: usize| _mm512_loadu_si512(q.add(64 * v).cast());
                let w = decode_head(&[ld(0), ld(1), ld(2), ld(3)]);
                let mut isum = _mm512_setzero_si512();
                for c in 0..4 {
                    // groups 2c (low nibbles) and 2c + 1 (high nibbles) of quant bytes 32c..
                    let (mut lo, mut hi) = (_mm512_setzero_si512(), _mm512_setzero_si512());
                    for e in 0..8 {
                        let (mut tl, mut th) = $nibbles(ld(qs + 8 * c + e));
                        if FIVE {
                            // bit g of a fifth-bit byte belongs to group g
                            let qh = ld(4 + e);
                            tl = _mm512_or_si512(tl, $fifth(qh, 2 * c));
                            th = _mm512_or_si512(th, $fifth(qh, 2 * c + 1));
                        }
                        lo = _mm512_dpbusd_epi32(lo, tl, bcast(y.add(4 + 64 * c + 4 * e)));
                        hi = _mm512_dpbusd_epi32(hi, th, bcast(y.add(4 + 64 * c + 32 + 4 * e)));
                    }
                    isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(lo, w.sc[2 * c]));
                    isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(hi, w.sc[2 * c + 1]));
                }
                acc = finish_k4(acc, isum, &w, y);
            }
            _mm512_mask_storeu_ps(o, mask, acc);
        }
    };
}

single_k4_kernel!(single_k4_packed, "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni", nibbles, fifth_bit);
single_k4_kernel!(
    single_k4_packed_gfni,
    "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,gfni",
    nibbles_gfni,
    fifth_bit_gfni
);

/// [`single_k4_packed`], by `vgf2p8affineqb` where the CPU has GFNI (a
/// quarter fewer instructions per Q5_K super-block).
///
/// # Safety
/// As for [`single_k4_packed`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn single_k4<const FIVE: bool>(nb: usize, p: *const u8, a: *const u8, o: *mut f32, mask: __mmask16) {
    if std::arch::is_x86_feature_detected!("gfni") {
        single_k4_packed_gfni::<FIVE>(nb, p, a, o, mask)
    } else {
        single_k4_packed::<FIVE>(nb, p, a, o, mask)
    }
}

/// A run of groups of Q4_K weight rows repacked by `TileKernel::pack_group`: one
/// activation row by [`single_k4`], more by the tile.
///
/// # Safety
/// The contract of `super::super::common::RawPacked`, at this level.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn q4_k_packed(nb: usize, group: &[u8], rows: usize, a: &[&[u8]], out: &mut [f32], stride: usize) {
    if let [a] = a {
        for (at, first, n) in groups_of_run(nb * 144 * MR, MR, rows) {
            single_k4::<false>(nb, group[at..].as_ptr(), a.as_ptr(), out[first..].as_mut_ptr(), lanes_mask(n));
        }
        return;
    }
    q4_k_tiled_packed(nb, group, rows, a, out, stride)
}

/// A run of groups of Q5_K weight rows repacked by `TileKernel::pack_group`: one
/// activation row by [`single_k4`], more by the tile.
///
/// # Safety
/// The contract of `super::super::common::RawPacked`, at this level.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn q5_k_packed(nb: usize, group: &[u8], rows: usize, a: &[&[u8]], out: &mut [f32], stride: usize) {
    if let [a] = a {
        for (at, first, n) in groups_of_run(nb * 176 * MR, MR, rows) {
            single_k4::<true>(nb, group[at..].as_ptr(), a.as_ptr(), out[first..].as_mut_ptr(), lanes_mask(n));
        }
        return;
    }
    q5_k_tiled_packed(nb, group, rows, a, out, stride)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::quant::dot::{quantize_activations, SimdLevel};
    use crate::quant::tile::tile_kernel_for;

    /// Random bytes (an xorshift), `d` and `dmin` of each 176-byte Q5_K block
    /// kept finite: the byte-mask and GFNI forms of the one-row kernel give
    /// the same bits as each other and as the tile at one row, on any quants
    /// and any fifth bits, for each count of rows in the group.
    #[test]
    fn both_bit_forms_give_the_tiles_bits() {
        let (Some(t), true) = (tile_kernel_for(DType::Q5_K, SimdLevel::Avx512), SimdLevel::Avx512.is_supported())
        else {
            eprintln!("skipped: no AVX-512 VNNI");
            return;
        };
        let (k, mut x) = (3 * 256, 0x9e37_79b9_7f4a_7c15u64);
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let rows: Vec<Vec<u8>> = (0..MR)
            .map(|_| {
                let mut r: Vec<u8> = (0..3 * 176).map(|_| next() as u8).collect();
                for b in r.chunks_exact_mut(176) {
                    // d and dmin: small positive f16s (exponent below all-ones)
                    b[..4].copy_from_slice(&[0x00, 0x2c, 0x00, 0x28]);
                }
                r
            })
            .collect();
        let act: Vec<f32> = (0..k).map(|_| (next() % 2001) as f32 / 1000.0 - 1.0).collect();
        let mut q8k = vec![0u8; DType::Q8_K.row_size(k as i64).unwrap()];
        quantize_activations(DType::Q5_K, &act, &mut q8k).unwrap();
        for m in [1, 7, MR] {
            let w: Vec<&[u8]> = rows[..m].iter().map(|r| &r[..]).collect();
            let mut group = vec![0u8; t.packed_group_size(k).unwrap()];
            t.pack_group(k, &w, &mut group).unwrap();
            let mut tiled = vec![0f32; m];
            t.run(k, &w, &[&q8k], &mut tiled, m).unwrap();
            let mut outs = Vec::new();
            // SAFETY: `group` holds 3 repacked super-blocks of `m` rows, `q8k` 3 Q8_K
            // blocks; 16 floats of room for the store; the CPU has AVX-512 VNNI (checked).
            unsafe {
                let mut o = [0f32; MR];
                single_k4_packed::<true>(3, group.as_ptr(), q8k.as_ptr(), o.as_mut_ptr(), lanes_mask(m));
                outs.push(o);
                if std::arch::is_x86_feature_detected!("gfni") {
                    let mut o = [0f32; MR];
                    single_k4_packed_gfni::<true>(3, group.as_ptr(), q8k.as_ptr(), o.as_mut_ptr(), lanes_mask(m));
                    outs.push(o);
                }
            }
            for o in outs {
                assert_eq!(
                    o[..m].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    tiled.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "{m} rows"
                );
                assert!(o[m..].iter().all(|&v| v == 0.0), "lanes past {m} stay unwritten");
            }
        }
    }
}
