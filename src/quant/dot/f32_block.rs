//! F32, F16 and BF16 `mul_mat` for a few activation rows: an `R` × `C` block of dot
//! products per call (`R` weight rows against `C` activation rows, `R·C` AVX-512
//! accumulators; 4 × 6 fills 29 of the 32 registers), so each loaded vector
//! feeds several multiply-adds where a single dot feeds one. F16 and BF16 rows
//! (weights and their activations of the same type, ggml's dot partner) are
//! widened as they load; the products are exact in f32, as in their dot kernels.
//! Below the GEMM's row count this is the F32 path, and the F16 and BF16 path
//! from two activation rows.

/// Whether [`dot_block`] runs on this CPU (AVX-512 F, BW and VL).
pub(crate) fn supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vl")
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
/// `w` and `C` activation rows `a` (repeat a pointer to compute fewer), all of
/// type `T` ([`F32`], [`F16`] or [`BF16`]); `None` when the CPU has no AVX-512.
///
/// # Safety
/// Each pointer addresses `k` readable values of the type (any alignment).
pub(crate) unsafe fn dot_block<const R: usize, const C: usize, const T: u8>(
    k: usize,
    w: [*const u8; R],
    a: [*const u8; C],
) -> Option<[[f32; R]; C]> {
    #[cfg(target_arch = "x86_64")]
    if supported() {
        // SAFETY: the features are present (F: the 512-bit F16 conversion; BW, VL:
        // the masked 16-bit load); the pointers as the caller promises.
        return Some(unsafe { avx512::<R, C, T>(k, w, a) });
    }
    let _ = (k, w, a);
    None
}

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
    let step = |i: usize, mask: __mmask16, acc: &mut [[__m512; R]; C]| {
        let (wv, av) = (w.map(|p| load(p, i, mask)), a.map(|p| load(p, i, mask)));
        for (c, av) in av.iter().enumerate() {
            for (r, wv) in wv.iter().enumerate() {
                acc[c][r] = _mm512_fmadd_ps(*wv, *av, acc[c][r]);
            }
        }
    };
    let full = k / 16 * 16;
    for i in (0..full).step_by(16) {
        step(i, 0xFFFF, &mut acc);
    }
    if full < k {
        step(full, (1u16 << (k - full)) - 1, &mut acc);
    }
    acc.map(|row| row.map(|v| _mm512_reduce_add_ps(v)))
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
            // SAFETY: every row holds k values of its type.
            let (got32, got16) = unsafe {
                (
                    super::dot_block::<4, 4, { super::F32 }>(k, [p(0), p(1), p(2), p(3)], [p(4), p(5), p(6), p(7)]),
                    super::dot_block::<3, 5, { super::F16 }>(k, [h(0), h(1), h(2)], [h(3), h(4), h(5), h(6), h(7)]),
                )
            };
            let (Some(got32), Some(got16)) = (got32, got16) else {
                return; // no AVX-512 here: nothing to check
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
