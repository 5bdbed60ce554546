//! CUDA `mul_mat` against the CPU backend for every weight type, at odd sizes
//! (K whole blocks but not a multiple of 256 where the type allows, M a
//! multiple of no tile, N = 1, 3, 8, 9, 40 across the dot kernels' 8-row
//! tiles), broadcast batches, transposed activations, strided weights and F16
//! activations; and the device's activation quantization against the CPU's
//! bytes. Without a device the CUDA half prints `SKIP: …` and passes
//! (`RGML_REQUIRE_CUDA=1` makes it a failure).
//!
//! # Tolerance
//! `|cuda - cpu| ≤ 2e-5 · Σ_k |w_k|·|x_k|` (weights as stored, activations in
//! f32). Both backends compute the same terms exactly: for block types the
//! same quantized activations (checked byte for byte below), the same exact
//! integer dot per block and the same f32 scaling ops per block; for F16/BF16
//! exact products of 16-bit values. They differ only in the order of the f32
//! sum over blocks (the CPU's SIMD lanes, the GPU's per-thread sums and tree;
//! cuBLAS's own order), an error below `(lanes + log2 terms)·2⁻²⁴·Σ|terms|`,
//! about 1e-6 here. 2e-5 leaves room for cuBLAS's split-K orders yet is far
//! below what a wrong quant, scale or broadcast index produces.
//!
//! Batches that take the dequantized F16 GEMM (`CudaBackend::with_dequant_gemm`)
//! are checked against the exact product of the stored weights and the f32
//! activations instead: `|cuda - exact| ≤ 2e-3 · Σ|terms|`. Rounding both
//! factors to F16 (2⁻¹¹ relative each) moves each term by at most about
//! 2⁻¹⁰ of itself, 1e-3; the sum's order adds nothing visible. The other
//! cases run with that GEMM off, so they test the dot kernels.

#![cfg(feature = "cuda")]

mod common;
use common::cuda;
use rgml::quant::{self, dot};
use rgml::{Context, CpuBackend, CudaBackend, DType, Graph};

fn vals(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The weight types the CUDA backend multiplies (the first 13 of
/// `dot::WEIGHT_TYPES`; the later ones are refused, see `tests/cuda_quant.rs`).
const TYPES: [DType; 13] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
    DType::Q2_K,
    DType::Q3_K,
    DType::Q4_K,
    DType::Q5_K,
    DType::Q6_K,
];

/// The weight types CUDA multiplies without dot kernels: through the
/// dequantized F16 GEMM at every batch size.
fn gemm_only(t: DType) -> bool {
    t.is_quantized() && !TYPES.contains(&t)
}

#[test]
fn the_cuda_weight_types_lead_the_cpu_list() {
    assert_eq!(TYPES[..], dot::WEIGHT_TYPES[..TYPES.len()]);
    for &t in &dot::WEIGHT_TYPES[TYPES.len()..] {
        assert_eq!(CudaBackend::handles(t), gemm_only(t), "{t}");
    }
}

#[test]
fn weights_without_dot_kernels_take_the_f16_gemm_at_every_batch() {
    let gpu = cuda();
    for wt in dot::WEIGHT_TYPES.into_iter().filter(|&t| gemm_only(t)) {
        // the dot kernels' switch off: these types take the GEMM regardless
        check(gpu.as_ref(), &Case { gemm: true, ..Case::new(wt, 1) });
        check(gpu.as_ref(), &Case { gemm: true, ..Case::new(wt, 5) });
        check(gpu.as_ref(), &Case { gemm: true, f16_b: true, ..Case::new(wt, 33) });
        check(gpu.as_ref(), &Case { gemm: true, transposed_b: true, strided_a: true, ..Case::new(wt, 3) });
        check(gpu.as_ref(), &Case { gemm: true, ratio: [2, 1], ..Case::new(wt, 2) });
    }
}

/// A K for `wt`: whole blocks, and not a multiple of 256 where the type allows.
fn odd_k(wt: DType) -> usize {
    match wt.block_size() {
        256 => 768,
        32 => 416,
        _ => 200,
    }
}

/// `rows` rows of `k` values stored as `wt`, and the stored values back in f32.
fn weights(wt: DType, k: usize, rows: usize, seed: u64) -> (Vec<u8>, Vec<f32>) {
    let v = vals(k * rows, seed);
    let rs = wt.row_size(k as i64).unwrap();
    let (mut bytes, mut back) = (vec![0u8; rs * rows], vec![0f32; k * rows]);
    let mut rng = common::Rng(seed | 1);
    for ((src, q), d) in v.chunks(k).zip(bytes.chunks_mut(rs)).zip(back.chunks_mut(k)) {
        if quant::quantize_row(wt, src, q).is_err() {
            // no quantizer (the grid i-quants): random blocks
            q.copy_from_slice(&common::blocks::random_blocks(wt, rs / wt.type_size(), || rng.next()));
        }
        quant::dequantize_row(wt, q, d).unwrap();
    }
    (bytes, back)
}

struct Case {
    wt: DType,
    k: usize,
    m: usize,
    n: usize,
    /// a's (ne2, ne3) and b's ratio over them
    batch: [i64; 2],
    ratio: [i64; 2],
    transposed_b: bool,
    /// weights as every other row of a 2m-row tensor
    strided_a: bool,
    f16_b: bool,
    /// block-type weights through the dequantized F16 GEMM (else the dot kernels)
    gemm: bool,
}

impl Case {
    fn new(wt: DType, n: usize) -> Case {
        Case {
            wt,
            k: odd_k(wt),
            m: 37,
            n,
            batch: [1, 1],
            ratio: [1, 1],
            transposed_b: false,
            strided_a: false,
            f16_b: false,
            gemm: false,
        }
    }
}

/// Runs `c` on the CPU and (when present) the GPU and compares.
fn check(gpu: Option<&CudaBackend>, c: &Case) {
    let (k, m, n) = (c.k, c.m, c.n);
    let (a2, a3) = (c.batch[0], c.batch[1]);
    let (b2, b3) = (a2 * c.ratio[0], a3 * c.ratio[1]);
    let mats = (a2 * a3) as usize;
    let arows = if c.strided_a { 2 * m } else { m };
    let (abytes, aw) = weights(c.wt, k, arows * mats, 7 + k as u64 + m as u64);
    let bv = vals(k * n * (b2 * b3) as usize, 3 + n as u64);
    let mut ctx = Context::new();
    let full = ctx.new_tensor(c.wt, &[k as i64, arows as i64, a2, a3]).unwrap();
    ctx.set_bytes(full, &abytes).unwrap();
    let a = if c.strided_a {
        let rs = c.wt.row_size(k as i64).unwrap();
        ctx.view_4d(full, [k as i64, m as i64, a2, a3], [2 * rs, arows * rs, arows * rs * a2 as usize], rs).unwrap()
    } else {
        full
    };
    let b = if c.transposed_b {
        let bt: Vec<f32> = (0..(b2 * b3) as usize)
            .flat_map(|bb| {
                let bv = &bv;
                (0..k).flat_map(move |kk| (0..n).map(move |j| bv[bb * k * n + j * k + kk]))
            })
            .collect();
        let t = ctx.new_f32(&[n as i64, k as i64, b2, b3], &bt).unwrap();
        ctx.transpose(t).unwrap()
    } else if c.f16_b {
        let t = ctx.new_tensor(DType::F16, &[k as i64, n as i64, b2, b3]).unwrap();
        let h: Vec<u16> = bv.iter().map(|&x| quant::f32_to_f16(x)).collect();
        ctx.set_bytes(t, bytemuck_bytes(&h)).unwrap();
        t
    } else {
        ctx.new_f32(&[k as i64, n as i64, b2, b3], &bv).unwrap()
    };
    let out = ctx.mul_mat(a, b).unwrap();
    let g = Graph::build(&ctx, &[out]).unwrap();
    let want = CpuBackend::new(2).unwrap().run(&ctx, &g).unwrap().read_f32(&ctx, out).unwrap();
    let Some(gpu) = gpu else { return };
    let dots = !gemm_only(c.wt);
    let gpu = gpu.clone().with_dequant_gemm(if c.gemm && dots { Some(1) } else { None });
    let name = format!(
        "{:?} k={k} m={m} n={n} batch={:?}x{:?} tb={} sa={} f16b={} gemm={}",
        c.wt, c.batch, c.ratio, c.transposed_b, c.strided_a, c.f16_b, c.gemm
    );
    let st = gpu.run(&ctx, &g).unwrap_or_else(|e| panic!("{name}: CUDA run failed: {e}"));
    let got = st.read_f32(&ctx, out).unwrap();
    assert_eq!(got.len(), want.len(), "{name}");
    let row = |i0: usize, i2: usize, i3: usize| {
        let mat = (i3 / c.ratio[1] as usize) * a2 as usize + i2 / c.ratio[0] as usize;
        let r = mat * arows + if c.strided_a { 2 * i0 + 1 } else { i0 };
        &aw[r * k..(r + 1) * k]
    };
    let mut worst = 0f64;
    for i3 in 0..b3 as usize {
        for i2 in 0..b2 as usize {
            for i1 in 0..n {
                let x = &bv[((i3 * b2 as usize + i2) * n + i1) * k..][..k];
                for i0 in 0..m {
                    let at = ((i3 * b2 as usize + i2) * n + i1) * m + i0;
                    let w = row(i0, i2, i3);
                    let mag: f64 = w.iter().zip(x).map(|(w, v)| f64::from((w * v).abs())).sum();
                    let (err, tol) = if c.gemm {
                        let exact: f64 = w.iter().zip(x).map(|(&w, &v)| f64::from(w) * f64::from(v)).sum();
                        ((f64::from(got[at]) - exact).abs(), 2e-3)
                    } else {
                        (f64::from((got[at] - want[at]).abs()), 2e-5)
                    };
                    assert!(
                        err <= tol * mag + 1e-30,
                        "{name}: [{i0},{i1},{i2},{i3}] cuda {} vs cpu {} (Σ|terms| {mag})",
                        got[at],
                        want[at]
                    );
                    worst = worst.max(err / mag.max(1e-30));
                }
            }
        }
    }
    println!("ok: {name} (worst error {worst:.2e} of Σ|terms|)");
}

fn bytemuck_bytes(h: &[u16]) -> &[u8] {
    // SAFETY: u16 has no padding and u8 alignment is 1; the length covers h exactly.
    unsafe { std::slice::from_raw_parts(h.as_ptr().cast::<u8>(), std::mem::size_of_val(h)) }
}

#[test]
fn every_weight_type_every_tile_shape() {
    let gpu = cuda();
    for wt in TYPES {
        for n in [1, 3, 8, 9, 40] {
            check(gpu.as_ref(), &Case::new(wt, n));
        }
    }
}

#[test]
fn broadcast_batches_and_transposed_activations() {
    let gpu = cuda();
    for wt in TYPES {
        for n in [1, 9] {
            check(gpu.as_ref(), &Case { batch: [2, 1], ratio: [3, 2], ..Case::new(wt, n) });
            check(gpu.as_ref(), &Case { batch: [1, 2], ratio: [2, 1], transposed_b: true, ..Case::new(wt, n) });
        }
    }
}

#[test]
fn strided_weights_f16_activations_and_small_k() {
    let gpu = cuda();
    for wt in TYPES {
        check(gpu.as_ref(), &Case { strided_a: true, ..Case::new(wt, 3) });
        check(gpu.as_ref(), &Case { f16_b: true, ..Case::new(wt, 9) });
        // one block per row (one super-block for the k-quants)
        check(gpu.as_ref(), &Case { k: wt.block_size().max(32), m: 5, ..Case::new(wt, 2) });
    }
}

/// Batches of activation rows through the dequantized F16 weights and cuBLAS,
/// for every block type: plain, F16 and transposed activations, strided
/// weights, K one block; weights broadcast over batches stay on the dot kernels.
#[test]
fn large_batches_take_the_dequantized_f16_gemm() {
    let gpu = cuda();
    for wt in TYPES.into_iter().filter(|t| t.is_quantized()) {
        let g = |c: Case| Case { gemm: true, ..c };
        check(gpu.as_ref(), &g(Case::new(wt, 40)));
        check(gpu.as_ref(), &g(Case { f16_b: true, ..Case::new(wt, 33) }));
        check(gpu.as_ref(), &g(Case { transposed_b: true, strided_a: true, ..Case::new(wt, 35) }));
        check(gpu.as_ref(), &g(Case { k: wt.block_size().max(32), m: 5, ..Case::new(wt, 64) }));
        check(gpu.as_ref(), &g(Case { batch: [2, 1], ratio: [1, 2], ..Case::new(wt, 20) }));
    }
}

/// Activations with ties, zero blocks, tiny and huge values (all finite).
fn nasty_finite(n: usize, seed: u64) -> Vec<f32> {
    let v = vals(n, seed);
    v.iter()
        .enumerate()
        .map(|(i, &x)| match (i / 32) % 6 {
            0 => 0.0,
            1 => (x * 8.0).round() / 8.0 * 127.0,
            2 => x * 1e-30,
            3 => x * 3e30,
            _ => x,
        })
        .collect()
}

#[test]
fn activation_quantization_matches_the_cpu_bytes() {
    let Some(gpu) = cuda() else { return };
    for wt in TYPES.into_iter().filter(|t| t.is_quantized()) {
        let pt = dot::vec_dot_type(wt);
        let k = 768;
        let x = nasty_finite(3 * k, wt as u64 + 5);
        let mut want = vec![0u8; 3 * pt.row_size(k as i64).unwrap()];
        for (src, dst) in x.chunks(k).zip(want.chunks_mut(pt.row_size(k as i64).unwrap())) {
            dot::quantize_activations(wt, src, dst).unwrap();
        }
        let got = gpu.quantize_activations(wt, &x, k).unwrap();
        assert_eq!(got, want, "{wt:?} → {pt:?}");
        // non-finite values: the quants (and Q8_K's bytes) match; f16 NaN payloads may not
        let mut y = vals(3 * k, 99);
        for (i, v) in y.iter_mut().enumerate() {
            match i % 97 {
                0 => *v = f32::NAN,
                1 => *v = f32::INFINITY,
                2 => *v = -f32::INFINITY,
                _ => {}
            }
        }
        let mut want = vec![0u8; want.len()];
        for (src, dst) in y.chunks(k).zip(want.chunks_mut(pt.row_size(k as i64).unwrap())) {
            dot::quantize_activations(wt, src, dst).unwrap();
        }
        let got = gpu.quantize_activations(wt, &y, k).unwrap();
        if pt == DType::Q8_K {
            assert_eq!(got, want, "{wt:?}: non-finite");
            continue;
        }
        let bs = pt.type_size();
        let head = bs - 32;
        for (g, w) in got.chunks(bs).zip(want.chunks(bs)) {
            assert_eq!(g[head..], w[head..], "{wt:?}: non-finite quants");
            for f in 0..head / 2 {
                let (hg, hw) = (
                    quant::f16_to_f32(u16::from_le_bytes([g[2 * f], g[2 * f + 1]])),
                    quant::f16_to_f32(u16::from_le_bytes([w[2 * f], w[2 * f + 1]])),
                );
                assert!(hg == hw || (hg.is_nan() && hw.is_nan()), "{wt:?}: field {f}: {hg} vs {hw}");
            }
        }
    }
    println!("ok: activation quantization on {gpu:?}");
}

#[test]
fn quantize_activations_rejects_bad_input() {
    let Some(gpu) = cuda() else { return };
    assert!(gpu.quantize_activations(DType::F16, &[0.0; 32], 32).is_err());
    assert!(gpu.quantize_activations(DType::Q4_0, &[0.0; 48], 48).is_err());
    assert!(gpu.quantize_activations(DType::Q4_K, &[0.0; 64], 32).is_err());
    assert!(gpu.quantize_activations(DType::Q4_0, &[0.0; 33], 32).is_err());
}

/// The staged dot kernels (taken when every weight row and activation row is
/// aligned for their vector copies: K a multiple of 256 for the legacy
/// types, 1024 for the k-quants) against the CPU: legacy types with a last
/// partial 32-unit chunk (K = 1280: 40 units; 4352: 136), k-quants with warps
/// that have no chunk (K = 1024: 32 units; 5120: 160), broadcast batches and
/// strided weights; and against the generic kernel
/// (`CudaBackend::with_staged_mmvq(false)`): the two compute the same sums in
/// the same order, so the results must be the same bits.
#[test]
fn staged_dot_kernels_match_the_cpu_and_the_generic_ones() {
    let gpu = cuda();
    let ks = |wt: DType| if wt.block_size() == 256 { [1024, 5120] } else { [1280, 4352] };
    let quantized: Vec<DType> = TYPES.into_iter().filter(|t| t.is_quantized()).collect();
    for &wt in &quantized {
        let [k0, k1] = ks(wt);
        check(gpu.as_ref(), &Case { k: k0, ..Case::new(wt, 1) });
        check(gpu.as_ref(), &Case { k: k1, ..Case::new(wt, 9) });
        check(gpu.as_ref(), &Case { k: k1, batch: [2, 1], ratio: [3, 2], ..Case::new(wt, 3) });
        check(gpu.as_ref(), &Case { k: k0, strided_a: true, ..Case::new(wt, 3) });
    }
    let Some(gpu) = gpu else { return };
    let generic = gpu.clone().with_staged_mmvq(false);
    for (wt, n) in quantized.iter().flat_map(|&wt| [(wt, 1usize), (wt, 9)]) {
        let (k, m) = (ks(wt)[1], 37usize);
        let (bytes, _) = weights(wt, k, m, 91);
        let mut ctx = Context::new();
        let w = ctx.new_tensor(wt, &[k as i64, m as i64]).unwrap();
        ctx.set_bytes(w, &bytes).unwrap();
        let x = ctx.new_f32(&[k as i64, n as i64], &vals(k * n, 92)).unwrap();
        let out = ctx.mul_mat(w, x).unwrap();
        let g = Graph::build(&ctx, &[out]).unwrap();
        let bits = |be: &CudaBackend| {
            let st = be.run(&ctx, &g).unwrap();
            st.read_f32(&ctx, out).unwrap().iter().map(|v| v.to_bits()).collect::<Vec<u32>>()
        };
        assert_eq!(bits(&gpu), bits(&generic), "{wt:?} n={n}: staged and generic kernels differ");
    }
}
