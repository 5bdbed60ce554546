//! The AVX-512 forms of attention's two inner loops on F16 or F32 key and value
//! rows: sixteen keys' scores against one query ([`scores16`]: a vector of
//! sums per key, summed across in one transposing tree where a dot per key
//! would sum each across alone, with the dot kernels' bits) and the value rows
//! weighted into every head of the group ([`weighted_sum`]: each chunk of a
//! row widened once for up to 8 heads, whose sums stay in registers).
//! Any row length: the last chunk of a row is a masked load.

use std::arch::x86_64::*;

/// Whether these forms run here (AVX-512 F, BW and VL, under `RGML_SIMD`).
pub(super) fn supported() -> bool {
    use crate::quant::dot::SimdLevel;
    SimdLevel::cap() >= SimdLevel::Avx512
        && std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vl")
}

/// The lanes of the chunk of a row of `n` values that starts at `i`.
#[inline(always)]
fn lanes(n: usize, i: usize) -> __mmask16 {
    if n - i >= 16 {
        !0
    } else {
        (1u16 << (n - i)) - 1
    }
}

/// Values `i..` of the row at `p` (F16 when `HALF`, else F32) as f32, the
/// lanes outside `m` zero.
///
/// # Safety
/// The lanes in `m` are readable; the CPU has AVX-512 F, BW and VL.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,f16c")]
unsafe fn chunk<const HALF: bool>(p: *const u8, i: usize, m: __mmask16) -> __m512 {
    // SAFETY: as the caller promises.
    unsafe {
        if HALF {
            _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p.add(2 * i).cast()))
        } else {
            _mm512_maskz_loadu_ps(m, p.add(4 * i).cast())
        }
    }
}

/// Lane `j` of the result: the sum of the lanes of `v[j]`, added in the order
/// `_mm512_reduce_add_ps` adds one vector's lanes (lane `l` with `l + 8`, then
/// with `l + 4`, `l + 2`, `l + 1`), so each sum has the bits of the dot
/// kernels' (`quant::dot`): a tree that pairs the vectors at each level, the
/// sums landing transposed by 4 × 4 and put back in order at the end. Loops,
/// not closures: a vector must not cross into a function compiled without
/// AVX-512.
///
/// # Safety
/// The CPU has AVX-512 F.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn sum_across(v: [__m512; 16]) -> __m512 {
    // (l, l + 8): v[2i]'s in the low half, v[2i + 1]'s in the high half
    let mut x = [_mm512_setzero_ps(); 8];
    for i in 0..8 {
        let (a, b) = (v[2 * i], v[2 * i + 1]);
        x[i] = _mm512_add_ps(_mm512_shuffle_f32x4::<0b01_00_01_00>(a, b), _mm512_shuffle_f32x4::<0b11_10_11_10>(a, b));
    }
    // (l, l + 4): quarter q of y[i] holds v[4i + q]'s four sums
    let mut y = [_mm512_setzero_ps(); 4];
    for i in 0..4 {
        let (a, b) = (x[2 * i], x[2 * i + 1]);
        y[i] = _mm512_add_ps(_mm512_shuffle_f32x4::<0b10_00_10_00>(a, b), _mm512_shuffle_f32x4::<0b11_01_11_01>(a, b));
    }
    // (l, l + 2): quarter q of z[i] holds two sums of v[8i + q], then of v[8i + 4 + q]
    let mut z = [_mm512_setzero_ps(); 2];
    for i in 0..2 {
        let (a, b) = (_mm512_castps_pd(y[2 * i]), _mm512_castps_pd(y[2 * i + 1]));
        // the pairs move as f64 lanes and add as f32 ones
        z[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    // (l, l + 1): lane 4q + t holds the sum of v[4t + q]
    let r =
        _mm512_add_ps(_mm512_shuffle_ps::<0b10_00_10_00>(z[0], z[1]), _mm512_shuffle_ps::<0b11_01_11_01>(z[0], z[1]));
    _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), r)
}

/// One key's vector of products with the query, summed as the dot kernels sum
/// them (`quant::dot`'s AVX-512 float kernels: four sums over each 64 values,
/// then 16 at a time into the first, a masked tail into the second), so that
/// [`sum_across`] gives their bits.
///
/// # Safety
/// `q` holds `d` f32 and `k` `d` values; the CPU has AVX-512 F, BW and VL.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,f16c,fma")]
unsafe fn key_sums<const HALF: bool>(d: usize, q: *const f32, k: *const u8) -> __m512 {
    // SAFETY: every chunk's lanes lie in both rows.
    unsafe {
        // (a macro, not a closure: see `sum_across`)
        macro_rules! prod {
            ($acc:expr, $i:expr, $m:expr) => {
                _mm512_fmadd_ps(chunk::<HALF>(k, $i, $m), _mm512_maskz_loadu_ps($m, q.add($i)), $acc)
            };
        }
        let mut acc = [_mm512_setzero_ps(); 4];
        let mut i = 0;
        while i + 64 <= d {
            for (t, a) in acc.iter_mut().enumerate() {
                *a = prod!(*a, i + 16 * t, !0);
            }
            i += 64;
        }
        while i + 16 <= d {
            acc[0] = prod!(acc[0], i, !0);
            i += 16;
        }
        if i < d {
            acc[1] = prod!(acc[1], i, lanes(d, i));
        }
        _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]))
    }
}

/// `out[j] = Σ_i q[i] · key_j[i]` over the `d` values of the keys `j < n`
/// (`n ≤ 16`) at `k + j · stride` (F16 when `HALF`, else F32), with the bits
/// of the dot kernels.
///
/// # Safety
/// `q` holds `d` f32, each key `d` values, `out` `n` f32; `n ≤ 16`; the CPU
/// has AVX-512 F, BW and VL ([`supported`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,f16c,fma")]
pub(super) unsafe fn scores16<const HALF: bool>(
    d: usize,
    q: *const f32,
    k: *const u8,
    stride: usize,
    n: usize,
    out: *mut f32,
) {
    let mut v = [_mm512_setzero_ps(); 16];
    for (j, s) in v.iter_mut().enumerate().take(n) {
        // SAFETY: key j < n holds d values.
        *s = unsafe { key_sums::<HALF>(d, q, k.add(j * stride)) };
    }
    // SAFETY: `out` holds n floats; AVX-512 F is present.
    unsafe { _mm512_mask_storeu_ps(out, lanes(n, 0), sum_across(v)) };
}

/// `acc[h · dv + i] = Σ_j w[h · n_kv + j] · v_j[i]` for every head `h < heads`,
/// `i < dv` and key `j` of `keys` in order, the value rows `v_j` at
/// `v + j · stride` (F16 when `HALF`, else F32); a zero weight adds nothing
/// (its row is not read for that head, as a masked key's may hold anything).
/// The heads go up to 8 at a time, each pass over the keys taking as many
/// 16-value chunks of the rows as keeps 16 sums in registers (4 heads: 64
/// values a row): each chunk widened once for those heads, and 16 chains of
/// adds in flight where one chunk a pass left the adds' latency exposed.
///
/// # Safety
/// Each row `j` of `keys` holds `dv` values; `w` holds `heads · n_kv` f32 and
/// every `j < n_kv`; `acc` holds `heads · dv` f32; the CPU has AVX-512 F, BW
/// and VL ([`supported`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,f16c,fma")]
pub(super) unsafe fn weighted_sum<const HALF: bool>(
    dv: usize,
    v: (*const u8, usize),
    keys: &[u32],
    (w, n_kv, heads): (*const f32, usize, usize),
    acc: *mut f32,
) {
    // SAFETY: the caller's, passed on.
    unsafe {
        match heads {
            0 => {}
            1 => weighted_passes::<HALF, 1, 16>(dv, v, keys, (w, n_kv, heads), acc),
            2 => weighted_passes::<HALF, 2, 8>(dv, v, keys, (w, n_kv, heads), acc),
            3 | 4 => weighted_passes::<HALF, 4, 4>(dv, v, keys, (w, n_kv, heads), acc),
            _ => weighted_passes::<HALF, 8, 2>(dv, v, keys, (w, n_kv, heads), acc),
        }
    }
}

/// [`weighted_sum`] by groups of `H` heads and passes of `C` chunks.
///
/// # Safety
/// As for [`weighted_sum`].
// index loops read best over the chunks of a pass and the heads of a group
#[allow(clippy::needless_range_loop)]
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,f16c,fma")]
unsafe fn weighted_passes<const HALF: bool, const H: usize, const C: usize>(
    dv: usize,
    (v, stride): (*const u8, usize),
    keys: &[u32],
    (w, n_kv, heads): (*const f32, usize, usize),
    acc: *mut f32,
) {
    for h0 in (0..heads).step_by(H) {
        let hn = (heads - h0).min(H);
        for i0 in (0..dv).step_by(16 * C) {
            let mut sums = [[_mm512_setzero_ps(); C]; H];
            let mut x = [_mm512_setzero_ps(); C];
            for &j in keys {
                let j = j as usize;
                // SAFETY: row j's lanes l < dv - i, and the weights of heads h0..h0 + hn
                // at key j < n_kv, are inside their buffers.
                unsafe {
                    for c in 0..C {
                        let i = i0 + 16 * c;
                        if i < dv {
                            x[c] = chunk::<HALF>(v.add(j * stride), i, lanes(dv, i));
                        }
                    }
                    for hh in 0..hn {
                        let wj = *w.add((h0 + hh) * n_kv + j);
                        if wj != 0.0 {
                            let b = _mm512_set1_ps(wj);
                            for c in 0..C {
                                // a multiply and an add, as the other paths' `a + e · x`
                                sums[hh][c] = _mm512_add_ps(sums[hh][c], _mm512_mul_ps(x[c], b));
                            }
                        }
                    }
                }
            }
            for hh in 0..hn {
                for c in 0..C {
                    let i = i0 + 16 * c;
                    if i < dv {
                        // SAFETY: head h0 + hh's lanes l < dv - i are inside `acc`.
                        unsafe { _mm512_mask_storeu_ps(acc.add((h0 + hh) * dv + i), lanes(dv, i), sums[hh][c]) };
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    fn vals(n: usize, seed: usize) -> Vec<f32> {
        // exact in f16: multiples of 1/64 in [-1, 1)
        (0..n).map(|i| ((i * 37 + seed * 11) % 128) as f32 / 64.0 - 1.0).collect()
    }

    fn halves(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|&x| f16::from_f32(x).to_bits().to_le_bytes()).collect()
    }

    /// Scores of 16 and of 5 keys, F32 and F16 rows of 8, 40, 64 and 136 values
    /// (masked tails, whole 64-value steps), are the dot kernel's bits, and
    /// within 1e-5 of f64 sums; the lanes past `n` are not written.
    #[test]
    fn scores_are_the_dot_kernels_bits() {
        if !supported() {
            return;
        }
        use crate::dtype::DType;
        for d in [8, 40, 64, 136] {
            let (keys, q) = (vals(16 * d, d), vals(d, d + 1));
            let q = q.iter().map(|&x| f16::from_f32(x).to_f32()).collect::<Vec<_>>();
            for half in [false, true] {
                let (t, size) = if half { (DType::F16, 2) } else { (DType::F32, 4) };
                let kb = if half { halves(&keys) } else { bytemuck::cast_slice::<f32, u8>(&keys).to_vec() };
                let qb = if half { halves(&q) } else { bytemuck::cast_slice::<f32, u8>(&q).to_vec() };
                let dot = crate::quant::dot::dot_fn(t).unwrap().raw();
                for n in [16, 5] {
                    let mut out = [7f32; 16];
                    // SAFETY: 16 rows of d values, d-value query, 16 outputs; AVX-512 checked above.
                    unsafe {
                        if half {
                            scores16::<true>(d, q.as_ptr(), kb.as_ptr(), 2 * d, n, out.as_mut_ptr())
                        } else {
                            scores16::<false>(d, q.as_ptr(), kb.as_ptr(), 4 * d, n, out.as_mut_ptr())
                        }
                    }
                    for (j, &o) in out.iter().enumerate() {
                        let what = format!("d {d} {t} n {n} key {j}");
                        if j >= n {
                            assert_eq!(o, 7.0, "{what}");
                            continue;
                        }
                        let row = &kb[j * d * size..(j + 1) * d * size];
                        assert_eq!(o.to_bits(), dot(d, row, &qb).to_bits(), "{what}");
                        let want: f64 = (0..d).map(|i| f64::from(q[i]) * f64::from(keys[j * d + i])).sum();
                        assert!((f64::from(o) - want).abs() < 1e-5, "{what}: {o} vs {want}");
                    }
                }
            }
        }
    }

    /// Ten heads (two register groups) over the listed keys of 24-value rows:
    /// the bits of the scalar loop, within 1e-5 of f64 sums; a zero weight adds
    /// nothing, even where its row holds a NaN.
    #[test]
    fn weighted_sums_match_f64_and_skip_zero_weights() {
        if !supported() {
            return;
        }
        // every grouping of heads (1, 2, 4 and 8 at a time), one to several passes
        for (dv, heads) in [(24, 10), (24, 1), (136, 2), (64, 3), (256, 4), (80, 9)] {
            weighted_sum_case(dv, heads);
        }
    }

    fn weighted_sum_case(dv: usize, heads: usize) {
        let n_kv = 6;
        let mut rows = vals(n_kv * dv, 3);
        rows[2 * dv + 5] = f32::NAN;
        let mut w = vals(heads * n_kv, 4);
        for h in 0..heads {
            w[h * n_kv + 2] = 0.0;
        }
        let keys = [0u32, 2, 3, 5];
        for half in [false, true] {
            let bytes = if half { halves(&rows) } else { bytemuck::cast_slice::<f32, u8>(&rows).to_vec() };
            let mut acc = vec![0f32; heads * dv];
            let stride = if half { 2 * dv } else { 4 * dv };
            // SAFETY: n_kv rows of dv values, heads · n_kv weights, heads · dv sums.
            unsafe {
                let (v, wt) = ((bytes.as_ptr(), stride), (w.as_ptr(), n_kv, heads));
                if half {
                    weighted_sum::<true>(dv, v, &keys, wt, acc.as_mut_ptr())
                } else {
                    weighted_sum::<false>(dv, v, &keys, wt, acc.as_mut_ptr())
                }
            }
            for h in 0..heads {
                for i in 0..dv {
                    let want: f64 = keys
                        .iter()
                        .map(|&j| j as usize)
                        .filter(|&j| w[h * n_kv + j] != 0.0)
                        .map(|j| f64::from(w[h * n_kv + j]) * f64::from(rows[j * dv + i]))
                        .sum();
                    let got = f64::from(acc[h * dv + i]);
                    assert!((got - want).abs() < 1e-5, "dv {dv} half {half} head {h} value {i}: {got} vs {want}");
                    // the bits of the scalar `a + e · x` in key order
                    let mut a = 0f32;
                    for &j in keys.iter().filter(|&&j| w[h * n_kv + j as usize] != 0.0) {
                        a += w[h * n_kv + j as usize] * rows[j as usize * dv + i];
                    }
                    assert_eq!(acc[h * dv + i].to_bits(), a.to_bits(), "dv {dv} half {half} head {h} value {i}");
                }
            }
        }
    }
}
