//! Raw tensor memory during a compute: a base pointer checked against its
//! buffer once, element loads/stores with type conversion, and the thread split.
//!
//! The CPU kernels work on raw pointers because their destinations may be any
//! strided layout (rows interleaved in memory) and may alias a source exactly
//! (in-place ops), which Rust references cannot express. The invariants that make
//! this sound are established here and in the op constructors:
//! - every `Strided` lies inside its buffer (checked in [`Strided::new`]) and is
//!   aligned for its type (view offsets and strides are checked at build time);
//! - a destination layout never maps two elements to the same bytes, and never
//!   partly overlaps a source (`Error::OverlappingWrite` at build time), so
//!   threads that write different elements write different bytes.

use std::ops::Range;

use half::{bf16, f16};
use rayon::prelude::*;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;

/// A tensor's bytes during one compute: a pointer to its first byte and its layout.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Strided {
    ptr: *mut u8,
    pub(crate) l: Layout,
}

// SAFETY: a Strided is a plain pointer into a buffer that outlives the compute
// that uses it; concurrent writers touch disjoint elements (see module docs).
unsafe impl Send for Strided {}
// SAFETY: as above.
unsafe impl Sync for Strided {}

impl Strided {
    /// The tensor `l` at byte `offs` of a buffer of `len` bytes at `base`.
    /// Errors if its byte extent leaves the buffer or it is misaligned.
    pub(crate) fn new(base: *mut u8, len: usize, offs: usize, l: Layout) -> Result<Strided> {
        let end = l.checked_nbytes().and_then(|n| n.checked_add(offs));
        if end.is_none_or(|e| e > len) {
            return Err(Error::internal(format!(
                "tensor ne={:?} nb={:?} at offset {offs} does not fit its {len}-byte buffer",
                l.ne, l.nb
            )));
        }
        let ptr = base.wrapping_add(offs);
        if !(ptr as usize).is_multiple_of(l.dtype.align()) {
            return Err(Error::internal(format!("tensor at offset {offs} is misaligned for {}", l.dtype)));
        }
        Ok(Strided { ptr, l })
    }
    /// A tensor over a slice of f32 the caller owns.
    pub(crate) fn of_f32(v: &mut [f32], ne: [i64; 4]) -> Result<Strided> {
        let l = Layout::contiguous(DType::F32, ne)?;
        Strided::new(v.as_mut_ptr().cast(), std::mem::size_of_val(v), 0, l)
    }
    /// First byte.
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }
    /// First byte of row `(i1, i2, i3)`.
    #[inline(always)]
    pub(crate) fn row(&self, i1: i64, i2: i64, i3: i64) -> *mut u8 {
        let nb = &self.l.nb;
        self.ptr.wrapping_add(i1 as usize * nb[1] + i2 as usize * nb[2] + i3 as usize * nb[3])
    }
    /// First byte of the row with linear index `r` (over dims 1..4).
    #[inline(always)]
    pub(crate) fn row_at(&self, r: i64) -> *mut u8 {
        let [i1, i2, i3] = unravel_row(r, &self.l.ne);
        self.row(i1, i2, i3)
    }
    /// The same packed bytes seen with shape `ne` (same element count).
    pub(crate) fn reshaped(&self, ne: [i64; 4]) -> Result<Strided> {
        let l = Layout::contiguous(self.l.dtype, ne)?;
        if !self.l.is_contiguous() || l.nelements() != self.l.nelements() {
            return Err(Error::internal(format!("cannot view ne={:?} as {ne:?}", self.l.ne)));
        }
        Ok(Strided { ptr: self.ptr, l })
    }
    /// Row `r` as a one-row tensor.
    pub(crate) fn row_tensor(&self, r: i64) -> Strided {
        Strided { ptr: self.row_at(r), l: Layout { ne: [self.l.ne[0], 1, 1, 1], ..self.l } }
    }
    /// True if elements along dim 0 are packed.
    pub(crate) fn packed_rows(&self) -> bool {
        self.l.nb[0] == self.l.dtype.type_size() || self.l.ne[0] <= 1
    }
    /// Same first byte and the same places (`Layout::same_places`): the same tensor.
    pub(crate) fn same_as(&self, o: &Strided) -> bool {
        self.ptr == o.ptr && self.l.same_places(&o.l)
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

/// `(i1, i2, i3)` of the row with linear index `r`.
#[inline(always)]
pub(crate) fn unravel_row(r: i64, ne: &[i64; 4]) -> [i64; 3] {
    let i1 = r % ne[1];
    let t = r / ne[1];
    [i1, t % ne[2], t / ne[2]]
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

/// Work below this many element-operations runs on the calling thread: waking
/// the pool costs more than it saves.
pub(crate) const PARALLEL_MIN_WORK: usize = 1 << 15;

/// How a compute splits its work: a pool, or the calling thread alone.
#[derive(Clone, Copy)]
pub(crate) struct Exec<'a> {
    pub(crate) pool: Option<&'a rayon::ThreadPool>,
}

impl Exec<'_> {
    /// Calls `f` on ranges covering `0..n`, in parallel when `n * cost` is large.
    /// `cost` is the work of one item, in element-operations.
    pub(crate) fn for_ranges(&self, n: usize, cost: usize, f: impl Fn(Range<usize>) + Sync + Send) {
        let work = n.saturating_mul(cost.max(1));
        match self.pool {
            Some(pool) if work >= PARALLEL_MIN_WORK && n > 1 && pool.current_num_threads() > 1 => {
                // enough chunks to balance, each worth at least PARALLEL_MIN_WORK / 4
                let by_work = work / (PARALLEL_MIN_WORK / 4);
                let chunks = (pool.current_num_threads() * 4).min(n).min(by_work.max(1));
                let step = n.div_ceil(chunks);
                pool.install(|| {
                    (0..n.div_ceil(step)).into_par_iter().for_each(|c| f(c * step..((c + 1) * step).min(n)));
                });
            }
            _ => f(0..n),
        }
    }
}
