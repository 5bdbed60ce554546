//! The register-tiled kernels of `rgml::quant::tile`:
//! - every level this CPU supports against `quant::dot::dot_fn_scalar`, per
//!   element, at odd sizes (k = 32, 96, 4128; weight rows 1..=mr; activation
//!   rows 0..=19 and 37), on realistic, random-byte and extreme rows, with
//!   unaligned slices and an output stride wider than the tile; the scalar
//!   tiles bit for bit;
//! - that a call writes only its `out[j * stride + i]` elements;
//! - the length checks and `prepare`'s errors;
//! - `mul_mat` through the public graph API (weights quantized by `cpy`) at
//!   sizes that do not fill the tiles, against a per-element reference from
//!   `dot_fn_scalar` on `quantize_activations` output.
//!
//! Tolerance: `|got - want| ≤ 1e-5 · Σ|terms|`, `Σ|terms|` the f64 sum of
//! `|d_w·q_w| · |d_a·q_a|`: the integer parts are exact, only the f32 scaling
//! and summing of the blocks may round differently.

use rgml::quant::dot::{dot_fn_scalar, quantize_activations, vec_dot_type, SimdLevel};
use rgml::quant::tile::{tile_kernel, tile_kernel_for, TileKernel, PREPARED_BLOCK};
use rgml::quant::{dequantize_row, quantize_row};
use rgml::{Context, CpuBackend, DType, Graph};

const TYPES: [DType; 2] = [DType::Q4_0, DType::Q8_0];
const REL_TOL: f64 = 1e-5;

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn f32(&mut self) -> f32 {
        ((self.u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    fn vals(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// Quantized random floats.
    Realistic,
    /// Random quant bytes with random (finite) scales.
    RandomBytes,
    /// Every quant at an extreme, large scales.
    Extreme,
}

/// Overwrites the quants of every block (`bytes` per block, quants after the
/// 2-byte f16 scale) per `kind`; `no_min` keeps Q8 quants off `-128`.
fn mangle(row: &mut [u8], bytes: usize, kind: Kind, no_min: bool, rng: &mut Rng) {
    for blk in row.chunks_exact_mut(bytes) {
        match kind {
            Kind::Realistic => return,
            Kind::RandomBytes => {
                let d = half::f16::from_f32(rng.f32() * 4.0).to_bits();
                blk[..2].copy_from_slice(&d.to_le_bytes());
                blk[2..].iter_mut().for_each(|q| *q = rng.u64() as u8);
            }
            Kind::Extreme => {
                let d = half::f16::from_f32(if rng.u64() & 1 == 0 { 60000.0 } else { -3.0e4 }).to_bits();
                blk[..2].copy_from_slice(&d.to_le_bytes());
                let ext = if rng.u64() & 1 == 0 { 0x80 } else { 0x7f };
                blk[2..].iter_mut().for_each(|q| *q = if bytes == 18 { 0xff * (ext >> 7) } else { ext });
            }
        }
        if no_min && bytes == 34 {
            blk[2..].iter_mut().for_each(|q| *q = if *q == 0x80 { 0x81 } else { *q });
        }
    }
}

/// `m` weight rows and `n` activation rows (Q8_0 bytes) of `k` values.
fn rows(w: DType, k: usize, m: usize, n: usize, kind: Kind, no_min: bool, seed: u64) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut rng = Rng(seed);
    let pt = vec_dot_type(w);
    let wr = (0..m)
        .map(|_| {
            let mut q = vec![0u8; w.row_size(k as i64).unwrap()];
            quantize_row(w, &rng.vals(k), &mut q).unwrap();
            mangle(&mut q, w.type_size(), kind, no_min, &mut rng);
            q
        })
        .collect();
    let ar = (0..n)
        .map(|_| {
            let mut q = vec![0u8; pt.row_size(k as i64).unwrap()];
            quantize_activations(w, &rng.vals(k), &mut q).unwrap();
            mangle(&mut q, pt.type_size(), kind, no_min, &mut rng);
            q
        })
        .collect();
    (wr, ar)
}

/// `Σ|d_w·q_w| · |d_a·q_a|` of one pair of rows.
fn magnitude(w: DType, k: usize, wr: &[u8], ar: &[u8]) -> f64 {
    let (mut x, mut y) = (vec![0f32; k], vec![0f32; k]);
    dequantize_row(w, wr, &mut x).unwrap();
    dequantize_row(vec_dot_type(w), ar, &mut y).unwrap();
    x.iter().zip(&y).map(|(a, b)| (*a as f64 * *b as f64).abs()).sum()
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
    t.run(k, &wrows, &arows, &mut out, stride);
    for j in 0..n {
        for i in 0..stride {
            let got = out[j * stride + i];
            if i >= m {
                assert_eq!(got, SENTINEL, "{t:?} k={k} wrote padding ({i}, {j})");
                continue;
            }
            let want = dot(k, &wr[i], &ar[j]);
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
        for k in [32, 96, 4096 + 32] {
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
            for &(k, m, n) in &[(32, t.mr(), 11), (256, t.mr() - 1, 20), (1024 + 64, 3, 9)] {
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
        let t = tile_kernel(w).expect("Q4_0 and Q8_0 have tile kernels");
        assert_eq!((t.weight_type(), t.level()), (w, SimdLevel::detect()));
        assert!(t.min_rows() >= 1 && t.mr() >= 1);
    }
    assert!(tile_kernel_for(DType::Q8_0, SimdLevel::Scalar).is_none());
    for w in [DType::F32, DType::F16, DType::Q4_1, DType::Q5_0, DType::Q4_K, DType::Q6_K, DType::Q8_1] {
        assert!(tile_kernel(w).is_none(), "{w}");
    }
}

#[test]
fn zero_length_rows_give_zeros_and_no_rows_write_nothing() {
    for t in &kernels() {
        let mut out = vec![7f32; 6];
        t.run(0, &[&[]], &[&[], &[]], &mut out, 3);
        assert_eq!(out, [0.0, 7.0, 7.0, 0.0, 7.0, 7.0]);
        let w = vec![0u8; t.weight_type().type_size()];
        t.run(32, &[&w], &[], &mut [], 1);
    }
}

#[test]
fn prepare_checks_lengths() {
    let t = tile_kernel(DType::Q4_0).unwrap();
    assert_eq!(t.prepared_row_size(64), Some(2 * PREPARED_BLOCK));
    assert_eq!(t.prepared_row_size(65), None);
    let a = vec![0u8; 68];
    assert!(t.prepare(&a, &mut [0u8; 80]).is_ok());
    assert!(t.prepare(&a, &mut [0u8; 81]).is_err());
    assert!(t.prepare(&a[..67], &mut [0u8; 80]).is_err());
}

/// Calls `run` with one of its arguments wrong, expecting a panic.
fn expect_panic(what: &str, f: impl FnOnce() + std::panic::UnwindSafe) {
    assert!(std::panic::catch_unwind(f).is_err(), "no panic for {what}");
}

#[test]
fn run_checks_lengths() {
    for t in kernels() {
        let w = t.weight_type();
        let wr = vec![0u8; w.row_size(64).unwrap()];
        let ar = vec![0u8; 2 * PREPARED_BLOCK];
        let mr = t.mr();
        expect_panic("k not whole blocks", move || t.run(48, &[&wr], &[&ar], &mut [0.0], 1));
        let (wr, ar) = (vec![0u8; w.row_size(64).unwrap()], vec![0u8; 2 * PREPARED_BLOCK]);
        expect_panic("short weight row", move || t.run(64, &[&wr[1..]], &[&ar], &mut [0.0], 1));
        let (wr, ar) = (vec![0u8; w.row_size(64).unwrap()], vec![0u8; 2 * PREPARED_BLOCK]);
        expect_panic("short activation row", move || t.run(64, &[&wr], &[&ar[1..]], &mut [0.0], 1));
        let (wr, ar) = (vec![0u8; w.row_size(64).unwrap()], vec![0u8; 2 * PREPARED_BLOCK]);
        expect_panic("short out", move || t.run(64, &[&wr, &wr], &[&ar, &ar], &mut [0.0; 3], 2));
        let (wr, ar) = (vec![0u8; w.row_size(64).unwrap()], vec![0u8; 2 * PREPARED_BLOCK]);
        expect_panic("stride below rows", move || t.run(64, &[&wr, &wr], &[&ar, &ar], &mut [0.0; 8], 1));
        let (wr, ar) = (vec![0u8; w.row_size(64).unwrap()], vec![0u8; 2 * PREPARED_BLOCK]);
        let many: Vec<&[u8]> = vec![&wr; mr + 1];
        let r = std::panic::catch_unwind(|| t.run(64, &many, &[&ar], &mut vec![0.0; mr + 1], mr + 1));
        assert!(r.is_err(), "no panic for too many weight rows");
        let r = std::panic::catch_unwind(|| t.run(64, &[], &[&ar], &mut [0.0; 1], 1));
        assert!(r.is_err(), "no panic for no weight rows");
    }
}

/// `mul_mat` of `m` quantized weight rows (`cpy` from f32) with `n × batch`
/// activation rows, against `dot_fn_scalar` per element.
fn check_mul_mat(w: DType, k: usize, m: usize, n: usize, batch: i64, threads: usize) {
    let mut rng = Rng(k as u64 * 31 + m as u64 * 7 + n as u64);
    let (wv, xv) = (rng.vals(k * m), rng.vals(k * n * batch as usize));
    let mut ctx = Context::new();
    let wf = ctx.new_f32(&[k as i64, m as i64], &wv).unwrap();
    let q = ctx.new_tensor(w, &[k as i64, m as i64]).unwrap();
    let wq = ctx.cpy(wf, q).unwrap();
    let x = ctx.new_f32(&[k as i64, n as i64, batch], &xv).unwrap();
    let out = ctx.mul_mat(wq, x).unwrap();
    let g = Graph::build(&ctx, &[out]).unwrap();
    let st = CpuBackend::new(threads).unwrap().run(&ctx, &g).unwrap();
    let got = st.read_f32(&ctx, out).unwrap();
    let dot = dot_fn_scalar(w).unwrap();
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
            let (want, g) = (dot(k, wr, &a), got[r * m + i]);
            let mag = magnitude(w, k, wr, &a);
            assert!(
                (g as f64 - want as f64).abs() <= REL_TOL * mag,
                "{w} k={k} m={m} n={n} threads={threads} ({i}, {r}): {g} vs {want}"
            );
        }
    }
}

#[test]
fn mul_mat_at_sizes_that_do_not_fill_tiles() {
    for w in TYPES {
        for &(k, m, n, batch) in &[(32, 1, 1, 1), (96, 37, 13, 1), (64, 17, 131, 1), (160, 33, 9, 2), (4128, 20, 5, 1)]
        {
            for threads in [1, 2] {
                check_mul_mat(w, k, m, n, batch, threads);
            }
        }
    }
}
