//! `flash_attn_ext` on CUDA against the CPU (within rounding: the kernel's
//! online softmax sums in another order): grouped heads, F32 and F16 masks
//! with masked keys and a wholly masked row, ALiBi, more keys than one chunk,
//! odd head sizes, a permuted (strided) query, and F32, F16, BF16 and Q8_0
//! keys and values, attention sinks (and a softmax's); key types the kernel
//! lacks are refused up front. Without
//! a device the CUDA half prints `SKIP: …`.

#![cfg(feature = "cuda")]

mod common;
#[path = "common/on_cuda.rs"]
mod on_cuda;
use common::{cuda, leaf, Rng};
use on_cuda::check_on_cuda;
use rgml::{Context, CpuBackend, DType, Error, Graph, TensorId};

/// `ne` values of `rng` in `[-r, r)` as a leaf of type `t` (F32 values rounded
/// or quantized to it by the CPU's conversion).
fn typed(ctx: &mut Context, rng: &mut Rng, t: DType, ne: &[i64], r: f32) -> TensorId {
    let f = leaf(ctx, rng, ne, r);
    if t == DType::F32 {
        return f;
    }
    let dst = ctx.new_tensor(t, ne).unwrap();
    let c = ctx.cpy(f, dst).unwrap();
    let g = Graph::build(ctx, &[c]).unwrap();
    let bytes = CpuBackend::new(1).unwrap().run(ctx, &g).unwrap().read_bytes(ctx, c).unwrap();
    let out = ctx.new_tensor(t, ne).unwrap();
    ctx.set_bytes(out, &bytes).unwrap();
    out
}

/// A causal mask of `n_kv` keys for `n_q` rows (the last `n_q` positions),
/// row 1 wholly masked, as type `t`.
fn mask(ctx: &mut Context, rng: &mut Rng, t: DType, n_kv: i64, n_q: i64) -> TensorId {
    let mut m = Vec::new();
    for i in 0..n_q {
        for j in 0..n_kv {
            let visible = j <= n_kv - n_q + i && i != 1;
            m.push(if visible { rng.f(0.5) } else { f32::NEG_INFINITY });
        }
    }
    let f = ctx.new_f32(&[n_kv, n_q], &m).unwrap();
    if t == DType::F32 {
        return f;
    }
    let h = ctx.new_tensor(DType::F16, &[n_kv, n_q]).unwrap();
    let v: Vec<rgml::f16> = m.iter().map(|&x| rgml::f16::from_f32(x)).collect();
    ctx.set_data(h, &v).unwrap();
    h
}

#[test]
fn flash_attention_matches_the_cpu() {
    // (d, d_v, n_q, n_head, n_head_kv, n_kv, key/value type, mask type, max_bias)
    let cases = [
        (64, 64, 5, 4, 2, 37, DType::F32, DType::F32, 0.0),
        (80, 48, 3, 6, 3, 300, DType::F16, DType::F16, 0.0),
        (64, 64, 1, 8, 2, 513, DType::F16, DType::F32, 8.0),
        (96, 96, 4, 2, 1, 70, DType::Q8_0, DType::F16, 0.0),
        (32, 40, 2, 3, 3, 260, DType::BF16, DType::F32, 0.0),
    ];
    for (c, &(d, dv, nq, nh, nhkv, nkv, kt, mt, bias)) in cases.iter().enumerate() {
        let name = format!("flash_attn_ext d={d} dv={dv} n_q={nq} heads {nh}/{nhkv} n_kv={nkv} {kt} mask {mt}");
        check_on_cuda(&name, 2e-5, |ctx| {
            let mut rng = Rng(40 + c as u64);
            let q = leaf(ctx, &mut rng, &[d, nq, nh, 1], 1.0);
            let k = typed(ctx, &mut rng, kt, &[d, nkv, nhkv, 1], 1.0);
            let v = typed(
                ctx,
                &mut rng,
                if kt == DType::Q8_0 { DType::Q8_0 } else { DType::F16 },
                &[dv, nkv, nhkv, 1],
                1.0,
            );
            let m = mask(ctx, &mut rng, mt, nkv, nq);
            let scale = 1.0 / (d as f32).sqrt();
            // the query as a permuted view (heads and rows swapped), as models make it
            let qp = leaf(ctx, &mut rng, &[d, nh, nq, 1], 1.0);
            let qv = ctx.permute(qp, [0, 2, 1, 3]).unwrap();
            // attention sinks, one logit per head, fused and in a plain softmax
            let sinks = leaf(ctx, &mut rng, &[nh], 3.0);
            let fa = ctx.flash_attn_ext(q, k, v, Some(m), scale, bias).unwrap();
            let scores = leaf(ctx, &mut rng, &[nkv, nq, nh, 1], 4.0);
            let sm = ctx.soft_max_ext(scores, Some(m), scale, bias).unwrap();
            vec![
                fa,
                ctx.flash_attn_ext(qv, k, v, Some(m), scale, bias).unwrap(),
                ctx.flash_attn_ext(q, k, v, None, scale, 0.0).unwrap(),
                ctx.flash_attn_ext_add_sinks(fa, sinks).unwrap(),
                ctx.soft_max_add_sinks(sm, sinks).unwrap(),
            ]
        });
    }
}

#[test]
fn key_types_the_kernel_lacks_are_refused_up_front() {
    let Some(gpu) = cuda() else { return };
    let mut ctx = Context::new();
    let mut rng = Rng(9);
    let q = leaf(&mut ctx, &mut rng, &[256, 2, 2, 1], 1.0);
    let k = typed(&mut ctx, &mut rng, DType::Q4_K, &[256, 8, 2, 1], 1.0);
    let v = typed(&mut ctx, &mut rng, DType::F16, &[256, 8, 2, 1], 1.0);
    let o = ctx.flash_attn_ext(q, k, v, None, 0.1, 0.0).unwrap();
    let g = Graph::build(&ctx, &[o]).unwrap();
    CpuBackend::new(1).unwrap().run(&ctx, &g).unwrap();
    match rgml::Backend::run(&gpu, &ctx, &g) {
        Err(Error::Unsupported { dtype, .. }) => assert_eq!(dtype, DType::Q4_K),
        r => panic!("expected Unsupported, got {:?}", r.map(|_| ())),
    }
}
