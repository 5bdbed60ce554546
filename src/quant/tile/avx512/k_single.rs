//! One activation row against repacked Q4_K/Q5_K/Q6_K groups (decode's
//! products): each super-block's quants are split and used as they are
//! loaded, and only its scales and mins ([`HeadK`]) are decoded whole. A
//! whole [`super::k`] tile block, which one row would not reuse, would cost a
//! 4–6 KiB store per super-block. Q5_K's fifth bit is
//! merged into each nibble vector: under a byte mask, or where the CPU has
//! GFNI by one `vgf2p8affineqb`, which also moves the high nibbles down in one
//! instruction. Q6_K's two high bits are shifted into place and merged by one
//! `vpternlogd`, and its stored `+ 32` comes off in each group's starting
//! value (`-32 · bsum`, prepared once per call), not in a correction per block.

use std::arch::x86_64::*;

use super::super::common::{groups_of_run, prefetch_ahead, rows_at, Q6_BYTES, ROWS_APART};
use super::k::{decode_head, finish_k4, q4_k_tiled_packed, q5_k_tiled_packed, q6_k_tiled_packed, HeadK, QB};
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

/// `N` activation rows (one or two) against a repacked Q4_K group (`FIVE`:
/// Q5_K), by the bit helpers given, with the arithmetic of the tile's
/// `group_k4` in its order (the same bits); each super-block's quants are
/// split once for all the rows.
macro_rules! single_k4_kernel {
    ($name:ident, $features:literal, $nibbles:ident, $fifth:ident) => {
        /// # Safety
        /// `p` must hold `nb` repacked super-blocks, each `a[j]` point at `nb`
        /// Q8_K blocks, and the lanes of each `o[j]` in `mask` be writable;
        /// the CPU must have the features enabled here.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn $name<const FIVE: bool, const N: usize>(
            nb: usize,
            p: *const u8,
            a: [*const u8; N],
            o: [*mut f32; N],
            mask: __mmask16,
        ) {
            let block = if FIVE { 176 } else { 144 } * MR;
            // groups 2C (low nibbles) and 2C + 1 (high nibbles) of quant bytes 32C..,
            // scaled; a constant C lets every index fold
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn pair<const FIVE: bool, const C: usize, const N: usize>(
                q: *const u8,
                y: [*const u8; N],
                w: &HeadK,
            ) -> [__m512i; N] {
                // body vectors: the 4 of the heads, Q5_K's 8 of fifth bits, then the nibbles
                let qs = if FIVE { 12 } else { 4 };
                let ld = |v: usize| _mm512_loadu_si512(q.add(64 * v).cast());
                let (mut lo, mut hi) = ([_mm512_setzero_si512(); N], [_mm512_setzero_si512(); N]);
                for e in 0..8 {
                    let (mut tl, mut th) = $nibbles(ld(qs + 8 * C + e));
                    if FIVE {
                        // bit g of a fifth-bit byte belongs to group g
                        let qh = ld(4 + e);
                        tl = _mm512_or_si512(tl, $fifth(qh, 2 * C));
                        th = _mm512_or_si512(th, $fifth(qh, 2 * C + 1));
                    }
                    for j in 0..N {
                        lo[j] = _mm512_dpbusd_epi32(lo[j], tl, bcast(y[j].add(4 + 64 * C + 4 * e)));
                        hi[j] = _mm512_dpbusd_epi32(hi[j], th, bcast(y[j].add(4 + 64 * C + 32 + 4 * e)));
                    }
                }
                let mut out = [_mm512_setzero_si512(); N];
                for j in 0..N {
                    out[j] = _mm512_add_epi32(
                        _mm512_mullo_epi32(lo[j], w.sc[2 * C]),
                        _mm512_mullo_epi32(hi[j], w.sc[2 * C + 1]),
                    );
                }
                out
            }
            let mut acc = [_mm512_setzero_ps(); N];
            for b in 0..nb {
                let q = p.add(b * block);
                let mut y = a;
                for yj in y.iter_mut() {
                    *yj = yj.add(b * QB);
                }
                prefetch_ahead(q, block);
                let ld = |v: usize| _mm512_loadu_si512(q.add(64 * v).cast());
                let w = decode_head(&[ld(0), ld(1), ld(2), ld(3)]);
                let (p0, p1) = (pair::<FIVE, 0, N>(q, y, &w), pair::<FIVE, 1, N>(q, y, &w));
                let (p2, p3) = (pair::<FIVE, 2, N>(q, y, &w), pair::<FIVE, 3, N>(q, y, &w));
                for j in 0..N {
                    let isum = _mm512_add_epi32(_mm512_add_epi32(p0[j], p1[j]), _mm512_add_epi32(p2[j], p3[j]));
                    acc[j] = finish_k4(acc[j], isum, &w, y[j]);
                }
            }
            for j in 0..N {
                _mm512_mask_storeu_ps(o[j], mask, acc[j]);
            }
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
/// quarter fewer instructions per Q5_K super-block), on the first `N`
/// activation rows of `a`, their outputs at `o + j · stride`.
///
/// # Safety
/// As for [`single_k4_packed`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn single_k4<const FIVE: bool, const N: usize>(
    nb: usize,
    p: *const u8,
    a: &[&[u8]],
    o: *mut f32,
    stride: usize,
    mask: __mmask16,
) {
    let (a, o) = rows_at::<N>(a, o, stride);
    if std::arch::is_x86_feature_detected!("gfni") {
        single_k4_packed_gfni::<FIVE, N>(nb, p, a, o, mask)
    } else {
        single_k4_packed::<FIVE, N>(nb, p, a, o, mask)
    }
}

/// One or two activation rows against a run of groups of Q4_K (`five`:
/// Q5_K) weight rows repacked by `TileKernel::pack_group`, by [`single_k4`];
/// false (nothing done) for more rows, which the tile takes.
///
/// # Safety
/// The contract of `super::super::common::RawPacked`, at this level.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn k4(nb: usize, five: bool, group: &[u8], rows: usize, a: &[&[u8]], out: &mut [f32], stride: usize) -> bool {
    let wb = if five { 176 } else { 144 };
    for (at, first, n) in groups_of_run(nb * wb * MR, MR, rows) {
        let (p, o, mask) = (group[at..].as_ptr(), out[first..].as_mut_ptr(), lanes_mask(n));
        match (a.len(), five) {
            (1, false) => single_k4::<false, 1>(nb, p, a, o, stride, mask),
            (1, true) => single_k4::<true, 1>(nb, p, a, o, stride, mask),
            (2, false) => single_k4::<false, 2>(nb, p, a, o, stride, mask),
            (2, true) => single_k4::<true, 2>(nb, p, a, o, stride, mask),
            _ => return false,
        }
    }
    true
}

/// A run of groups of Q4_K weight rows repacked by `TileKernel::pack_group`: one
/// or two activation rows by [`k4`], more by the tile.
///
/// # Safety
/// The contract of `super::super::common::RawPacked`, at this level.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn q4_k_packed(nb: usize, group: &[u8], rows: usize, a: &[&[u8]], out: &mut [f32], stride: usize) {
    if !k4(nb, false, group, rows, a, out, stride) {
        q4_k_tiled_packed(nb, group, rows, a, out, stride)
    }
}

/// A run of groups of Q5_K weight rows repacked by `TileKernel::pack_group`: one
/// or two activation rows by [`k4`], more by the tile.
///
/// # Safety
/// The contract of `super::super::common::RawPacked`, at this level.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn q5_k_packed(nb: usize, group: &[u8], rows: usize, a: &[&[u8]], out: &mut [f32], stride: usize) {
    if !k4(nb, true, group, rows, a, out, stride) {
        q5_k_tiled_packed(nb, group, rows, a, out, stride)
    }
}

/// Super-blocks whose group offsets [`q6_k_packed`] keeps on the stack (K ≤ 16384).
const Q6_STACK_BLOCKS: usize = 64;

/// `-32 · bsum` of each group of 16 activations of `nb` Q8_K blocks at `a`:
/// the starting value of each group's dot, which takes Q6_K's stored `+ 32`
/// back off (`Σ (q + 32 - 32) · y`), so the integer dot stays exact.
///
/// # Safety
/// `a` must point at `nb` Q8_K blocks and `out` hold `16 · nb` values; the CPU must have AVX-512 F/BW.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn q6_offsets(nb: usize, a: *const u8, out: &mut [i32]) {
    debug_assert!(out.len() >= 16 * nb);
    for b in 0..nb {
        let bsums = _mm512_cvtepi16_epi32(_mm256_loadu_si256(a.add(b * QB + 260).cast()));
        let v = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32::<5>(bsums));
        _mm512_storeu_si512(out.as_mut_ptr().add(16 * b).cast(), v);
    }
}

/// Byte `i` of each dword of `v`, sign-extended (a Q6_K scale).
///
/// # Safety
/// The CPU must have AVX-512 F.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn signed_byte(v: __m512i, i: usize) -> __m512i {
    match i {
        0 => _mm512_srai_epi32::<24>(_mm512_slli_epi32::<24>(v)),
        1 => _mm512_srai_epi32::<24>(_mm512_slli_epi32::<16>(v)),
        2 => _mm512_srai_epi32::<24>(_mm512_slli_epi32::<8>(v)),
        _ => _mm512_srai_epi32::<24>(v),
    }
}

/// The scaled dots of Q6_K groups `8H + 2j + HALF` (j < 4) of one repacked
/// super-block at `q` with the Q8_K block at `y`, each group's dot started at
/// its offset in `off` ([`q6_offsets`]), summed: a quarter of the
/// super-block's integer dot. Constant `H` and `HALF` let every index and
/// shift fold.
///
/// Value `128H + 32j + l` (l < 32) is a nibble of `ql` byte `64H + 32(j % 2) + l`
/// (the high one for j ≥ 2) and bits `2j..2j + 2` of `qh` byte `32H + l`; dword
/// `e` of a vector holds `l = 4e..4e + 4`, and groups `8H + 2j + HALF` take
/// `l` in `16 HALF..16 HALF + 16`.
///
/// # Safety
/// As for [`single_q6`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn q6_quarter<const H: usize, const HALF: usize>(
    q: *const u8,
    y: *const u8,
    off: *const i32,
    scales: &[__m512i; 4],
) -> __m512i {
    let (m4, m30) = (_mm512_set1_epi8(0x0f), _mm512_set1_epi8(0x30));
    let ld = |v: usize| _mm512_loadu_si512(q.add(64 * v).cast());
    let mut s: [__m512i; 4] = std::array::from_fn(|j| _mm512_set1_epi32(*off.add(8 * H + 2 * j + HALF)));
    for e in 4 * HALF..4 * HALF + 4 {
        let (ql0, ql1, qh) = (ld(16 * H + e), ld(16 * H + 8 + e), ld(32 + 8 * H + e));
        let low = [
            _mm512_and_si512(ql0, m4),
            _mm512_and_si512(ql1, m4),
            _mm512_and_si512(_mm512_srli_epi16::<4>(ql0), m4),
            _mm512_and_si512(_mm512_srli_epi16::<4>(ql1), m4),
        ];
        // bits 2j..2j + 2 moved to bits 4..6 (what crosses a byte is masked off below)
        let high = [_mm512_slli_epi16::<4>(qh), _mm512_slli_epi16::<2>(qh), qh, _mm512_srli_epi16::<2>(qh)];
        for j in 0..4 {
            // low | (high & 0x30)
            let v = _mm512_ternarylogic_epi32::<0xF8>(low[j], high[j], m30);
            s[j] = _mm512_dpbusd_epi32(s[j], v, bcast(y.add(4 + 128 * H + 32 * j + 4 * e)));
        }
    }
    let scaled: [__m512i; 4] = std::array::from_fn(|j| {
        let g = 8 * H + 2 * j + HALF;
        _mm512_mullo_epi32(s[j], signed_byte(scales[g / 4], g % 4))
    });
    _mm512_add_epi32(_mm512_add_epi32(scaled[0], scaled[1]), _mm512_add_epi32(scaled[2], scaled[3]))
}

/// One activation row against a repacked Q6_K group: the integer dot of
/// every group of 16 exactly as the tile's `group_q6` computes it (integer
/// sums, so the order is free), then `acc + d·d_a·isum` in its order (the
/// same bits).
///
/// The repacked body is the GGUF super-block transposed by dwords: vector
/// `v` holds dword `v` of each row, so `ql` is vectors 0..32, `qh` 32..48 and
/// the scales 48..52; the rows' `d` follow as 16 f16.
///
/// # Safety
/// `p` must hold `nb` repacked super-blocks, `a` point at `nb` Q8_K blocks,
/// `offs` hold their [`q6_offsets`], and the lanes of `o` in `mask` be
/// writable; the CPU must have AVX-512 F/BW/VNNI.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn single_q6(nb: usize, p: *const u8, a: *const u8, offs: *const i32, o: *mut f32, mask: __mmask16) {
    let block = Q6_BYTES * MR;
    let mut acc = _mm512_setzero_ps();
    for b in 0..nb {
        let (q, y, off) = (p.add(b * block), a.add(b * QB), offs.add(16 * b));
        prefetch_ahead(q, block);
        let ld = |v: usize| _mm512_loadu_si512(q.add(64 * v).cast());
        let scales = [ld(48), ld(49), ld(50), ld(51)];
        let first = _mm512_add_epi32(q6_quarter::<0, 0>(q, y, off, &scales), q6_quarter::<0, 1>(q, y, off, &scales));
        let second = _mm512_add_epi32(q6_quarter::<1, 0>(q, y, off, &scales), q6_quarter::<1, 1>(q, y, off, &scales));
        let isum = _mm512_add_epi32(first, second);
        let d = _mm512_cvtph_ps(_mm256_loadu_si256(q.add(208 * MR).cast()));
        let da = _mm512_set1_ps(y.cast::<f32>().read_unaligned());
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, da), acc);
    }
    _mm512_mask_storeu_ps(o, mask, acc);
}

/// A run of groups of Q6_K weight rows repacked by `TileKernel::pack_group`: up to
/// [`ROWS_APART`] activation rows by [`single_q6`] each, more by the tile.
///
/// # Safety
/// The contract of `super::super::common::RawPacked`, at this level.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn q6_k_packed(nb: usize, group: &[u8], rows: usize, a: &[&[u8]], out: &mut [f32], stride: usize) {
    if a.len() <= ROWS_APART {
        let (mut stack, mut heap) = ([0i32; 16 * Q6_STACK_BLOCKS * ROWS_APART], Vec::new());
        let offs = if nb <= Q6_STACK_BLOCKS {
            &mut stack[..16 * nb * a.len()]
        } else {
            heap.resize(16 * nb * a.len(), 0);
            &mut heap[..]
        };
        for (a, offs) in a.iter().zip(offs.chunks_exact_mut(16 * nb)) {
            q6_offsets(nb, a.as_ptr(), offs);
        }
        for (at, first, n) in groups_of_run(nb * Q6_BYTES * MR, MR, rows) {
            for (j, (a, offs)) in a.iter().zip(offs.chunks_exact(16 * nb)).enumerate() {
                let o = out[j * stride + first..].as_mut_ptr();
                single_q6(nb, group[at..].as_ptr(), a.as_ptr(), offs.as_ptr(), o, lanes_mask(n));
            }
        }
        return;
    }
    q6_k_tiled_packed(nb, group, rows, a, out, stride)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::quant::dot::{quantize_activations, SimdLevel};
    use crate::quant::tile::tile_kernel_for;

    /// An xorshift stream of random words from `seed`.
    fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

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
        let (k, mut next) = (3 * 256, xorshift(0x9e37_79b9_7f4a_7c15));
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
                single_k4_packed::<true, 1>(3, group.as_ptr(), [q8k.as_ptr()], [o.as_mut_ptr()], lanes_mask(m));
                outs.push(o);
                if std::arch::is_x86_feature_detected!("gfni") {
                    let mut o = [0f32; MR];
                    single_k4_packed_gfni::<true, 1>(
                        3,
                        group.as_ptr(),
                        [q8k.as_ptr()],
                        [o.as_mut_ptr()],
                        lanes_mask(m),
                    );
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

    /// Random Q6_K super-blocks (`d` kept a small finite f16): one activation
    /// row against a run of repacked groups (the one-row kernel, its `-32 · bsum`
    /// starts on the stack and, past 64 super-blocks, on the heap) gives the
    /// bits of the tile at one row, for full and partial groups.
    #[test]
    fn q6_one_row_gives_the_tiles_bits() {
        let (Some(t), true) = (tile_kernel_for(DType::Q6_K, SimdLevel::Avx512), SimdLevel::Avx512.is_supported())
        else {
            eprintln!("skipped: no AVX-512 VNNI");
            return;
        };
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        for (nb, rows) in [(1usize, 16usize), (3, 7), (4, 35), (65, 17)] {
            let k = 256 * nb;
            let w: Vec<Vec<u8>> = (0..rows)
                .map(|_| {
                    let mut r: Vec<u8> = (0..nb * Q6_BYTES).map(|_| next() as u8).collect();
                    for b in r.chunks_exact_mut(Q6_BYTES) {
                        b[208..].copy_from_slice(&[0x00, 0x20]);
                    }
                    r
                })
                .collect();
            let act: Vec<f32> = (0..k).map(|_| (next() % 2001) as f32 / 1000.0 - 1.0).collect();
            let mut q8k = vec![0u8; DType::Q8_K.row_size(k as i64).unwrap()];
            quantize_activations(DType::Q6_K, &act, &mut q8k).unwrap();
            let size = t.packed_group_size(k).unwrap();
            let mut groups = vec![0u8; size * rows.div_ceil(MR)];
            for (g, dst) in groups.chunks_exact_mut(size).enumerate() {
                let of: Vec<&[u8]> = w[g * MR..rows.min(g * MR + MR)].iter().map(|r| &r[..]).collect();
                t.pack_group(k, &of, dst).unwrap();
            }
            let mut packed = vec![0f32; rows];
            t.run_packed(k, &groups, rows, &[&q8k], &mut packed, rows).unwrap();
            let mut tiled = vec![0f32; rows];
            for (g, o) in tiled.chunks_mut(MR).enumerate() {
                let of: Vec<&[u8]> = w[g * MR..g * MR + o.len()].iter().map(|r| &r[..]).collect();
                t.run(k, &of, &[&q8k], o, MR).unwrap();
            }
            assert!(packed.iter().all(|v| v.is_finite()));
            assert_eq!(
                packed.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                tiled.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "{nb} super-blocks, {rows} rows"
            );
        }
    }
}
