//! Attention sinks (`soft_max_add_sinks`, `flash_attn_ext_add_sinks`): each
//! head's sink logit joins its rows' softmax denominators, checked against an
//! f64 softmax written here; the fused attention with sinks equals the three-op
//! attention with a sinked softmax; bad sinks are refused.

mod common;

use common::{leaf, Rng};
use rgml::{Context, CpuBackend, DType, Graph, TensorId};

fn run(ctx: &Context, outs: &[TensorId]) -> Vec<Vec<f32>> {
    let g = Graph::build(ctx, outs).unwrap();
    let st = CpuBackend::new(2).unwrap().run(ctx, &g).unwrap();
    outs.iter().map(|&o| st.read_f32(ctx, o).unwrap()).collect()
}

fn values(ctx: &Context, t: TensorId) -> Vec<f32> {
    run(ctx, &[ctx.cont(t).unwrap()]).remove(0)
}

#[test]
fn a_sink_joins_each_rows_denominator() {
    let mut ctx = Context::new();
    let mut rng = Rng(5);
    let (n, rows, heads) = (9i64, 3i64, 4i64);
    let a = leaf(&mut ctx, &mut rng, &[n, rows, heads], 3.0);
    let sinks = leaf(&mut ctx, &mut rng, &[heads], 3.0);
    let mut mask_v = vec![0f32; (n * rows) as usize];
    mask_v[4] = f32::NEG_INFINITY; // one masked key
    for v in &mut mask_v[(2 * n) as usize..] {
        *v = f32::NEG_INFINITY; // a wholly masked row: the sink takes everything
    }
    let mask = ctx.new_f32(&[n, rows], &mask_v).unwrap();
    let sm = ctx.soft_max_ext(a, Some(mask), 0.5, 0.0).unwrap();
    let y = ctx.soft_max_add_sinks(sm, sinks).unwrap();
    let got = run(&ctx, &[y]).remove(0);
    let (av, sv) = (values(&ctx, a), values(&ctx, sinks));
    for h in 0..heads as usize {
        for r in 0..rows as usize {
            let row = &av[(h * rows as usize + r) * n as usize..][..n as usize];
            let x: Vec<f64> =
                row.iter().enumerate().map(|(i, &v)| 0.5 * v as f64 + mask_v[r * n as usize + i] as f64).collect();
            let s = sv[h] as f64;
            let m = x.iter().copied().fold(s, f64::max);
            let sum: f64 = x.iter().map(|v| (v - m).exp()).sum::<f64>() + (s - m).exp();
            for (i, &v) in x.iter().enumerate() {
                let want = (v - m).exp() / sum;
                let g = got[(h * rows as usize + r) * n as usize + i] as f64;
                assert!((g - want).abs() < 1e-6, "head {h} row {r} [{i}]: {g} vs {want}");
            }
        }
    }
    // the rows do not sum to 1: the sink took its share
    let total: f32 = got[..n as usize].iter().sum();
    assert!(total < 0.999, "{total}");
}

#[test]
fn fused_attention_with_sinks_equals_the_unfused_one() {
    let mut ctx = Context::new();
    let mut rng = Rng(8);
    let (d, nq, nh, nkv, n_kv) = (32i64, 5i64, 4i64, 2i64, 11i64);
    let q = leaf(&mut ctx, &mut rng, &[d, nq, nh, 1], 1.0);
    let k = leaf(&mut ctx, &mut rng, &[d, n_kv, nkv, 1], 1.0);
    let v = leaf(&mut ctx, &mut rng, &[d, n_kv, nkv, 1], 1.0);
    let sinks = leaf(&mut ctx, &mut rng, &[nh], 2.0);
    let causal: Vec<f32> =
        (0..nq).flat_map(|i| (0..n_kv).map(move |j| if j > i + n_kv - nq { f32::NEG_INFINITY } else { 0.0 })).collect();
    let mask = ctx.new_f32(&[n_kv, nq], &causal).unwrap();
    let scale = 0.2;
    let fa = ctx.flash_attn_ext(q, k, v, Some(mask), scale, 0.0).unwrap();
    let fused = ctx.flash_attn_ext_add_sinks(fa, sinks).unwrap(); // [d, nh, nq]
                                                                  // unfused: per kv head group, scores [n_kv, nq, nh], softmax with sinks, values
                                                                  // attention pairs head h with kv head h / (nh/nkv): the kv heads gathered per query head
    let kq_heads = |t: TensorId| -> TensorId {
        let parts: Vec<TensorId> = (0..nh)
            .map(|h| {
                let l = ctx.layout(t).unwrap();
                ctx.view_3d(t, [d, n_kv, 1], l.nb[1], l.nb[2], (h / (nh / nkv)) as usize * l.nb[2]).unwrap()
            })
            .collect();
        parts.into_iter().reduce(|a, b| ctx.concat(a, b, 2).unwrap()).unwrap()
    };
    let (kh, vh) = (kq_heads(k), kq_heads(v));
    let scores = ctx.mul_mat(kh, q).unwrap(); // [n_kv, nq, nh]
    let sm = ctx.soft_max_ext(scores, Some(mask), scale, 0.0).unwrap();
    let p = ctx.soft_max_add_sinks(sm, sinks).unwrap();
    let vt = ctx.cont(ctx.transpose(vh).unwrap()).unwrap(); // [n_kv, d, nh]
    let o = ctx.mul_mat(vt, p).unwrap(); // [d, nq, nh]
    let o = ctx.cont(ctx.permute(o, [0, 2, 1, 3]).unwrap()).unwrap(); // [d, nh, nq]
    let r = run(&ctx, &[fused, o, fa]);
    let d_max = r[0].iter().zip(&r[1]).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(d_max < 1e-5, "fused vs unfused with sinks: {d_max}");
    let moved = r[0].iter().zip(&r[2]).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(moved > 1e-3, "the sinks must change the result: {moved}");
}

#[test]
fn bad_sinks_are_refused() {
    let mut ctx = Context::new();
    let mut rng = Rng(1);
    let a = leaf(&mut ctx, &mut rng, &[8, 2, 3], 1.0);
    let sm = ctx.soft_max(a).unwrap();
    let wrong = leaf(&mut ctx, &mut rng, &[4], 1.0);
    let half = ctx.new_tensor(DType::F16, &[3]).unwrap();
    assert!(ctx.soft_max_add_sinks(sm, wrong).is_err(), "3 heads, 4 sinks");
    assert!(ctx.soft_max_add_sinks(sm, half).is_err(), "F16 sinks");
    assert!(ctx.soft_max_add_sinks(a, wrong).is_err(), "not a softmax");
    let ok = leaf(&mut ctx, &mut rng, &[3], 1.0);
    let y = ctx.soft_max_add_sinks(sm, ok).unwrap();
    assert!(ctx.soft_max_add_sinks(y, ok).is_err(), "sinks twice");
}
