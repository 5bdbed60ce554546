//! Streaming (non-temporal) stores for destinations larger than the last-level
//! cache. Such an output cannot stay cached for the next node anyway, and an
//! ordinary store first reads each line it writes (read for ownership): for
//! `d = a + b` that is a quarter of the memory traffic, for an F32→F16 copy a
//! third. Streaming stores write whole lines without reading them. Decided per
//! node from the destination's size against the L3 the CPU reports;
//! `RGML_STREAM_STORES=on|off` overrides it (`on`: every destination, to test and
//! measure the paths). The values written are the same either way.
//!
//! The loops store a vector at a time where the destination is aligned to it
//! (ordinary stores before and after). Streaming stores are weakly ordered: the
//! caller calls [`fence`] once its share of the work is written (once per range,
//! not per row: a fence drains the write-combining buffers), so the lines are
//! visible to whichever thread reads them after the pool's barrier.

use std::sync::OnceLock;

use super::width::Wide;

/// True when a node that moves `bytes` (its destination's and its sources',
/// summed: an estimate will do) into a fresh destination (not in place) should use streaming
/// stores: past the L3's size, a sequential pass leaves none of the destination
/// cached for the next node's sequential read (the least recently used lines go
/// first: the ones that read needs first).
#[inline]
pub(crate) fn pays(bytes: usize) -> bool {
    #[cfg(test)]
    if FORCED_IN_TESTS.load(std::sync::atomic::Ordering::Relaxed) {
        return supported();
    }
    bytes > threshold()
}

/// The bytes past which [`pays`] says yes, decided once (every node asks).
fn threshold() -> usize {
    static BYTES: OnceLock<usize> = OnceLock::new();
    *BYTES.get_or_init(|| match (supported(), forced()) {
        (false, _) | (true, Some(false)) => usize::MAX,
        (true, Some(true)) => 0,
        (true, None) => crate::cpu_info::CpuInfo::get().l3_bytes.unwrap_or(usize::MAX),
    })
}

/// The unit tests' `RGML_STREAM_STORES=on`: the kernels' streamed paths on
/// small tensors (the values are the same, so other tests are unaffected).
#[cfg(test)]
pub(crate) static FORCED_IN_TESTS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this CPU has the streamed loops (AVX2 or AVX-512 at the level the
/// kernels run at).
fn supported() -> bool {
    !matches!(Wide::detect(), Wide::Base)
}

/// What `RGML_STREAM_STORES` asks for, read once (anything but `on`/`off` is
/// ignored with a warning).
fn forced() -> Option<bool> {
    static FORCED: OnceLock<Option<bool>> = OnceLock::new();
    *FORCED.get_or_init(|| match std::env::var("RGML_STREAM_STORES").as_deref() {
        Ok("on") => Some(true),
        Ok("off") => Some(false),
        Ok(v) => {
            eprintln!("warning: RGML_STREAM_STORES={v:?} is not on or off; ignored");
            None
        }
        Err(_) => None,
    })
}

/// Orders this thread's streaming stores before its later stores (the pool's
/// completion signal among them).
#[inline]
pub(crate) fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of x86_64.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

/// `d[i] = f(x[i], y[i])` for `i < n` with streaming stores (ordinary ones where
/// the CPU has no streamed loop).
///
/// # Safety
/// `d`, `x`, `y` hold `n` floats; `d` overlaps neither input; the caller calls
/// [`fence`] before handing the work back.
#[inline(always)]
pub(crate) unsafe fn zip_f32(d: *mut f32, x: *const f32, y: *const f32, n: usize, f: impl Fn(f32, f32) -> f32) {
    // SAFETY: the contract is passed on; each form runs only where detected.
    unsafe {
        match Wide::detect() {
            #[cfg(target_arch = "x86_64")]
            Wide::Avx512 => x86::zip_avx512(d, x, y, n, f),
            #[cfg(target_arch = "x86_64")]
            Wide::Avx2 => x86::zip_avx2(d, x, y, n, f),
            Wide::Base => scalar(d, 0, n, |i| f(*x.add(i), *y.add(i))),
        }
    }
}

/// `d[i] = f(x[i])` for `i < n` with streaming stores (see [`zip_f32`]).
///
/// # Safety
/// `d`, `x` hold `n` floats and do not overlap; the caller fences as for [`zip_f32`].
#[inline(always)]
pub(crate) unsafe fn map_f32(d: *mut f32, x: *const f32, n: usize, f: impl Fn(f32) -> f32) {
    // SAFETY: as in `zip_f32`.
    unsafe { zip_f32(d, x, x, n, |a, _| f(a)) }
}

/// `d[i] = g(i)` for `i` in `from..to`, ordinary stores (the unaligned ends).
///
/// # Safety
/// `d` holds `to` floats; `g` may read whatever the caller's contract allows.
#[inline(always)]
unsafe fn scalar(d: *mut f32, from: usize, to: usize, g: impl Fn(usize) -> f32) {
    for i in from..to {
        // SAFETY: i < to, inside `d`.
        unsafe { *d.add(i) = g(i) };
    }
}

/// Elements before `d` reaches an `align`-byte boundary (at most `n`).
pub(crate) fn head(d: *const u8, align: usize, n: usize, elem: usize) -> usize {
    (d.align_offset(align) / elem).min(n)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{head, scalar};

    /// The streamed loop at one width: ordinary stores until `d` is aligned to
    /// a vector, then a vector of `f` at a time streamed, then the tail.
    macro_rules! zip_form {
        ($name:ident, $feature:literal, $lanes:literal, $load:ident, $stream:ident) => {
            /// # Safety
            /// As [`super::zip_f32`]; the CPU has the feature.
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn $name(
                d: *mut f32,
                x: *const f32,
                y: *const f32,
                n: usize,
                f: impl Fn(f32, f32) -> f32,
            ) {
                let h = head(d.cast(), 4 * $lanes, n, 4);
                // SAFETY: every index stays below n; `d` at `i` is vector-aligned
                // in the loop (from `h` on, whole vectors).
                unsafe {
                    scalar(d, 0, h, |i| f(*x.add(i), *y.add(i)));
                    let mut i = h;
                    while i + $lanes <= n {
                        let mut v = [0f32; $lanes];
                        for (j, v) in v.iter_mut().enumerate() {
                            *v = f(*x.add(i + j), *y.add(i + j));
                        }
                        $stream(d.add(i), $load(v.as_ptr()));
                        i += $lanes;
                    }
                    scalar(d, i, n, |i| f(*x.add(i), *y.add(i)));
                }
            }
        };
    }
    zip_form!(zip_avx512, "avx512f,fma", 16, _mm512_loadu_ps, _mm512_stream_ps);
    zip_form!(zip_avx2, "avx2,fma", 8, _mm256_loadu_ps, _mm256_stream_ps);
}

#[cfg(test)]
mod tests {
    /// Every offset and length around the vector widths gives what the plain
    /// loop gives, and nothing outside `d`'s range is written.
    #[test]
    fn streamed_loops_write_exactly_their_range() {
        let x: Vec<f32> = (0..200).map(|i| i as f32 * 0.37 - 20.0).collect();
        let y: Vec<f32> = (0..200).map(|i| (i % 11) as f32 - 5.5).collect();
        for off in 0..17 {
            for n in [0, 1, 7, 8, 15, 16, 17, 31, 33, 64, 100, 150] {
                let mut d = vec![-1.0f32; 200];
                // SAFETY: off + n <= 167 < 200 for every pair; d is a separate vector.
                unsafe { super::zip_f32(d.as_mut_ptr().add(off), x.as_ptr(), y.as_ptr(), n, |a, b| a * b + 1.0) };
                super::fence();
                for (i, &v) in d.iter().enumerate() {
                    let want = if (off..off + n).contains(&i) { x[i - off] * y[i - off] + 1.0 } else { -1.0 };
                    assert_eq!(v.to_bits(), want.to_bits(), "off {off} n {n} i {i}");
                }
                let mut m = vec![-1.0f32; 200];
                // SAFETY: as above.
                unsafe { super::map_f32(m.as_mut_ptr().add(off), x.as_ptr(), n, |a| -a) };
                super::fence();
                assert!(m[off..off + n].iter().zip(&x).all(|(m, x)| m.to_bits() == (-x).to_bits()));
                assert!(m[..off].iter().chain(&m[off + n..]).all(|&v| v == -1.0));
            }
        }
    }
}
