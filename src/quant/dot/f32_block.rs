//! F32 `mul_mat` for a few activation rows: an `R` × `C` block of dot products
//! per call (`R` weight rows against `C` activation rows, `R·C` AVX-512
//! accumulators; 4 × 6 fills 29 of the 32 registers), so each loaded vector
//! feeds several multiply-adds where a single dot feeds one. Below the GEMM's
//! row count this is the F32 path.

/// `out[c][r] = Σ_i w[r][i]·a[c][i]` over `k` values, for the `R` weight rows
/// `w` and `C` activation rows `a` (repeat a pointer to compute fewer);
/// `None` when the CPU has no AVX-512.
///
/// # Safety
/// Each pointer addresses `k` readable f32 values (any alignment).
pub(crate) unsafe fn dot_block<const R: usize, const C: usize>(
    k: usize,
    w: [*const f32; R],
    a: [*const f32; C],
) -> Option<[[f32; R]; C]> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the feature is present; the pointers as the caller promises.
        return Some(unsafe { avx512(k, w, a) });
    }
    let _ = (k, w, a);
    None
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn avx512<const R: usize, const C: usize>(k: usize, w: [*const f32; R], a: [*const f32; C]) -> [[f32; R]; C] {
    use std::arch::x86_64::*;
    let mut acc = [[_mm512_setzero_ps(); R]; C];
    let step = |i: usize, mask: __mmask16, acc: &mut [[__m512; R]; C]| {
        // SAFETY: lanes at i.. under `mask` lie inside the k values of each row.
        let (wv, av) = unsafe {
            (w.map(|p| _mm512_maskz_loadu_ps(mask, p.add(i))), a.map(|p| _mm512_maskz_loadu_ps(mask, p.add(i))))
        };
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
    /// Every block shape against f64 sums, at lengths that end mid-vector.
    #[test]
    fn blocks_match_f64() {
        for k in [1usize, 15, 16, 17, 100, 4096] {
            let rows: Vec<Vec<f32>> =
                (0..8).map(|r| (0..k).map(|i| ((i * 7 + r * 13) % 29) as f32 / 7.0 - 2.0).collect()).collect();
            let p = |r: usize| rows[r].as_ptr();
            // SAFETY: every row holds k values.
            let Some(got) = (unsafe { super::dot_block(k, [p(0), p(1), p(2), p(3)], [p(4), p(5), p(6), p(7)]) }) else {
                return; // no AVX-512 here: nothing to check
            };
            for (c, out) in got.iter().enumerate() {
                for (r, &g) in out.iter().enumerate() {
                    let want: f64 = rows[r].iter().zip(&rows[4 + c]).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum();
                    assert!(
                        (f64::from(g) - want).abs() <= 1e-5 * (1.0 + want.abs()),
                        "k {k} ({r}, {c}): {g} vs {want}"
                    );
                }
            }
        }
    }
}
