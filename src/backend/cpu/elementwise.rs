//! Elementwise kernels: binary ops with ggml's tiling broadcast, scale, unary.
//!
//! Paths: one flat loop when everything is packed F32 of one shape; a row loop
//! when rows are packed F32 (the broadcast operand tiled along the row); a
//! strided element loop with type conversion otherwise. In-place ops pass the
//! same pointer as destination and first source: each element is read, then
//! written, by one thread.

use super::mem::{Exec, Scalar, Strided, StridedMut};
use super::width::Wide;
use super::{stream, vexp};
use crate::error::Result;
use crate::op::{BinaryOp, GluOp, UnaryOp};

/// Flat chunk length (elements) of the packed path.
const CHUNK: usize = 1 << 14;

/// `dst = a op b`, `b` tiled over `a`'s shape.
pub(crate) fn binary(ex: &Exec, op: BinaryOp, dst: StridedMut, a: Strided, b: Strided) -> Result<()> {
    match op {
        BinaryOp::Add => binary_with(ex, dst, a, b, |x, y| x + y),
        BinaryOp::Sub => binary_with(ex, dst, a, b, |x, y| x - y),
        BinaryOp::Mul => binary_with(ex, dst, a, b, |x, y| x * y),
        BinaryOp::Div => binary_with(ex, dst, a, b, |x, y| x / y),
    }
}

/// `dst = a * s`.
pub(crate) fn scale(ex: &Exec, s: f32, dst: StridedMut, a: Strided) -> Result<()> {
    map_with(ex, dst, a, move |x| x * s)
}

/// `dst = f(a)`.
pub(crate) fn unary(ex: &Exec, op: UnaryOp, dst: StridedMut, a: Strided) -> Result<()> {
    match op {
        UnaryOp::Relu => map_with(ex, dst, a, |x| if x > 0.0 { x } else { 0.0 }),
        UnaryOp::Gelu => {
            let table = gelu_table();
            map_with(ex, dst, a, move |x| gelu(table, x))
        }
        UnaryOp::Silu if vexp::vector() => map_with(ex, dst, a, vexp::silu),
        UnaryOp::Silu => map_with(ex, dst, a, vexp::silu_libm),
        UnaryOp::Neg => map_with(ex, dst, a, |x| -x),
        UnaryOp::Sqr => map_with(ex, dst, a, |x| x * x),
        UnaryOp::Sqrt => map_with(ex, dst, a, f32::sqrt),
        UnaryOp::Exp => map_with(ex, dst, a, f32::exp),
        UnaryOp::Sigmoid => map_with(ex, dst, a, |x| 1.0 / (1.0 + (-x).exp())),
    }
}

/// `dst = f(a) * b` (same shapes): the gated linear units, with the
/// functions of [`unary`], so a fused `swiglu` is bit for bit `silu` then `mul`.
pub(crate) fn glu(ex: &Exec, op: GluOp, dst: StridedMut, a: Strided, b: Strided) -> Result<()> {
    match op {
        GluOp::Swiglu if vexp::vector() => binary_with(ex, dst, a, b, |x, g| vexp::silu(x) * g),
        GluOp::Swiglu => binary_with(ex, dst, a, b, |x, g| vexp::silu_libm(x) * g),
        // ggml's geglu gives exactly 0 below -10, whatever the gate
        GluOp::Geglu => {
            let table = gelu_table();
            binary_with(ex, dst, a, b, move |x, g| if x <= -10.0 { 0.0 } else { gelu(table, x) * g })
        }
        GluOp::SwigluOai => binary_with(ex, dst, a, b, swiglu_oai),
    }
}

/// ggml's `swiglu_oai` of gate `x` and value `g`, in its order of operations.
fn swiglu_oai(x: f32, g: f32) -> f32 {
    let (x, g) = (x.min(GluOp::OAI_LIMIT), g.clamp(-GluOp::OAI_LIMIT, GluOp::OAI_LIMIT));
    x / (1.0 + (GluOp::OAI_ALPHA * -x).exp()) * (g + 1.0)
}

/// GELU, tanh approximation, `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`, as ggml's CPU
/// backend computes it: from the input rounded to f16, the result rounded to f16 (its
/// lookup table of every f16), 0 from -10 down and `x` from 10 up. Models tested
/// against llama.cpp (Gemma's GeGLU) depend on the rounding.
/// The f16 result is looked up by the f16 input's bits, as ggml does (one
/// `tanh` per f16 value, once per process, instead of one per element), in
/// the [`gelu_table`] the caller fetched once: branch-free but for the
/// lookup, so that a loop of it vectorizes (the lookups gathered).
#[inline(always)]
fn gelu(table: &[f32; 1 << 16], x: f32) -> f32 {
    let y = table[usize::from(f16_bits(x))];
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        y
    }
}

/// The bits of `x` rounded to the nearest f16, ties to even, as the F16C
/// instruction (`half::f16::from_f32` on x86) rounds it; infinities stay
/// infinite and NaNs stay NaN (quiet). Integer arithmetic and selects, so
/// that it vectorizes where `half`'s call per value does not.
#[inline(always)]
fn f16_bits(x: f32) -> u16 {
    let u = x.to_bits();
    let sign = (u >> 16) & 0x8000;
    let a = u & 0x7fff_ffff;
    // normal f16: rebias the exponent (127 → 15), round the 13 dropped bits to even
    // (a carry into the exponent is the right result, up to infinity)
    // (wrapping: below 2^-15 this lane's value is not used, and may wrap)
    let normal = (a.wrapping_sub(0x3800_0000).wrapping_add(0xfff + ((a >> 13) & 1))) >> 13;
    // below f16's smallest normal: adding 0.5 puts the f16 subnormal's units
    // (2^-24) at f32's last mantissa bit, so the FPU's own rounding is f16's
    let sub = (f32::from_bits(a) + 0.5).to_bits().wrapping_sub(0x3f00_0000);
    let nan = 0x7e00 | ((a >> 13) & 0x3ff);
    let h = if a > 0x7f80_0000 {
        nan
    } else if a >= 0x4780_0000 {
        // 65536 and up (infinity included): f16's infinity; 65520..65536 round up to it above
        0x7c00
    } else if a < 0x3880_0000 {
        sub
    } else {
        normal
    };
    (sign | h) as u16
}

/// ggml's GELU of every f16 value, by its bits, widened to f32 (exact).
fn gelu_table() -> &'static [f32; 1 << 16] {
    static GELU: std::sync::OnceLock<Box<[f32; 1 << 16]>> = std::sync::OnceLock::new();
    GELU.get_or_init(|| {
        let mut t = Box::new([0f32; 1 << 16]);
        for (b, v) in t.iter_mut().enumerate() {
            *v = gelu_of_f16(half::f16::from_bits(b as u16)).to_f32();
        }
        t
    })
}

/// The tanh GELU of one f16 input, rounded to f16.
fn gelu_of_f16(h: half::f16) -> half::f16 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    const COEF_A: f32 = 0.044715;
    let h = h.to_f32();
    half::f16::from_f32(0.5 * h * (1.0 + (SQRT_2_OVER_PI * h * (1.0 + COEF_A * h * h)).tanh()))
}

fn all_f32(ls: &[&crate::layout::Layout]) -> bool {
    ls.iter().all(|l| l.dtype == crate::dtype::DType::F32)
}

/// True when `dst` is not written in place over one of `srcs` (a streamed
/// store may then bypass the caches; in place, the lines are already there).
fn fresh(dst: &StridedMut, srcs: &[&Strided]) -> bool {
    srcs.iter().all(|s| !std::ptr::eq(s.ptr(), dst.ptr()))
}

fn binary_with<F>(ex: &Exec, dst: StridedMut, a: Strided, b: Strided, f: F) -> Result<()>
where
    F: Fn(f32, f32) -> f32 + Sync + Send + Copy,
{
    let ne = dst.l.ne;
    let f32s = all_f32(&[&dst.l, &a.l, &b.l]);
    // F32 paths only (4 bytes a value): what the node moves, in bytes
    let streamed = |bytes: usize| stream::pays(bytes) && fresh(&dst, &[&a, &b]);
    if f32s && a.l.ne == b.l.ne && dst.l.is_contiguous() && a.l.is_contiguous() && b.l.is_contiguous() {
        let n = dst.l.nelements() as usize;
        let streamed = streamed(n.saturating_mul(12));
        ex.for_ranges(n.div_ceil(CHUNK), CHUNK, |chunks| {
            let (lo, hi) = (chunks.start * CHUNK, (chunks.end * CHUNK).min(n));
            let (d, x, y) = (dst.ptr().cast::<f32>(), a.ptr().cast::<f32>(), b.ptr().cast::<f32>());
            // SAFETY: all three are packed F32 of n elements inside their buffers;
            // d may equal x or y exactly (in place, never streamed), never partly.
            unsafe {
                if streamed {
                    stream::zip_f32(d.add(lo), x.add(lo), y.add(lo), hi - lo, f);
                    stream::fence();
                } else {
                    zip_f32(d.add(lo), x.add(lo), y.add(lo), hi - lo, f)
                }
            }
        });
        return Ok(());
    }
    let (sd, sa, sb) =
        (Scalar::of("binary", dst.l.dtype)?, Scalar::of("binary", a.l.dtype)?, Scalar::of("binary", b.l.dtype)?);
    if dst.l.is_empty() {
        return Ok(());
    }
    let bne = b.l.ne;
    let ne0 = ne[0] as usize;
    let packed = f32s && dst.packed_rows() && a.packed_rows() && b.packed_rows();
    // `b` tiled: a row, a few, or as many as `a`; its share left out
    let streamed = packed && streamed((dst.l.nelements() as usize).saturating_mul(8));
    ex.for_ranges(dst.l.nrows() as usize, ne0, |rows| {
        for r in rows {
            let [i1, i2, i3] = dst.l.row_index(r as i64);
            let d = dst.row(i1, i2, i3);
            let x = a.row(i1, i2, i3);
            let y = b.row(i1 % bne[1], i2 % bne[2], i3 % bne[3]);
            // SAFETY: rows (i1,i2,i3) of dst and a and the tiled row of b exist;
            // this thread alone writes dst's row.
            unsafe {
                if streamed && bne[0] as usize == ne0 {
                    stream::zip_f32(d.cast(), x.cast(), y.cast(), ne0, f);
                } else if packed {
                    row_f32(d.cast(), x.cast(), y.cast(), ne0, bne[0] as usize, f);
                } else {
                    let (dn, an, bn) = (dst.l.nb[0], a.l.nb[0], b.l.nb[0]);
                    for i0 in 0..ne0 {
                        let v = f(sa.load(x.add(i0 * an)), sb.load(y.add((i0 % bne[0] as usize) * bn)));
                        sd.store(d.add(i0 * dn), v);
                    }
                }
            }
        }
        if streamed {
            stream::fence();
        }
    });
    Ok(())
}

/// `d[i] = f(x[i], y[i])` for `i < n`, as slices: the loop then vectorizes whether
/// `d` is a third array or one of the inputs (in place), where raw pointers that
/// may alias fail the compiler's overlap check and run scalar.
///
/// # Safety
/// `d`, `x`, `y` hold `n` floats; `d` equals `x` or `y` exactly or overlaps neither.
#[inline(always)]
pub(crate) unsafe fn zip_f32(d: *mut f32, x: *const f32, y: *const f32, n: usize, f: impl Fn(f32, f32) -> f32) {
    // SAFETY: the contract is passed on; the wide forms run only where detected.
    unsafe {
        match Wide::detect() {
            #[cfg(target_arch = "x86_64")]
            Wide::Avx512 => zip_avx512(d, x, y, n, f),
            #[cfg(target_arch = "x86_64")]
            Wide::Avx2 => zip_avx2(d, x, y, n, f),
            Wide::Base => zip_body(d, x, y, n, f),
        }
    }
}

/// [`zip_f32`]'s and [`map_f32`]'s loops compiled for one target feature.
macro_rules! wide_forms {
    ($feature:literal, $zip:ident, $map:ident) => {
        /// # Safety
        /// As [`zip_f32`]; the CPU has the feature.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $feature)]
        unsafe fn $zip(d: *mut f32, x: *const f32, y: *const f32, n: usize, f: impl Fn(f32, f32) -> f32) {
            // SAFETY: as the caller's.
            unsafe { zip_body(d, x, y, n, f) }
        }
        /// # Safety
        /// As [`map_f32`]; the CPU has the feature.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $feature)]
        unsafe fn $map(d: *mut f32, x: *const f32, n: usize, f: impl Fn(f32) -> f32) {
            // SAFETY: as the caller's.
            unsafe { map_body(d, x, n, f) }
        }
    };
}
wide_forms!("avx512f,fma", zip_avx512, map_avx512);
wide_forms!("avx2,fma", zip_avx2, map_avx2);

/// [`zip_f32`] at the baseline's width.
///
/// # Safety
/// As [`zip_f32`].
#[inline(always)]
unsafe fn zip_body(d: *mut f32, x: *const f32, y: *const f32, n: usize, f: impl Fn(f32, f32) -> f32) {
    use std::slice::{from_raw_parts as shared, from_raw_parts_mut as unique};
    let (dx, dy) = (std::ptr::eq(d, x), std::ptr::eq(d, y));
    // SAFETY: per the contract, each slice below is the only one over its bytes
    // that is written, and no two slices overlap partly.
    unsafe {
        match (dx, dy) {
            (false, false) => {
                let (d, x, y) = (unique(d, n), shared(x, n), shared(y, n));
                d.iter_mut().zip(x.iter().zip(y)).for_each(|(d, (&x, &y))| *d = f(x, y));
            }
            (true, false) => unique(d, n).iter_mut().zip(shared(y, n)).for_each(|(d, &y)| *d = f(*d, y)),
            (false, true) => unique(d, n).iter_mut().zip(shared(x, n)).for_each(|(d, &x)| *d = f(x, *d)),
            (true, true) => unique(d, n).iter_mut().for_each(|d| *d = f(*d, *d)),
        }
    }
}

/// `d[i] = f(x[i])` for `i < n`, as slices (see [`zip_f32`]).
///
/// # Safety
/// `d`, `x` hold `n` floats; `d` equals `x` exactly or does not overlap it.
#[inline(always)]
unsafe fn map_f32(d: *mut f32, x: *const f32, n: usize, f: impl Fn(f32) -> f32) {
    // SAFETY: as in `zip_f32`.
    unsafe {
        match Wide::detect() {
            #[cfg(target_arch = "x86_64")]
            Wide::Avx512 => map_avx512(d, x, n, f),
            #[cfg(target_arch = "x86_64")]
            Wide::Avx2 => map_avx2(d, x, n, f),
            Wide::Base => map_body(d, x, n, f),
        }
    }
}

/// [`map_f32`] at the baseline's width.
///
/// # Safety
/// As [`map_f32`].
#[inline(always)]
unsafe fn map_body(d: *mut f32, x: *const f32, n: usize, f: impl Fn(f32) -> f32) {
    use std::slice::{from_raw_parts as shared, from_raw_parts_mut as unique};
    // SAFETY: per the contract.
    unsafe {
        if std::ptr::eq(d, x) {
            unique(d, n).iter_mut().for_each(|d| *d = f(*d));
        } else {
            unique(d, n).iter_mut().zip(shared(x, n)).for_each(|(d, &x)| *d = f(x));
        }
    }
}

/// One packed F32 row: `d[i] = f(x[i], y[i % m])`.
///
/// # Safety
/// `d`, `x` hold `n` floats, `y` holds `m` floats; `d` may equal `x` or `y` exactly.
#[inline(always)]
unsafe fn row_f32(d: *mut f32, x: *const f32, y: *const f32, n: usize, m: usize, f: impl Fn(f32, f32) -> f32) {
    // SAFETY: per the contract.
    unsafe {
        if m == n {
            zip_f32(d, x, y, n, f);
        } else if m == 1 {
            let c = *y;
            map_f32(d, x, n, |v| f(v, c));
        } else {
            for start in (0..n).step_by(m) {
                for j in 0..m {
                    *d.add(start + j) = f(*x.add(start + j), *y.add(j));
                }
            }
        }
    }
}

fn map_with<F>(ex: &Exec, dst: StridedMut, a: Strided, f: F) -> Result<()>
where
    F: Fn(f32) -> f32 + Sync + Send + Copy,
{
    let (sd, sa) = (Scalar::of("unary", dst.l.dtype)?, Scalar::of("unary", a.l.dtype)?);
    let ne = dst.l.ne;
    if dst.l.is_empty() {
        return Ok(());
    }
    let f32s = all_f32(&[&dst.l, &a.l]);
    if f32s && dst.l.is_contiguous() && a.l.is_contiguous() {
        let n = dst.l.nelements() as usize;
        let streamed = stream::pays(n.saturating_mul(8)) && fresh(&dst, &[&a]);
        ex.for_ranges(n.div_ceil(CHUNK), CHUNK, |chunks| {
            let (lo, hi) = (chunks.start * CHUNK, (chunks.end * CHUNK).min(n));
            let (d, x) = (dst.ptr().cast::<f32>(), a.ptr().cast::<f32>());
            // SAFETY: both are packed F32 of n elements; d may equal x exactly
            // (in place, never streamed).
            unsafe {
                if streamed {
                    stream::map_f32(d.add(lo), x.add(lo), hi - lo, f);
                    stream::fence();
                } else {
                    map_f32(d.add(lo), x.add(lo), hi - lo, f)
                }
            }
        });
        return Ok(());
    }
    let ne0 = ne[0] as usize;
    let (dn, an) = (dst.l.nb[0], a.l.nb[0]);
    ex.for_ranges(dst.l.nrows() as usize, ne0, |rows| {
        for r in rows {
            let [i1, i2, i3] = dst.l.row_index(r as i64);
            let (d, x) = (dst.row(i1, i2, i3), a.row(i1, i2, i3));
            // SAFETY: row (i1,i2,i3) exists in both; this thread alone writes it.
            unsafe {
                for i0 in 0..ne0 {
                    sd.store(d.add(i0 * dn), f(sa.load(x.add(i0 * an))));
                }
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The f16 rounding GELU looks up by is `half`'s (F16C's on x86), at its
    /// edges (ties, the subnormal and overflow boundaries, infinities, NaN)
    /// and on a stream of random bit patterns; every f32 was checked once.
    #[test]
    fn f16_bits_round_as_half_does() {
        let edges = [
            0.0f32,
            -0.0,
            1.0,
            65504.0,
            65519.99,
            65520.0,
            65536.0,
            1e10,
            f32::INFINITY,
            f32::MAX,
            6.103_515_6e-5,
            6.1e-5,
            5.960_464_5e-8,
            2.980_232_2e-8,
            2.980_233e-8,
            1e-40,
            f32::MIN_POSITIVE,
            1.000_488_3,
            1.000_976_6,
            1.001_464_8,
            2049.0,
            2051.0,
            0.1,
            9.999,
            -10.0,
            10.0,
            // just under 2^-15, where the normal form's rebias wraps
            f32::from_bits(0x37ff_f001),
            f32::from_bits(0x37ff_f800),
            f32::from_bits(0x37ff_ffff),
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let random = (0..1_000_000).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            f32::from_bits(x as u32)
        });
        // (NaN payloads are the instruction's choice: NaN is only required to stay NaN)
        for v in edges.into_iter().flat_map(|v| [v, -v]).chain(random).filter(|v| !v.is_nan()) {
            let (got, want) = (f16_bits(v), half::f16::from_f32(v).to_bits());
            assert_eq!(got, want, "{v:e} ({:#x})", v.to_bits());
        }
        for nan in [f32::NAN, f32::from_bits(0x7f80_0001), f32::from_bits(0xffc0_1234)] {
            assert!(half::f16::from_bits(f16_bits(nan)).is_nan(), "{:#x}", nan.to_bits());
        }
    }
}
