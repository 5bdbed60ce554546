//! `mul_mat` on the CPU, ggml's way: each row of `b` (the activations) is
//! converted once to the weight type's dot partner (`vec_dot_type`: Q8_0,
//! Q8_1 or Q8_K for block types, the weight's own type for floats), then every
//! output element is one dot product of a weight row with a converted row, by
//! the fastest kernel this CPU has (`quant::dot`). Work is split over blocks of
//! weight rows; within a block, activation rows go in chunks so the weight
//! rows stay in L1 and the chunk in L2. Weight types with a register-tiled
//! kernel at this CPU's level (`quant::tile`) instead get their converted rows
//! prepared once more, and each call computes a block's weight rows against
//! every activation row of the batch.

use super::copy;
use super::dot_blocks::BlockRun;
use super::mem::{Exec, FirstError, SharedBytes, Strided, StridedMut};
use crate::dtype::DType;
use crate::error::Result;
use crate::host::HostBuffer;
use crate::layout::Layout;
use crate::quant::{dot, tile};

/// Weight rows per work item.
const A_BLOCK: usize = 16;
/// Activation rows per inner chunk.
const B_CHUNK: usize = 32;
/// How many weight rows ahead one activation row's dots prefetch.
const ROW_PREFETCH_AHEAD: usize = 2;

/// Activation rows from which F32 weights may go through the blocked GEMM.
const GEMM_MIN_ROWS: i64 = 32;
/// Activation rows from which F32 weights go through the blocked GEMM whatever
/// their shape (see [`gemm_pays`]).
const GEMM_ALWAYS_ROWS: i64 = 512;

/// Whether `n` activation rows against F32 weight rows of `k` values go
/// through the blocked GEMM rather than the blocks of dots. The GEMM first
/// packs the weights across their rows (a transposing copy whose reads stride
/// a row apart: slow once rows are long), then runs an outer-product kernel
/// faster than dots; the dots read rows as they lie but sum each output across
/// its vector, which costs more the shorter the rows. So short rows (under
/// 256 values) take the GEMM from [`GEMM_MIN_ROWS`], longer ones from `k / 2`
/// rows up to [`GEMM_ALWAYS_ROWS`] (measured crossovers, Zen 4: 32 rows at
/// k = 128, about 128 at k = 256, 256 at 512, 512 from 1024 on).
fn gemm_pays(n: i64, k: i64) -> bool {
    let from = if k < 256 { GEMM_MIN_ROWS } else { (k / 2).clamp(GEMM_MIN_ROWS, GEMM_ALWAYS_ROWS) };
    n >= from
}

/// Multiply-adds (m·n·k, per matrix) from which the blocked GEMM runs on the
/// gemm pool's threads.
const GEMM_PARALLEL_MIN: usize = 1 << 21;

/// `dst[i3,i2,i1,i0] = Σ_k a[i3/r3, i2/r2, i0, k] · b[i3, i2, i1, k]`;
/// `packed`, when given, is `a` as [`repack`] made it.
pub(crate) fn mul_mat(ex: &Exec, dst: StridedMut, a: Strided, b: Strided, packed: Option<&[u8]>) -> Result<()> {
    let (ne, ane, bne) = (dst.l.ne, a.l.ne, b.l.ne);
    if dst.l.is_empty() {
        return Ok(());
    }
    // a repacked stack of matrices is read one matrix at a time (`mul_mat_id`)
    let packed = packed.filter(|_| ane[2] * ane[3] == 1);
    if a.l.dtype == crate::dtype::DType::F32 && gemm_pays(ne[1], ane[0]) && ane[0] > 0 {
        return gemm_f32(ex, dst, a, b);
    }
    let k = ane[0] as usize;
    let wt = a.l.dtype;
    // lengths are right by construction below: the raw kernel, no per-element check
    let dot = dot::dot_fn(wt)?.raw();
    let mut a_tmp = None;
    let a = packed_rows(ex, a, &mut a_tmp)?;
    let (m, n1) = (ne[0] as usize, ne[1] as usize);
    // repacked weights take the tile at every row count: no per-call packing to amortize
    let tile = tile::tile_kernel(wt).filter(|t| (n1 >= t.min_rows() || packed.is_some() || ex.tiles_always) && k > 0);
    // F32, F16 and BF16 weights below the GEMM's row count: blocks of dots where the
    // CPU has them. A single row too where the dots prefetch (one activation row feeds
    // eight weight rows' sums, each row asked for ahead); where the hardware's stream
    // prefetch is left to it (AMD), one row at a time is the stream it follows best
    let blocks_of_dots = tile.is_none()
        && matches!(wt, DType::F32 | DType::F16 | DType::BF16)
        && dot::f32_block::supported()
        && (n1 >= 2 || crate::quant::prefetch::enabled());
    let wide_blocks = dot::f32_block::wide();
    // the blocks read F32 activations: F16/BF16 ones rounded to the weight type
    // (their dot partner) and widened back once here, not for every weight block
    let widened = blocks_of_dots && wt != DType::F32;
    let acts = activations(ex, wt, b, widened)?;
    let brow = if widened { 4 * k } else { dot::vec_dot_type(wt).row_size(k as i64).unwrap_or(0) };
    let arow = a.l.row_size();
    let (r2, r3) = ((bne[2] / ane[2]) as usize, (bne[3] / ane[3]) as usize);
    let blocks = m.div_ceil(A_BLOCK);
    let batches = (ne[2] * ne[3]) as usize;
    let bq = acts.as_bytes();
    let tiled = match tile {
        Some(t) => Some((t, prepare(ex, t, k, bq, brow)?)),
        None => None,
    };
    let prepared: Vec<&[u8]> = match &tiled {
        Some((t, p)) => p.as_bytes().chunks_exact(t.prepared_row_size(k).unwrap_or(0).max(1)).collect(),
        None => Vec::new(),
    };
    let group_size = tiled.as_ref().and_then(|(t, _)| t.packed_group_size(k));
    // a few activation rows (decode, one sequence or a server's batch) on repacked
    // weights: runs of groups
    let runs = match (&tiled, packed.zip(group_size)) {
        (Some((t, _)), Some((weights, group))) if n1 <= RUN_MAX_ROWS && A_BLOCK.is_multiple_of(t.mr()) => {
            Some(PackedRuns { t: *t, k, m, n1, blocks, ne2: ne[2] as usize, weights, group, acts: &prepared })
        }
        _ => None,
    };
    let failed = FirstError::default();
    // each block of weight rows is computed alone: shrinking ranges keep the bits
    ex.for_shrinking_ranges(batches * blocks, A_BLOCK * k * n1, |items| {
        if let Some(runs) = &runs {
            failed.keep(runs.run(items, &dst));
            return;
        }
        let mut out = Vec::new();
        for item in items {
            let (batch, blk) = (item / blocks, item % blocks);
            let (i2, i3) = (batch % ne[2] as usize, batch / ne[2] as usize);
            let rows = blk * A_BLOCK..((blk + 1) * A_BLOCK).min(m);
            let a_off = (i2 / r2) * a.l.nb[2] + (i3 / r3) * a.l.nb[3];
            if let Some((t, _)) = &tiled {
                // every activation row of the batch, up to 16 weight rows per call
                let acts = &prepared[batch * n1..(batch + 1) * n1];
                for sub in rows.clone().step_by(t.mr().min(A_BLOCK)) {
                    let sub = sub..(sub + t.mr().min(A_BLOCK)).min(rows.end);
                    out.resize(n1 * sub.len(), 0f32);
                    let group = packed.zip(group_size).and_then(|(p, gs)| {
                        sub.start.is_multiple_of(t.mr()).then(|| p.get(sub.start / t.mr() * gs..)?.get(..gs)).flatten()
                    });
                    let run = match group {
                        Some(g) => t.run_packed(k, g, sub.len(), acts, &mut out, sub.len()),
                        None => {
                            let mut w: [&[u8]; A_BLOCK] = [&[]; A_BLOCK];
                            for (wr, i0) in w.iter_mut().zip(sub.clone()) {
                                let at = a_off + i0 * a.l.nb[1];
                                // SAFETY: as for `wrow` below.
                                *wr = unsafe { std::slice::from_raw_parts(a.ptr().add(at), arow) };
                            }
                            t.run(k, &w[..sub.len()], acts, &mut out, sub.len())
                        }
                    };
                    if run.is_err() {
                        failed.keep(run);
                        return;
                    }
                    // SAFETY: elements (sub, .., i2, i3) of dst exist and only this item
                    // writes them (items partition i0 within a batch).
                    unsafe { put_rows(&dst, sub.clone(), &out, i2 as i64, i3 as i64) };
                }
                continue;
            }
            if blocks_of_dots {
                let act = |i1: usize| bq[((i3 * ne[2] as usize + i2) * n1 + i1) * brow..].as_ptr();
                // SAFETY: weight row (i0, i2/r2, i3/r3) is k packed values inside `a` (packed_rows).
                let wrow = |i0: usize| unsafe { a.ptr().add(a_off + i0 * a.l.nb[1]) };
                let put = |i0: usize, i1: usize, v: f32| {
                    // SAFETY: as for the write below.
                    unsafe { dst.row(i1 as i64, i2 as i64, i3 as i64).add(i0 * dst.l.nb[0]).cast::<f32>().write(v) };
                };
                let blocks = BlockRun { k, wt, rows: rows.clone(), n1 };
                // SAFETY: each weight row holds k values of `wt`, each activation row k
                // f32 (`activations`, widened).
                let run = unsafe { blocks.run(wide_blocks, wrow, act, put) };
                if run.is_err() {
                    failed.keep(run);
                    return;
                }
                continue;
            }
            for chunk in (0..n1).step_by(B_CHUNK) {
                for i0 in rows.clone() {
                    let at = a_off + i0 * a.l.nb[1];
                    // SAFETY: row (i0, i2/r2, i3/r3) of `a` is `arow` packed bytes
                    // inside its tensor (packed_rows), which outlives this call.
                    let wrow = unsafe { std::slice::from_raw_parts(a.ptr().add(at), arow) };
                    if n1 == 1 {
                        dot::prefetch(a.ptr().wrapping_add(at + ROW_PREFETCH_AHEAD * a.l.nb[1]), arow);
                    }
                    for i1 in chunk..(chunk + B_CHUNK).min(n1) {
                        let r = (i3 * ne[2] as usize + i2) * n1 + i1;
                        let v = dot(k, wrow, &bq[r * brow..(r + 1) * brow]);
                        // SAFETY: element (i0, i1, i2, i3) of dst exists and only
                        // this item writes it (items partition i0 within a batch).
                        unsafe {
                            dst.row(i1 as i64, i2 as i64, i3 as i64).add(i0 * dst.l.nb[0]).cast::<f32>().write(v)
                        };
                    }
                }
            }
        }
    });
    failed.into_result()
}

/// Activation rows up to which a product on repacked weights goes by runs of
/// groups ([`PackedRuns`]): decode steps, whose weights stream from memory.
/// Past it (prompts) the kernels are busy with the arithmetic, and a run's
/// outputs would no longer fit the L1.
const RUN_MAX_ROWS: usize = 8;
/// Weight rows a run's outputs go through its buffer at a time when they are
/// not written in place (`RUN_MAX_ROWS` of 256: 8 KiB).
const RUN_PIECE_ROWS: usize = 256;

/// A few activation rows against repacked weights: a range of blocks of
/// weight rows is one kernel call over its run of groups
/// (`TileKernel::run_packed`), so that nothing runs between the groups of a
/// thread's stream; one row into packed F32 outputs is written in place.
struct PackedRuns<'a> {
    t: tile::TileKernel,
    k: usize,
    /// Weight rows, and blocks of [`A_BLOCK`] of them, per matrix.
    m: usize,
    /// Activation rows per batch.
    n1: usize,
    blocks: usize,
    /// The output's `ne[2]` (a batch index is `i2 + ne2 · i3`).
    ne2: usize,
    /// The repacked matrix, and the bytes of one of its groups.
    weights: &'a [u8],
    group: usize,
    /// The prepared activation rows, `n1` per batch.
    acts: &'a [&'a [u8]],
}

impl PackedRuns<'_> {
    /// Items `items` (blocks of weight rows, batch after batch) into `dst`.
    fn run(&self, items: std::ops::Range<usize>, dst: &StridedMut) -> Result<()> {
        let (mr, n1, mut item) = (self.t.mr(), self.n1, items.start);
        let in_place = n1 == 1 && dst.l.nb[0] == 4;
        let mut tmp = Vec::new();
        while item < items.end {
            let (batch, blk) = (item / self.blocks, item % self.blocks);
            let end = items.end.min((batch + 1) * self.blocks);
            let rows = blk * A_BLOCK..((end - batch * self.blocks) * A_BLOCK).min(self.m);
            let (i2, i3) = ((batch % self.ne2) as i64, (batch / self.ne2) as i64);
            let first = rows.start / mr;
            let groups = self.weights.get(first * self.group..(first + rows.len().div_ceil(mr)) * self.group);
            let groups =
                groups.ok_or_else(|| crate::error::Error::internal("a run of packed groups outside its buffer"))?;
            let acts = &self.acts[batch * n1..(batch + 1) * n1];
            if in_place {
                // SAFETY: elements (rows, 0, i2, i3) of dst are packed f32 inside it, and
                // only this range writes them (ranges partition i0 within a batch).
                let out = unsafe {
                    std::slice::from_raw_parts_mut(dst.row(0, i2, i3).add(4 * rows.start).cast::<f32>(), rows.len())
                };
                self.t.run_packed(self.k, groups, rows.len(), acts, out, rows.len())?;
            } else {
                // the outputs through a buffer that stays in the L1, a piece of the run at a time
                let piece = RUN_PIECE_ROWS.next_multiple_of(mr);
                for (p, start) in rows.clone().step_by(piece).enumerate() {
                    let sub = start..(start + piece).min(rows.end);
                    let bytes = &groups[p * (piece / mr) * self.group..];
                    let bytes = &bytes[..sub.len().div_ceil(mr) * self.group];
                    tmp.resize(n1 * sub.len(), 0f32);
                    self.t.run_packed(self.k, bytes, sub.len(), acts, &mut tmp, sub.len())?;
                    // SAFETY: elements (sub, .., i2, i3) of dst exist and only this range writes them.
                    unsafe { put_rows(dst, sub, &tmp, i2, i3) };
                }
            }
            item = end;
        }
        Ok(())
    }
}

/// Writes `vals` (`rows.len()` outputs per activation row, row after row) to
/// elements `(rows, i1, i2, i3)` of `dst`, `i1` counting the activation rows.
///
/// # Safety
/// Those elements exist, and nothing else writes them meanwhile.
unsafe fn put_rows(dst: &StridedMut, rows: std::ops::Range<usize>, vals: &[f32], i2: i64, i3: i64) {
    for (i1, vals) in vals.chunks_exact(rows.len()).enumerate() {
        for (i0, &v) in rows.clone().zip(vals) {
            // SAFETY: the caller's.
            unsafe { dst.row(i1 as i64, i2, i3).add(i0 * dst.l.nb[0]).cast::<f32>().write(v) };
        }
    }
}

/// Whether repacking weights for `t` pays on `cpu`: decode streams them
/// through the repacked tile, so where that runs slower than the dot kernels
/// on the file's layout the weights stay in place. AMD's family 25 (Zen 4)
/// runs 512-bit instructions as two 256-bit halves, and its repacked Q6_K
/// tile is no faster there than the dot kernel (its 6-bit unpacking is the
/// bottleneck); Q4_K and Q5_K have a one-row kernel on repacked groups
/// (`quant::tile`'s `k_single`) about twice as fast as their dots. AMD's
/// cores at AVX2 width run the repacked tiles of one activation row slower
/// than the memory delivers (compute-bound: Q8_0, Q4_K and Q5_K at 0.65–0.8 of
/// the read) where the dots of Q8_0 and the k-quants keep up, so those stay
/// in place there too.
pub(crate) fn repack_pays(t: &tile::TileKernel, cpu: &crate::cpu_info::CpuInfo) -> bool {
    let w = t.weight_type();
    let zen4_avx512 =
        cpu.is_amd() && cpu.family_model.is_some_and(|(family, _)| family == 25) && t.level() == dot::SimdLevel::Avx512;
    let amd_avx2 = cpu.is_amd() && t.level() == dot::SimdLevel::Avx2;
    t.packs()
        && !(zen4_avx512 && w == DType::Q6_K)
        && !(amd_avx2 && matches!(w, DType::Q8_0 | DType::Q4_K | DType::Q5_K | DType::Q6_K))
}

/// Weight leaf `a` repacked for its tile kernel ([`tile::TileKernel::pack_group`],
/// groups of `mr` rows in order, matrix after matrix for a 3-D stack of
/// experts), or `None` when it does not qualify: a read-only file mapping (its
/// bytes never change), at most 3-D, packed rows, and a
/// tile kernel with a repacked form for its type on this CPU that pays there
/// ([`repack_pays`]).
pub(super) fn repack(
    ex: &Exec,
    ctx: &crate::context::Context,
    a: crate::tensor::TensorId,
) -> Result<Option<HostBuffer>> {
    let l = ctx.layout(a)?;
    let cpu = crate::cpu_info::CpuInfo::get();
    let Some(t) = tile::tile_kernel(l.dtype).filter(|t| repack_pays(t, cpu)) else { return Ok(None) };
    let Some(bytes) = ctx.leaf_bytes(a).filter(|_| ctx.is_mapped(a)) else { return Ok(None) };
    let packed_rows = l.block_dim == 0 && l.nb[0] == l.dtype.type_size() && l.ne[3] == 1;
    let (k, m, matrices) = (l.ne[0] as usize, l.ne[1] as usize, l.ne[2] as usize);
    let Some(gs) = t.packed_group_size(k).filter(|_| packed_rows && k > 0) else { return Ok(None) };
    let (row, mr) = (l.row_size(), t.mr());
    let groups = m.div_ceil(mr);
    let mut out = HostBuffer::zeroed(matrices * groups * gs)?;
    let shared = SharedBytes::new(out.as_bytes_mut());
    let failed = FirstError::default();
    ex.for_ranges(matrices * groups, gs, |range| {
        for g in range {
            // an expert's groups follow the one before's (`mul_mat_id` slices them)
            let (matrix, first) = (g / groups, (g % groups) * mr);
            let at = |r: usize| matrix * l.nb[2] + r * l.nb[1];
            let rows: Option<Vec<&[u8]>> =
                (first..(first + mr).min(m)).map(|r| bytes.get(at(r)..at(r) + row)).collect();
            // SAFETY: only this thread writes group g's `gs` bytes, and `out` outlives the loop.
            let dst = unsafe { shared.range(g * gs, gs) };
            let res = match (rows, dst) {
                (Some(rows), Some(dst)) => t.pack_group(k, &rows, dst),
                (None, _) => {
                    Err(crate::error::Error::internal(format!("{}: a row lies outside its bytes", ctx.label(a))))
                }
                (_, None) => Err(crate::error::Error::internal("a packed group outside its buffer")),
            };
            failed.keep(res);
        }
    });
    failed.into_result().map(|()| Some(out))
}

/// Every activation row (`brow` bytes of the dot partner each, in `acts`)
/// prepared for the tile kernel `t`.
fn prepare(ex: &Exec, t: tile::TileKernel, k: usize, acts: &[u8], brow: usize) -> Result<HostBuffer> {
    let prow = t.prepared_row_size(k).unwrap_or(0);
    let rows = acts.len().checked_div(brow).unwrap_or(0);
    let mut out = HostBuffer::zeroed(prow * rows)?;
    let shared = SharedBytes::new(out.as_bytes_mut());
    let failed = FirstError::default();
    ex.for_ranges(rows, k, |range| {
        for r in range {
            // SAFETY: only this thread writes row r's `prow` bytes, and `out` outlives the loop.
            let res = match unsafe { shared.range(r * prow, prow) } {
                Some(dst) => t.prepare(&acts[r * brow..(r + 1) * brow], dst),
                None => Err(crate::error::Error::internal("a prepared row outside its buffer")),
            };
            failed.keep(res);
        }
    });
    failed.into_result().map(|()| out)
}

/// `t` itself when its rows are packed whole blocks, else a packed copy in `tmp`.
fn packed_rows(ex: &Exec, t: Strided, tmp: &mut Option<HostBuffer>) -> Result<Strided> {
    let l = &t.l;
    if l.block_dim == 0 && (l.nb[0] == l.dtype.type_size() || l.units0() <= 1) {
        return Ok(t);
    }
    let packed = Layout::contiguous(l.dtype, l.ne)?;
    let buf = tmp.insert(HostBuffer::zeroed(packed.nbytes())?);
    let out = StridedMut::new(buf.as_bytes_mut().as_mut_ptr(), packed.nbytes(), 0, packed)?;
    copy::copy(ex, "mul_mat", out, t)?;
    Ok(out.as_src())
}

/// Every row of `b`, in logical row order, converted to the dot partner of
/// `wt`; if `widened`, that partner's values as F32 (exactly: for the blocks
/// of dots, which would otherwise widen F16/BF16 rows for every weight block).
fn activations(ex: &Exec, wt: crate::dtype::DType, b: Strided, widened: bool) -> Result<HostBuffer> {
    let k = b.l.ne[0] as usize;
    let partner = dot::vec_dot_type(wt);
    let prow = partner.row_size(k as i64).unwrap_or(0);
    let brow = if widened { 4 * k } else { prow };
    let rows = b.l.nrows() as usize;
    let mut out = HostBuffer::zeroed(brow * rows)?;
    let shared = SharedBytes::new(out.as_bytes_mut());
    let failed = FirstError::default();
    ex.for_ranges(rows, k, |range| {
        let mut row = vec![0f32; k];
        let mut rounded = vec![0u8; if widened { prow } else { 0 }];
        let one = Exec::ONE;
        for r in range {
            let res = StridedMut::of_f32(&mut row, [k as i64, 1, 1, 1])
                .and_then(|dst| copy::copy(&one, "mul_mat", dst, b.row_tensor(r as i64)))
                .and_then(|()| {
                    // SAFETY: only this thread writes row r's `brow` bytes, and `out` outlives the loop.
                    let dst = unsafe { shared.range(r * brow, brow) };
                    let dst =
                        dst.ok_or_else(|| crate::error::Error::internal("an activation row outside its buffer"))?;
                    if !widened {
                        return dot::quantize_activations(wt, &row, dst);
                    }
                    dot::quantize_activations(wt, &row, &mut rounded)?;
                    crate::quant::dequantize_row(partner, &rounded, &mut row)?;
                    dst.copy_from_slice(bytemuck::cast_slice(&row));
                    Ok(())
                });
            failed.keep(res);
        }
    });
    failed.into_result().map(|()| out)
}

/// F32 weights and a batch of rows: a blocked GEMM per matrix (the `gemm`
/// crate), on packed f32 rows of both operands.
fn gemm_f32(ex: &Exec, dst: StridedMut, a: Strided, b: Strided) -> Result<()> {
    let (ne, ane, bne) = (dst.l.ne, a.l.ne, b.l.ne);
    let (mut a_tmp, mut b_tmp) = (None, None);
    let a = packed_rows(ex, a, &mut a_tmp)?;
    let b = if b.l.dtype == crate::dtype::DType::F32 {
        packed_rows(ex, b, &mut b_tmp)?
    } else {
        f32_copy(ex, b, &mut b_tmp)?
    };
    let (m, n, k) = (ne[0] as usize, ne[1] as usize, ane[0] as usize);
    let (r2, r3) = (bne[2] / ane[2], bne[3] / ane[3]);
    let threads = ex.gemm.map_or(1, |p| p.current_num_threads());
    // a small product runs on the calling thread: handing it to the pool's
    // threads costs more than it saves (the same kernel either way: the same bits)
    let pool = ex.gemm.filter(|_| threads > 1 && m * n * k >= GEMM_PARALLEL_MIN);
    let parallelism = if pool.is_some() { gemm::Parallelism::Rayon(threads) } else { gemm::Parallelism::None };
    let run = || {
        for i3 in 0..ne[3] {
            for i2 in 0..ne[2] {
                let (ap, bp, dp) = (a.row(0, i2 / r2, i3 / r3), b.row(0, i2, i3), dst.row(0, i2, i3));
                // SAFETY: each operand is packed f32 rows (nb0 = 4) inside its
                // buffer: a is m rows of k, b is n rows of k, dst is n rows of m
                // (fresh, not aliasing a or b); the strides below stay inside them.
                unsafe {
                    gemm::gemm(
                        m,
                        n,
                        k,
                        dp.cast::<f32>(),
                        (dst.l.nb[1] / 4) as isize,
                        1,
                        false,
                        ap.cast::<f32>(),
                        1,
                        (a.l.nb[1] / 4) as isize,
                        bp.cast::<f32>(),
                        (b.l.nb[1] / 4) as isize,
                        1,
                        0.0,
                        1.0,
                        false,
                        false,
                        false,
                        parallelism,
                    )
                };
            }
        }
    };
    match pool {
        Some(p) => p.install(run),
        None => run(),
    }
    Ok(())
}

/// A packed f32 copy of `t` in `tmp`.
fn f32_copy(ex: &Exec, t: Strided, tmp: &mut Option<HostBuffer>) -> Result<Strided> {
    let packed = Layout::contiguous(crate::dtype::DType::F32, t.l.ne)?;
    let buf = tmp.insert(HostBuffer::zeroed(packed.nbytes())?);
    let out = StridedMut::new(buf.as_bytes_mut().as_mut_ptr(), packed.nbytes(), 0, packed)?;
    copy::copy(ex, "mul_mat", out, t)?;
    Ok(out.as_src())
}
