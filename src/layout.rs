//! `Layout`: a tensor's element type, shape (`ne`) and byte strides (`nb`), with
//! ggml's predicates. Pure metadata: nothing here touches data.

use crate::dtype::DType;
use crate::error::{Error, Result};

/// Shape and strides of a tensor, ggml's way: `ne[0]` is the fastest dim, strides
/// are in bytes, and for block types the values along one dim — `block_dim`,
/// dim 0 unless a transpose or permute moved it — are stored in blocks:
/// `nb[block_dim]` is the stride of one block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    /// Element type.
    pub dtype: DType,
    /// Element counts per dim; unused dims are 1.
    pub ne: [i64; 4],
    /// Byte strides per dim.
    pub nb: [usize; 4],
    /// The dim whose values are grouped in blocks (0 for fresh tensors; only
    /// meaningful for block types).
    pub block_dim: usize,
}

/// The index of the `k`-th of `counts` units in logical order (dim 0
/// fastest): [`Layout::unit_index`] with the counts computed once, for loops.
#[inline]
pub(crate) fn unravel_units(k: usize, counts: [usize; 4]) -> [usize; 4] {
    let u = counts;
    [k % u[0], (k / u[0]) % u[1], (k / (u[0] * u[1])) % u[2], k / (u[0] * u[1] * u[2])]
}

/// How two layouts placed in the same storage share bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overlap {
    /// No byte is shared.
    None,
    /// The same elements at the same places (same offset, shape and strides).
    Same,
    /// Some bytes are shared by different elements.
    Partial,
}

/// Element count above which the exact overlap checks give up and answer "overlaps".
const EXACT_OVERLAP_LIMIT: i64 = 1 << 20;

impl Layout {
    /// A fresh contiguous layout: `nb[0] = type_size`, `nb[1] = nb[0]*ne[0]/block`,
    /// `nb[i] = nb[i-1]*ne[i-1]`. Errors on negative dims, a dim 0 that is not a
    /// whole number of blocks, or a size that overflows.
    pub fn contiguous(dtype: DType, ne: [i64; 4]) -> Result<Layout> {
        if ne.iter().any(|&n| n < 0) {
            return Err(Error::shape("new_tensor", format!("negative dimension in ne={ne:?}")));
        }
        let row = dtype.row_size(ne[0]).ok_or_else(|| {
            Error::shape(
                "new_tensor",
                format!("ne[0]={} is not a multiple of {}'s block size {}", ne[0], dtype, dtype.block_size()),
            )
        })?;
        let mut nb = [dtype.type_size(), row, 0, 0];
        for i in 2..4 {
            nb[i] = nb[i - 1]
                .checked_mul(ne[i - 1] as usize)
                .ok_or_else(|| Error::shape("new_tensor", format!("size of ne={ne:?} ({dtype}) overflows")))?;
        }
        let layout = Layout { dtype, ne, nb, block_dim: 0 };
        match layout.checked_nbytes() {
            Some(n) if n <= isize::MAX as usize && nb[3].checked_mul(ne[3] as usize).is_some() => Ok(layout),
            _ => Err(Error::shape("new_tensor", format!("size of ne={ne:?} ({dtype}) overflows"))),
        }
    }

    /// Number of elements.
    pub fn nelements(&self) -> i64 {
        self.ne.iter().product()
    }
    /// Number of rows (`ne[1]*ne[2]*ne[3]`).
    pub fn nrows(&self) -> i64 {
        self.ne[1] * self.ne[2] * self.ne[3]
    }
    /// Bytes of one contiguous row of `ne[0]` values.
    pub fn row_size(&self) -> usize {
        self.ne[0] as usize / self.dtype.block_size() * self.dtype.type_size()
    }
    /// True if any dim is 0.
    pub fn is_empty(&self) -> bool {
        self.ne.contains(&0)
    }
    /// Blocks (elements for plain types) along dim 0.
    pub fn units0(&self) -> i64 {
        self.units(0)
    }
    /// Storage units along dim `d`: blocks along the block dim, else elements.
    pub fn units(&self, d: usize) -> i64 {
        if d == self.block_dim {
            self.ne[d] / self.dtype.block_size() as i64
        } else {
            self.ne[d]
        }
    }

    /// Storage units along every dim (see [`Layout::units`]).
    pub fn unit_counts(&self) -> [usize; 4] {
        [0, 1, 2, 3].map(|d| self.units(d).max(0) as usize)
    }
    /// Unit index (blocks along the block dim, else elements) of the `k`-th
    /// storage unit in logical order.
    #[inline]
    pub fn unit_index(&self, k: usize) -> [usize; 4] {
        unravel_units(k, self.unit_counts())
    }
    /// Byte offset of the storage unit at unit index `u`.
    #[inline]
    pub fn unit_offset(&self, u: [usize; 4]) -> usize {
        u[0] * self.nb[0] + u[1] * self.nb[1] + u[2] * self.nb[2] + u[3] * self.nb[3]
    }
    /// `(i1, i2, i3)` of the row with linear index `r` over dims 1..4.
    #[inline(always)]
    pub fn row_index(&self, r: i64) -> [i64; 3] {
        let t = r / self.ne[1];
        [r % self.ne[1], t % self.ne[2], t / self.ne[2]]
    }
    /// Byte offset of the first byte of row `(i1, i2, i3)`.
    #[inline(always)]
    pub fn row_start(&self, [i1, i2, i3]: [i64; 3]) -> usize {
        i1 as usize * self.nb[1] + i2 as usize * self.nb[2] + i3 as usize * self.nb[3]
    }
    /// Byte offset of the first byte of the row with linear index `r`.
    #[inline(always)]
    pub fn row_offset(&self, r: i64) -> usize {
        self.row_start(self.row_index(r))
    }

    /// The byte extent `[0, nbytes)` the tensor touches from its start (ggml's
    /// `ggml_nbytes`), `None` if it overflows. 0 for an empty tensor.
    #[inline]
    pub fn checked_nbytes(&self) -> Option<usize> {
        if self.is_empty() {
            return Some(0);
        }
        let bd = if self.dtype.block_size() == 1 { usize::MAX } else { self.block_dim };
        // plain types: the last element covers type_size bytes; block types:
        // units·nb along the block dim (ggml's formula)
        let mut n = if bd == usize::MAX {
            self.dtype.type_size()
        } else {
            (self.units(bd) as usize).checked_mul(self.nb[bd])?
        };
        for i in (0..4).filter(|&i| i != bd) {
            n = n.checked_add((self.ne[i] as usize - 1).checked_mul(self.nb[i])?)?;
        }
        Some(n)
    }
    /// [`Layout::checked_nbytes`] for a layout already known to be valid.
    pub fn nbytes(&self) -> usize {
        self.checked_nbytes().unwrap_or(usize::MAX)
    }

    /// Byte offset of element `(i0,i1,i2,i3)` (for block types `i0` must be a block start).
    pub fn offset_of(&self, i: [i64; 4]) -> usize {
        let bs = self.dtype.block_size();
        (0..4).map(|d| if d == self.block_dim { i[d] as usize / bs } else { i[d] as usize } * self.nb[d]).sum()
    }

    /// ggml's `ggml_is_contiguous`: packed rows in dim order, block aware, size-1 dims ignored.
    #[inline]
    pub fn is_contiguous(&self) -> bool {
        self.is_contiguous_from(0)
    }
    /// ggml's `ggml_is_contiguous_1`: like `is_contiguous` but dim 1 may be strided.
    pub fn is_contiguous_1(&self) -> bool {
        self.is_contiguous_from(1)
    }
    /// ggml's `ggml_is_contiguous_m_n(t, m, 4)`: dims `1..=m` may have any stride.
    #[inline(always)]
    fn is_contiguous_from(&self, m: usize) -> bool {
        let ts = self.dtype.type_size();
        if self.dtype.is_quantized() && self.block_dim != 0 {
            return false;
        }
        if self.ne[0] != self.dtype.block_size() as i64 && self.nb[0] != ts {
            return false;
        }
        let mut next = ts * (self.units0() as usize);
        for i in 1..4 {
            if i > m {
                if self.ne[i] != 1 && self.nb[i] != next {
                    return false;
                }
                next *= self.ne[i] as usize;
            } else {
                next = self.ne[i] as usize * self.nb[i];
            }
        }
        true
    }
    /// ggml's `ggml_is_contiguous_rows`: each row is packed (dims ≥ 1 may be strided).
    pub fn is_contiguous_rows(&self) -> bool {
        self.ne[0] == self.dtype.block_size() as i64 || self.nb[0] == self.dtype.type_size()
    }
    /// ggml's `ggml_is_transposed`: `nb[0] > nb[1]`.
    pub fn is_transposed(&self) -> bool {
        self.nb[0] > self.nb[1]
    }
    /// ggml's `ggml_is_permuted`: strides not increasing with the dim.
    pub fn is_permuted(&self) -> bool {
        self.nb[0] > self.nb[1] || self.nb[1] > self.nb[2] || self.nb[2] > self.nb[3]
    }
    /// Same `ne`.
    pub fn same_shape(&self, other: &Layout) -> bool {
        self.ne == other.ne
    }
    /// Same `nb`.
    pub fn same_stride(&self, other: &Layout) -> bool {
        self.nb == other.nb
    }
    /// Same type and shape, and each element at the same byte: strides agree
    /// on every dim of more than one unit (a size-1 dim's stride addresses
    /// nothing, so it may differ). Two such views of one storage at one
    /// offset are the same tensor.
    pub fn same_places(&self, other: &Layout) -> bool {
        self.dtype == other.dtype
            && self.ne == other.ne
            && (self.dtype.block_size() == 1 || self.block_dim == other.block_dim)
            && (0..4).all(|d| self.units(d) <= 1 || self.nb[d] == other.nb[d])
    }
    /// ggml's `ggml_can_repeat(self, other)`: `other` is a whole tiling of `self`.
    pub fn can_repeat(&self, other: &Layout) -> bool {
        if self.is_empty() {
            return other.is_empty();
        }
        (0..4).all(|i| other.ne[i] % self.ne[i] == 0)
    }

    /// True if two different elements (blocks) share a byte: a stride 0 on a
    /// dim of size > 1, or strides too small for the dims below them. Exact up
    /// to 2^20 elements; above that, layouts that fail the sorted-stride test
    /// are reported as overlapping.
    pub fn self_overlaps(&self) -> bool {
        if self.is_empty() {
            return false;
        }
        let mut dims: Vec<(usize, i64)> = (0..4).map(|i| (self.nb[i], self.units(i))).filter(|&(_, n)| n > 1).collect();
        dims.sort_unstable();
        let mut extent = self.dtype.type_size();
        let mut packed = true;
        for &(nb, n) in &dims {
            if nb < extent {
                packed = false;
                break;
            }
            extent += nb * (n as usize - 1);
        }
        if packed {
            return false;
        }
        if self.nelements() / self.dtype.block_size() as i64 > EXACT_OVERLAP_LIMIT {
            return true;
        }
        let mut starts = self.unit_offsets(0);
        starts.sort_unstable();
        starts.windows(2).any(|w| w[1] - w[0] < self.dtype.type_size())
    }

    /// How `self` at byte `off` and `other` at byte `other_off` of one storage share bytes.
    pub fn overlap(&self, off: usize, other: &Layout, other_off: usize) -> Overlap {
        if self.is_empty() || other.is_empty() {
            return Overlap::None;
        }
        let (a0, a1) = (off, off + self.nbytes());
        let (b0, b1) = (other_off, other_off + other.nbytes());
        if a1 <= b0 || b1 <= a0 {
            return Overlap::None;
        }
        if off == other_off && self.same_places(other) {
            return Overlap::Same;
        }
        let n = (self.nelements() / self.dtype.block_size() as i64)
            .saturating_add(other.nelements() / other.dtype.block_size() as i64);
        if n > EXACT_OVERLAP_LIMIT {
            return Overlap::Partial;
        }
        let mut a: Vec<(usize, usize)> =
            self.unit_offsets(off).into_iter().map(|s| (s, s + self.dtype.type_size())).collect();
        let mut b: Vec<(usize, usize)> =
            other.unit_offsets(other_off).into_iter().map(|s| (s, s + other.dtype.type_size())).collect();
        a.sort_unstable();
        b.sort_unstable();
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            if a[i].1 <= b[j].0 {
                i += 1;
            } else if b[j].1 <= a[i].0 {
                j += 1;
            } else {
                return Overlap::Partial;
            }
        }
        Overlap::None
    }

    /// Start byte of every element (block) in logical order, plus `base`.
    fn unit_offsets(&self, base: usize) -> Vec<usize> {
        let u = self.unit_counts();
        (0..u.iter().product()).map(|k| base + self.unit_offset(unravel_units(k, u))).collect()
    }
}

#[cfg(test)]
mod tests;
