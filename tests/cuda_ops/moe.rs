//! The mixture-of-experts ops on CUDA against the CPU: `mul_mat_id` on every
//! device path (one pair per tile in decode, tiles routed on the device for
//! more tokens; the dot kernels staged and generic, and the value kernel of
//! the other weight types), `argsort` and `top_k` (ties, signed zeros, NaN,
//! infinities, strides, rows sorted in shared and in global memory), a
//! router's `top_k` ids feeding `mul_mat_id`, expert ids out of range, and
//! CUDA graph replays.

use super::common::{cuda, leaf, Rng};
use rgml::{f16, quant, Backend, Context, CpuBackend, CudaBackend, DType, Graph, TensorId};

/// Runs the graph of `build`'s outputs on the CPU and on CUDA with the staged
/// dot kernels on and off, and checks CUDA's outputs against the CPU's within
/// `tol` (relative to `1 + |cpu|`).
fn check(name: &str, tol: f32, build: impl FnOnce(&mut Context) -> Vec<TensorId>) {
    super::on_cuda::check_on_cuda_variants(name, tol, build, |gpu| {
        [true, false].map(|staged| (format!(" (staged {staged})"), gpu.clone().with_staged_mmvq(staged))).to_vec()
    });
}

/// A stack of `e` experts `[k, m]` of type `wt`, uniform in `[-1, 1)`;
/// block types are quantized here (the device does not quantize k-quants).
fn experts(ctx: &mut Context, rng: &mut Rng, wt: DType, k: i64, m: i64, e: i64) -> TensorId {
    let vals = rng.vec((k * m * e) as usize, 1.0);
    let w = ctx.new_tensor(wt, &[k, m, e]).unwrap();
    match wt {
        DType::F32 => ctx.set_data(w, &vals).unwrap(),
        DType::F16 => ctx.set_data(w, &vals.iter().map(|&v| f16::from_f32(v)).collect::<Vec<_>>()).unwrap(),
        DType::BF16 => ctx.set_data(w, &vals.iter().map(|&v| rgml::bf16::from_f32(v)).collect::<Vec<_>>()).unwrap(),
        _ => {
            let rs = wt.row_size(k).unwrap();
            let mut bytes = vec![0u8; rs * (m * e) as usize];
            for (src, q) in vals.chunks(k as usize).zip(bytes.chunks_mut(rs)) {
                quant::quantize_row(wt, src, q).unwrap();
            }
            ctx.set_bytes(w, &bytes).unwrap();
        }
    }
    w
}

/// I32 ids `[n_used, n_tokens]` varying with the token; token 1 picks one
/// expert twice, and the first expert takes more pairs than one tile holds.
fn ids(ctx: &mut Context, n_used: i64, n_tokens: i64, n_expert: i64) -> TensorId {
    let mut v: Vec<i32> =
        (0..n_tokens).flat_map(|t| (0..n_used).map(move |s| ((t * 7 + s * 3 + t / 2) % n_expert) as i32)).collect();
    if n_tokens > 1 && n_used > 1 {
        v[n_used as usize + 1] = v[n_used as usize];
    }
    for t in (0..n_tokens as usize).step_by(2) {
        v[t * n_used as usize] = 0;
    }
    let id = ctx.new_tensor(DType::I32, &[n_used, n_tokens]).unwrap();
    ctx.set_data(id, &v).unwrap();
    id
}

/// `mul_mat_id` of `n_expert` experts `[k, m]` of type `wt` for each
/// `(n_expert, n_used, n_tokens, shared activations)`.
fn products(wt: DType, k: i64, tol: f32, cases: &[(i64, i64, i64, bool)]) {
    for &(n_expert, n_used, n_tokens, shared) in cases {
        let name = format!("mul_mat_id {wt} k={k} E={n_expert} used={n_used} T={n_tokens} shared={shared}");
        check(&name, tol, |ctx| {
            let mut rng = Rng(k as u64 * 31 + n_tokens as u64);
            let w = experts(ctx, &mut rng, wt, k, 19, n_expert);
            let n_b = if shared { 1 } else { n_used };
            let b = leaf(ctx, &mut rng, &[k, n_b, n_tokens], 1.0);
            let id = ids(ctx, n_used, n_tokens, n_expert);
            vec![ctx.mul_mat_id(w, b, id).unwrap()]
        });
    }
}

/// Decode (one token: a pair per tile), a few tokens and a prompt (routed
/// tiles; with 4 experts and 20 tokens each expert's run spans tiles).
const CASES: &[(i64, i64, i64, bool)] =
    &[(8, 2, 1, true), (8, 4, 1, false), (8, 2, 3, false), (6, 3, 5, true), (4, 2, 20, false), (8, 2, 40, true)];

#[test]
fn mul_mat_id_float_experts() {
    products(DType::F32, 64, 1e-5, CASES);
    products(DType::F16, 64, 1e-5, CASES);
    products(DType::BF16, 96, 1e-5, &CASES[..3]);
    // rows read in 16-byte vectors, then a tail of single values; with K =
    // 260 every other F16 row is not 16-byte aligned (single values only)
    products(DType::F32, 300, 1e-5, &CASES[..3]);
    products(DType::F16, 520, 1e-5, &CASES[2..4]);
    products(DType::F16, 260, 1e-5, &CASES[..2]);
    products(DType::BF16, 512, 1e-5, &CASES[..2]);
}

#[test]
fn mul_mat_id_legacy_quants_staged_and_generic() {
    // K = 256: aligned rows, the staged kernels; K = 96: the generic ones
    for wt in [DType::Q4_0, DType::Q8_0] {
        products(wt, 256, 1e-5, CASES);
        products(wt, 96, 1e-5, &CASES[..4]);
    }
}

#[test]
fn mul_mat_id_k_quants_staged_and_generic() {
    // K = 1024: Q8_K activation rows 16-byte aligned, the staged kernels; K = 256: the generic ones
    for wt in [DType::Q4_K, DType::Q6_K] {
        products(wt, 1024, 1e-5, &CASES[..4]);
        products(wt, 256, 1e-5, CASES);
    }
}

/// The other types with dot kernels: decode and routed tiles.
#[test]
fn mul_mat_id_every_other_dot_type() {
    for wt in [DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::Q5_K] {
        products(wt, 256, 1e-5, &[CASES[0], CASES[3]]);
    }
}

/// Block types without dot kernels take the value kernel: f32 activations
/// there, the CPU's Q8 partner blocks here, so within activation rounding.
#[test]
fn mul_mat_id_types_without_dot_kernels() {
    products(DType::IQ4_NL, 64, 2e-2, &CASES[..3]);
}

/// More pairs than a block sorts in shared memory (routed in scratch
/// memory), and activations read through a permuted view.
#[test]
fn mul_mat_id_long_prompts_and_strided_activations() {
    for wt in [DType::F32, DType::Q4_0] {
        check(&format!("mul_mat_id {wt} 4200 pairs, permuted activations"), 1e-5, |ctx| {
            let (k, n_used, n_tokens, n_expert) = (64, 2, 2100, 6);
            let mut rng = Rng(77);
            let w = experts(ctx, &mut rng, wt, k, 5, n_expert);
            let x = leaf(ctx, &mut rng, &[k, n_tokens, n_used], 1.0);
            let x = ctx.permute(x, [0, 2, 1, 3]).unwrap();
            let id = ids(ctx, n_used, n_tokens, n_expert);
            vec![ctx.mul_mat_id(w, x, id).unwrap()]
        });
    }
}

/// A router's `top_k` (a strided view of a descending argsort) picks the
/// experts, in decode and for a few tokens, of 16 or 64 experts.
#[test]
fn router_top_k_ids_feed_mul_mat_id() {
    for (wt, n_tokens, n_expert) in
        [(DType::Q4_0, 1, 16), (DType::Q4_0, 6, 64), (DType::F16, 6, 16), (DType::Q6_K, 2, 16)]
    {
        check(&format!("router {wt} T={n_tokens} E={n_expert}"), 1e-5, |ctx| {
            let (k, n_used) = (256, 4);
            let mut rng = Rng(40 + n_tokens as u64);
            // top_k of the logits: the order of the softmax, without its rounding on two devices
            let logits = leaf(ctx, &mut rng, &[n_expert, n_tokens], 3.0);
            let picks = ctx.top_k(logits, n_used).unwrap();
            let w = experts(ctx, &mut rng, wt, k, 24, n_expert);
            let x = leaf(ctx, &mut rng, &[k, 1, n_tokens], 1.0);
            let sorted = ctx.argsort(logits, true).unwrap();
            vec![sorted, ctx.cont(picks).unwrap(), ctx.mul_mat_id(w, x, picks).unwrap()]
        });
    }
}

/// Values with ties, signed zeros, infinities and NaN.
fn awkward(n: usize, rng: &mut Rng) -> Vec<f32> {
    let pool = [0.0, -0.0, 1.5, -1.5, 2.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e-30, -7.25];
    (0..n).map(|i| if i % 3 == 0 { pool[(rng.next() % pool.len() as u64) as usize] } else { rng.f(4.0) }).collect()
}

#[test]
fn argsort_ties_signed_zeros_nan_and_types() {
    check("argsort", 0.0, |ctx| {
        let mut rng = Rng(3);
        let v = awkward(37 * 6, &mut rng);
        let a = ctx.new_f32(&[37, 3, 2], &v).unwrap();
        let h = ctx.new_tensor(DType::F16, &[37, 3, 2]).unwrap();
        // few distinct F16 values: many ties
        let coarse: Vec<f16> = v.iter().map(|&x| f16::from_f32((x * 2.0).round() / 2.0)).collect();
        ctx.set_data(h, &coarse).unwrap();
        let b = ctx.new_tensor(DType::BF16, &[37, 3, 2]).unwrap();
        ctx.set_data(b, &v.iter().map(|&x| rgml::bf16::from_f32(x)).collect::<Vec<_>>()).unwrap();
        let t = leaf(ctx, &mut rng, &[5, 29], 1.0);
        let t = ctx.transpose(t).unwrap();
        let mut outs = Vec::new();
        for x in [a, h, b, t] {
            outs.push(ctx.argsort(x, false).unwrap());
            outs.push(ctx.argsort(x, true).unwrap());
        }
        outs.push(ctx.cont(ctx.top_k(a, 5).unwrap()).unwrap());
        outs.push(ctx.cont(ctx.top_k(h, 1).unwrap()).unwrap());
        outs
    });
}

/// One value per row; a row of 4096 (the most a block sorts in shared
/// memory); rows of 5000 (sorted in scratch memory).
#[test]
fn argsort_row_lengths() {
    check("argsort lengths", 0.0, |ctx| {
        let mut rng = Rng(5);
        let one = leaf(ctx, &mut rng, &[1, 3], 1.0);
        let v = awkward(4096, &mut rng);
        let full = ctx.new_f32(&[4096, 1], &v).unwrap();
        let v = awkward(5000 * 2, &mut rng);
        let long = ctx.new_f32(&[5000, 2], &v).unwrap();
        vec![
            ctx.argsort(one, true).unwrap(),
            ctx.argsort(full, false).unwrap(),
            ctx.argsort(long, true).unwrap(),
            ctx.cont(ctx.top_k(long, 40).unwrap()).unwrap(),
        ]
    });
}

/// The error a graph with an expert id `bad` gets on `gpu`.
fn bad_id_error(gpu: &CudaBackend, wt: DType, n_tokens: i64, bad: i32) -> String {
    let mut ctx = Context::new();
    let mut rng = Rng(9);
    let w = experts(&mut ctx, &mut rng, wt, 64, 8, 3);
    let b = leaf(&mut ctx, &mut rng, &[64, 1, n_tokens], 1.0);
    let id = ctx.new_tensor(DType::I32, &[2, n_tokens]).unwrap();
    let mut v: Vec<i32> = (0..2 * n_tokens as i32).map(|i| i % 3).collect();
    v[1] = bad;
    ctx.set_data(id, &v).unwrap();
    let out = ctx.mul_mat_id(w, b, id).unwrap();
    let g = Graph::build(&ctx, &[out]).unwrap();
    assert!(CpuBackend::new(1).unwrap().run(&ctx, &g).is_err(), "the CPU refuses expert {bad} too");
    match gpu.run(&ctx, &g) {
        Ok(_) => panic!("{wt} T={n_tokens}: expert {bad} of 3 must fail"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn expert_ids_out_of_range_are_errors() {
    let Some(gpu) = cuda() else { return };
    for wt in [DType::Q4_0, DType::F32] {
        for n_tokens in [1, 4] {
            for bad in [3, -1] {
                let e = bad_id_error(&gpu, wt, n_tokens, bad);
                assert!(e.contains("mul_mat_id") && e.contains("expert"), "{wt} T={n_tokens}: {e}");
            }
        }
    }
    // the device is fine afterwards
    products(DType::Q4_0, 64, 1e-5, &CASES[..1]);
}

/// A decode-like MoE step run again and again with new router logits and
/// activations: replays of the captured graph give the eager run's bits.
#[test]
fn graph_replays_route_the_new_ids() {
    let Some(gpu) = cuda() else { return };
    for n_tokens in [1, 3] {
        let run = |be: CudaBackend| {
            let mut ctx = Context::new();
            let mut rng = Rng(12);
            let (k, n_expert) = (256, 8);
            let w = experts(&mut ctx, &mut rng, DType::Q4_0, k, 16, n_expert);
            let logits = ctx.new_tensor(DType::F32, &[n_expert, n_tokens]).unwrap();
            let x = ctx.new_tensor(DType::F32, &[k, 1, n_tokens]).unwrap();
            ctx.set_input(logits).unwrap();
            ctx.set_input(x).unwrap();
            let picks = ctx.top_k(logits, 2).unwrap();
            let out = ctx.mul_mat_id(w, x, picks).unwrap();
            let g = Graph::build(&ctx, &[out]).unwrap();
            let mut st = be.alloc(&ctx, &g, be.plan(&ctx, &g).unwrap()).unwrap();
            let mut outs = Vec::new();
            for step in 0..4 {
                ctx.set_data(logits, &rng.vec((n_expert * n_tokens) as usize, 2.0)).unwrap();
                ctx.set_data(x, &rng.vec((k * n_tokens) as usize, 1.0)).unwrap();
                be.compute(&ctx, &g, &mut st).unwrap();
                let bits: Vec<u32> = st.read_f32(&ctx, out).unwrap().iter().map(|v| v.to_bits()).collect();
                outs.push((step, bits));
            }
            (outs, st.graph_stats())
        };
        let (eager, _) = run(gpu.clone().with_graphs(false));
        let (replayed, stats) = run(gpu.clone().with_graphs(true));
        assert_eq!((stats.eager, stats.captured, stats.replayed, stats.fallback.clone()), (1, 1, 2, None), "{stats:?}");
        assert_eq!(eager, replayed, "T={n_tokens}");
        assert_ne!(eager[0].1, eager[3].1, "new inputs give new products");
    }
}

/// Decode and small batches on a real GPU (only with `RGML_MOE_TIMING=1`, which
/// `scripts/gpu-check.sh` sets there: under the emulator it would take minutes): a 128-expert, top-8 Q4_0 `mul_mat_id` against a dense
/// `mul_mat` of the same number of rows (`n_used · M`), both after a
/// `get_rows` (so both graphs pay for the index flag), CUDA graphs on. For
/// more than one token the tokens' experts differ: `mul_mat_id` reads up to
/// T times the dense product's weights. Prints one `moe:` line per batch;
/// asserts nothing about speed.
#[test]
fn moe_decode_time_against_dense() {
    if std::env::var("RGML_MOE_TIMING").as_deref() != Ok("1") {
        println!("SKIP: the MoE timing runs with RGML_MOE_TIMING=1 (scripts/gpu-check.sh)");
        return;
    }
    let Some(gpu) = cuda() else { return };
    let gpu = gpu.with_graphs(true);
    let reps: u32 = std::env::var("RGML_MOE_BENCH_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    let (k, m, n_expert, n_used) = (2048i64, 768i64, 128i64, 8i64);
    let rs = DType::Q4_0.row_size(k).unwrap();
    let mut row = vec![0u8; rs];
    let vals: Vec<f32> = (0..k).map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0).collect();
    quant::quantize_row(DType::Q4_0, &vals, &mut row).unwrap();
    for n_tokens in [1i64, 2, 4, 8] {
        let time = |dense: bool| {
            let mut ctx = Context::new();
            let emb = ctx.new_f32(&[k, 16], &vec![0.25; (16 * k) as usize]).unwrap();
            let tok = ctx.new_tensor(DType::I32, &[n_tokens]).unwrap();
            ctx.set_data(tok, &(0..n_tokens as i32).collect::<Vec<_>>()).unwrap();
            let x = ctx.get_rows(emb, tok).unwrap();
            let out = if dense {
                let w = ctx.new_tensor(DType::Q4_0, &[k, n_used * m]).unwrap();
                ctx.set_bytes(w, &row.repeat((n_used * m) as usize)).unwrap();
                ctx.mul_mat(w, x).unwrap()
            } else {
                let w = ctx.new_tensor(DType::Q4_0, &[k, m, n_expert]).unwrap();
                ctx.set_bytes(w, &row.repeat((m * n_expert) as usize)).unwrap();
                let id = ctx.new_tensor(DType::I32, &[n_used, n_tokens]).unwrap();
                // spread over the experts, as a router's picks are
                let v: Vec<i32> =
                    (0..n_used * n_tokens).map(|i| ((i * 37 + i / n_used * 11) % n_expert) as i32).collect();
                ctx.set_data(id, &v).unwrap();
                let x = ctx.reshape_3d(x, k, 1, n_tokens).unwrap();
                ctx.mul_mat_id(w, x, id).unwrap()
            };
            let g = Graph::build(&ctx, &[out]).unwrap();
            let mut st = gpu.alloc(&ctx, &g, gpu.plan(&ctx, &g).unwrap()).unwrap();
            for _ in 0..3 {
                gpu.compute(&ctx, &g, &mut st).unwrap();
            }
            let t0 = std::time::Instant::now();
            for _ in 0..reps {
                gpu.compute(&ctx, &g, &mut st).unwrap();
            }
            t0.elapsed().as_secs_f64() * 1e6 / f64::from(reps)
        };
        let (id, dense) = (time(false), time(true));
        println!(
            "moe: T={n_tokens}: mul_mat_id {id:.1} us, dense mul_mat of {} rows {dense:.1} us, ratio {:.2}",
            n_used * m,
            id / dense
        );
    }
}
