//! `rms_norm` and `norm` against f64 references: every layout and float
//! type, 1 and 2 threads, zero rows.

use super::*;

fn rms_norm_ref(x: &[f64], ne: [i64; 4], eps: f64) -> Vec<f64> {
    let n = ne[0] as usize;
    x.chunks(n)
        .flat_map(|row| {
            let ms = row.iter().map(|v| v * v).sum::<f64>() / n as f64;
            let s = 1.0 / (ms + eps).sqrt();
            row.iter().map(move |v| v * s).collect::<Vec<_>>()
        })
        .collect()
}

fn norm_ref(x: &[f64], ne: [i64; 4], eps: f64) -> Vec<f64> {
    let n = ne[0] as usize;
    x.chunks(n)
        .flat_map(|row| {
            let mean = row.iter().sum::<f64>() / n as f64;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
            let s = 1.0 / (var + eps).sqrt();
            row.iter().map(move |v| (v - mean) * s).collect::<Vec<_>>()
        })
        .collect()
}

/// rms_norm and norm: every layout, 1 and 2 threads, a small odd shape and one
/// big enough to be split across threads; F16 and BF16 inputs too.
/// Tolerance: 1e-5 relative plus 1e-6 absolute (f32 arithmetic, f64 sums).
#[test]
fn norms_match_reference() {
    let shapes = [[7, 3, 5, 1], [131, 13, 5, 3]];
    let mut rng = Rng(0x1234_5678);
    for ne in shapes {
        for kind in KINDS {
            for dtype in [DType::F32, DType::F16, DType::BF16] {
                if dtype != DType::F32 && kind == Kind::Permuted {
                    continue;
                }
                for threads in [1, 2] {
                    let mut ctx = Context::new();
                    // an offset mean, so norm's centring matters
                    let x = input(&mut ctx, &mut rng, dtype, ne, kind, 3.0);
                    let eps = 1e-5f32;
                    let r = ctx.rms_norm(x.id, eps).unwrap();
                    assert_eq!(ctx.layout(r).unwrap().dtype, DType::F32);
                    assert!(ctx.layout(r).unwrap().is_contiguous());
                    let got = run(&ctx, r, threads);
                    let what = format!("rms_norm {ne:?} {kind:?} {dtype} {threads}t");
                    check(&what, &got, &rms_norm_ref(&x.vals, ne, eps.into()), 1e-5, 1e-6);

                    let n = ctx.norm(x.id, eps).unwrap();
                    let got = run(&ctx, n, threads);
                    let what = format!("norm {ne:?} {kind:?} {dtype} {threads}t");
                    check(&what, &got, &norm_ref(&x.vals, ne, eps.into()), 1e-5, 1e-5);

                    // a large eps changes the result: it is really used
                    let r2 = ctx.rms_norm(x.id, 0.5).unwrap();
                    let got = run(&ctx, r2, threads);
                    check(&format!("{what} eps"), &got, &rms_norm_ref(&x.vals, ne, 0.5), 1e-5, 1e-6);
                }
            }
        }
    }
}

/// A row of zeros: rms_norm gives zeros (scale 1/sqrt(eps)), not NaN.
#[test]
fn rms_norm_of_zero_row() {
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[5, 2], &[0., 0., 0., 0., 0., 1., 2., 3., 4., 5.]).unwrap();
    let r = ctx.rms_norm(a, 1e-6).unwrap();
    let got = run(&ctx, r, 1);
    assert!(got[..5].iter().all(|&v| v == 0.0), "{got:?}");
    let ms: f64 = (1.0 + 4.0 + 9.0 + 16.0 + 25.0) / 5.0;
    check("rms_norm", &got[5..], &[1., 2., 3., 4., 5.].map(|v: f64| v / (ms + 1e-6).sqrt()), 1e-6, 0.0);
}

/// `rms_norm_mul` gives the bits of `rms_norm` then `mul`, for weights that are a
/// row, a full tensor, a per-head row of a 3-D input and a transposed F16 view;
/// 1 and 2 threads. Weights that do not broadcast are refused.
#[test]
fn rms_norm_mul_is_rms_norm_then_mul() {
    let mut rng = Rng(0x6e_6d);
    let ne = [132, 6, 5, 1];
    for kind in KINDS {
        let mut ctx = Context::new();
        let x = input(&mut ctx, &mut rng, DType::F32, ne, kind, 3.0);
        let weights = [
            input(&mut ctx, &mut rng, DType::F32, [132, 1, 1, 1], Kind::Contig, 2.0).id,
            input(&mut ctx, &mut rng, DType::F32, ne, Kind::Padded, 2.0).id,
            input(&mut ctx, &mut rng, DType::F32, [132, 6, 1, 1], Kind::Contig, 2.0).id,
            input(&mut ctx, &mut rng, DType::F16, [132, 6, 1, 1], Kind::Transposed, 2.0).id,
            input(&mut ctx, &mut rng, DType::F32, [44, 1, 1, 1], Kind::Contig, 2.0).id,
        ];
        for w in weights {
            let fused = ctx.rms_norm_mul(x.id, w, 1e-5).unwrap();
            let unfused = ctx.mul(ctx.rms_norm(x.id, 1e-5).unwrap(), w).unwrap();
            for threads in [1, 2] {
                let (a, b) = (run(&ctx, fused, threads), run(&ctx, unfused, threads));
                assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()), "{kind:?} {threads}t");
            }
        }
        let bad = ctx.new_tensor(DType::F32, &[131]).unwrap();
        assert!(matches!(ctx.rms_norm_mul(x.id, bad, 1e-5), Err(Error::Shape { .. })));
        let int = ctx.new_tensor(DType::I32, &[132]).unwrap();
        assert!(matches!(ctx.rms_norm_mul(x.id, int, 1e-5), Err(Error::Unsupported { .. })));
        assert!(matches!(ctx.rms_norm_mul(x.id, weights[0], -1.0), Err(Error::Invalid(_))));
    }
}
