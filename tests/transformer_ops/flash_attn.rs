//! `flash_attn_ext` against an f64 reference written from its definition
//! (grouped heads, broadcast masks with masked keys and a fully masked row,
//! ALiBi), on F32 and F16 keys and values, contiguous and padded queries, 1 and
//! 2 threads; against the unfused ops (`mul_mat`, `soft_max_ext`, `mul_mat`)
//! on a Q8_0 cache; and its errors.

use super::*;

/// Shapes of one case: `d`, `d_v`, `n_q`, `n_head`, `n_head_kv`, `n_kv`, `n_seq`.
#[derive(Clone, Copy, Debug)]
struct Shape {
    d: i64,
    dv: i64,
    nq: i64,
    nh: i64,
    nhkv: i64,
    nkv: i64,
    ns: i64,
}

/// ALiBi slope of head `h` of `n_head`, as `soft_max_ext` defines it.
fn slope(h: i64, n_head: i64, max_bias: f64) -> f64 {
    if max_bias <= 0.0 {
        return 1.0;
    }
    let n_log2 = 1i64 << (n_head as f64).log2().floor() as u32;
    let m0 = 2f64.powf(-max_bias / n_log2 as f64);
    let m1 = 2f64.powf(-(max_bias / 2.0) / n_log2 as f64);
    if h < n_log2 {
        m0.powi(h as i32 + 1)
    } else {
        m1.powi((2 * (h - n_log2) + 1) as i32)
    }
}

/// The mask: `-inf` past a causal diagonal (key `j > n_kv - n_q + i`), small
/// values elsewhere, and row 1 wholly masked when `hole`.
fn mask_vals(rng: &mut Rng, s: Shape, hole: bool) -> Vec<f32> {
    let mut m = Vec::new();
    for i in 0..s.nq {
        for j in 0..s.nkv {
            let masked = j > s.nkv - s.nq + i || (hole && i == 1);
            m.push(if masked { f32::NEG_INFINITY } else { rng.f(0.5) });
        }
    }
    m
}

/// f64 reference: `[dv, nh, nq, ns]` in logical order.
#[allow(clippy::too_many_arguments)]
fn reference(s: Shape, q: &[f64], k: &[f64], v: &[f64], mask: &[f64], scale: f64, max_bias: f64) -> Vec<f64> {
    let g = s.nh / s.nhkv;
    let mut out = vec![0f64; (s.dv * s.nh * s.nq * s.ns) as usize];
    for sq in 0..s.ns {
        for i in 0..s.nq {
            for h in 0..s.nh {
                let kh = h / g;
                let sl = slope(h, s.nh, max_bias);
                let scores: Vec<f64> = (0..s.nkv)
                    .map(|j| {
                        let dot: f64 = (0..s.d)
                            .map(|c| {
                                q[at([s.d, s.nq, s.nh, s.ns], [c, i, h, sq])]
                                    * k[at([s.d, s.nkv, s.nhkv, s.ns], [c, j, kh, sq])]
                            })
                            .sum();
                        dot * scale + sl * mask[(i * s.nkv + j) as usize]
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                if max == f64::NEG_INFINITY {
                    continue;
                }
                let e: Vec<f64> = scores.iter().map(|&x| (x - max).exp()).collect();
                let sum: f64 = e.iter().sum();
                for c in 0..s.dv {
                    let acc: f64 =
                        (0..s.nkv).map(|j| e[j as usize] * v[at([s.dv, s.nkv, s.nhkv, s.ns], [c, j, kh, sq])]).sum();
                    out[at([s.dv, s.nh, s.nq, s.ns], [c, h, i, sq])] = acc / sum;
                }
            }
        }
    }
    out
}

/// Values rounded as the kernel sees them: the query in the key type's dot
/// partner (F16 keys: the query in f16).
fn as_dot_partner(vals: &[f64], key: DType) -> Vec<f64> {
    match key {
        DType::F16 => vals.iter().map(|&x| f64::from(f16::from_f64(x).to_f32())).collect(),
        _ => vals.to_vec(),
    }
}

/// Tolerance: f32 sums of f32 products over at most 64 terms, then a softmax
/// and an f32 weighted sum: 2e-5 relative plus 2e-6 absolute.
#[test]
fn flash_attn_matches_reference() {
    let mut rng = Rng(0x66_61);
    let shapes = [
        Shape { d: 40, dv: 24, nq: 5, nh: 6, nhkv: 2, nkv: 37, ns: 1 },
        Shape { d: 64, dv: 64, nq: 3, nh: 4, nhkv: 4, nkv: 19, ns: 2 },
        Shape { d: 8, dv: 8, nq: 1, nh: 3, nhkv: 1, nkv: 70, ns: 1 },
    ];
    for s in shapes {
        for kv in [DType::F32, DType::F16] {
            for (qkind, hole, max_bias) in [(Kind::Contig, false, 0.0), (Kind::Padded, true, 8.0)] {
                let mut ctx = Context::new();
                let q = input(&mut ctx, &mut rng, DType::F32, [s.d, s.nq, s.nh, s.ns], qkind, 1.5);
                let k = input(&mut ctx, &mut rng, kv, [s.d, s.nkv, s.nhkv, s.ns], Kind::Contig, 1.0);
                let v = input(&mut ctx, &mut rng, kv, [s.dv, s.nkv, s.nhkv, s.ns], Kind::Padded, 2.0);
                let mv = mask_vals(&mut rng, s, hole);
                let (m, mstored) = leaf(&mut ctx, DType::F32, [s.nkv, s.nq, 1, 1], &mv);
                let scale = 1.0 / (s.d as f32).sqrt();
                let r = ctx.flash_attn_ext(q.id, k.id, v.id, Some(m), scale, max_bias).unwrap();
                let l = ctx.layout(r).unwrap();
                assert_eq!((l.ne, l.dtype, l.is_contiguous()), ([s.dv, s.nh, s.nq, s.ns], DType::F32, true));
                let qv = as_dot_partner(&q.vals, kv);
                let want = reference(s, &qv, &k.vals, &v.vals, &mstored, f64::from(scale), f64::from(max_bias));
                for threads in [1, 2] {
                    let got = run(&ctx, r, threads);
                    check(&format!("{s:?} {kv} {qkind:?} bias {max_bias} t{threads}"), &got, &want, 2e-5, 2e-6);
                }
                if hole && s.nq > 1 {
                    // the wholly masked query row gives zeros in every head
                    let got = run(&ctx, r, 1);
                    let row = (s.dv * s.nh) as usize;
                    assert!(got[row..2 * row].iter().all(|&x| x == 0.0));
                }
            }
        }
    }
}

/// A Q8_0 cache (keys and values quantized per row, as the KV cache stores them):
/// the fused op against the three ops it replaces, which convert the query and
/// dequantize the values the same way; 1e-5 relative plus 1e-6 absolute (the
/// order of the sums differs).
#[test]
fn flash_attn_q8_0_matches_the_unfused_ops() {
    let mut rng = Rng(0x71_38);
    let s = Shape { d: 64, dv: 64, nq: 4, nh: 6, nhkv: 3, nkv: 45, ns: 1 };
    let mut ctx = Context::new();
    let q = input(&mut ctx, &mut rng, DType::F32, [s.d, s.nq, s.nh, 1], Kind::Contig, 1.5);
    let quantized = |ctx: &mut Context, rng: &mut Rng, ne: [i64; 4]| {
        let vals = rng.vec((ne[0] * ne[1] * ne[2]) as usize, 1.0);
        let row = DType::Q8_0.row_size(ne[0]).unwrap();
        let mut bytes = vec![0u8; row * (ne[1] * ne[2]) as usize];
        for (src, dst) in vals.chunks(ne[0] as usize).zip(bytes.chunks_mut(row)) {
            rgml::quant::quantize_row(DType::Q8_0, src, dst).unwrap();
        }
        let id = ctx.new_tensor(DType::Q8_0, &ne).unwrap();
        ctx.set_bytes(id, &bytes).unwrap();
        id
    };
    let k = quantized(&mut ctx, &mut rng, [s.d, s.nkv, s.nhkv, 1]);
    let v = quantized(&mut ctx, &mut rng, [s.dv, s.nkv, s.nhkv, 1]);
    let (m, _) = leaf(&mut ctx, DType::F32, [s.nkv, s.nq, 1, 1], &mask_vals(&mut rng, s, false));
    let fused = ctx.flash_attn_ext(q.id, k, v, Some(m), 0.125, 0.0).unwrap();
    // unfused: [n_kv, nq, nh] scores, softmax, values as f32 [n_kv, dv, nhkv], product
    let kq = ctx.mul_mat(k, q.id).unwrap();
    let p = ctx.soft_max_ext(kq, Some(m), 0.125, 0.0).unwrap();
    let vf = ctx.new_tensor(DType::F32, &[s.dv, s.nkv, s.nhkv]).unwrap();
    let vf = ctx.cpy(v, vf).unwrap();
    let vt = ctx.cont(ctx.transpose(vf).unwrap()).unwrap();
    let kqv = ctx.mul_mat(vt, p).unwrap(); // [dv, nq, nh]
    let unfused = ctx.cont(ctx.permute(kqv, [0, 2, 1, 3]).unwrap()).unwrap(); // [dv, nh, nq]
    let want: Vec<f64> = run(&ctx, unfused, 1).into_iter().map(f64::from).collect();
    for threads in [1, 2] {
        check(&format!("q8_0 t{threads}"), &run(&ctx, fused, threads), &want, 1e-5, 1e-6);
    }
}

#[test]
fn flash_attn_refuses_what_does_not_fit() {
    let mut ctx = Context::new();
    let t = |ctx: &mut Context, dt: DType, ne: &[i64]| ctx.new_tensor(dt, ne).unwrap();
    let q = t(&mut ctx, DType::F32, &[64, 3, 4]);
    let k = t(&mut ctx, DType::F16, &[64, 10, 2]);
    let v = t(&mut ctx, DType::F16, &[32, 10, 2]);
    let m = t(&mut ctx, DType::F32, &[10, 3]);
    assert!(ctx.flash_attn_ext(q, k, v, Some(m), 0.1, 0.0).is_ok());
    let q16 = t(&mut ctx, DType::F16, &[64, 3, 4]);
    assert!(matches!(ctx.flash_attn_ext(q16, k, v, None, 0.1, 0.0), Err(Error::Unsupported { .. })));
    let k_short = t(&mut ctx, DType::F16, &[32, 10, 2]);
    assert!(matches!(ctx.flash_attn_ext(q, k_short, v, None, 0.1, 0.0), Err(Error::Shape { .. })));
    let k3 = t(&mut ctx, DType::F16, &[64, 10, 3]);
    let v3 = t(&mut ctx, DType::F16, &[32, 10, 3]);
    assert!(matches!(ctx.flash_attn_ext(q, k3, v3, None, 0.1, 0.0), Err(Error::Shape { .. })));
    let v_long = t(&mut ctx, DType::F16, &[32, 11, 2]);
    assert!(matches!(ctx.flash_attn_ext(q, k, v_long, None, 0.1, 0.0), Err(Error::Shape { .. })));
    let m_short = t(&mut ctx, DType::F32, &[9, 3]);
    assert!(matches!(ctx.flash_attn_ext(q, k, v, Some(m_short), 0.1, 0.0), Err(Error::Shape { .. })));
    let kt = t(&mut ctx, DType::F16, &[10, 64, 2]);
    let kt = ctx.transpose(kt).unwrap();
    assert!(matches!(ctx.flash_attn_ext(q, kt, v, None, 0.1, 0.0), Err(Error::Shape { .. })));
    let ki = t(&mut ctx, DType::I32, &[64, 10, 2]);
    assert!(matches!(ctx.flash_attn_ext(q, ki, v, None, 0.1, 0.0), Err(Error::Unsupported { .. })));
    assert!(matches!(ctx.flash_attn_ext(q, k, v, Some(m), 0.1, -1.0), Err(Error::Invalid(_))));
    assert!(matches!(ctx.flash_attn_ext(q, k, v, None, 0.1, 2.0), Err(Error::Invalid(_))));
    assert!(matches!(ctx.flash_attn_ext(q, k, v, None, f32::NAN, 0.0), Err(Error::Invalid(_))));
}
