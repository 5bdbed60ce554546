//! `mul_mat_id` on the device: `dst[:, s, t] = a[:, :, ids[s, t]] · b[:, s mod n_b, t]`,
//! with the expert ids read on the device: nothing is copied back and the
//! host never waits, so a run with it can be captured as a CUDA graph.
//!
//! The `(slot, token)` pairs are cut into tiles of pairs routed to one expert
//! (`kernels/moe.cuh`). For one token (decode) each pair is a tile of its own
//! and the kernels read its id. For more tokens, `rg_moe_route`
//! (`kernels/sort.cu`) sorts the pairs by expert on the device and cuts each
//! expert's run into tiles of up to [`NC`] pairs, so an expert's weights are
//! read once per tile of the pairs routed to it, as `mul_mat` reads its
//! weights once per tile of activation rows. Then one launch over (weight
//! rows, tiles), with a tile for the most tiles the routing can make (those
//! past the last exit at once):
//!
//! - **Q4_0 … Q6_K**: the activation rows quantized as for `mul_mat` and the
//!   `rg_mmvq_id_*` kernels, the bodies of its dot kernels (staged where the
//!   rows are aligned, the `_n1` one for one pair per tile): the CPU's
//!   function per pair, and in decode the work of a dense matrix-vector
//!   product of `n_used · M` rows.
//! - **Other weights** (F32, F16, BF16, the block types without dot kernels,
//!   rows the dot kernels cannot load): `rg_moe_mv` (`kernels/moe.cu`), f32
//!   sums of the weights' values and the activations, rounded to F16/BF16 for
//!   weights of those types as on the CPU.
//!
//! Prompts take the same kernels (not `mul_mat`'s dequantized GEMM, whose
//! sizes the host would have to know). An id outside `0..n_expert` sets bit 2
//! of the run's error flag, and the run fails naming `mul_mat_id`.

use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};

use super::super::device::Device;
use super::super::kernels::type_code;
use super::super::launch::{cuda_err, launch, Bound, BoundMut};
use super::super::ops::check_index;
use super::mmvq::{self, ActRows, KMmvq, QSpec, ROWS, THREADS};
use super::QuantPath;
use crate::dtype::DType;
use crate::error::{Error, Result};

/// Pairs per tile at most (`RG_MMVQ_NC` and `RG_MOE_NC` in the kernels).
pub(crate) const NC: i64 = mmvq::NC;
/// Weight rows per block of `rg_moe_mv` (`RG_MOE_ROWS`).
const MV_ROWS: i64 = 4;

/// The tiles of `mul_mat_id` (`RgMoe` in `kernels/moe.cuh`, 80 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KMoe {
    /// The I32 ids `[n_used, n_tokens]`, read by the kernels when `route` is 0.
    pub ids: u64,
    /// The routing table of `rg_moe_route` (0: one pair per tile).
    pub route: u64,
    /// The run's error flag (bit 2: an expert id out of range).
    pub err: u64,
    /// Byte strides of `ids` (dims 0 and 1).
    pub ids_nb: [i64; 2],
    /// Slots per token.
    pub n_used: i64,
    /// Activation rows per token (1 or `n_used`).
    pub n_b: i64,
    /// `n_used · n_tokens`.
    pub n_pairs: i64,
    /// Tiles in the grid.
    pub n_tiles: i64,
    /// Experts in the weights.
    pub n_expert: i32,
    /// Padding (0).
    pub pad: i32,
}

// SAFETY: #[repr(C)] plain data matching the kernels' `RgMoe` field for field
// (size checked in the tests below and against the PTX in ptx_tests.rs).
unsafe impl DeviceRepr for KMoe {}

/// The tiles of `pairs` pairs over `n_expert` experts in runs of at most
/// `tile`: one per pair for tiles of one, else at most one per `tile` pairs
/// plus one per expert in use (each expert's last run may be short).
pub(crate) fn max_tiles(pairs: i64, n_expert: i64, tile: i64) -> i64 {
    if tile <= 1 {
        return pairs;
    }
    pairs.min((pairs + tile - 1) / tile + n_expert.min(pairs))
}

/// The grid's `(y, z)` for `tiles` tiles (tile `y + gy · z`).
fn tile_grid(tiles: i64) -> Result<(u32, u32)> {
    let gy = tiles.clamp(1, 65535);
    let gz = (tiles + gy - 1) / gy;
    if gz > 65535 {
        return Err(Error::Invalid(format!("CUDA mul_mat_id: {tiles} tiles of pairs exceed one grid")));
    }
    Ok((gy as u32, gz.max(1) as u32))
}

/// `dst = mul_mat_id(a, b, ids)` (see the module docs); a bad id sets bit 2
/// of the flag at `err_ptr`.
pub(crate) fn mul_mat_id(
    dev: &Device,
    dst: BoundMut,
    a: Bound,
    b: Bound,
    ids: Bound,
    err_ptr: u64,
    q: QuantPath,
) -> Result<()> {
    check_index(&ids, "mul_mat_id")?;
    let (al, bl, il, d) = (a.l, b.l, ids.l, dst.l);
    let (k, m, n_expert) = (al.ne[0], al.ne[1], al.ne[2]);
    let (n_used, n_tokens, n_b) = (il.ne[0], il.ne[1], bl.ne[1]);
    let fits = d.ne == [m, n_used, n_tokens, 1]
        && bl.ne[0] == k
        && bl.ne[2] == n_tokens
        && (n_b == 1 || n_b == n_used)
        && al.ne[3] == 1;
    if !fits || d.dtype != DType::F32 || d.nb[0] != 4 {
        let what = format!("mul_mat_id of {:?} by {:?} at {:?} into {:?}", al.ne, bl.ne, il.ne, d.ne);
        return Err(Error::internal(what));
    }
    if d.is_empty() {
        return Ok(());
    }
    if err_ptr == 0 {
        return Err(Error::internal("mul_mat_id without an error flag"));
    }
    let n_pairs = n_used * n_tokens;
    let n_expert32 = i32::try_from(n_expert).ok().filter(|_| i32::try_from(n_pairs).is_ok());
    let n_expert32 =
        n_expert32.ok_or_else(|| Error::Invalid(format!("CUDA mul_mat_id: {n_expert} experts, {n_pairs} pairs")))?;
    let tile = if n_tokens == 1 { 1 } else { NC };
    let n_tiles = max_tiles(n_pairs, n_expert, tile);
    let route = if tile == 1 { 0 } else { route(dev, &ids, n_expert32, tile, n_tiles, err_ptr)? };
    let moe = KMoe {
        ids: ids.ptr,
        route,
        err: err_ptr,
        ids_nb: [il.nb[0] as i64, il.nb[1] as i64],
        n_used,
        n_b,
        n_pairs,
        n_tiles,
        n_expert: n_expert32,
        pad: 0,
    };
    match QSpec::of(al.dtype).filter(|s| mmvq::loads(s, &a)) {
        Some(spec) => dots(dev, dst, a, b, &spec, moe, tile == 1, q.staged),
        None => values(dev, dst, a, b, moe),
    }
}

/// The routing table of the pairs of `ids` for tiles of `tile` pairs, in
/// scratch memory (see `rg_moe_route`).
fn route(dev: &Device, ids: &Bound, n_expert: i32, tile: i64, n_tiles: i64, err_ptr: u64) -> Result<u64> {
    let pairs = ids.l.ne[0] * ids.l.ne[1];
    let (n, threads, shared) = super::super::sort::plan(pairs)?;
    let route = dev.scratch.take(&dev.stream, ((pairs + 3 * n_tiles) * 4) as usize)?;
    let work = if shared > 0 { 0 } else { dev.scratch.take(&dev.stream, (n * 8) as usize)? };
    let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: shared };
    launch!(dev, "sort", "rg_moe_route", cfg;
        route, ids.ptr, ids.p("mul_mat_id")?, work, n, n_expert, tile as i32, n_tiles, err_ptr);
    Ok(route)
}

/// Quantized weights through the `rg_mmvq_id_*` dot kernels: `one` when
/// every tile is one pair (the `_n1` kernel may run), `staged` when the
/// staged kernels may run at all.
#[allow(clippy::too_many_arguments)]
fn dots(
    dev: &Device,
    dst: BoundMut,
    a: Bound,
    b: Bound,
    spec: &QSpec,
    moe: KMoe,
    one: bool,
    staged: bool,
) -> Result<()> {
    let (al, d) = (a.l, dst.l);
    let k = al.ne[0];
    let units = i32::try_from(k / 32).map_err(|_| Error::Invalid(format!("CUDA mul_mat_id: K = {k} too large")))?;
    let rows = ActRows::of(al.dtype, &b)?;
    let acts = dev.scratch.take(&dev.stream, rows.total_bytes)?;
    mmvq::quantize(dev, &b, &rows, acts)?;
    let act_row = rows.row_bytes;
    let p = KMmvq {
        w_nb: [al.nb[1] as i64, al.nb[2] as i64, al.nb[3] as i64],
        d_nb: [d.nb[1] as i64, d.nb[2] as i64, d.nb[3] as i64],
        act_row: act_row as i64,
        n: 1,
        ne2: 1,
        r2: 1,
        r3: 1,
        m: d.ne[0],
        units,
        pad: 0,
    };
    let staged = staged && mmvq::stages(spec, a.ptr, &al, act_row);
    let [generic, n1, tiles] = spec.id_kernels;
    let (kernel, blocks_x) = match (staged, one) {
        (false, _) => (generic, d.ne[0]),
        (true, true) => (n1, (d.ne[0] + ROWS - 1) / ROWS),
        (true, false) => (tiles, (d.ne[0] + ROWS - 1) / ROWS),
    };
    let gx = u32::try_from(blocks_x).ok().filter(|&g| g <= i32::MAX as u32);
    let gx = gx.ok_or_else(|| Error::Invalid(format!("CUDA mul_mat_id: {} weight rows exceed one grid", d.ne[0])))?;
    let (gy, gz) = tile_grid(moe.n_tiles)?;
    let f = dev.function(spec.id_module, kernel)?;
    let cfg = LaunchConfig { grid_dim: (gx, gy, gz), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
    let mut lb = dev.stream.launch_builder(&f);
    lb.arg(&dst.ptr).arg(&a.ptr).arg(&acts).arg(&p).arg(&moe);
    // SAFETY: the arguments are the kernel's (dst, w, act, p, q). dst is F32
    // with nb0 = 4 and [M, n_used, n_tokens] at the strides in p; w holds
    // n_expert matrices of M rows at the strides in p, with the alignment the
    // kernel's loads need (`loads`, and `stages` for the staged ones), and a
    // tile's expert is in range or the tile is skipped; act holds the
    // n_b · n_tokens rows of act_row bytes a pair's row indexes; ids and the
    // route table are read within [n_used, n_tokens] and n_pairs + 3 n_tiles ints.
    unsafe { lb.launch(cfg) }.map_err(cuda_err("launch mmvq_id"))?;
    Ok(())
}

/// Any other weights through `rg_moe_mv`.
fn values(dev: &Device, dst: BoundMut, a: Bound, b: Bound, moe: KMoe) -> Result<()> {
    let d = dst.l;
    let round = match a.l.dtype {
        DType::F16 | DType::BF16 => type_code("mul_mat_id", a.l.dtype)?,
        _ => -1,
    };
    let gx = u32::try_from((d.ne[0] + MV_ROWS - 1) / MV_ROWS).ok().filter(|&g| g <= i32::MAX as u32);
    let gx = gx.ok_or_else(|| Error::Invalid(format!("CUDA mul_mat_id: {} weight rows exceed one grid", d.ne[0])))?;
    let (gy, gz) = tile_grid(moe.n_tiles)?;
    let cfg = LaunchConfig { grid_dim: (gx, gy, gz), block_dim: (128, 1, 1), shared_mem_bytes: 0 };
    let (d_nb1, d_nb2) = (d.nb[1] as i64, d.nb[2] as i64);
    launch!(dev, "moe", "rg_moe_mv", cfg;
        dst.ptr, a.ptr, a.k("mul_mat_id")?, b.ptr, b.p("mul_mat_id")?, moe, d_nb1, d_nb2, round);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn param_struct_matches_the_kernels() {
        assert_eq!(std::mem::size_of::<KMoe>(), 80);
    }

    #[test]
    fn tiles_bound_every_routing() {
        assert_eq!(max_tiles(8, 128, 1), 8);
        // 8 tokens of 8 picks: 64 pairs, at most 8 full tiles plus a short one per expert
        assert_eq!(max_tiles(64, 128, 8), 64);
        assert_eq!(max_tiles(64, 4, 8), 12);
        assert_eq!(max_tiles(4096, 128, 8), 512 + 128);
        // every expert's run: count c takes ceil(c / 8) tiles
        for counts in [[0i64, 0, 17, 0], [9, 9, 9, 9], [1, 1, 1, 61], [8, 16, 24, 16]] {
            let pairs: i64 = counts.iter().sum();
            let tiles: i64 = counts.iter().map(|c| (c + 7) / 8).sum();
            assert!(tiles <= max_tiles(pairs, 4, 8), "{counts:?}");
        }
        assert_eq!(tile_grid(1).unwrap(), (1, 1));
        assert_eq!(tile_grid(65536).unwrap(), (65535, 2));
        assert!(tile_grid(65535 * 65536).is_err());
    }
}
