//! `rope_ext` against an f64 reference written from the definition
//! (frequency factors, YaRN), the shorthands, and dims past `n_dims` passing
//! through.

use super::*;

/// Reference rope: for pair `k < n_dims/2` the angle is
/// `pos * base^(-2k/n_dims) / ff[k]`, with YaRN when `ext_factor != 0`:
/// interpolated angle `freq_scale * theta` blended back towards the
/// extrapolated one by `ext_factor * ramp(k)`, where the ramp falls from 1 to 0
/// between the correction dims of `beta_fast` and `beta_slow` (the pair index
/// whose wavelength fits `beta` turns into `n_ctx_orig`), and the magnitude
/// grows by `1 + 0.1 ln(1/freq_scale)`.
fn rope_ref(x: &[f64], ne: [i64; 4], pos: &[i32], ff: Option<&[f64]>, p: &RopeParams) -> Vec<f64> {
    let nd = p.n_dims as f64;
    let base = f64::from(p.freq_base);
    let fs = f64::from(p.freq_scale);
    let ext = f64::from(p.ext_factor);
    // the pair index k whose frequency makes `beta` turns over n_ctx_orig positions:
    // n_ctx_orig * base^(-2k/nd) = 2π beta
    let corr = |beta: f32| {
        nd * (f64::from(p.n_ctx_orig) / (2.0 * std::f64::consts::PI * f64::from(beta))).ln() / (2.0 * base.ln())
    };
    let low = corr(p.beta_fast).floor().max(0.0);
    let high = corr(p.beta_slow).ceil().min(nd - 1.0);
    let ramp = |k: f64| 1.0 - ((k - low) / (high - low).max(0.001)).clamp(0.0, 1.0);
    let mut mscale = f64::from(p.attn_factor);
    if ext != 0.0 {
        mscale *= 1.0 + 0.1 * (1.0 / fs).ln();
    }
    let half = (p.n_dims / 2) as i64;
    let mut out = x.to_vec();
    for i in indices([half, ne[1], ne[2], ne[3]]) {
        let k = i[0];
        let theta_e =
            f64::from(pos[i[2] as usize]) * base.powf(-2.0 * k as f64 / nd) / ff.map_or(1.0, |f| f[k as usize]);
        let theta_i = fs * theta_e;
        let theta = if ext != 0.0 {
            let mix = ramp(k as f64) * ext;
            theta_i * (1.0 - mix) + theta_e * mix
        } else {
            theta_i
        };
        let (j0, j1) = if p.mode == RopeParams::NEOX { (k, k + half) } else { (2 * k, 2 * k + 1) };
        let (a0, a1) = (at(ne, [j0, i[1], i[2], i[3]]), at(ne, [j1, i[1], i[2], i[3]]));
        let (x0, x1) = (x[a0], x[a1]);
        out[a0] = (x0 * theta.cos() - x1 * theta.sin()) * mscale;
        out[a1] = (x0 * theta.sin() + x1 * theta.cos()) * mscale;
    }
    out
}

/// rope in both modes, with n_dims < head_dim on an odd head_dim, position
/// interpolation, YaRN (full, half, and with the upper correction dim clamped
/// to n_dims - 1), attn_factor, frequency factors, negative positions, ne3 > 1,
/// every input layout, F16, 1 and 2 threads.
/// Tolerance: 5e-5 absolute on values in [-1, 1] for F32: like ggml, the
/// kernel advances the angle by repeated f32 multiplication, which drifts from
/// the exact angle by a few ulp per pair, and angles here reach ~115 rad (ulp
/// 7.6e-6); the largest error seen is about 2.3e-5. F16 results: 2e-3 relative
/// plus 1e-3 absolute (one f16 rounding).
#[test]
fn rope_matches_reference() {
    let mut rng = Rng(7);
    let yarn = RopeParams {
        n_ctx_orig: 4096,
        freq_base: 10000.0,
        freq_scale: 0.25,
        ext_factor: 1.0,
        attn_factor: 0.9,
        beta_fast: 32.0,
        beta_slow: 1.0,
        ..RopeParams::new(0, 0)
    };
    let interp = RopeParams { freq_scale: 0.5, freq_base: 500000.0, ..RopeParams::new(0, 0) };
    let half_yarn = RopeParams { ext_factor: 0.5, ..yarn };
    // a small base and a tiny beta_slow push the upper correction dim past
    // n_dims - 1, where it is clamped
    let clamped = RopeParams { freq_base: 100.0, beta_slow: 0.01, freq_scale: 0.5, ..yarn };
    // (a shape, n_dims)
    let shapes = [([11, 3, 5, 1], 6), ([64, 7, 9, 1], 64), ([128, 8, 40, 1], 96), ([13, 2, 3, 2], 12)];
    let mut worst = 0f64;
    for (ne, n_dims) in shapes {
        for mode in [RopeParams::NORMAL, RopeParams::NEOX] {
            for (pi, base_p) in [RopeParams::new(0, 0), interp, yarn, half_yarn, clamped].into_iter().enumerate() {
                let p = RopeParams { n_dims, mode, ..base_p };
                for kind in KINDS {
                    for threads in [1, 2] {
                        let mut ctx = Context::new();
                        let x = input(&mut ctx, &mut rng, DType::F32, ne, kind, 1.0);
                        let positions: Vec<i32> = (0..ne[2] as i32).map(|t| 3 * t - 2).collect();
                        let pos = ctx.new_tensor_1d(DType::I32, ne[2]).unwrap();
                        ctx.set_data(pos, &positions).unwrap();
                        let use_ff = pi % 2 == 1;
                        let ffv: Vec<f32> = (0..n_dims / 2).map(|k| 1.0 + 0.25 * k as f32).collect();
                        let ff = use_ff.then(|| ctx.new_f32(&[i64::from(n_dims / 2)], &ffv).unwrap());
                        let r = ctx.rope_with(x.id, pos, ff, p).unwrap();
                        let ffd: Vec<f64> = ffv.iter().map(|&v| f64::from(v)).collect();
                        let want = rope_ref(&x.vals, ne, &positions, use_ff.then_some(&ffd[..]), &p);
                        let what = format!("rope {ne:?} {p:?} ff={use_ff} {kind:?} {threads}t");
                        let got = run(&ctx, r, threads);
                        worst = worst.max(check(&what, &got, &want, 0.0, 5e-5));
                    }
                }
            }
        }
    }
    eprintln!("rope: largest f32 error {worst:e}");
    // F16 in and out
    for mode in [RopeParams::NORMAL, RopeParams::NEOX] {
        let ne = [10, 3, 4, 1];
        let p = RopeParams { n_dims: 8, mode, ..yarn };
        let mut ctx = Context::new();
        let x = input(&mut ctx, &mut rng, DType::F16, ne, Kind::Transposed, 1.0);
        let positions = [0, 5, 100, 7];
        let pos = ctx.new_tensor_1d(DType::I32, 4).unwrap();
        ctx.set_data(pos, &positions).unwrap();
        let r = ctx.rope_with(x.id, pos, None, p).unwrap();
        assert_eq!(ctx.layout(r).unwrap().dtype, DType::F16);
        let want = rope_ref(&x.vals, ne, &positions, None, &p);
        check(&format!("rope f16 mode {mode}"), &run(&ctx, r, 1), &want, 2e-3, 1e-3);
    }
}

/// `rope` and `rope_ext` agree with `rope_with` and the defaults; dims past
/// n_dims pass through bit for bit; position 0 is the identity.
#[test]
fn rope_shorthands_and_pass_through() {
    let mut rng = Rng(99);
    let ne = [9, 2, 3, 1];
    let mut ctx = Context::new();
    let x = input(&mut ctx, &mut rng, DType::F32, ne, Kind::Padded, 1.0);
    let pos = ctx.new_tensor_1d(DType::I32, 3).unwrap();
    ctx.set_data(pos, &[0i32, 1, 2]).unwrap();
    let a = ctx.rope(x.id, pos, 4, RopeParams::NEOX).unwrap();
    let b = ctx.rope_ext(x.id, pos, None, 4, RopeParams::NEOX, 0, 10000.0, 1.0, 0.0, 1.0, 32.0, 1.0).unwrap();
    let ga = run(&ctx, a, 1);
    assert_eq!(ga, run(&ctx, b, 2));
    let want = rope_ref(&x.vals, ne, &[0, 1, 2], None, &RopeParams::new(4, RopeParams::NEOX));
    check("rope default", &ga, &want, 0.0, 2e-6);
    for i in indices(ne) {
        let k = at(ne, i);
        if i[0] >= 4 || i[2] == 0 {
            assert_eq!(ga[k], x.vals[k] as f32, "element {i:?} must pass through");
        }
    }
    assert_eq!(
        ctx.tensor(a).unwrap().op(),
        rgml::Op::Rope { a: x.id, pos, freq: None, p: RopeParams::new(4, RopeParams::NEOX) }
    );
    assert_eq!(ctx.tensor(a).unwrap().op().name(), "rope");
}
