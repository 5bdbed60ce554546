//! What the dispatcher of this module and its kernels share: the kernel type,
//! the SIMD levels (the CPU's, [`crate::cpu_info`]), the dot partners, the f16
//! table and the length check.

pub use crate::cpu_info::SimdLevel;
use crate::dtype::DType;

/// A raw dot-product kernel: `f(n, w, a)` is the dot product of the `n`
/// values in `w` (weight type) with the `n` values in `a` (its
/// [`vec_dot_type`]). It asserts the length contract (a panic rather than a
/// read past either slice); callers outside the crate go through
/// [`DotKernel::dot`](super::DotKernel::dot), which returns an error instead.
pub(crate) type DotFn = fn(n: usize, w: &[u8], a: &[u8]) -> f32;

/// The type an activation row must be converted to before it is dotted with a
/// row of `w` (ggml-cpu's `type_traits_cpu[w].vec_dot_type`).
///
/// F32, F16 and BF16 pair with themselves; Q4_0, Q5_0, Q8_0, IQ4_NL and
/// MXFP4 with Q8_0; Q4_1 and Q5_1 with Q8_1; Q2_K … Q6_K, IQ4_XS, the
/// i-quants IQ1_S … IQ3_S and TQ1_0/TQ2_0 with Q8_K. The types without a dot
/// kernel (Q8_1, Q8_K, F64 and the integer types; [`dot_fn`](super::dot_fn) refuses them)
/// map to themselves.
pub const fn vec_dot_type(w: DType) -> DType {
    match w {
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 | DType::IQ4_NL | DType::MXFP4 => DType::Q8_0,
        DType::Q4_1 | DType::Q5_1 => DType::Q8_1,
        DType::Q2_K
        | DType::Q3_K
        | DType::Q4_K
        | DType::Q5_K
        | DType::Q6_K
        | DType::IQ4_XS
        | DType::IQ1_S
        | DType::IQ1_M
        | DType::IQ2_XXS
        | DType::IQ2_XS
        | DType::IQ2_S
        | DType::IQ3_XXS
        | DType::IQ3_S
        | DType::TQ1_0
        | DType::TQ2_0 => DType::Q8_K,
        other => other,
    }
}

/// Every f16 (raw bits) as f32, exactly (bit for bit [`f16_to_f32`](crate::quant::f16_to_f32)):
/// a scale costs one load instead of `vcvtph2ps`'s shuffle-port uops, or the
/// scalar kernels' branches (256 KiB, like ggml-cpu's table on x86).
static F16_TABLE: [f32; 1 << 16] = {
    let mut t = [0f32; 1 << 16];
    let mut h = 0;
    while h < 1 << 16 {
        let (sign, exp, man) = ((h as u32 & 0x8000) << 16, (h as u32 >> 10) & 0x1f, h as u32 & 0x3ff);
        let bits = if exp == 0x1f {
            sign | 0x7f80_0000 | (man << 13)
        } else if exp != 0 {
            sign | ((exp + 112) << 23) | (man << 13)
        } else if man == 0 {
            sign
        } else {
            // subnormal: normalize the mantissa
            let shift = man.leading_zeros() - 21;
            sign | ((113 - shift) << 23) | (((man << shift) & 0x3ff) << 13)
        };
        t[h] = f32::from_bits(bits);
        h += 1;
    }
    t
};

/// An f16 scale (raw bits) as f32, from the table.
#[inline(always)]
pub(super) fn f16t(bits: u16) -> f32 {
    F16_TABLE[usize::from(bits)]
}

/// Checks the length contract of a kernel over `bs`-value blocks of `wb` weight
/// bytes and `ab` activation bytes, returning the number of blocks. Inlined
/// with constant sizes, the checks are a few instructions.
///
/// # Panics
/// If `n` is not a whole number of blocks or a slice is too short; in debug
/// builds also if a slice is longer than `n` values.
#[inline(always)]
#[track_caller]
pub(super) fn blocks(n: usize, w: &[u8], a: &[u8], bs: usize, wb: usize, ab: usize) -> usize {
    let nb = n / bs;
    // divisions, not `nb * wb`, so that no length can overflow past the check
    assert!(
        n.is_multiple_of(bs) && w.len() / wb >= nb && a.len() / ab >= nb,
        "dot: {n} values need {nb} blocks of {wb} + {ab} bytes, got {} + {} bytes",
        w.len(),
        a.len()
    );
    debug_assert!(w.len() == nb * wb && a.len() == nb * ab, "dot: slices longer than {n} values");
    nb
}

#[cfg(test)]
mod tests {
    #[test]
    fn f16_table_is_exact() {
        for h in 0..=u16::MAX {
            assert_eq!(super::f16t(h).to_bits(), crate::quant::f16_to_f32(h).to_bits(), "{h:#06x}");
        }
    }
}
