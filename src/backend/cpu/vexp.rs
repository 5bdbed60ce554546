//! `e^x` as ggml's AVX2 kernels compute it (`ggml_v_expf`, adapted there from
//! Arm's optimized routines: a Cody-Waite reduction by ln 2 and a degree-5
//! polynomial, at most about 2 ulp from the true value), one lane at a time,
//! so that SiLU gives ggml's bits where it takes its vector path. The
//! operations are the vector form's, lane for lane (every `mul_add` one FMA),
//! so the result does not depend on the loop's width, and the branch-free
//! selects let it vectorize (tests/silu_ggml.rs checks the bits against
//! ggml's). ggml built for AVX-512 has another form (`vscalefps`), a few ulp
//! away; rgml keeps this one on every x86-64 CPU with AVX2 and FMA.

/// Whether the CPU runs ggml's vector form (x86-64 with AVX2 and FMA): SiLU
/// then uses [`silu`], else [`silu_libm`] (ggml's scalar form).
pub(crate) fn vector() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::quant::dot::SimdLevel::cap() >= crate::quant::dot::SimdLevel::Avx2
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The round-to-integer shift `0x1.8p23`.
const SHIFT: u32 = 0x4b40_0000;
/// `log2(e)`, and `ln 2` in two parts (high, low).
const LOG2E: u32 = 0x3fb8_aa3b;
const LN2_HI: u32 = 0x3f31_7200;
const LN2_LO: u32 = 0x35bf_be8e;
/// The polynomial's coefficients, highest degree first.
const P: [u32; 5] = [0x3c07_2010, 0x3d2b_9f17, 0x3e2a_af33, 0x3eff_fedb, 0x3f7f_fff6];

#[inline(always)]
fn c(bits: u32) -> f32 {
    f32::from_bits(bits)
}

/// `e^x` (see the module docs): above about 88.4 it overflows to infinity,
/// below about -104 it flushes to zero.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    let z = x.mul_add(c(LOG2E), c(SHIFT));
    let n = z - c(SHIFT);
    let b = (-n).mul_add(c(LN2_LO), (-n).mul_add(c(LN2_HI), x));
    let e = z.to_bits() << 23;
    let k = f32::from_bits(e.wrapping_add(1f32.to_bits()));
    let u = b * b;
    let j = c(P[0]).mul_add(b, c(P[1])).mul_add(u, c(P[2]).mul_add(b, c(P[3]))).mul_add(u, c(P[4]) * b);
    // |n| > 126: 2^n split in two factors; > 192: their square, infinity or zero
    let a = n.abs();
    let g: u32 = if n <= 0.0 { 0x8200_0000 } else { 0 };
    let s1 = f32::from_bits(g.wrapping_add(0x7f00_0000));
    let s2 = f32::from_bits(e.wrapping_sub(g));
    // Every lane computes all three forms (branch-free, so the loop
    // vectorizes); a lane that will not use `far` or `huge` computes them on
    // 1.0, since on its own factors they underflow to subnormals, which cost
    // Intel cores a microcode assist per instruction (README, streaming:
    // 2026-12-06 (16)). ggml's vector form skips them when no lane needs them.
    let s2 = if a > 126.0 { s2 } else { 1.0 };
    let s1h = if a > 192.0 { s1 } else { 1.0 };
    let near = j.mul_add(k, k);
    let far = s2.mul_add(j, s2) * s1;
    let huge = s1h * s1h;
    if a > 192.0 {
        huge
    } else if a > 126.0 {
        far
    } else {
        near
    }
}

/// `x · sigmoid(x)` as ggml's vector SiLU: `x / (1 + e^(0 - x))` with [`exp`].
#[inline(always)]
pub(crate) fn silu(x: f32) -> f32 {
    x / (1.0 + exp(0.0 - x))
}

/// `x · sigmoid(x)` as ggml's scalar SiLU, with the C library's `expf`.
#[inline(always)]
pub(crate) fn silu_libm(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Within 2 ulp (the routine's bound, 1.45 + 0.5) of f64's exp over its range,
    /// the ends as documented, and NaN kept.
    #[test]
    fn exp_is_within_two_ulp() {
        let mut x = -103.0f32;
        while x < 88.0 {
            let (got, want) = (exp(x), (x as f64).exp());
            let ulp = f64::from(f32::from_bits(got.to_bits() + 1) - got);
            assert!(((got as f64) - want).abs() <= 2.0 * ulp, "exp({x}) = {got}, want {want}");
            x += 0.0137;
        }
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(89.0), f32::INFINITY);
        assert_eq!(exp(-105.0), 0.0);
        assert_eq!(exp(-1000.0), 0.0);
        assert_eq!(exp(1000.0), f32::INFINITY);
        assert!(exp(f32::NAN).is_nan());
        assert_eq!(silu(-1000.0), -0.0);
        assert_eq!(silu(1000.0), 1000.0);
    }

    /// The two SiLU forms agree to a few ulp of the result.
    #[test]
    fn the_two_silus_agree() {
        for i in -4000..4000 {
            let x = i as f32 * 0.01;
            let (v, l) = (silu(x), silu_libm(x));
            assert!((v - l).abs() <= 4.0 * f32::EPSILON * l.abs().max(1e-30), "silu({x}): {v} vs {l}");
        }
    }
}
