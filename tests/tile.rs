//! The register-tiled kernels of `rgml::quant::tile`:
//! - every level this CPU supports against `quant::dot::dot_fn_scalar`, per
//!   element, at odd sizes (k = 1, 3 and 129 blocks, i.e. 32, 96, 4128 for
//!   Q4_0/Q8_0, and 1, 3 and 17 super-blocks, i.e. 256, 768, 4352 for
//!   Q4_K/Q5_K/Q6_K: partial chunks of packed blocks; weight rows 1..=mr;
//!   activation rows 0..=19 and 37, which use every register-group size), on
//!   realistic, random-byte and extreme rows (every quant and scale at its
//!   extreme: the i16 sums of the AVX2 tiles at their bound), with unaligned
//!   slices and an output stride wider than the tile; the scalar tiles bit
//!   for bit;
//! - that a call writes only its `out[j * stride + i]` elements;
//! - the length checks and `prepare`'s errors;
//! - `mul_mat` through the public graph API (weights quantized by `cpy`) at
//!   sizes that do not fill the tiles, against a per-element reference from
//!   `dot_fn_scalar` on `quantize_activations` output.
//!
//! - `mul_mat` from each type's `min_rows` activation rows (where it takes the
//!   tile) against the per-element dot kernel it used before (`dot_fn`, this
//!   CPU's level) and the scalar one.
//!
//! Tolerance: `|got - want| ≤ 1e-5 · Σ|terms|`, `Σ|terms|` the f64 sum of
//! `(|d_w·q_w| + |min|) · |d_a·q_a|` (Q4_K/Q5_K's `min = dmin·m` is subtracted
//! separately): the integer parts (per block, or per super-block with its
//! scales, mins and Q6_K's `- 32` correction) are exact on every path, so only
//! the f32 scaling (`d_w·d_a`, FMA or not) and the in-order sum of the blocks
//! may round differently: a few ulps of the largest partial sum, which is at
//! most `Σ|terms|`; with at most 17 blocks summed that stays below
//! `17 · 2 · 2^-24 ≈ 2e-6` of it, and 1e-5 leaves room.

mod common;

use common::Rng;
use rgml::quant::dot::{dot_fn, dot_fn_scalar, quantize_activations, vec_dot_type, SimdLevel};
use rgml::quant::tile::{tile_kernel, tile_kernel_for, TileKernel};
use rgml::quant::{dequantize_row, quantize_row};
use rgml::{Context, CpuBackend, DType, Graph};

const TYPES: [DType; 9] = [
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q8_0,
    DType::IQ4_NL,
    DType::Q4_K,
    DType::Q5_K,
    DType::Q6_K,
    DType::IQ4_XS,
];
const REL_TOL: f64 = 1e-5;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// Quantized random floats.
    Realistic,
    /// Random quant bytes with random (finite) scales.
    RandomBytes,
    /// Every quant at an extreme, large scales.
    Extreme,
}

/// `(scale fields, quant bytes)` of a block of type `t`: the byte ranges.
fn fields(t: DType) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
    match t {
        DType::Q4_0 | DType::IQ4_NL => (0..2, 2..18),
        DType::Q4_1 => (0..4, 4..20),
        DType::Q5_0 => (0..2, 2..22),
        DType::Q8_1 => (0..4, 4..36),
        DType::Q8_0 => (0..2, 2..34),
        DType::Q4_K => (0..16, 16..144),
        DType::Q5_K => (0..16, 16..176),
        DType::Q6_K => (192..210, 0..192),
        DType::Q8_K => (0..4, 4..260),
        DType::IQ4_XS => (0..8, 8..136),
        _ => unreachable!("{t}"),
    }
}

/// An f16's little-endian bytes.
fn f16_bytes(x: f32) -> [u8; 2] {
    half::f16::from_f32(x).to_bits().to_le_bytes()
}

/// Overwrites the scales and quants of every block of a row of `t` per
/// `kind` (Q8_K's `bsums` kept consistent); `no_min` keeps Q8_0 quants off `-128`.
fn mangle(t: DType, row: &mut [u8], kind: Kind, no_min: bool, rng: &mut Rng) {
    let (sr, qr) = fields(t);
    for blk in row.chunks_exact_mut(t.type_size()) {
        let ext = rng.next() & 1 == 0;
        match kind {
            Kind::Realistic => return,
            Kind::RandomBytes => {
                for q in &mut blk[qr.clone()] {
                    *q = rng.next() as u8;
                }
                match t {
                    DType::Q8_K => blk[..4].copy_from_slice(&(rng.f(1.0) * 0.1).to_le_bytes()),
                    DType::Q4_K | DType::Q5_K => {
                        blk[..2].copy_from_slice(&f16_bytes(rng.f(1.0) * 4.0));
                        blk[2..4].copy_from_slice(&f16_bytes(rng.f(1.0) * 4.0));
                        blk[4..16].iter_mut().for_each(|q| *q = rng.next() as u8);
                    }
                    DType::Q6_K => {
                        blk[192..208].iter_mut().for_each(|q| *q = rng.next() as u8);
                        blk[208..].copy_from_slice(&f16_bytes(rng.f(1.0) * 4.0));
                    }
                    _ => blk[..2].copy_from_slice(&f16_bytes(rng.f(1.0) * 4.0)),
                }
            }
            Kind::Extreme => {
                let q = match t {
                    DType::Q4_0 | DType::Q4_K | DType::Q5_K | DType::Q6_K => 0xff * u8::from(ext),
                    _ if ext => 0x80,
                    _ => 0x7f,
                };
                blk[qr.clone()].iter_mut().for_each(|v| *v = q);
                if t == DType::Q8_K {
                    blk[..4].copy_from_slice(&1e3f32.to_le_bytes());
                } else if t == DType::Q6_K {
                    // the extreme signed scales, one sign per block
                    blk[192..208].iter_mut().for_each(|v| *v = if ext { 0x80 } else { 0x7f });
                    blk[208..].copy_from_slice(&f16_bytes(if ext { 60000.0 } else { -3.0e4 }));
                } else {
                    let d = f16_bytes(if ext { 60000.0 } else { -3.0e4 });
                    for c in blk[sr.clone()].chunks_exact_mut(2).take(2) {
                        c.copy_from_slice(&d);
                    }
                    if matches!(t, DType::Q4_K | DType::Q5_K) {
                        blk[4..16].iter_mut().for_each(|v| *v = 0xff);
                    }
                }
            }
        }
        if no_min && t == DType::Q8_0 {
            blk[qr.clone()].iter_mut().for_each(|q| *q = if *q == 0x80 { 0x81 } else { *q });
        }
        if t == DType::Q8_K {
            for g in 0..16 {
                let s: i32 = blk[4 + 16 * g..20 + 16 * g].iter().map(|&q| i32::from(q as i8)).sum();
                blk[260 + 2 * g..262 + 2 * g].copy_from_slice(&(s as i16).to_le_bytes());
            }
        }
    }
}

/// `m` weight rows and `n` activation rows (the partner type's bytes) of `k` values.
fn rows(w: DType, k: usize, m: usize, n: usize, kind: Kind, no_min: bool, seed: u64) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut rng = Rng(seed);
    let pt = vec_dot_type(w);
    let wr = (0..m)
        .map(|_| {
            let mut q = vec![0u8; w.row_size(k as i64).unwrap()];
            quantize_row(w, &rng.vec(k, 1.0), &mut q).unwrap();
            mangle(w, &mut q, kind, no_min, &mut rng);
            q
        })
        .collect();
    let ar = (0..n)
        .map(|_| {
            let mut q = vec![0u8; pt.row_size(k as i64).unwrap()];
            quantize_activations(w, &rng.vec(k, 1.0), &mut q).unwrap();
            mangle(pt, &mut q, kind, no_min, &mut rng);
            q
        })
        .collect();
    (wr, ar)
}

/// Per value of a weight row, `|scaled quant| + |min term|`.
fn weight_terms(w: DType, k: usize, row: &[u8]) -> Vec<f64> {
    if w == DType::Q4_1 {
        let f16 = |b: &[u8]| half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64();
        return row
            .chunks_exact(20)
            .flat_map(|b| {
                (0..32).map(move |v| {
                    (f16(b) * f64::from((b[4 + v % 16] >> (4 * (v / 16))) & 15)).abs() + f16(&b[2..]).abs()
                })
            })
            .take(k)
            .collect();
    }
    if !matches!(w, DType::Q4_K | DType::Q5_K) {
        let mut x = vec![0f32; k];
        dequantize_row(w, row, &mut x).unwrap();
        return x.iter().map(|v| v.abs() as f64).collect();
    }
    let f16 = |b: &[u8]| half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64();
    let mut out = Vec::with_capacity(k);
    for blk in row.chunks_exact(w.type_size()) {
        let (d, dmin, sc) = (f16(blk), f16(&blk[2..]), &blk[4..16]);
        for v in 0..256 {
            let g = v / 32;
            // ggml's get_scale_min_k4
            let (s, m) = if g < 4 {
                (sc[g] & 63, sc[g + 4] & 63)
            } else {
                ((sc[g + 4] & 0x0f) | ((sc[g - 4] >> 6) << 4), (sc[g + 4] >> 4) | ((sc[g] >> 6) << 4))
            };
            let q = if w == DType::Q4_K {
                (blk[16 + 32 * (v / 64) + v % 32] >> (4 * (g % 2))) & 0x0f
            } else {
                ((blk[48 + 32 * (v / 64) + v % 32] >> (4 * (g % 2))) & 0x0f) | (((blk[16 + v % 32] >> g) & 1) << 4)
            };
            out.push((d * f64::from(s) * f64::from(q)).abs() + (dmin * f64::from(m)).abs());
        }
    }
    out
}

/// `Σ (|d_w·q_w| + |min|) · |d_a·q_a|` of one pair of rows.
fn magnitude(w: DType, k: usize, wr: &[u8], ar: &[u8]) -> f64 {
    let mut y = vec![0f32; k];
    dequantize_row(vec_dot_type(w), ar, &mut y).unwrap();
    weight_terms(w, k, wr).iter().zip(&y).map(|(a, b)| a * (*b as f64).abs()).sum()
}

/// A copy of `v` starting one byte past an aligned address, to catch aligned-load assumptions.
fn unaligned(v: &[u8]) -> (Vec<u8>, usize) {
    let mut buf = vec![0u8; v.len() + 1];
    buf[1..].copy_from_slice(v);
    (buf, 1)
}

/// Runs `t` on the rows with output stride `m + pad` and checks every element
/// against the scalar dot kernel, and that the padding stays untouched.
fn check(t: &TileKernel, k: usize, wr: &[Vec<u8>], ar: &[Vec<u8>], pad: usize) {
    let w = t.weight_type();
    let dot = dot_fn_scalar(w).unwrap();
    let (m, n) = (wr.len(), ar.len());
    let prepared: Vec<(Vec<u8>, usize)> = ar
        .iter()
        .map(|a| {
            let mut p = vec![0u8; t.prepared_row_size(k).unwrap()];
            t.prepare(a, &mut p).unwrap();
            unaligned(&p)
        })
        .collect();
    let wbuf: Vec<(Vec<u8>, usize)> = wr.iter().map(|r| unaligned(r)).collect();
    let wrows: Vec<&[u8]> = wbuf.iter().map(|(b, o)| &b[*o..]).collect();
    let arows: Vec<&[u8]> = prepared.iter().map(|(b, o)| &b[*o..]).collect();
    let stride = m + pad;
    const SENTINEL: f32 = -12345.5;
    let mut out = vec![SENTINEL; n * stride];
    t.run(k, &wrows, &arows, &mut out, stride).unwrap();
    for j in 0..n {
        for i in 0..stride {
            let got = out[j * stride + i];
            if i >= m {
                assert_eq!(got, SENTINEL, "{t:?} k={k} wrote padding ({i}, {j})");
                continue;
            }
            let want = dot.dot(k, &wr[i], &ar[j]).unwrap();
            if t.level() == SimdLevel::Scalar {
                assert_eq!(got.to_bits(), want.to_bits(), "{t:?} k={k} m={m} n={n} ({i}, {j}): {got} vs {want}");
            } else {
                let mag = magnitude(w, k, &wr[i], &ar[j]);
                assert!(
                    (got as f64 - want as f64).abs() <= REL_TOL * mag,
                    "{t:?} k={k} m={m} n={n} ({i}, {j}): {got} vs {want} (Σ|terms| {mag})"
                );
            }
        }
    }
}

fn kernels() -> Vec<TileKernel> {
    TYPES.iter().flat_map(|&w| SimdLevel::ALL.iter().filter_map(move |&l| tile_kernel_for(w, l))).collect()
}

#[test]
fn every_level_matches_the_scalar_dot_at_odd_sizes() {
    let ks = kernels();
    for l in SimdLevel::ALL {
        if l.is_supported() {
            assert!(ks.iter().any(|t| t.level() == l), "no tile kernel for supported level {l:?}");
        } else {
            eprintln!("skipped: {l:?} not supported here");
        }
    }
    let mut seed = 1;
    for t in &ks {
        let bs = t.weight_type().block_size();
        for k in [bs, 3 * bs, 4096 + bs] {
            for m in (1..=t.mr()).filter(|&m| k < 4096 || m == 1 || m == t.mr() || m == t.mr() - 1) {
                for n in [0, 1, 2, 3, 5, 8, 9, 13, 19, 37] {
                    if k > 4096 && ![1, 9, 37].contains(&n) {
                        continue;
                    }
                    seed += 1;
                    let (wr, ar) = rows(t.weight_type(), k, m, n, Kind::Realistic, false, seed);
                    check(t, k, &wr, &ar, (seed % 3) as usize);
                }
            }
        }
    }
}

#[test]
fn random_bytes_and_extremes() {
    for t in &kernels() {
        // AVX2's Q8_0 products share the dot kernels' -128 caveat
        let no_min = t.level() == SimdLevel::Avx2;
        for (s, kind) in [Kind::RandomBytes, Kind::Extreme].into_iter().enumerate() {
            let bs = t.weight_type().block_size();
            for &(k, m, n) in &[(bs, t.mr(), 11), (8 * bs, t.mr() - 1, 20), (1024 + 2 * bs, 3, 9)] {
                let (wr, ar) = rows(t.weight_type(), k, m, n, kind, no_min, 100 + s as u64 + k as u64);
                check(t, k, &wr, &ar, 1);
            }
        }
    }
}

#[test]
fn the_best_kernel_is_the_detected_level() {
    for w in TYPES {
        if w == DType::Q8_0 && SimdLevel::detect() == SimdLevel::Scalar {
            assert!(tile_kernel(w).is_none(), "Q8_0 has no scalar tile");
            continue;
        }
        let simd_only =
            matches!(w, DType::Q4_1 | DType::Q5_0 | DType::IQ4_NL) && SimdLevel::detect() == SimdLevel::Scalar;
        if simd_only || (w == DType::IQ4_XS && SimdLevel::detect() != SimdLevel::Avx512) {
            assert!(tile_kernel(w).is_none(), "{w} has no tile at this level");
            continue;
        }
        let t = tile_kernel(w).expect("Q4_0 and Q8_0 have tile kernels");
        assert_eq!((t.weight_type(), t.level()), (w, SimdLevel::detect()));
        assert!(t.min_rows() >= 1 && t.mr() >= 1);
    }
    assert!(tile_kernel_for(DType::Q8_0, SimdLevel::Scalar).is_none());
    for w in [DType::F32, DType::F16, DType::Q2_K, DType::Q3_K, DType::Q8_1] {
        assert!(tile_kernel(w).is_none(), "{w}");
    }
}

#[test]
fn zero_length_rows_give_zeros_and_no_rows_write_nothing() {
    for t in &kernels() {
        let mut out = vec![7f32; 6];
        t.run(0, &[&[]], &[&[], &[]], &mut out, 3).unwrap();
        assert_eq!(out, [0.0, 7.0, 7.0, 0.0, 7.0, 7.0]);
        let w = vec![0u8; t.weight_type().type_size()];
        t.run(t.weight_type().block_size(), &[&w], &[], &mut [], 1).unwrap();
    }
}

#[test]
fn prepare_checks_lengths() {
    let t = tile_kernel_for(DType::Q4_0, SimdLevel::Scalar).unwrap();
    assert_eq!(t.prepared_row_size(64), Some(80));
    assert_eq!(t.prepared_row_size(65), None);
    let a = vec![0u8; 68];
    assert!(t.prepare(&a, &mut [0u8; 80]).is_ok());
    assert!(t.prepare(&a, &mut [0u8; 81]).is_err());
    assert!(t.prepare(&a[..67], &mut [0u8; 80]).is_err());
    let t = tile_kernel_for(DType::Q4_K, SimdLevel::Scalar).unwrap();
    assert_eq!(t.prepared_row_size(512), Some(584));
    assert_eq!(t.prepared_row_size(64), None);
    let a = vec![3u8; 584];
    let mut out = vec![0u8; 584];
    assert!(t.prepare(&a, &mut out).is_ok());
    assert_eq!(out, a, "Q4_K's prepared rows are the Q8_K rows");
    assert!(t.prepare(&a, &mut out[1..]).is_err());
    assert!(t.prepare(&a[1..], &mut out[1..]).is_err());
}

#[test]
fn run_checks_lengths() {
    for t in kernels() {
        let w = t.weight_type();
        let k = 2 * w.block_size();
        let wr = vec![0u8; w.row_size(k as i64).unwrap()];
        let ar = vec![0u8; t.prepared_row_size(k).unwrap()];
        let mr = t.mr();
        let (wr, ar) = (&wr[..], &ar[..]);
        let many = vec![wr; mr + 1];
        type Case<'a> = (&'a str, Box<dyn Fn() -> rgml::Result<()> + 'a>);
        let cases: [Case; 7] = [
            ("k not whole blocks", Box::new(|| t.run(k - 16, &[wr], &[ar], &mut [0.0], 1))),
            ("short weight row", Box::new(|| t.run(k, &[&wr[1..]], &[ar], &mut [0.0], 1))),
            ("short activation row", Box::new(|| t.run(k, &[wr], &[&ar[1..]], &mut [0.0], 1))),
            ("short out", Box::new(|| t.run(k, &[wr, wr], &[ar, ar], &mut [0.0; 3], 2))),
            ("stride below rows", Box::new(|| t.run(k, &[wr, wr], &[ar, ar], &mut [0.0; 8], 1))),
            ("too many weight rows", Box::new(|| t.run(k, &many, &[ar], &mut vec![0.0; mr + 1], mr + 1))),
            ("no weight rows", Box::new(|| t.run(k, &[], &[ar], &mut [0.0; 1], 1))),
        ];
        for (what, f) in cases {
            assert!(matches!(f(), Err(rgml::Error::Shape { .. })), "{t:?}: no Error::Shape for {what}");
        }
        // the same arguments, right, run
        t.run(k, &[wr, wr], &[ar, ar], &mut [0.0; 4], 2).unwrap();
    }
}

/// `mul_mat` of `m` quantized weight rows (`cpy` from f32) with `n × batch`
/// activation rows, against `dot_fn_scalar` and `dot_fn` (this CPU's level,
/// what `mul_mat` runs without a tile) per element.
fn check_mul_mat(w: DType, k: usize, m: usize, n: usize, batch: i64, threads: usize) {
    let mut rng = Rng(k as u64 * 31 + m as u64 * 7 + n as u64);
    let (wv, xv) = (rng.vec(k * m, 1.0), rng.vec(k * n * batch as usize, 1.0));
    let mut ctx = Context::new();
    let wf = ctx.new_f32(&[k as i64, m as i64], &wv).unwrap();
    let q = ctx.new_tensor(w, &[k as i64, m as i64]).unwrap();
    let wq = ctx.cpy(wf, q).unwrap();
    let x = ctx.new_f32(&[k as i64, n as i64, batch], &xv).unwrap();
    let out = ctx.mul_mat(wq, x).unwrap();
    let g = Graph::build(&ctx, &[out]).unwrap();
    let st = CpuBackend::new(threads).unwrap().run(&ctx, &g).unwrap();
    let got = st.read_f32(&ctx, out).unwrap();
    let (dot, fast) = (dot_fn_scalar(w).unwrap(), dot_fn(w).unwrap());
    let wrows: Vec<Vec<u8>> = wv
        .chunks(k)
        .map(|r| {
            let mut q = vec![0u8; w.row_size(k as i64).unwrap()];
            quantize_row(w, r, &mut q).unwrap();
            q
        })
        .collect();
    for (r, xr) in xv.chunks(k).enumerate() {
        let mut a = vec![0u8; vec_dot_type(w).row_size(k as i64).unwrap()];
        quantize_activations(w, xr, &mut a).unwrap();
        for (i, wr) in wrows.iter().enumerate() {
            let g = got[r * m + i];
            let mag = magnitude(w, k, wr, &a);
            for want in [dot.dot(k, wr, &a).unwrap(), fast.dot(k, wr, &a).unwrap()] {
                assert!(
                    (g as f64 - want as f64).abs() <= REL_TOL * mag,
                    "{w} k={k} m={m} n={n} threads={threads} ({i}, {r}): {g} vs {want}"
                );
            }
        }
    }
}

#[test]
fn mul_mat_at_sizes_that_do_not_fill_tiles() {
    check_mul_mat(DType::Q4_0, 4096 + 32, 20, 5, 1, 2);
    for w in TYPES {
        let bs = w.block_size();
        for &(k, m, n, batch) in &[(bs, 1, 1, 1), (3 * bs, 37, 13, 1), (2 * bs, 17, 131, 1), (5 * bs, 33, 9, 2)] {
            for threads in [1, 2] {
                check_mul_mat(w, k, m, n, batch, threads);
            }
        }
    }
}

#[test]
fn mul_mat_from_min_rows_equals_the_dot_path() {
    for w in TYPES {
        let Some(t) = tile_kernel(w) else { continue };
        let (bs, lo) = (w.block_size(), t.min_rows());
        // the first batches that take the tile, one that fills a register group
        // and leaves a rest, and weight rows that leave a partial tile
        for &(k, m, n) in &[(2 * bs, t.mr() + 3, lo), (3 * bs, 2 * t.mr() - 1, lo + 1), (5 * bs, 21, 4 * lo + 7)] {
            check_mul_mat(w, k, m, n, 1, 2);
        }
    }
}

/// A row's results do not depend on the rows beside it: every kernel, at
/// every level this CPU has, gives activation row 0 alone (its one-row path)
/// exactly the bits it gives row 0 among 2..=9 and 37 rows (its register
/// groups), at 1 block, 33 (past a chunk, where Q4_1 adds its min terms) and
/// the k-quants' 17 super-blocks; full and partial groups of weight rows.
#[test]
fn a_row_alone_gets_the_bits_it_gets_among_others() {
    for t in &kernels() {
        let bs = t.weight_type().block_size();
        for k in [bs, 33 * bs, 17 * 256].into_iter().filter(|k| k % bs == 0) {
            for m in [1, t.mr()] {
                let (wr, ar) = rows(t.weight_type(), k, m, 37, Kind::Realistic, false, (k + m) as u64);
                let prepared: Vec<Vec<u8>> = ar
                    .iter()
                    .map(|a| {
                        let mut p = vec![0u8; t.prepared_row_size(k).unwrap()];
                        t.prepare(a, &mut p).unwrap();
                        p
                    })
                    .collect();
                let wrows: Vec<&[u8]> = wr.iter().map(|r| &r[..]).collect();
                let arows: Vec<&[u8]> = prepared.iter().map(|p| &p[..]).collect();
                let bits = |n: usize| {
                    let mut out = vec![0f32; n * m];
                    t.run(k, &wrows, &arows[..n], &mut out, m).unwrap();
                    out[..m].iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                };
                let alone = bits(1);
                for n in [2, 3, 4, 5, 8, 9, 37] {
                    assert_eq!(bits(n), alone, "{t:?} k={k} m={m}: row 0 among {n} rows");
                }
            }
        }
    }
}
