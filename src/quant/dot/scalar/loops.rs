//! The helpers the scalar kernels of [`super`] and [`super::iq`] share: the
//! f16 fields, and the block loops of the legacy and k-quant kernels.

use std::mem::size_of;

use bytemuck::Pod;

use super::super::super::blocks::{BlockQ8_K, QK, QK_K};
use super::super::common::{blocks, f16t};

/// An f16 field as f32.
#[inline(always)]
pub(super) fn h(x: half::f16) -> f32 {
    f16t(x.to_bits())
}

/// Calls `f` on each pair of blocks of the first `nb` blocks of `w` and `a`,
/// reading them in place when aligned and copying them out when not.
#[inline(always)]
pub(super) fn each_block<X: Pod, Y: Pod>(nb: usize, w: &[u8], a: &[u8], mut f: impl FnMut(&X, &Y)) {
    let (w, a) = (&w[..nb * size_of::<X>()], &a[..nb * size_of::<Y>()]);
    match (bytemuck::try_cast_slice::<u8, X>(w), bytemuck::try_cast_slice::<u8, Y>(a)) {
        (Ok(xs), Ok(ys)) => xs.iter().zip(ys).for_each(|(x, y)| f(x, y)),
        _ => w
            .chunks_exact(size_of::<X>())
            .zip(a.chunks_exact(size_of::<Y>()))
            .for_each(|(x, y)| f(&bytemuck::pod_read_unaligned(x), &bytemuck::pod_read_unaligned(y))),
    }
}

/// A legacy-block kernel: `f` returns one block's contribution.
#[inline(always)]
pub(super) fn legacy<X: Pod, Y: Pod>(n: usize, w: &[u8], a: &[u8], f: impl Fn(&X, &Y) -> f32) -> f32 {
    let nb = blocks(n, w, a, QK, size_of::<X>(), size_of::<Y>());
    let mut sum = 0f32;
    each_block(nb, w, a, |x: &X, y: &Y| sum += f(x, y));
    sum
}

/// A k-quant kernel: `f` returns one super-block's contribution given Q8_K's `d`.
#[inline(always)]
pub(super) fn kquant<X: Pod>(n: usize, w: &[u8], a: &[u8], f: impl Fn(&X, &BlockQ8_K) -> f32) -> f32 {
    let nb = blocks(n, w, a, QK_K, size_of::<X>(), size_of::<BlockQ8_K>());
    let mut sum = 0f32;
    each_block(nb, w, a, |x: &X, y: &BlockQ8_K| sum += f(x, y));
    sum
}
