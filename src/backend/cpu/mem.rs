//! Raw tensor memory during a compute: a base pointer checked against its
//! buffer once, element loads/stores with type conversion, and the thread split.
//!
//! The CPU kernels work on raw pointers because their destinations may be any
//! strided layout (rows interleaved in memory) and may alias a source exactly
//! (in-place ops), which Rust references cannot express. The invariants that make
//! this sound are established here and in the op constructors:
//! - sources are [`Strided`] (a `*const u8`: read only, so a mapped weight is
//!   never reachable through a writable pointer) and destinations
//!   [`StridedMut`] (a `*mut u8` into bytes the compute may write, `Bytes::Write`);
//! - every view lies inside its buffer (checked in [`Strided::new`]) and is
//!   aligned for its type (view offsets and strides are checked at build time);
//! - a destination layout never maps two elements to the same bytes, and never
//!   partly overlaps a source (`Error::OverlappingWrite` at build time), so
//!   threads that write different elements write different bytes.

use std::ops::Range;

use super::pool::Session;

use half::{bf16, f16};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;

/// Defines a tensor view type over a raw pointer of type `$ptr`: the same
/// layout arithmetic for the read-only view of a source and the writable
/// view of a destination, which differ only in what their pointer allows.
macro_rules! strided {
    ($(#[$doc:meta])* $name:ident, $ptr:ty) => {
        $(#[$doc])*
        // the layout first: a view is copied 16 bytes at a time from its start,
        // and kernels compare `ne` 16 bytes at a time, which then forward from
        // those stores (at offset 8 they straddle two and stall)
        #[derive(Clone, Copy, Debug)]
        #[repr(C)]
        pub(crate) struct $name {
            pub(crate) l: Layout,
            ptr: $ptr,
        }

        // SAFETY: a view is a plain pointer into a buffer that outlives the
        // compute that uses it; concurrent writers touch disjoint elements
        // (see the module docs).
        unsafe impl Send for $name {}
        // SAFETY: as above.
        unsafe impl Sync for $name {}

        impl $name {
            /// The tensor `l` at byte `offs` of a buffer of `len` bytes at `base`.
            /// Errors if its byte extent leaves the buffer or it is misaligned.
            // inlined: it runs for every operand of every node, and a call returning
            // the header through memory stalls the loop on store forwarding
            #[inline(always)]
            pub(crate) fn new(base: $ptr, len: usize, offs: usize, l: Layout) -> Result<$name> {
                let end = l.checked_nbytes().and_then(|n| n.checked_add(offs));
                let ptr = base.wrapping_add(offs);
                if end.is_none_or(|e| e > len) || !(ptr as usize).is_multiple_of(l.dtype.align()) {
                    return Err(misplaced(&l, offs, len));
                }
                Ok($name { ptr, l })
            }
            /// First byte.
            pub(crate) fn ptr(&self) -> $ptr {
                self.ptr
            }
            /// First byte of row `(i1, i2, i3)`.
            #[inline(always)]
            pub(crate) fn row(&self, i1: i64, i2: i64, i3: i64) -> $ptr {
                self.ptr.wrapping_add(self.l.row_start([i1, i2, i3]))
            }
            /// First byte of the row with linear index `r` (over dims 1..4).
            #[inline(always)]
            pub(crate) fn row_at(&self, r: i64) -> $ptr {
                self.ptr.wrapping_add(self.l.row_offset(r))
            }
            /// Row `r` as a one-row tensor.
            pub(crate) fn row_tensor(&self, r: i64) -> $name {
                $name { ptr: self.row_at(r), l: Layout { ne: [self.l.ne[0], 1, 1, 1], ..self.l } }
            }
            /// True if elements along dim 0 are packed.
            pub(crate) fn packed_rows(&self) -> bool {
                self.l.nb[0] == self.l.dtype.type_size() || self.l.ne[0] <= 1
            }
        }
    };
}

strided!(
    /// A source's bytes during one compute, read only: a pointer to its
    /// first byte and its layout.
    Strided,
    *const u8
);

/// The error of a tensor that does not fit its buffer or is misaligned.
#[cold]
fn misplaced(l: &Layout, offs: usize, len: usize) -> Error {
    Error::internal(format!(
        "tensor ne={:?} nb={:?} {} at offset {offs} does not fit its {len}-byte buffer or is misaligned",
        l.ne, l.nb, l.dtype
    ))
}

strided!(
    /// A destination's bytes during one compute: a pointer to its first
    /// byte, through which the kernel writes, and its layout.
    StridedMut,
    *mut u8
);

impl Strided {
    /// Matrix `(i2, i3)` (dims 0 and 1) as a tensor of its own.
    pub(crate) fn matrix_tensor(&self, i2: i64, i3: i64) -> Strided {
        Strided { ptr: self.row(0, i2, i3), l: Layout { ne: [self.l.ne[0], self.l.ne[1], 1, 1], ..self.l } }
    }
    /// The same packed bytes seen with shape `ne` (same element count).
    pub(crate) fn reshaped(&self, ne: [i64; 4]) -> Result<Strided> {
        let l = Layout::contiguous(self.l.dtype, ne)?;
        if !self.l.is_contiguous() || l.nelements() != self.l.nelements() {
            return Err(Error::internal(format!("cannot view ne={:?} as {ne:?}", self.l.ne)));
        }
        Ok(Strided { ptr: self.ptr, l })
    }
    /// A tensor over a slice of f32 the caller owns, to be read.
    pub(crate) fn of_f32(v: &[f32], ne: [i64; 4]) -> Result<Strided> {
        let l = Layout::contiguous(DType::F32, ne)?;
        Strided::new(v.as_ptr().cast(), std::mem::size_of_val(v), 0, l)
    }
    /// Same first byte and the same places (`Layout::same_places`) as the
    /// destination `d`: the same tensor (an in-place op).
    pub(crate) fn same_as(&self, d: &StridedMut) -> bool {
        std::ptr::eq(self.ptr, d.ptr) && self.l.same_places(&d.l)
    }
}

impl StridedMut {
    /// A tensor over a slice of f32 the caller owns, to be written.
    pub(crate) fn of_f32(v: &mut [f32], ne: [i64; 4]) -> Result<StridedMut> {
        let l = Layout::contiguous(DType::F32, ne)?;
        StridedMut::new(v.as_mut_ptr().cast(), std::mem::size_of_val(v), 0, l)
    }
    /// The destination's bytes seen as a source (for a kernel that reads back
    /// what it wrote, e.g. a second pass over the result).
    pub(crate) fn as_src(&self) -> Strided {
        Strided { ptr: self.ptr.cast_const(), l: self.l }
    }
}

/// Where a storage root's bytes are during a compute, and what they allow:
/// read-only bytes (a leaf read in place, e.g. a mapped weight) or bytes the
/// compute may write.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Bytes {
    /// Read only.
    Read(*const u8),
    /// Read and written.
    Write(*mut u8),
}

/// A byte buffer the threads of one kernel write, each its own ranges.
#[derive(Clone, Copy)]
pub(crate) struct SharedBytes<'a> {
    ptr: *mut u8,
    len: usize,
    _buf: std::marker::PhantomData<&'a mut [u8]>,
}

// SAFETY: the threads that share it write disjoint ranges (`range`'s contract).
unsafe impl Send for SharedBytes<'_> {}
// SAFETY: as above.
unsafe impl Sync for SharedBytes<'_> {}

impl<'a> SharedBytes<'a> {
    /// Shares `b` for the duration of one parallel loop.
    pub(crate) fn new(b: &'a mut [u8]) -> SharedBytes<'a> {
        SharedBytes { ptr: b.as_mut_ptr(), len: b.len(), _buf: std::marker::PhantomData }
    }
    /// Bytes `offset..offset + n` of the shared buffer, or `None` outside it.
    ///
    /// # Safety
    /// No other thread may access these bytes while the slice lives.
    pub(crate) unsafe fn range(&self, offset: usize, n: usize) -> Option<&'a mut [u8]> {
        let end = offset.checked_add(n).filter(|&e| e <= self.len)?;
        // SAFETY: `offset..end` lies in the buffer; exclusivity is the caller's.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr.add(offset), end - offset) })
    }
}

/// Sets `n` bytes from `offset` of the `len`-byte buffer at `base` to
/// `byte`; a range outside the buffer is ignored.
pub(crate) fn fill(base: *mut u8, len: usize, offset: usize, n: usize, byte: u8) {
    if offset.checked_add(n).is_some_and(|e| e <= len) {
        // SAFETY: `offset..offset+n` lies inside the buffer at `base`, which
        // outlives the compute; no kernel runs while the executor fills it.
        unsafe { base.add(offset).write_bytes(byte, n) }
    }
}

/// The plain element types the CPU kernels load and store (as f32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scalar {
    F32,
    F16,
    BF16,
    I8,
    I16,
    I32,
    F64,
    I64,
}

impl Scalar {
    /// The scalar kind of `d`, or `Unsupported` for block types.
    pub(crate) fn of(op: &'static str, d: DType) -> Result<Scalar> {
        Ok(match d {
            DType::F32 => Scalar::F32,
            DType::F16 => Scalar::F16,
            DType::BF16 => Scalar::BF16,
            DType::I8 => Scalar::I8,
            DType::I16 => Scalar::I16,
            DType::I32 => Scalar::I32,
            DType::F64 => Scalar::F64,
            DType::I64 => Scalar::I64,
            _ => return Err(Error::Unsupported { op, dtype: d }),
        })
    }
    /// Reads one element as f32 (F64 and I64 rounded to nearest).
    ///
    /// # Safety
    /// `p` must point to a readable, aligned element of this type.
    #[inline(always)]
    pub(crate) unsafe fn load(self, p: *const u8) -> f32 {
        // SAFETY: the caller guarantees p is valid and aligned for this type.
        unsafe {
            match self {
                Scalar::F32 => p.cast::<f32>().read(),
                Scalar::F16 => f16::from_bits(p.cast::<u16>().read()).to_f32(),
                Scalar::BF16 => bf16::from_bits(p.cast::<u16>().read()).to_f32(),
                Scalar::I8 => p.cast::<i8>().read() as f32,
                Scalar::I16 => p.cast::<i16>().read() as f32,
                Scalar::I32 => p.cast::<i32>().read() as f32,
                Scalar::F64 => p.cast::<f64>().read() as f32,
                Scalar::I64 => p.cast::<i64>().read() as f32,
            }
        }
    }
    /// Writes one element, rounding f32 to the type (F16/BF16 round to nearest
    /// even; integers round to nearest and saturate).
    ///
    /// # Safety
    /// `p` must point to a writable, aligned element of this type that no other
    /// thread accesses concurrently.
    #[inline(always)]
    pub(crate) unsafe fn store(self, p: *mut u8, v: f32) {
        // SAFETY: the caller guarantees p is valid, aligned and exclusively ours.
        unsafe {
            match self {
                Scalar::F32 => p.cast::<f32>().write(v),
                Scalar::F16 => p.cast::<u16>().write(f16::from_f32(v).to_bits()),
                Scalar::BF16 => p.cast::<u16>().write(bf16::from_f32(v).to_bits()),
                Scalar::I8 => p.cast::<i8>().write(v.round() as i8),
                Scalar::I16 => p.cast::<i16>().write(v.round() as i16),
                Scalar::I32 => p.cast::<i32>().write(v.round() as i32),
                Scalar::F64 => p.cast::<f64>().write(f64::from(v)),
                Scalar::I64 => p.cast::<i64>().write(v.round() as i64),
            }
        }
    }
}

/// Keeps the first error raised inside a parallel loop.
#[derive(Default)]
pub(crate) struct FirstError(std::sync::Mutex<Option<Error>>);

impl FirstError {
    /// Keeps `r`'s error unless one is kept already.
    pub(crate) fn keep(&self, r: Result<()>) {
        if let (Err(e), Ok(mut slot)) = (r, self.0.lock()) {
            slot.get_or_insert(e);
        }
    }
    /// The kept error, if any.
    pub(crate) fn into_result(self) -> Result<()> {
        match self.0.into_inner() {
            Ok(Some(e)) => Err(e),
            _ => Ok(()),
        }
    }
}

/// Work below this many element-operations runs on the calling thread: waking
/// the pool costs more than it saves.
pub(crate) const PARALLEL_MIN_WORK: usize = 1 << 15;

/// Work from which a loop of independent items goes in shrinking ranges
/// ([`Exec::for_shrinking_ranges`]): below it a step is over in a few
/// microseconds, and its claims (each an atomic exchange between the cores)
/// would cost more than the threads' wait at its end.
const SHRINKING_MIN_WORK: usize = 1 << 21;
/// The least work of one shrinking range: each starts a new stream of weights,
/// which the hardware's prefetch must pick up again (about 36 KiB of Q4_0).
const SHRINKING_MIN_RANGE: usize = 1 << 16;

/// How a compute splits its work: a pool session, or the calling thread alone;
/// and the rayon pool the f32 GEMM crate runs on.
#[derive(Clone, Copy)]
pub(crate) struct Exec<'a> {
    pub(crate) pool: Option<&'a Session<'a>>,
    pub(crate) gemm: Option<&'a rayon::ThreadPool>,
    /// Tile kernels at every row count (row-invariant products).
    pub(crate) tiles_always: bool,
}

impl Exec<'_> {
    /// Everything on the calling thread.
    pub(crate) const ONE: Exec<'static> = Exec { pool: None, gemm: None, tiles_always: false };

    /// The same kernel choices on the calling thread alone (for work already
    /// split over the threads one level up).
    pub(crate) fn on_caller(&self) -> Exec<'static> {
        Exec { tiles_always: self.tiles_always, ..Exec::ONE }
    }

    /// The threads a parallel loop runs on.
    pub(crate) fn threads(&self) -> usize {
        self.pool.map_or(1, |p| p.threads())
    }

    /// Calls `f` on ranges covering `0..n`, in parallel when `n * cost` is large.
    /// `cost` is the work of one item, in element-operations.
    pub(crate) fn for_ranges(&self, n: usize, cost: usize, f: impl Fn(Range<usize>) + Sync + Send) {
        let work = n.saturating_mul(cost.max(1));
        match self.pool {
            Some(pool) if work >= PARALLEL_MIN_WORK && n > 1 && pool.threads() > 1 => {
                // enough chunks to balance, each worth at least PARALLEL_MIN_WORK / 4
                let by_work = work / (PARALLEL_MIN_WORK / 4);
                let chunks = (pool.threads() * 4).min(n).min(by_work.max(1));
                pool.for_ranges(n, n.div_ceil(chunks), &f);
            }
            _ => f(0..n),
        }
    }

    /// [`Exec::for_ranges`] with shrinking ranges (`pool::Session::for_shrinking_ranges`),
    /// none under [`SHRINKING_MIN_RANGE`] of work, from [`SHRINKING_MIN_WORK`] on: for loops whose items each
    /// give the same result however they are grouped, such as a product's
    /// blocks of weight rows.
    pub(crate) fn for_shrinking_ranges(&self, n: usize, cost: usize, f: impl Fn(Range<usize>) + Sync + Send) {
        // (the pool runs a lone thread's step, or one no longer than `min`, inline)
        match self.pool {
            Some(pool) if n.saturating_mul(cost.max(1)) >= SHRINKING_MIN_WORK => {
                pool.for_shrinking_ranges(n, SHRINKING_MIN_RANGE / cost.max(1), &f);
            }
            _ => self.for_ranges(n, cost, f),
        }
    }
}
