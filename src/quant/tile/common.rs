//! What the dispatcher of this module and its kernels share: the prepared
//! block size, the kernel contracts ([`RawTile`], [`RawPacked`]), where a SIMD
//! call's weight blocks come from ([`Source`]: the [`Rows`] in place or a
//! [`Repacked`] group; each level implements it for its vectors), the
//! packed-block source and the prefetch.

/// The base pointers of the `N` weight rows of one SIMD tile call; missing
/// rows repeat row 0 (their lanes are never stored).
#[cfg(target_arch = "x86_64")]
pub(super) struct Rows<const N: usize> {
    /// The rows' base pointers.
    pub(super) ptr: [*const u8; N],
    /// Bytes per block.
    pub(super) wb: usize,
}

#[cfg(target_arch = "x86_64")]
impl<const N: usize> Rows<N> {
    /// # Panics
    /// If `w` is empty.
    pub(super) fn new(w: &[&[u8]], wb: usize) -> Rows<N> {
        let mut ptr = [w[0].as_ptr(); N];
        for (p, r) in ptr.iter_mut().zip(w) {
            *p = r.as_ptr();
        }
        Rows { ptr, wb }
    }
}

/// Where a SIMD call's weight blocks come from, as the dword-transposed
/// vectors (`V`: one lane per weight row) the kernels decode: [`Rows`] in their
/// GGUF layout, transposed as they are read, or a [`Repacked`] group, whose
/// blocks were transposed ahead of time. Offsets are bytes within a block;
/// each level implements it for its own vector type and row count.
#[cfg(target_arch = "x86_64")]
pub(super) trait Source<V> {
    /// Whether the blocks are a [`Repacked`] group's, whose Q5_0 `qh` is
    /// regrouped ([`q5_0_high_bits`](super::q5_0_high_bits)), not the GGUF rows'.
    const REPACKED: bool;
    /// Asks for block `b`'s bytes ahead of their use (a repacked group's
    /// stream; the rows' transposes prefetch their own).
    ///
    /// # Safety
    /// The CPU must have the level's features.
    unsafe fn touch(&self, b: usize);
    /// Bytes `off..off + 16` of block `b` of the rows, transposed by dwords:
    /// lane `r` of vector `e` holds bytes `off + 4e..off + 4e + 4` of row `r`.
    ///
    /// # Safety
    /// `b` must be below the call's block count and the bytes inside the
    /// block (for a repacked group, inside its body); the CPU must have the level's features.
    unsafe fn t16(&self, b: usize, off: usize) -> [V; 4];
    /// Bytes `off..off + 32` of block `b`, transposed as [`Source::t16`].
    ///
    /// # Safety
    /// As for [`Source::t16`].
    unsafe fn t32(&self, b: usize, off: usize) -> [V; 8];
    /// Lane `r`: the dword at `off` of row `r`'s block `b`.
    ///
    /// # Safety
    /// As for [`Source::t16`].
    unsafe fn dword(&self, b: usize, off: usize) -> V;
    /// Lane `r`: the f16 at `off` of row `r`'s block `b`, as f32 bits.
    ///
    /// # Safety
    /// As for [`Source::t16`] (a repacked group's f16 may also be its
    /// trailer's), and the CPU must have F16C.
    unsafe fn half(&self, b: usize, off: usize) -> V;
}

/// A group of `N` rows repacked ahead of time (`TileKernel::pack_group`): per
/// block (`wb · N` bytes), dword `v` of row `r`'s body (its bytes past a
/// `head` and before a `tail`) at `4 (N v + r)`, then each row's head and
/// tail bytes (the trailer).
#[cfg(target_arch = "x86_64")]
pub(super) struct Repacked<const N: usize> {
    base: *const u8,
    wb: usize,
    head: usize,
    tail: usize,
    /// [`tiles_prefetch`], read once: a value the block loop keeps in a register.
    prefetch: bool,
}

/// Where a [`Repacked`] block's f16 at some offset lies.
#[cfg(target_arch = "x86_64")]
pub(super) enum Half {
    /// In body dword `v`: its high half when `high`, else its low one.
    Body { v: usize, high: bool },
    /// In the trailer, one f16 per row from its pointer.
    Trailer(*const u8),
}

#[cfg(target_arch = "x86_64")]
impl<const N: usize> Repacked<N> {
    /// The group at `base` of blocks of `wb` bytes per row, of which `head`
    /// lead and `tail` end outside the transposed body (one f16 at most, at
    /// either end: the kernels read no other).
    pub(super) fn new(base: *const u8, wb: usize, head: usize, tail: usize) -> Repacked<N> {
        debug_assert!(head + tail <= 2 && (wb - head - tail).is_multiple_of(4));
        Repacked { base, wb, head, tail, prefetch: tiles_prefetch() }
    }

    /// The first byte of body dword vector `v` of block `b` (`4 N` bytes).
    #[inline(always)]
    pub(super) fn vector(&self, b: usize, v: usize) -> *const u8 {
        self.base.wrapping_add(b * self.wb * N + 4 * N * v)
    }

    /// The body vector holding byte `off` (dword-aligned within the body).
    #[inline(always)]
    pub(super) fn at(&self, off: usize) -> usize {
        debug_assert!(off >= self.head && (off - self.head).is_multiple_of(4));
        (off - self.head) / 4
    }

    /// Where the f16 at `off` of block `b`'s rows lies.
    #[inline(always)]
    pub(super) fn half_at(&self, b: usize, off: usize) -> Half {
        let body = self.wb - self.head - self.tail;
        if off >= self.head && off < self.head + body {
            Half::Body { v: (off - self.head) / 4, high: (off - self.head) % 4 == 2 }
        } else {
            Half::Trailer(self.base.wrapping_add(b * self.wb * N + body * N))
        }
    }

    /// Asks for block `b`'s bytes [`prefetch_ahead`].
    #[inline(always)]
    pub(super) fn touch(&self, b: usize) {
        if self.prefetch {
            let block = self.wb * N;
            prefetch_lines(self.base.wrapping_add(b * block), block);
        }
    }
}

/// Where a tile call's packed blocks (each level's `Packed`) come from: weight
/// rows in their GGUF layout, packed block by block as they are used, or
/// weights repacked ahead of time ([`TileKernel::pack_group`](super::TileKernel::pack_group)).
#[cfg(target_arch = "x86_64")]
pub(super) trait Blocks<P> {
    /// Block `b`, packed.
    ///
    /// # Safety
    /// `b` must be below the call's block count; the CPU must have the level's features.
    unsafe fn get(&self, b: usize) -> P;
}

/// The first `N` activation rows of `a` as pointers, and their outputs' at
/// `o + j · stride`: the arrays the few-row kernels take.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn rows_at<const N: usize>(a: &[&[u8]], o: *mut f32, stride: usize) -> ([*const u8; N], [*mut f32; N]) {
    (std::array::from_fn(|j| a[j].as_ptr()), std::array::from_fn(|j| o.wrapping_add(j * stride)))
}

/// Activation rows up to which a k-quant's repacked product without a fused
/// kernel for several rows (AVX2's, AVX-512's Q6_K) runs its one-row kernel
/// for each row on a group in turn (the group's weights stay in cache for the
/// next row): at two rows the tile costs more a row than the one-row kernel.
#[cfg(target_arch = "x86_64")]
pub(super) const ROWS_APART: usize = 2;

/// Bytes of a Q6_K super-block, as the one-row kernels of both levels read a
/// repacked group of them (each row's 208-byte body transposed, its `d` after).
#[cfg(target_arch = "x86_64")]
pub(super) const Q6_BYTES: usize = 210;

/// How far ahead of the block in use the repacked kernels prefetch their
/// stream: 2.3 KiB (8 AVX-512 Q4_0 blocks, 16 AVX2 ones, one Q4_K super-block
/// of 16 rows). One thread streaming 4096 × 4096 Q4_0 weights from L3 went
/// from about 17.5 to 22 GB/s (no prefetch / 8 / 24 blocks ahead: 17.5, 22,
/// 20.4 GB/s, same minutes).
#[cfg(target_arch = "x86_64")]
const PREFETCH_AHEAD: usize = 2304;

/// Whether the tiles prefetch: as the dot kernels do
/// ([`crate::quant::prefetch`]), and on AMD too where the tiles are AVX2's
/// (on Zen 4 with `RGML_SIMD=avx2` the repacked Q4_0/Q4_1/Q5_0 tiles streamed
/// at 0.40–0.46 of the read with it, 0.34–0.39 without). Read once.
#[cfg(target_arch = "x86_64")]
fn tiles_prefetch() -> bool {
    use crate::quant::dot::SimdLevel;
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        crate::quant::prefetch::forced()
            .unwrap_or_else(|| crate::quant::prefetch::enabled() || SimdLevel::detect() < SimdLevel::Avx512)
    })
}

/// Asks for the cache lines of the `len` bytes [`PREFETCH_AHEAD`] past `p`,
/// where this CPU gains by it ([`tiles_prefetch`]).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn prefetch_ahead(p: *const u8, len: usize) {
    if tiles_prefetch() {
        prefetch_lines(p, len);
    }
}

/// Asks for the cache lines of the `len` bytes [`PREFETCH_AHEAD`] past `p`.
/// A prefetch never faults, so an address past the end of the stream is
/// harmless (and `wrapping_add` forms it without claiming it is in bounds).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_lines(p: *const u8, len: usize) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    for line in 0..len.div_ceil(64) {
        // SAFETY: a prefetch is a hint; it reads nothing and never faults.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH_AHEAD + 64 * line).cast()) };
    }
}

/// Bytes of one prepared activation block: 32 quants, the f32 scale, the i32
/// correction `-off · Σ q`.
pub const PREPARED_BLOCK: usize = 40;

/// The unchecked form of a kernel.
///
/// # Safety
/// `nb ≥ 1`; `1 ≤ w.len() ≤ mr` and every weight row holds `nb` blocks; every
/// activation row holds `nb` prepared blocks; `out` holds
/// `(a.len() - 1) · out_stride + w.len()` values (when `a` is not empty); the
/// CPU supports the kernel's level.
pub(super) type RawTile = unsafe fn(nb: usize, w: &[&[u8]], a: &[&[u8]], out: &mut [f32], out_stride: usize);

/// Bytes of one block of a repacked Q4_0 group of `mr` rows
/// ([`TileKernel::pack_group`](super::TileKernel::pack_group)): their quant bytes transposed by dwords
/// (4 vectors of `4 · mr` bytes), then their `mr` f16 scales; 18 bytes per
/// row, as in the GGUF layout.
pub const fn packed_q4_0_block(mr: usize) -> usize {
    18 * mr
}

/// The unchecked form of a kernel on a run of consecutive repacked groups
/// (`rows.div_ceil(mr)` of them, the last one possibly partial): row `r` of
/// the run is row `r % mr` of group `r / mr`.
///
/// # Safety
/// `nb ≥ 1`; `group` holds the run's groups, `nb` packed blocks each;
/// `rows ≥ 1`; `a` and `out` as for [`RawTile`] (with `rows` weight rows);
/// the CPU supports the kernel's level.
pub(super) type RawPacked =
    unsafe fn(nb: usize, group: &[u8], rows: usize, a: &[&[u8]], out: &mut [f32], out_stride: usize);

/// The groups of a run ([`RawPacked`]) of `rows` rows, `mr` a group and
/// `group_bytes` each: the byte offset of each, its first row and its rows.
/// A kernel loops over them itself, so that a decode step's stream of groups
/// runs from one call (with nothing between the groups but this loop).
#[inline(always)]
pub(super) fn groups_of_run(group_bytes: usize, mr: usize, rows: usize) -> impl Iterator<Item = (usize, usize, usize)> {
    (0..rows.div_ceil(mr)).map(move |g| (g * group_bytes, g * mr, (rows - g * mr).min(mr)))
}
