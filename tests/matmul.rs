//! `mul_mat` on every path: the per-row dot kernels (small batches, every
//! weight type), the register-tiled kernels (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K
//! from a few rows) and the blocked GEMM (F32 weights, batches from 32 rows, or
//! from half the row length for rows of 256 values or more),
//! against an f64 reference built from the dequantized weights and the
//! activations rounded the way ggml rounds them (to the weight's dot partner).
//! The i-quants, which have no quantizer, multiply random valid blocks.

mod common;

use rgml::quant::{self, dot};
use rgml::{Context, CpuBackend, DType, Graph};

use common::as_partner;

fn vals(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn check(wt: DType, k: usize, m: usize, n: usize, batch: [i64; 2], ratio: [i64; 2], transposed_b: bool) {
    let (a2, a3) = (batch[0], batch[1]);
    let (b2, b3) = (a2 * ratio[0], a3 * ratio[1]);
    let na = k * m * (a2 * a3) as usize;
    let nb = k * n * (b2 * b3) as usize;
    let (av, bv) = (vals(na, 1 + k as u64), vals(nb, 2 + n as u64));
    let mut ctx = Context::new();
    let af = ctx.new_f32(&[k as i64, m as i64, a2, a3], &av).unwrap();
    // the i-quants: random valid blocks as the weights
    let random = (!quant::has_quantizer(wt)).then(|| {
        let mut rng = common::Rng(k as u64 * 31 + m as u64);
        common::blocks::random_blocks(wt, na / wt.block_size(), || rng.next())
    });
    let a = match &random {
        _ if wt == DType::F32 => af,
        Some(bytes) => {
            let q = ctx.new_tensor(wt, &[k as i64, m as i64, a2, a3]).unwrap();
            ctx.set_bytes(q, bytes).unwrap();
            q
        }
        None => {
            let q = ctx.new_tensor(wt, &[k as i64, m as i64, a2, a3]).unwrap();
            ctx.cpy(af, q).unwrap()
        }
    };
    let b = if transposed_b {
        // b stored as [n, k] per batch and transposed: rows of b are strided
        let bt: Vec<f32> = (0..(b2 * b3) as usize)
            .flat_map(|bb| {
                let base = bb * k * n;
                let bv = &bv;
                (0..k).flat_map(move |kk| (0..n).map(move |j| bv[base + j * k + kk]))
            })
            .collect();
        let t = ctx.new_f32(&[n as i64, k as i64, b2, b3], &bt).unwrap();
        ctx.transpose(t).unwrap()
    } else {
        ctx.new_f32(&[k as i64, n as i64, b2, b3], &bv).unwrap()
    };
    let out = ctx.mul_mat(a, b).unwrap();
    let g = Graph::build(&ctx, &[out]).unwrap();
    let st = CpuBackend::new(2).unwrap().with_poison(true).run(&ctx, &g).unwrap();
    let got = st.read_f32(&ctx, out).unwrap();
    // reference: weights as stored, activations as ggml rounds them (F32 GEMM: unrounded)
    let aw: Vec<f32> = if wt == DType::F32 {
        av.clone()
    } else if let Some(bytes) = &random {
        let mut d = vec![0f32; na];
        let rs = wt.row_size(k as i64).unwrap();
        for (src, dst) in bytes.chunks(rs).zip(d.chunks_mut(k)) {
            quant::dequantize_row(wt, src, dst).unwrap();
        }
        d
    } else {
        let mut d = vec![0f32; na];
        let mut q = vec![0u8; wt.row_size(k as i64).unwrap()];
        for (src, dst) in av.chunks(k).zip(d.chunks_mut(k)) {
            quant::quantize_row(wt, src, &mut q).unwrap();
            quant::dequantize_row(wt, &q, dst).unwrap();
        }
        d
    };
    let bw = as_partner(wt, &bv, k);
    for i3 in 0..b3 as usize {
        for i2 in 0..b2 as usize {
            for i1 in 0..n {
                for i0 in 0..m {
                    let ab = ((i3 / ratio[1] as usize) * a2 as usize + i2 / ratio[0] as usize) * m + i0;
                    let bb = (i3 * b2 as usize + i2) * n + i1;
                    let (mut s, mut mag) = (0f64, 0f64);
                    for kk in 0..k {
                        let p = aw[ab * k + kk] as f64 * bw[bb * k + kk] as f64;
                        s += p;
                        mag += p.abs();
                    }
                    let g = got[((i3 * b2 as usize + i2) * n + i1) * m + i0] as f64;
                    // Q4_1/Q5_1 use Q8_1's stored f16 sum (of the unrounded scale), not Σ d·q
                    let tol = if matches!(wt, DType::Q4_1 | DType::Q5_1) { 2e-3 } else { 1e-5 };
                    assert!(
                        (g - s).abs() <= tol * mag + 1e-6,
                        "{wt} k={k} m={m} n={n} [{i0},{i1},{i2},{i3}]: {g} vs {s}"
                    );
                }
            }
        }
    }
}

#[test]
fn f32_gemm_path_at_odd_sizes_and_layouts() {
    // (600, 21, 100): long rows keep a batch of 100 on the blocks of dots; 301 goes to the GEMM
    for &(k, m, n) in &[(45, 19, 37), (1, 3, 16), (1, 3, 32), (64, 5, 31), (130, 70, 65), (600, 21, 100), (600, 9, 301)]
    {
        check(DType::F32, k, m, n, [1, 1], [1, 1], false);
        check(DType::F32, k, m, n, [2, 1], [2, 3], true);
    }
}

/// F16 and BF16 weights from two activation rows run in register blocks (a shape
/// per batch up to 8 rows, 4 weight rows × 6 activation rows beyond): partial
/// blocks both ways, tails of k inside a vector, broadcast and transposed activations.
#[test]
fn f16_and_bf16_blocks_at_odd_sizes_and_layouts() {
    let every_small_batch = (2..=9).map(|n| (45, 19, n));
    for (k, m, n) in [(45, 19, 13), (1, 3, 2), (17, 5, 7), (130, 9, 40)].into_iter().chain(every_small_batch) {
        for wt in [DType::F16, DType::BF16] {
            check(wt, k, m, n, [1, 1], [1, 1], false);
            check(wt, k, m, n, [2, 1], [2, 3], true);
        }
    }
}

/// The block shape follows the batch size, the values do not: each activation
/// row's products are the same bits in a batch of 2…9 rows as in one of 13.
#[test]
fn block_shapes_give_the_same_bits_at_every_batch_size() {
    let (k, m) = (77, 21);
    for wt in [DType::F32, DType::F16, DType::BF16] {
        let run = |n: usize| {
            let mut ctx = Context::new();
            let w = ctx.new_f32(&[k, m], &vals((k * m) as usize, 5)).unwrap();
            let w = if wt == DType::F32 {
                w
            } else {
                let q = ctx.new_tensor(wt, &[k, m]).unwrap();
                ctx.cpy(w, q).unwrap()
            };
            let x = ctx.new_f32(&[k, n as i64], &vals(k as usize * n, 6)).unwrap();
            let y = ctx.mul_mat(w, x).unwrap();
            let g = Graph::build(&ctx, &[y]).unwrap();
            CpuBackend::new(2).unwrap().run(&ctx, &g).unwrap().read_f32(&ctx, y).unwrap()
        };
        let all = run(13);
        for n in 2..=9 {
            let part = run(n);
            assert!(part.iter().zip(&all).all(|(a, b)| a.to_bits() == b.to_bits()), "{wt}: {n} rows");
        }
    }
}

#[test]
fn small_batches_use_the_dot_kernels_for_every_weight_type() {
    for wt in dot::WEIGHT_TYPES {
        let k = if wt.block_size() == 256 { 512 } else { 96 };
        check(wt, k, 7, 3, [1, 1], [1, 1], false);
        check(wt, k, 5, 2, [2, 1], [2, 1], true);
    }
}

#[test]
fn quantized_weights_with_large_batches() {
    check(DType::Q4_0, 64, 33, 40, [1, 1], [1, 1], false);
    check(DType::Q6_K, 256, 9, 20, [1, 1], [1, 1], false);
    // the k-quant tiles (Q4_K_M / Q5_K_M files): partial tiles of weight rows,
    // batches past every register group, broadcast and transposed activations
    for wt in [DType::Q4_K, DType::Q5_K, DType::Q6_K] {
        check(wt, 768, 19, 23, [1, 1], [1, 1], false);
        check(wt, 512, 17, 6, [2, 1], [1, 2], true);
    }
}
