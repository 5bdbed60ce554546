//! Blocks of dot products of F32, F16 or BF16 rows against a few F32 rows
//! ([`dot::f32_block::dot_block`]), in the block shape that fills this CPU's
//! registers for the number of F32 rows: `mul_mat`'s path below the GEMM's row
//! count, and `flash_attn_ext`'s scores (keys against the query heads of one KV
//! head), so that both get the same bits for the same operands.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::quant::dot;

/// Rows of one type (`w`: F32, F16 or BF16) against `n1` F32 rows of `k` values
/// each (values of `w`'s type, widened: its dot partner).
pub(super) struct BlockRun {
    /// Values per row.
    pub(super) k: usize,
    /// The type of the first operand's rows.
    pub(super) wt: DType,
    /// The first operand's rows to compute.
    pub(super) rows: std::ops::Range<usize>,
    /// The F32 rows.
    pub(super) n1: usize,
}

impl BlockRun {
    /// Every value (row `i0` of `rows`, F32 row `i1`) to `put`, in the block
    /// shape for `n1` at AVX-512 (`wide`, [`dot::f32_block::wide`]) or AVX2: at
    /// most 24 (12) accumulators, the values not depending on the shape.
    ///
    /// # Errors
    /// The CPU has neither AVX-512 nor AVX2 ([`dot::f32_block::supported`]).
    ///
    /// # Safety
    /// `wrow(i0)` addresses `k` readable values of type `wt` for every `i0` in
    /// `rows`, `act(i1)` `k` readable f32 for every `i1 < n1`.
    pub(super) unsafe fn run(
        &self,
        wide: bool,
        wrow: impl Fn(usize) -> *const u8,
        act: impl Fn(usize) -> *const u8,
        put: impl Fn(usize, usize, f32),
    ) -> Result<()> {
        // SAFETY: passed on.
        unsafe {
            match (wide, self.n1) {
                (true, 1) => self.blocks::<8, 1>(wrow, act, put),
                (true, 2) => self.blocks::<8, 2>(wrow, act, put),
                (true, 3) => self.blocks::<7, 3>(wrow, act, put),
                (true, 4) => self.blocks::<6, 4>(wrow, act, put),
                (true, 5) => self.blocks::<4, 5>(wrow, act, put),
                (true, 7 | 8) => self.blocks::<3, 8>(wrow, act, put),
                (true, _) => self.blocks::<4, 6>(wrow, act, put),
                // AVX2: at most 12 accumulators of its 16 registers
                (false, 1) => self.blocks::<4, 1>(wrow, act, put),
                (false, 2) => self.blocks::<4, 2>(wrow, act, put),
                (false, 3) => self.blocks::<3, 3>(wrow, act, put),
                (false, 5) => self.blocks::<2, 5>(wrow, act, put),
                (false, 6) => self.blocks::<2, 6>(wrow, act, put),
                (false, _) => self.blocks::<3, 4>(wrow, act, put),
            }
        }
    }

    /// [`BlockRun::run`] in blocks of `R` rows by `C` F32 rows (the last ones
    /// repeated to fill a block; their values are not put).
    ///
    /// # Safety
    /// As for [`BlockRun::run`].
    unsafe fn blocks<const R: usize, const C: usize>(
        &self,
        wrow: impl Fn(usize) -> *const u8,
        act: impl Fn(usize) -> *const u8,
        put: impl Fn(usize, usize, f32),
    ) -> Result<()> {
        use dot::f32_block::{dot_block, BF16, F16, F32};
        let (rows, n1) = (&self.rows, self.n1);
        for r0 in rows.clone().step_by(R) {
            let rs: [usize; R] = std::array::from_fn(|d| (r0 + d).min(rows.end - 1));
            for c0 in (0..n1).step_by(C) {
                let cs: [usize; C] = std::array::from_fn(|d| (c0 + d).min(n1 - 1));
                let (w, x) = (rs.map(&wrow), cs.map(&act));
                // SAFETY: every pointer addresses k values of its type (the caller's promise).
                let out = unsafe {
                    match self.wt {
                        DType::F16 => dot_block::<R, C, F16>(self.k, w, x),
                        DType::BF16 => dot_block::<R, C, BF16>(self.k, w, x),
                        _ => dot_block::<R, C, F32>(self.k, w, x),
                    }
                };
                let out = out.ok_or_else(|| Error::internal("F32 blocks without AVX-512 or AVX2"))?;
                for (i1, vals) in (c0..(c0 + C).min(n1)).zip(out) {
                    for (i0, v) in (r0..(r0 + R).min(rows.end)).zip(vals) {
                        put(i0, i1, v);
                    }
                }
            }
        }
        Ok(())
    }
}
