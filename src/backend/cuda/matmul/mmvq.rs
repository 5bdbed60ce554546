//! Quantized weights on the device: the activation rows are quantized to the
//! weight type's dot partner (`kernels/quantize_act.cu`, the CPU's bytes), then
//! `kernels/mmvq.cu` computes every output as the CPU does: an exact integer
//! dot per block, that block's f32 scaling in the CPU's operation order, and
//! an f32 sum over the blocks (the only step associated differently, so
//! results agree with the CPU's to float rounding of that sum).
//!
//! The same dot kernel serves every batch size: a launch covers tiles of
//! [`NC`] activation rows (grid y), and each weight unit read is dotted with
//! every row of its tile. Where the weight and activation rows are aligned
//! (a packed matrix with K a multiple of 256 for the legacy types, of 1024
//! for the k-quants) a staged variant runs instead ([`staged_kernel`]): its
//! warps copy 32-unit chunks of [`ROWS`] weight rows and of the activation
//! rows into shared memory with coalesced 16-byte (or 8-byte) loads, and
//! each activation chunk serves those rows. It computes the same
//! sums in the same order (the same bits); in the CUDA emulator's access
//! profile (`tools/cuda-emu`) a 4096² Q4_0 matvec goes from 0.12 to 1.00
//! coalescing and from 25 to 1.5 sector fetches per distinct sector. These
//! kernels compute the CPU's function (the Q4_1/Q5_1 minimum folded in through
//! Q8_1's f16-rounded `s = d·Σq`, which a dequantized GEMM cannot reproduce);
//! batches from [`QuantPath::dequant_from`](super::QuantPath) rows on take
//! [`dequant`](super::dequant) instead, for the tensor cores. A tensor-core
//! int8 kernel that keeps the CPU's arithmetic for those is future work.

use cudarc::driver::{DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg};

use super::super::device::Device;
use super::super::kernels::KTensor;
use super::super::launch::{cuda_err, Bound, BoundMut};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;

/// Activation rows per tile (`RG_MMVQ_NC` in `kernels/mmvq.cu`).
pub(crate) const NC: i64 = 8;
/// Weight rows per block of the staged dot kernels (`RG_MMVQ_ROWS`).
pub(crate) const ROWS: i64 = 4;
/// Threads per block of the dot kernels (`RG_MMVQ_THREADS`).
pub(crate) const THREADS: u32 = 128;
/// Bytes per 32 activation values in the device layout of the Q8_0/Q8_1 partners
/// (`{f16 d, f16 s, i8 qs[32]}`: Q8_1's block; for Q8_0, its block with `s` added).
pub(crate) const Q8_36: usize = 36;

/// What the kernels need to know about one weight type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QSpec {
    /// The kernel module of this type (one of
    /// [`VARIANTS`](super::super::kernels::VARIANTS): `mmvq_<type>`).
    pub module: &'static str,
    /// Dot kernel in `kernels/mmvq.cu`.
    pub kernel: &'static str,
    /// Its staged variants ([`staged_kernel`]), for weight rows aligned to
    /// `stage_align` and 16-byte aligned activation rows: `[N = 1, tiles of NC]`.
    pub staged: [&'static str; 2],
    /// The module of this type's `mul_mat_id` kernels (`mmvq_id_<type>`).
    pub id_module: &'static str,
    /// Those kernels, as `[kernel]` and `staged` above: the generic one, then
    /// the staged ones for one pair per tile and for tiles of up to NC pairs.
    pub id_kernels: [&'static str; 3],
    /// The alignment the staged kernel needs of every weight row: its copy
    /// vectors, 16 bytes, or 8 where 32 units (4 super-blocks of Q3_K or
    /// Q6_K) are not whole 16-byte vectors.
    pub stage_align: usize,
    /// Alignment (bytes) the kernel's loads need of every weight row.
    pub align: usize,
    /// Bytes per weight block.
    pub block_bytes: usize,
    /// Values per weight block.
    pub block_values: usize,
}

impl QSpec {
    /// The spec of quantized weight type `w`, or `None` for other types.
    pub fn of(w: DType) -> Option<QSpec> {
        // the names of one type's modules and kernels, and the alignment its generic loads need
        macro_rules! names {
            ($t:literal, $align:expr) => {
                (
                    [concat!("mmvq_", $t), concat!("mmvq_id_", $t)],
                    [
                        concat!("rg_mmvq_", $t),
                        concat!("rg_mmvq_", $t, "_staged_n1"),
                        concat!("rg_mmvq_", $t, "_staged"),
                    ],
                    [
                        concat!("rg_mmvq_id_", $t),
                        concat!("rg_mmvq_id_", $t, "_staged_n1"),
                        concat!("rg_mmvq_id_", $t, "_staged"),
                    ],
                    $align,
                )
            };
        }
        let ([module, id_module], [kernel, one, tile], id_kernels, align) = match w {
            DType::Q4_0 => names!("q4_0", 2),
            DType::Q4_1 => names!("q4_1", 4),
            DType::Q5_0 => names!("q5_0", 2),
            DType::Q5_1 => names!("q5_1", 4),
            DType::Q8_0 => names!("q8_0", 2),
            DType::Q2_K => names!("q2_k", 4),
            DType::Q3_K => names!("q3_k", 2),
            DType::Q4_K => names!("q4_k", 16),
            DType::Q5_K => names!("q5_k", 16),
            DType::Q6_K => names!("q6_k", 2),
            _ => return None,
        };
        // bytes of 32 units, copied in 16-byte vectors where they are whole ones
        let chunk = w.type_size() * 32 / w.block_size();
        let stage_align = if chunk.is_multiple_of(16) { 16 } else { 8 };
        Some(QSpec {
            module,
            kernel,
            staged: [one, tile],
            id_module,
            id_kernels,
            stage_align,
            align,
            block_bytes: w.type_size(),
            block_values: w.block_size(),
        })
    }
}

/// The dot kernel for weights `w` (at device address `ptr`, layout `l`) and
/// activation rows of `act_row` bytes: the staged variant where [`stages`]
/// (the `_n1` one for `n` = 1 activation row per batch), else the generic
/// kernel.
pub(crate) fn staged_kernel(spec: &QSpec, ptr: u64, l: &Layout, act_row: usize, n: i64) -> &'static str {
    let [one, tile] = spec.staged;
    match (stages(spec, ptr, l, act_row), n == 1) {
        (true, true) => one,
        (true, false) => tile,
        (false, _) => spec.kernel,
    }
}

/// Whether the staged kernels take weights `w` (at `ptr`, layout `l`) and
/// activation rows of `act_row` bytes: every weight row starts aligned to
/// the staging vectors, every activation row 16-byte aligned.
pub(crate) fn stages(spec: &QSpec, ptr: u64, l: &Layout, act_row: usize) -> bool {
    let a = spec.stage_align;
    let rows_aligned = ptr.is_multiple_of(a as u64) && (1..4).all(|i| l.ne[i] <= 1 || l.nb[i].is_multiple_of(a));
    rows_aligned && act_row.is_multiple_of(16)
}

/// Whether the dot kernels can load weights `a` of their type: blocks packed
/// along rows (dim 0), every row at the alignment their loads need.
pub(crate) fn loads(spec: &QSpec, a: &Bound) -> bool {
    let l = &a.l;
    let packed = l.block_dim == 0 && (l.ne[0] <= spec.block_values as i64 || l.nb[0] == spec.block_bytes);
    let aligned = |v: u64| v.is_multiple_of(spec.align as u64);
    packed && aligned(a.ptr) && (1..4).all(|i| l.ne[i] <= 1 || aligned(l.nb[i] as u64))
}

/// The activation layout for weights of type `w`: `(quantize kernel, values
/// per activation block, bytes per activation block)`.
pub(crate) fn act_format(w: DType) -> Option<(&'static str, usize, usize)> {
    match crate::quant::dot::vec_dot_type(w) {
        DType::Q8_0 | DType::Q8_1 if QSpec::of(w).is_some() => Some(("rg_quantize_q8_1", 32, Q8_36)),
        DType::Q8_K if QSpec::of(w).is_some() => Some(("rg_quantize_q8_k", 256, DType::Q8_K.type_size())),
        _ => None,
    }
}

/// The dot kernels' parameters (`RgMmvq` in `kernels/mmvq.cu`, 104 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KMmvq {
    /// Weight byte strides of dims 1..3.
    pub w_nb: [i64; 3],
    /// Destination byte strides of dims 1..3 (its `nb0` is 4).
    pub d_nb: [i64; 3],
    /// Bytes per quantized activation row.
    pub act_row: i64,
    /// Activation rows per batch (`dst.ne[1]`).
    pub n: i64,
    /// `dst.ne[2]`.
    pub ne2: i64,
    /// Broadcast ratio of the weights over dim 2.
    pub r2: i64,
    /// Broadcast ratio of the weights over dim 3.
    pub r3: i64,
    /// Weight rows (`dst.ne[0]`).
    pub m: i64,
    /// 32-value units per row (`K / 32`).
    pub units: i32,
    /// Padding (0).
    pub pad: i32,
}

// SAFETY: #[repr(C)] plain data matching the kernels' `RgMmvq` field for field
// (size checked in the tests below and against the PTX in tests/cuda_matmul.rs).
unsafe impl DeviceRepr for KMmvq {}

/// The dot kernels' grid for `m` blocks of weight rows (one row each, or
/// [`ROWS`] for the staged kernels), `n` activation rows per batch and
/// `batches` (i2, i3) pairs: `(m, ceil(n / NC), batches)`; an error when a
/// dimension exceeds CUDA's limits.
pub(crate) fn grid(m: i64, n: i64, batches: i64) -> Result<(u32, u32, u32)> {
    let dim = |v: i64, max: i64, what: &str| {
        u32::try_from(v)
            .ok()
            .filter(|&g| i64::from(g) <= max)
            .ok_or_else(|| Error::Invalid(format!("CUDA mul_mat: {v} {what} exceed the grid's limit of {max}")))
    };
    Ok((
        dim(m, i32::MAX as i64, "weight rows")?,
        dim(n.max(0).saturating_add(NC - 1) / NC, 65535, "activation tiles")?,
        dim(batches, 65535, "batches")?,
    ))
}

/// The quantize kernels' grid: one warp per activation block, 4 per thread block.
pub(crate) fn quantize_grid(blocks: i64) -> Result<u32> {
    u32::try_from((blocks.max(0) as u64).div_ceil(4))
        .ok()
        .filter(|&g| g <= i32::MAX as u32)
        .ok_or_else(|| Error::Invalid(format!("CUDA mul_mat: {blocks} activation blocks exceed one grid")))
}

/// The activation rows of a `mul_mat` quantized for its weight type (see [`act_format`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ActRows {
    /// The quantizing kernel in `kernels/quantize_act.cu`.
    pub func: &'static str,
    /// Activation blocks per row.
    pub blocks_per_row: i64,
    /// Bytes per quantized row.
    pub row_bytes: usize,
    /// Bytes of all the rows.
    pub total_bytes: usize,
}

impl ActRows {
    /// The rows of `b` quantized for weights of type `w`; an error when `b`
    /// cannot be quantized for them.
    pub(crate) fn of(w: DType, b: &Bound) -> Result<ActRows> {
        let (func, values, bytes) = act_format(w).ok_or(Error::Unsupported { op: "mul_mat", dtype: w })?;
        let k = b.l.ne[0];
        if b.l.dtype.block_size() > 1 {
            return Err(Error::Unsupported { op: "mul_mat (activations)", dtype: b.l.dtype });
        }
        if k % values as i64 != 0 {
            return Err(Error::shape("mul_mat", format!("{k} values per row are not whole {values}-value blocks")));
        }
        let blocks_per_row = k / values as i64;
        let row_bytes = blocks_per_row as usize * bytes;
        Ok(ActRows { func, blocks_per_row, row_bytes, total_bytes: row_bytes * b.l.nrows() as usize })
    }
}

/// Quantizes every row of `b` (F32/F16/BF16, any strides) as `rows` says into
/// packed rows at `dst` (room for `rows.total_bytes`).
pub(crate) fn quantize(dev: &Device, b: &Bound, rows: &ActRows, dst: u64) -> Result<()> {
    let bpr = rows.blocks_per_row;
    let total = bpr * b.l.nrows();
    if total > 0 {
        let f = dev.function("quantize_act", rows.func)?;
        let cfg = LaunchConfig { grid_dim: (quantize_grid(total)?, 1, 1), block_dim: (128, 1, 1), shared_mem_bytes: 0 };
        let kt = KTensor::of("mul_mat", &b.l)?;
        let mut lb = dev.stream.launch_builder(&f);
        lb.arg(&dst).arg(&b.ptr).arg(&kt).arg(&bpr).arg(&total);
        // SAFETY: the arguments are the kernel's (dst, x, tx, bpr, nblocks); x's
        // extent was checked when it was bound, and dst holds `total` blocks
        // (rows.total_bytes, the caller's promise).
        unsafe { lb.launch(cfg) }.map_err(cuda_err("launch quantize_act"))?;
    }
    Ok(())
}

/// `dst = a · bᵀ` for quantized weights `a` (see the module docs); the
/// staged kernel where it applies if `staged`.
pub(crate) fn mul_mat_q(dev: &Device, dst: BoundMut, a: Bound, b: Bound, staged: bool) -> Result<()> {
    let wt = a.l.dtype;
    let spec = QSpec::of(wt).ok_or(Error::Unsupported { op: "mul_mat", dtype: wt })?;
    let (al, bl, d) = (a.l, b.l, dst.l);
    let k = al.ne[0];
    if !loads(&spec, &a) {
        return Err(Error::Unsupported { op: "mul_mat (weights strided or misaligned for the dot kernel)", dtype: wt });
    }
    if bl.ne[0] != k || d.ne[0] != al.ne[1] || (1..4).any(|i| d.ne[i] != bl.ne[i]) {
        return Err(Error::internal(format!("mul_mat of {:?} by {:?} into {:?}", al.ne, bl.ne, d.ne)));
    }
    if al.ne[2] == 0 || al.ne[3] == 0 || bl.ne[2] % al.ne[2] != 0 || bl.ne[3] % al.ne[3] != 0 {
        return Err(Error::internal(format!("mul_mat of {:?} by {:?}", al.ne, bl.ne)));
    }
    let units = i32::try_from(k / 32).map_err(|_| Error::Invalid(format!("CUDA mul_mat: K = {k} too large")))?;
    let rows = ActRows::of(wt, &b)?;
    let act_row = rows.row_bytes;
    let acts = dev.scratch.take(&dev.stream, rows.total_bytes)?;
    quantize(dev, &b, &rows, acts)?;
    let p = KMmvq {
        w_nb: [al.nb[1] as i64, al.nb[2] as i64, al.nb[3] as i64],
        d_nb: [d.nb[1] as i64, d.nb[2] as i64, d.nb[3] as i64],
        act_row: act_row as i64,
        n: d.ne[1],
        ne2: d.ne[2],
        r2: bl.ne[2] / al.ne[2],
        r3: bl.ne[3] / al.ne[3],
        m: d.ne[0],
        units,
        pad: 0,
    };
    let kernel = if staged { staged_kernel(&spec, a.ptr, &al, act_row, d.ne[1]) } else { spec.kernel };
    // the staged kernels take ROWS weight rows per block (and the `_n1` ones one activation row)
    let blocks_x = if kernel == spec.kernel { d.ne[0] } else { (d.ne[0] + ROWS - 1) / ROWS };
    let (gx, gy, gz) = grid(blocks_x, d.ne[1], d.ne[2] * d.ne[3])?;
    if gx == 0 || gy == 0 || gz == 0 {
        return Ok(());
    }
    let f = dev.function(spec.module, kernel)?;
    let cfg = LaunchConfig { grid_dim: (gx, gy, gz), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
    let mut lb = dev.stream.launch_builder(&f);
    lb.arg(&dst.ptr).arg(&a.ptr).arg(&acts).arg(&p);
    // SAFETY: the arguments are the kernel's (dst, w, act, p). dst is F32 with
    // nb0 = 4 and the strides in p; w's extent (m rows of K/bs blocks at the
    // strides in p, broadcast by r2, r3) was checked when bound, with the
    // alignment its loads need; act holds ne1·ne2·ne3 rows of act_row bytes.
    unsafe { lb.launch(cfg) }.map_err(cuda_err("launch mmvq"))?;
    Ok(())
}

/// The device layout of quantized activation rows as the CPU's bytes: for the
/// Q8_0 partner, each 36-byte block loses its `s` field; other layouts are the
/// CPU's already.
pub(crate) fn to_cpu_layout(w: DType, dev_bytes: &[u8]) -> Vec<u8> {
    if crate::quant::dot::vec_dot_type(w) != DType::Q8_0 {
        return dev_bytes.to_vec();
    }
    dev_bytes.chunks_exact(Q8_36).flat_map(|b| b[..2].iter().chain(&b[4..]).copied()).collect()
}

/// Quantizes `x` (rows of `k` values) on the device exactly as `mul_mat`
/// does for weights of type `w`, and returns the CPU's bytes for them
/// ([`CudaBackend::quantize_activations`](crate::CudaBackend::quantize_activations)).
pub(crate) fn quantize_activations(dev: &Device, w: DType, x: &[f32], k: usize) -> Result<Vec<u8>> {
    if k == 0 || !x.len().is_multiple_of(k) {
        return Err(Error::shape("quantize_activations", format!("{} values are not rows of {k}", x.len())));
    }
    let rows = (x.len() / k) as i64;
    let l = Layout::contiguous(DType::F32, [k as i64, rows, 1, 1])?;
    let src = dev.stream.clone_htod(if x.is_empty() { &[0f32][..] } else { x }).map_err(cuda_err("upload"))?;
    let ptr = src.device_ptr(&dev.stream).0;
    let src = Bound::at(ptr, l);
    let rows = ActRows::of(w, &src)?;
    let total = rows.total_bytes;
    // SAFETY: the quantize kernel writes every byte before the download.
    let out = unsafe { dev.stream.alloc::<u8>(total.max(1)) }.map_err(cuda_err("alloc"))?;
    let op = out.device_ptr(&dev.stream).0;
    quantize(dev, &src, &rows, op)?;
    let bytes = dev.stream.clone_dtoh(&out).map_err(cuda_err("download"))?;
    Ok(to_cpu_layout(w, &bytes[..total]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn param_struct_matches_the_kernel() {
        assert_eq!(std::mem::size_of::<KMmvq>(), 104);
    }

    #[test]
    fn every_weight_type_cuda_reads_has_a_spec_or_another_path() {
        for &w in crate::quant::dot::WEIGHT_TYPES.iter().filter(|&&w| super::super::super::kernels::handles(w)) {
            let Some(s) = QSpec::of(w) else {
                // float weights go to cuBLAS, these through the dequantized GEMM (no dot kernels yet)
                let gemm_only = w.is_quantized();
                assert!(matches!(w, DType::F32 | DType::F16 | DType::BF16) || gemm_only, "{w:?}");
                assert!(act_format(w).is_none());
                continue;
            };
            assert_eq!(s.block_bytes % s.align, 0, "{w:?}: blocks keep the alignment");
            assert!(s.align >= w.align(), "{w:?}");
            assert!(s.kernel.starts_with("rg_mmvq_"));
            // its module is one of the per-type variants, and its kernels carry the module's type
            assert!(super::super::super::kernels::VARIANTS.iter().any(|(m, _, _)| *m == s.module), "{w:?}");
            let t = s.module.trim_start_matches("mmvq");
            assert!(s.kernel.ends_with(t) && s.staged.iter().all(|k| k.contains(t)), "{w:?}");
            let (_, v, b) = act_format(w).unwrap();
            assert_eq!(b % 4, 0, "activation quants stay 4-byte aligned");
            assert_eq!(s.block_values % v, 0);
            // the kernels' unit is 32 values: one legacy block, or 1/8 super-block
            assert_eq!(s.block_values % 32, 0);
        }
        assert!(QSpec::of(DType::Q8_K).is_none() && QSpec::of(DType::F32).is_none());
    }

    #[test]
    fn staged_kernels_need_aligned_rows() {
        let q4 = QSpec::of(DType::Q4_0).unwrap();
        let l = |k: i64, m: i64| Layout::contiguous(DType::Q4_0, [k, m, 1, 1]).unwrap();
        // K = 1280: 720-byte weight rows, 1440-byte activation rows
        assert_eq!(staged_kernel(&q4, 512, &l(1280, 4), 1440, 9), "rg_mmvq_q4_0_staged");
        assert_eq!(staged_kernel(&q4, 512, &l(1280, 4), 1440, 1), "rg_mmvq_q4_0_staged_n1");
        assert_eq!(staged_kernel(&q4, 512 + 18, &l(1280, 4), 1440, 1), "rg_mmvq_q4_0");
        // K = 416: 234-byte rows
        assert_eq!(staged_kernel(&q4, 512, &l(416, 4), 468, 1), "rg_mmvq_q4_0");
        // one row: its stride does not matter; activation rows must still be aligned
        assert_eq!(staged_kernel(&q4, 512, &l(416, 1), 1440, 2), "rg_mmvq_q4_0_staged");
        assert_eq!(staged_kernel(&q4, 512, &l(1280, 4), 468, 1), "rg_mmvq_q4_0");
        // k-quants: Q4_K's 4 super-blocks are 36 16-byte vectors, Q6_K's 105 8-byte ones
        let q4k = QSpec::of(DType::Q4_K).unwrap();
        let lk = Layout::contiguous(DType::Q4_K, [1024, 4, 1, 1]).unwrap();
        assert_eq!(staged_kernel(&q4k, 512, &lk, 1168, 3), "rg_mmvq_q4_k_staged");
        assert_eq!(staged_kernel(&q4k, 512, &lk, 292, 3), "rg_mmvq_q4_k");
        let q6k = QSpec::of(DType::Q6_K).unwrap();
        assert_eq!(q6k.stage_align, 8);
        let l6 = Layout::contiguous(DType::Q6_K, [1024, 4, 1, 1]).unwrap();
        assert_eq!(staged_kernel(&q6k, 512 + 840, &l6, 1168, 1), "rg_mmvq_q6_k_staged_n1");
        assert_eq!(staged_kernel(&q6k, 512 + 420, &l6, 1168, 1), "rg_mmvq_q6_k");
    }

    #[test]
    fn grid_geometry() {
        assert_eq!(grid(4096, 1, 1).unwrap(), (4096, 1, 1));
        assert_eq!(grid(7, 8, 3).unwrap(), (7, 1, 3));
        assert_eq!(grid(7, 9, 3).unwrap(), (7, 2, 3));
        assert_eq!(grid(7, 40, 6).unwrap(), (7, 5, 6));
        assert_eq!(grid(0, 3, 1).unwrap(), (0, 1, 1));
        assert!(grid(1 << 31, 1, 1).is_err());
        assert!(grid(1, 65536 * NC, 1).is_err());
        assert!(grid(1, 1, 65536).is_err());
        assert_eq!(quantize_grid(0).unwrap(), 0);
        assert_eq!(quantize_grid(5).unwrap(), 2);
        assert!(quantize_grid(i64::MAX).is_err());
    }

    #[test]
    fn q8_0_layout_drops_s() {
        let mut dev = vec![0u8; 2 * Q8_36];
        for (i, b) in dev.iter_mut().enumerate() {
            *b = i as u8;
        }
        let cpu = to_cpu_layout(DType::Q4_0, &dev);
        assert_eq!(cpu.len(), 2 * 34);
        assert_eq!(&cpu[..2], &[0, 1]);
        assert_eq!(&cpu[2..34], &dev[4..36]);
        assert_eq!(&cpu[34..36], &[36, 37]);
        assert_eq!(to_cpu_layout(DType::Q4_1, &dev), dev);
        assert_eq!(to_cpu_layout(DType::Q4_K, &dev), dev);
    }
}
