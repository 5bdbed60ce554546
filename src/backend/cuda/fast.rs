//! Fast paths of the memory-bound ops on the device: packed copies and
//! conversions in 16-byte vectors, the tiled transposing copy, F32 binary ops
//! by rows (the broadcast operand indexed once per row) and the packed F32
//! unary/binary ops in `float4`s. The path choice is pure host logic on
//! addresses and layouts ([`vec_plan`], [`transpose_dim`], [`row_plan`],
//! [`aligned16`]), unit-tested here without a GPU; the kernels are in
//! `kernels/copy.cu`, `kernels/binary.cu` and `kernels/unary.cu`.

use cudarc::driver::LaunchConfig;

use super::device::Device;
use super::launch::{flat, launch, Bound, BoundMut};
use crate::dtype::DType;
use crate::error::Result;
use crate::layout::Layout;

/// How a packed run of `n` elements is split for the vector kernels: `head`
/// scalar elements, then `nvec` vectors of `width` elements (both sides
/// aligned to their vector size there), then the scalar tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct VecPlan {
    /// Elements per vector.
    pub width: i64,
    /// Scalar elements before the first vector.
    pub head: i64,
    /// Whole vectors.
    pub nvec: i64,
}

impl VecPlan {
    /// The indices the kernel's grid covers for `n` elements: one per vector,
    /// one per head or tail element.
    pub fn items(&self, n: i64) -> i64 {
        n - self.nvec * (self.width - 1)
    }
}

/// The widest of `widths` (elements per vector, descending powers of two)
/// at which both runs can be vectorized: some head of fewer than `width`
/// elements brings `dst` (elements of `dsize` bytes) to a multiple of
/// `width·dsize` and `src` to a multiple of `width·ssize` at once. When none
/// fits, every element is scalar (the narrowest width, `head = n`).
pub(crate) fn vec_plan(dst: u64, dsize: u64, src: u64, ssize: u64, n: i64, widths: &[i64]) -> VecPlan {
    let n = n.max(0);
    for &w in widths.iter().filter(|&&w| w >= 1) {
        let (wu, dv, sv) = (w as u64, w as u64 * dsize, w as u64 * ssize);
        let fits = |h: u64| (dst + h * dsize).is_multiple_of(dv) && (src + h * ssize).is_multiple_of(sv);
        if let Some(h) = (0..wu).find(|&h| fits(h)) {
            let head = (h as i64).min(n);
            return VecPlan { width: w, head, nvec: (n - head) / w };
        }
    }
    VecPlan { width: widths.last().copied().unwrap_or(1).max(1), head: n, nvec: 0 }
}

/// True if every address is a multiple of 16.
pub(crate) fn aligned16(ptrs: &[u64]) -> bool {
    ptrs.iter().all(|p| p.is_multiple_of(16))
}

fn plain(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F16 | DType::BF16 | DType::I32)
}

/// The dim `k` (1..=3) along which the tiled transposing copy reads `src`:
/// both plain types of the same shape, `dst` with packed rows, `src` with
/// strided rows (more than one value per row) and unit stride along `k`.
pub(crate) fn transpose_dim(dst: &Layout, src: &Layout) -> Option<usize> {
    if !plain(dst.dtype) || !plain(src.dtype) || dst.ne != src.ne || dst.is_empty() {
        return None;
    }
    let ss = src.dtype.type_size();
    if dst.nb[0] != dst.dtype.type_size() || src.ne[0] <= 1 || src.nb[0] == ss {
        return None;
    }
    (1..4).find(|&k| src.nb[k] == ss && src.ne[k] > 1)
}

/// Side of the transposing copy's tiles and the rows of its thread block
/// (`RG_TILE`, `RG_TILE_ROWS` in `kernels/copy.cu`).
const TILE: u32 = 32;
const TILE_ROWS: u32 = 8;

/// The launch of `rg_copy_transpose` over shape `ne` reading along `k`:
/// `(cfg, p, q)`, `p` and `q` the other two dims (on grid z).
pub(crate) fn transpose_launch(ne: [i64; 4], k: usize) -> (LaunchConfig, usize, usize) {
    let mut other = (1..4).filter(|&d| d != k);
    let (p, q) = (other.next().unwrap_or(1), other.next().unwrap_or(2));
    let tiles = |n: i64, cap: u64| (n.max(1) as u64).div_ceil(u64::from(TILE)).min(cap) as u32;
    let gz = (ne[p].max(1) as u64).saturating_mul(ne[q].max(1) as u64).min(65535) as u32;
    let cfg = LaunchConfig {
        grid_dim: (tiles(ne[0], i32::MAX as u64), tiles(ne[k], 65535), gz),
        block_dim: (TILE, TILE_ROWS, 1),
        shared_mem_bytes: 0,
    };
    (cfg, p, q)
}

/// How `rg_binary_rows_f32[x4]` runs: `float4`s or not, the launch, the row
/// count and the elements of a row each block covers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowPlan {
    /// `float4` loads and stores.
    pub vec4: bool,
    /// Block (threads per row, rows per block), grid (row groups, row chunks).
    pub cfg: LaunchConfig,
    /// Rows of dst (fits in 31 bits).
    pub rows: u32,
    /// Elements of a row per block (a multiple of the vector width).
    pub chunk: i64,
}

/// Strides of the dims that have more than one element, all multiples of 16.
fn rows_aligned16(l: &Layout) -> bool {
    (1..4).all(|d| l.ne[d] <= 1 || l.nb[d].is_multiple_of(16))
}

/// The row path of an F32 binary op, if it applies: dst and `a` of the same
/// shape with packed rows; `b` with packed rows of `ne0` or 1 values,
/// tiled over the rows by modulo. `float4`s when `ne0 % 4 == 0` and every
/// row start of dst, `a` and (unless it has one value per row) `b` is
/// 16-byte aligned.
pub(crate) fn row_plan(dst: &BoundMut, a: &Bound, b: &Bound) -> Option<RowPlan> {
    let (d, la, lb) = (&dst.l, &a.l, &b.l);
    let f32s = [d, la, lb].iter().all(|l| l.dtype == DType::F32);
    if !f32s || d.ne != la.ne || d.is_empty() || lb.is_empty() {
        return None;
    }
    let ne0 = d.ne[0];
    let rows_ok = [d, la, lb].iter().all(|l| l.is_contiguous_rows());
    if !rows_ok || (lb.ne[0] != ne0 && lb.ne[0] != 1) || lb.ne.iter().any(|&n| n > i64::from(u32::MAX)) {
        return None;
    }
    let rows = u32::try_from(d.nrows()).ok().filter(|&r| r <= i32::MAX as u32)?;
    let b_vec = lb.ne[0] > 1;
    let vec4 = ne0 % 4 == 0
        && aligned16(&[dst.ptr, a.ptr])
        && rows_aligned16(d)
        && rows_aligned16(la)
        && (!b_vec || (aligned16(&[b.ptr]) && rows_aligned16(lb)));
    let v: i64 = if vec4 { 4 } else { 1 };
    let per = (ne0 + v - 1) / v;
    let tpr = (per as u64).next_power_of_two().clamp(32, 256) as u32;
    let rpb = 256 / tpr;
    let step = i64::from(tpr) * v;
    // one batch of `RG_ROW_BATCH` (4) steps per thread (kernels/binary.cu)
    let mut chunk = step * 4;
    if (ne0 + chunk - 1) / chunk > 65535 {
        chunk = ((ne0 + 65534) / 65535 + step - 1) / step * step;
    }
    let gy = ((ne0 + chunk - 1) / chunk) as u32;
    let gx = rows.div_ceil(rpb);
    let cfg = LaunchConfig { grid_dim: (gx, gy, 1), block_dim: (tpr, rpb, 1), shared_mem_bytes: 0 };
    Some(RowPlan { vec4, cfg, rows, chunk })
}

/// Same-type copy of two packed tensors: vectors of up to 16 bytes.
pub(crate) fn copy_packed(dev: &Device, dst: &BoundMut, src: &Bound) -> Result<()> {
    let nbytes = dst.l.nbytes().min(src.l.nbytes()) as i64;
    let v = vec_plan(dst.ptr, 1, src.ptr, 1, nbytes, &[16, 8, 4, 2, 1]);
    let (cfg, head, nvec) = (flat(v.items(nbytes)), v.head, v.nvec);
    match v.width {
        16 => launch!(dev, "copy", "rg_copy_v16", cfg; dst.ptr, src.ptr, head, nvec, nbytes),
        8 => launch!(dev, "copy", "rg_copy_v8", cfg; dst.ptr, src.ptr, head, nvec, nbytes),
        4 => launch!(dev, "copy", "rg_copy_v4", cfg; dst.ptr, src.ptr, head, nvec, nbytes),
        2 => launch!(dev, "copy", "rg_copy_v2", cfg; dst.ptr, src.ptr, head, nvec, nbytes),
        _ => launch!(dev, "copy", "rg_copy_v1", cfg; dst.ptr, src.ptr, head, nvec, nbytes),
    }
    Ok(())
}

/// Packed F32 into packed F16/BF16 or back (any `n`): vectors of 4 or 2
/// values, scalar head and tail. False (nothing launched) for other pairs.
pub(crate) fn convert_packed(dev: &Device, dst: &BoundMut, src: &Bound) -> Result<bool> {
    let half = |d: DType| matches!(d, DType::F16 | DType::BF16);
    let (dt, st) = (dst.l.dtype, src.l.dtype);
    let to_half = st == DType::F32 && half(dt);
    if !(to_half || (dt == DType::F32 && half(st))) || !dst.l.is_contiguous() || !src.l.is_contiguous() {
        return Ok(false);
    }
    let n = dst.l.nelements();
    if n != src.l.nelements() {
        return Ok(false);
    }
    let (ds, ss) = (dt.type_size() as u64, st.type_size() as u64);
    let v = vec_plan(dst.ptr, ds, src.ptr, ss, n, &[4, 2]);
    let (cfg, head, nvec) = (flat(v.items(n)), v.head, v.nvec);
    if to_half {
        let code = super::kernels::type_code("cpy", dt)?;
        match v.width {
            4 => launch!(dev, "copy", "rg_f32_to_half_v4", cfg; dst.ptr, code, src.ptr, head, nvec, n),
            _ => launch!(dev, "copy", "rg_f32_to_half_v2", cfg; dst.ptr, code, src.ptr, head, nvec, n),
        }
    } else {
        let code = super::kernels::type_code("cpy", st)?;
        match v.width {
            4 => launch!(dev, "copy", "rg_half_to_f32_v4", cfg; dst.ptr, src.ptr, code, head, nvec, n),
            _ => launch!(dev, "copy", "rg_half_to_f32_v2", cfg; dst.ptr, src.ptr, code, head, nvec, n),
        }
    }
    Ok(true)
}

/// The tiled transposing copy (see [`transpose_dim`] for when it applies).
pub(crate) fn copy_transposed(dev: &Device, dst: &BoundMut, src: &Bound, k: usize) -> Result<()> {
    let (cfg, p, q) = transpose_launch(dst.l.ne, k);
    launch!(dev, "copy", "rg_copy_transpose", cfg;
        dst.ptr, dst.p("cpy")?, src.ptr, src.p("cpy")?, k as i32, p as i32, q as i32);
    Ok(())
}

/// The F32 binary fast paths: packed operands of one shape (`float4`s when
/// aligned), else rows with the broadcast operand ([`row_plan`]). False
/// (nothing launched) when neither applies.
pub(crate) fn binary(dev: &Device, code: i32, dst: &BoundMut, a: &Bound, b: &Bound) -> Result<bool> {
    let n = dst.l.nelements();
    let packed = [&dst.l, &a.l, &b.l].iter().all(|l| l.dtype == DType::F32 && l.is_contiguous());
    if packed && a.l.ne == dst.l.ne && b.l.ne == dst.l.ne {
        if aligned16(&[dst.ptr, a.ptr, b.ptr]) {
            let cfg = flat(n - n / 4 * 3);
            launch!(dev, "binary", "rg_binary_f32_contig4", cfg; code, dst.ptr, a.ptr, b.ptr, n);
        } else {
            launch!(dev, "binary", "rg_binary_f32_contig", flat(n); code, dst.ptr, a.ptr, b.ptr, n);
        }
        return Ok(true);
    }
    let Some(rp) = row_plan(dst, a, b) else { return Ok(false) };
    let (kd, ka, kb) = (dst.p("binary")?, a.p("binary")?, b.p("binary")?);
    if rp.vec4 {
        launch!(dev, "binary", "rg_binary_rows_f32x4", rp.cfg;
            code, dst.ptr, kd, a.ptr, ka, b.ptr, kb, rp.rows, rp.chunk);
    } else {
        launch!(dev, "binary", "rg_binary_rows_f32", rp.cfg;
            code, dst.ptr, kd, a.ptr, ka, b.ptr, kb, rp.rows, rp.chunk);
    }
    Ok(true)
}

/// The packed F32 unary/scale fast path (`float4`s when aligned). False
/// (nothing launched) unless dst and `a` are packed F32 of one shape.
pub(crate) fn unary(dev: &Device, code: i32, param: f32, dst: &BoundMut, a: &Bound) -> Result<bool> {
    let packed = [&dst.l, &a.l].iter().all(|l| l.dtype == DType::F32 && l.is_contiguous());
    if !packed || a.l.ne != dst.l.ne {
        return Ok(false);
    }
    let n = dst.l.nelements();
    if aligned16(&[dst.ptr, a.ptr]) {
        launch!(dev, "unary", "rg_unary_f32_contig4", flat(n - n / 4 * 3); code, param, dst.ptr, a.ptr, n);
    } else {
        launch!(dev, "unary", "rg_unary_f32_contig", flat(n); code, param, dst.ptr, a.ptr, n);
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The elements the kernels touch under `v` for `n` elements, in the
    /// kernels' index mapping (`rg_scalar_at`), each vector's first element
    /// with it: every element must come exactly once.
    fn cover(v: VecPlan, n: i64) -> (Vec<u32>, Vec<i64>) {
        let mut seen = vec![0u32; n as usize];
        let mut starts = Vec::new();
        for i in 0..v.items(n) {
            if i < v.nvec {
                let s = v.head + i * v.width;
                starts.push(s);
                (s..s + v.width).for_each(|e| seen[e as usize] += 1);
            } else {
                let j = i - v.nvec;
                let at = if j < v.head { j } else { j + v.nvec * v.width };
                seen[at as usize] += 1;
            }
        }
        (seen, starts)
    }

    #[test]
    fn vec_plan_covers_every_element_once_with_aligned_vectors() {
        let pairs: [(u64, u64, &[i64]); 4] =
            [(1, 1, &[16, 8, 4, 2, 1]), (2, 4, &[4, 2]), (4, 2, &[4, 2]), (4, 4, &[4, 2])];
        for (ds, ss, widths) in pairs {
            for doff in (0..32).step_by(ds as usize) {
                for soff in (0..32).step_by(ss as usize) {
                    for n in 0..70 {
                        let (d, s) = (0x1000 + doff, 0x8000 + soff);
                        let v = vec_plan(d, ds, s, ss, n, widths);
                        let (seen, starts) = cover(v, n);
                        assert!(seen.iter().all(|&c| c == 1), "{ds}/{ss} {doff} {soff} n={n}: {v:?}");
                        let w = v.width as u64;
                        for st in starts {
                            assert_eq!((d + st as u64 * ds) % (w * ds), 0, "{v:?}");
                            assert_eq!((s + st as u64 * ss) % (w * ss), 0, "{v:?}");
                        }
                        assert!(v.nvec == 0 || v.head < v.width, "{v:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn vec_plan_picks_the_widest_width_the_addresses_allow() {
        let bytes: &[i64] = &[16, 8, 4, 2, 1];
        assert_eq!(vec_plan(0x1000, 1, 0x2000, 1, 100, bytes), VecPlan { width: 16, head: 0, nvec: 6 });
        // same residue mod 16: a 12-byte head, then 16-byte vectors
        assert_eq!(vec_plan(0x1004, 1, 0x2004, 1, 100, bytes), VecPlan { width: 16, head: 12, nvec: 5 });
        // residues 4 and 0: 4-byte vectors only
        assert_eq!(vec_plan(0x1004, 1, 0x2000, 1, 100, bytes).width, 4);
        assert_eq!(vec_plan(0x1002, 1, 0x2000, 1, 100, bytes).width, 2);
        assert_eq!(vec_plan(0x1001, 1, 0x2000, 1, 100, bytes).width, 1);
        // f32 -> f16: 16 bytes in, 8 out
        assert_eq!(vec_plan(0x2000, 2, 0x1000, 4, 10, &[4, 2]), VecPlan { width: 4, head: 0, nvec: 2 });
        assert_eq!(vec_plan(0x2002, 2, 0x1004, 4, 10, &[4, 2]), VecPlan { width: 4, head: 3, nvec: 1 });
        // f16 at 2 mod 4 against f32 at 0 mod 8: never both aligned
        assert_eq!(vec_plan(0x2002, 2, 0x1000, 4, 10, &[4, 2]), VecPlan { width: 2, head: 10, nvec: 0 });
        // a head longer than the run: all scalar
        assert_eq!(vec_plan(0x1004, 1, 0x2004, 1, 5, bytes), VecPlan { width: 16, head: 5, nvec: 0 });
        assert_eq!(vec_plan(0x1000, 1, 0x2000, 1, 0, bytes).items(0), 0);
    }

    fn f32l(ne: [i64; 4]) -> Layout {
        Layout::contiguous(DType::F32, ne).unwrap()
    }

    fn perm(l: Layout, ax: [usize; 4]) -> Layout {
        let mut t = l;
        for (i, &a) in ax.iter().enumerate() {
            t.ne[i] = l.ne[a];
            t.nb[i] = l.nb[a];
        }
        t
    }

    #[test]
    fn transpose_dim_takes_strided_rows_into_packed_ones() {
        let x = f32l([64, 48, 1, 1]);
        let t = perm(x, [1, 0, 2, 3]);
        let out = f32l(t.ne);
        assert_eq!(transpose_dim(&out, &t), Some(1));
        let h = Layout::contiguous(DType::F16, t.ne).unwrap();
        assert_eq!(transpose_dim(&h, &t), Some(1));
        // src's unit stride on dim 2
        let x3 = f32l([5, 6, 7, 2]);
        let p = perm(x3, [1, 2, 0, 3]);
        assert_eq!(transpose_dim(&f32l(p.ne), &p), Some(2));
        let p = perm(x3, [3, 1, 2, 0]);
        assert_eq!(transpose_dim(&f32l(p.ne), &p), Some(3));
        // not for: packed source rows, another shape, strided dst rows, one value per row, block types
        assert_eq!(transpose_dim(&f32l(x.ne), &x), None);
        assert_eq!(transpose_dim(&f32l([48 * 64, 1, 1, 1]), &t), None);
        assert_eq!(transpose_dim(&t, &t), None);
        let col = perm(f32l([1, 9, 1, 1]), [1, 0, 2, 3]);
        assert_eq!(transpose_dim(&f32l(col.ne), &col), None);
        let q = Layout::contiguous(DType::Q8_0, [64, 48, 1, 1]).unwrap();
        assert_eq!(transpose_dim(&q, &t), None);
        assert_eq!(transpose_dim(&f32l([0, 4, 1, 1]), &perm(f32l([4, 0, 1, 1]), [1, 0, 2, 3])), None);
    }

    #[test]
    fn transpose_launch_stays_inside_the_grid_limits() {
        let (cfg, p, q) = transpose_launch([16384, 16384, 1, 1], 1);
        assert_eq!((cfg.grid_dim, cfg.block_dim, p, q), ((512, 512, 1), (32, 8, 1), 2, 3));
        let (cfg, p, q) = transpose_launch([33, 5, 70000, 3], 2);
        assert_eq!((cfg.grid_dim, p, q), ((2, 2188, 15), 1, 3));
        let (cfg, _, _) = transpose_launch([1, 1 << 40, 1 << 20, 1 << 20], 1);
        assert_eq!(cfg.grid_dim, (1, 65535, 65535));
    }

    fn bound<A>(ptr: u64, l: Layout) -> Bound<A> {
        Bound::at(ptr, l)
    }

    /// Every element of every row covered exactly once by the row kernel's
    /// loops under `rp` (row of ne0 elements).
    fn row_cover(rp: &RowPlan, ne0: i64) {
        let (tpr, rpb) = (rp.cfg.block_dim.0 as i64, rp.cfg.block_dim.1 as i64);
        let v = if rp.vec4 { 4 } else { 1 };
        assert_eq!(rp.chunk % (tpr * v), 0);
        assert!(rp.cfg.grid_dim.1 <= 65535 && rp.cfg.block_dim.0 * rp.cfg.block_dim.1 == 256);
        assert!(i64::from(rp.cfg.grid_dim.0) * rpb >= i64::from(rp.rows));
        if ne0 > 1 << 16 {
            assert!(i64::from(rp.cfg.grid_dim.1) * rp.chunk >= ne0);
            return;
        }
        let mut seen = vec![0u32; ne0 as usize];
        for by in 0..i64::from(rp.cfg.grid_dim.1) {
            let (lo, hi) = (by * rp.chunk, ((by + 1) * rp.chunk).min(ne0));
            for tx in 0..tpr {
                let mut i = lo + tx * v;
                while i < hi {
                    (i..i + v).for_each(|e| seen[e as usize] += 1);
                    i += tpr * v;
                }
            }
        }
        assert!(seen.iter().all(|&c| c == 1), "{rp:?} ne0={ne0}");
    }

    #[test]
    fn row_plan_for_broadcast_rows() {
        let n = 16384;
        let (d, a, b) =
            (bound(0x10000, f32l([n, n, 1, 1])), bound(1 << 32, f32l([n, n, 1, 1])), bound(0x100, f32l([n, 1, 1, 1])));
        let rp = row_plan(&d, &a, &b).unwrap();
        assert!(rp.vec4);
        assert_eq!((rp.cfg.grid_dim, rp.cfg.block_dim, rp.rows, rp.chunk), ((16384, 4, 1), (256, 1, 1), 16384, 4096));
        row_cover(&rp, n);
        // 4 bytes off 16: scalar, still the row path
        let rp = row_plan(&d, &bound(a.ptr + 4, a.l), &b).unwrap();
        assert!(!rp.vec4);
        row_cover(&rp, n);
        assert!(!row_plan(&d, &a, &bound(0x104, b.l)).unwrap().vec4);
        // a column of one value per row: its address does not matter
        let col = bound(0x104, f32l([1, n, 1, 1]));
        assert!(row_plan(&d, &a, &col).unwrap().vec4);
        // odd and small rows
        for ne0 in [1, 3, 7, 31, 33, 100, 1023, 1025, 4097, 70001] {
            let l = f32l([ne0, 5, 3, 2]);
            let rp = row_plan(&bound(0x1000, l), &bound(0x9000, l), &bound(0x100, f32l([ne0, 1, 3, 1]))).unwrap();
            assert_eq!(rp.vec4, ne0 % 4 == 0, "{ne0}");
            assert_eq!(rp.rows, 30);
            row_cover(&rp, ne0);
        }
        // rows of 4 values whose row stride is 16 but dim-2 stride is not a multiple of 16
        let l = Layout { nb: [4, 16, 36, 72], ..f32l([4, 2, 2, 1]) };
        assert!(!row_plan(&bound(0x1000, l), &bound(0x1000, l), &bound(0x100, f32l([4, 1, 1, 1]))).unwrap().vec4);
        // huge rows: chunks grow so the grid's y stays inside 65535
        let big = f32l([1 << 30, 1, 1, 1]);
        let rp = row_plan(&bound(0x1000, big), &bound(0x1000, big), &bound(0x100, f32l([1, 1, 1, 1]))).unwrap();
        row_cover(&rp, 1 << 30);
    }

    #[test]
    fn row_plan_declines_what_it_cannot_index() {
        let l = f32l([8, 4, 1, 1]);
        let (d, a) = (bound(0x1000, l), bound(0x2000, l));
        // b strided along dim 0, b of another row length, other types, other shapes
        let bt = perm(f32l([4, 8, 1, 1]), [1, 0, 2, 3]);
        assert!(row_plan(&d, &a, &bound(0x100, bt)).is_none());
        assert!(row_plan(&d, &a, &bound(0x100, f32l([2, 1, 1, 1]))).is_none());
        let h = Layout::contiguous(DType::F16, [8, 4, 1, 1]).unwrap();
        assert!(row_plan(&bound(0x1000, h), &a, &bound(0x100, f32l([8, 1, 1, 1]))).is_none());
        assert!(row_plan(&d, &bound(0x2000, f32l([8, 2, 2, 1])), &bound(0x100, f32l([8, 1, 1, 1]))).is_none());
        assert!(row_plan(&d, &a, &bound(0x100, f32l([8, 0, 1, 1]))).is_none());
        // a with strided rows
        let at = perm(f32l([4, 8, 1, 1]), [1, 0, 2, 3]);
        assert!(row_plan(&d, &bound(0x2000, at), &bound(0x100, f32l([8, 1, 1, 1]))).is_none());
        // more rows than 31 bits
        let many = f32l([1, 1 << 16, 1 << 16, 1]);
        assert!(row_plan(&bound(0, many), &bound(0, many), &bound(0, f32l([1, 1, 1, 1]))).is_none());
        assert!(aligned16(&[0, 16, 0x1000]) && !aligned16(&[16, 4]));
    }
}
