//! F32, F16 and BF16 `mul_mat` for a few activation rows: an `R` × `C` block of dot
//! products per call (`R` weight rows against `C` activation rows, `R·C` AVX-512
//! accumulators, 4 × 6 filling 29 of the 32 registers; or AVX2 ones, at most 12
//! of its 16), so each loaded vector
//! feeds several multiply-adds where a single dot feeds one. F16 and BF16 rows
//! (weights and their activations of the same type, ggml's dot partner) are
//! widened as they load; the products are exact in f32, as in their dot kernels.
//! Below the GEMM's row count this is the F32 path, and the F16 and BF16 path
//! from one activation row (8 × 1 at AVX-512: a converted activation vector feeds
//! eight weight rows, where the dot kernel converted it for each). Each weight row
//! asks for its bytes [`PREFETCH_AHEAD`] on where the CPU gains by it
//! ([`crate::quant::prefetch`]): eight rows read side by side are eight short
//! streams.

use super::common::SimdLevel;

/// Whether [`dot_block`] runs on this CPU (AVX-512 F, BW and VL, or AVX2 with FMA and F16C).
pub(crate) fn supported() -> bool {
    wide() || narrow()
}

/// Whether the AVX-512 form runs (32 registers: larger blocks pay).
pub(crate) fn wide() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        SimdLevel::cap() >= SimdLevel::Avx512
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vl")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether the AVX2 form runs (16 registers).
fn narrow() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        SimdLevel::cap() >= SimdLevel::Avx2
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The element types of [`dot_block`]'s rows.
pub(crate) const F32: u8 = 0;
/// F16 rows.
pub(crate) const F16: u8 = 1;
/// BF16 rows.
pub(crate) const BF16: u8 = 2;

/// `out[c][r] = Σ_i w[r][i]·a[c][i]` over `k` values, for the `R` weight rows
/// `w` of type `T` ([`F32`], [`F16`] or [`BF16`]) and `C` F32 activation rows
/// `a` (repeat a pointer to compute fewer): F16/BF16 activations come widened
/// once by the caller, since widening them here would repeat for every block
/// of weight rows. `None` when the CPU has neither AVX-512 nor AVX2 (see
/// [`supported`]).
///
/// # Safety
/// Each weight pointer addresses `k` readable values of type `T`, each
/// activation pointer `k` readable f32 (any alignment).
pub(crate) unsafe fn dot_block<const R: usize, const C: usize, const T: u8>(
    k: usize,
    w: [*const u8; R],
    a: [*const u8; C],
) -> Option<[[f32; R]; C]> {
    #[cfg(target_arch = "x86_64")]
    if wide() {
        // SAFETY: the features are present (F: the 512-bit F16 conversion; BW, VL:
        // the masked 16-bit load); the pointers as the caller promises.
        return Some(unsafe { avx512::<R, C, T>(k, w, a) });
    }
    #[cfg(target_arch = "x86_64")]
    if narrow() {
        // SAFETY: AVX2, FMA and F16C are present; the pointers as the caller promises.
        return Some(unsafe { avx2::<R, C, T>(k, w, a) });
    }
    let _ = (k, w, a);
    None
}

/// Bytes ahead of the values in use that each weight row asks for, where the
/// CPU gains by it ([`crate::quant::prefetch`]).
const PREFETCH_AHEAD: usize = 1024;

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn avx512<const R: usize, const C: usize, const T: u8>(
    k: usize,
    w: [*const u8; R],
    a: [*const u8; C],
) -> [[f32; R]; C] {
    use std::arch::x86_64::*;
    let mut acc = [[_mm512_setzero_ps(); R]; C];
    // SAFETY (of each load): lanes at i.. under `mask` lie inside the k values of the row.
    let load = |p: *const u8, i: usize, mask: __mmask16| unsafe {
        match T {
            F16 => _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, p.cast::<i16>().add(i).cast())),
            // a bf16 is the high half of its f32
            BF16 => {
                let h = _mm256_maskz_loadu_epi16(mask, p.cast::<i16>().add(i).cast());
                _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
            }
            _ => _mm512_maskz_loadu_ps(mask, p.cast::<f32>().add(i)),
        }
    };
    // SAFETY: lanes at i.. under `mask` lie inside the k values of the row.
    let load_a =
        |p: *const u8, i: usize, mask: __mmask16| unsafe { _mm512_maskz_loadu_ps(mask, p.cast::<f32>().add(i)) };
    let step = |i: usize, mask: __mmask16, acc: &mut [[__m512; R]; C]| {
        let (wv, av) = (w.map(|p| load(p, i, mask)), a.map(|p| load_a(p, i, mask)));
        for (c, av) in av.iter().enumerate() {
            for (r, wv) in wv.iter().enumerate() {
                acc[c][r] = _mm512_fmadd_ps(*wv, *av, acc[c][r]);
            }
        }
    };
    let full = k / 16 * 16;
    let size = if T == F32 { 4 } else { 2 };
    let ahead = crate::quant::prefetch::enabled();
    for i in (0..full).step_by(16) {
        if ahead && (i * size) % 64 == 0 {
            for p in w {
                super::prefetch(p.wrapping_add(i * size + PREFETCH_AHEAD), 1);
            }
        }
        step(i, 0xFFFF, &mut acc);
    }
    if full < k {
        step(full, (1u16 << (k - full)) - 1, &mut acc);
    }
    acc.map(|row| row.map(|v| _mm512_reduce_add_ps(v)))
}

/// [`avx512`] in 8 lanes; the last partial vector is loaded from a zeroed copy.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn avx2<const R: usize, const C: usize, const T: u8>(
    k: usize,
    w: [*const u8; R],
    a: [*const u8; C],
) -> [[f32; R]; C] {
    use std::arch::x86_64::*;
    let size = if T == F32 { 4 } else { 2 };
    // SAFETY (of each load): 8 values at p are readable (a row's, or the tail copy's).
    let load = |p: *const u8| unsafe {
        match T {
            F16 => _mm256_cvtph_ps(_mm_loadu_si128(p.cast())),
            // a bf16 is the high half of its f32
            BF16 => _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(_mm_loadu_si128(p.cast())))),
            _ => _mm256_loadu_ps(p.cast()),
        }
    };
    let step = |wp: [*const u8; R], ap: [*const u8; C], acc: &mut [[__m256; R]; C]| {
        let wv = wp.map(load);
        for (c, &p) in ap.iter().enumerate() {
            // SAFETY: 8 f32 at p are readable (a row's, or the tail copy's).
            let av = unsafe { _mm256_loadu_ps(p.cast()) };
            for (r, wv) in wv.iter().enumerate() {
                acc[c][r] = _mm256_fmadd_ps(*wv, av, acc[c][r]);
            }
        }
    };
    let mut acc = [[_mm256_setzero_ps(); R]; C];
    let full = k / 8 * 8;
    let ahead = crate::quant::prefetch::enabled();
    for i in (0..full).step_by(8) {
        if ahead && (i * size) % 64 == 0 {
            for p in w {
                super::prefetch(p.wrapping_add(i * size + PREFETCH_AHEAD), 1);
            }
        }
        step(w.map(|p| p.add(i * size)), a.map(|p| p.add(i * 4)), &mut acc);
    }
    if full < k {
        let tail = |p: *const u8, size: usize| {
            let mut t = [0u8; 32];
            // SAFETY: the row's last k - full values are readable; `t` holds 32 bytes.
            unsafe { std::ptr::copy_nonoverlapping(p.add(full * size), t.as_mut_ptr(), (k - full) * size) };
            t
        };
        let (wt, at) = (w.map(|p| tail(p, size)), a.map(|p| tail(p, 4)));
        step(std::array::from_fn(|r| wt[r].as_ptr()), std::array::from_fn(|c| at[c].as_ptr()), &mut acc);
    }
    // lanes summed in one fixed order
    acc.map(|row| {
        row.map(|v| {
            let h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
            _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps::<1>(h, h)))
        })
    })
}

#[cfg(test)]
mod tests {
    /// Every block shape against f64 sums, F32 and F16, at lengths that end mid-vector.
    #[test]
    fn blocks_match_f64() {
        for k in [1usize, 15, 16, 17, 100, 4096] {
            let rows: Vec<Vec<f32>> =
                (0..8).map(|r| (0..k).map(|i| ((i * 7 + r * 13) % 29) as f32 / 7.0 - 2.0).collect()).collect();
            let halves: Vec<Vec<half::f16>> =
                rows.iter().map(|r| r.iter().map(|&v| half::f16::from_f32(v)).collect()).collect();
            let p = |r: usize| rows[r].as_ptr().cast::<u8>();
            let h = |r: usize| halves[r].as_ptr().cast::<u8>();
            let widened: Vec<Vec<f32>> = halves.iter().map(|r| r.iter().map(|v| v.to_f32()).collect()).collect();
            let hw = |r: usize| widened[r].as_ptr().cast::<u8>();
            // SAFETY: every row holds k values of its type.
            let (got32, got16) = unsafe {
                (
                    super::dot_block::<4, 4, { super::F32 }>(k, [p(0), p(1), p(2), p(3)], [p(4), p(5), p(6), p(7)]),
                    super::dot_block::<3, 5, { super::F16 }>(
                        k,
                        [h(0), h(1), h(2)],
                        [hw(3), hw(4), hw(5), hw(6), hw(7)],
                    ),
                )
            };
            let (Some(got32), Some(got16)) = (got32, got16) else {
                return; // neither AVX-512 nor AVX2 here: nothing to check
            };
            let want = |r: usize, c: usize, f16: bool| -> f64 {
                let v = |row: usize, i: usize| {
                    if f16 {
                        f64::from(halves[row][i].to_f32())
                    } else {
                        f64::from(rows[row][i])
                    }
                };
                (0..k).map(|i| v(r, i) * v(c, i)).sum()
            };
            for (c, out) in got32.iter().enumerate() {
                for (r, &g) in out.iter().enumerate() {
                    let w = want(r, 4 + c, false);
                    assert!((f64::from(g) - w).abs() <= 1e-5 * (1.0 + w.abs()), "f32 k {k} ({r}, {c}): {g} vs {w}");
                }
            }
            for (c, out) in got16.iter().enumerate() {
                for (r, &g) in out.iter().enumerate() {
                    let w = want(r, 3 + c, true);
                    assert!((f64::from(g) - w).abs() <= 1e-5 * (1.0 + w.abs()), "f16 k {k} ({r}, {c}): {g} vs {w}");
                }
            }
        }
    }
}
