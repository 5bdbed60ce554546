//! The transformer ops (`rms_norm`, `norm`, `soft_max_ext`, `diag_mask_inf`,
//! `rope_ext`, `concat`, `repeat`) against f64 references written here from the
//! op definitions, at odd sizes, on contiguous, padded, transposed and permuted
//! inputs, with 1 and 2 threads (poison mode on, so reads of unwritten memory
//! show up as NaN); and the errors for bad shapes and types.

use rgml::{f16, Context, CpuBackend, DType, Error, Graph, RopeParams, TensorId};

// ---------------------------------------------------------------- helpers

/// xorshift64*: deterministic test data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in `[-r, r)`.
    fn f(&mut self, r: f32) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * r
    }
}

/// How an input tensor is laid out in memory.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// A fresh contiguous leaf.
    Contig,
    /// A window into a bigger tensor: rows padded, offset from the start.
    Padded,
    /// The transpose of a leaf of shape `[ne1, ne0, ne2, ne3]` (`nb0 > nb1`).
    Transposed,
    /// A leaf of shape `[ne2, ne0, ne3, ne1]` permuted back (all strides shuffled).
    Permuted,
}

const KINDS: [Kind; 4] = [Kind::Contig, Kind::Padded, Kind::Transposed, Kind::Permuted];

/// A test input: its id and its values in logical order (`ne0` fastest), as
/// stored (rounded to the tensor's type).
struct Input {
    id: TensorId,
    vals: Vec<f64>,
}

/// Flat index of `(i0, i1, i2, i3)` in logical order.
fn at(ne: [i64; 4], i: [i64; 4]) -> usize {
    (i[0] + ne[0] * (i[1] + ne[1] * (i[2] + ne[2] * i[3]))) as usize
}

/// Every index of `ne` in logical order.
fn indices(ne: [i64; 4]) -> impl Iterator<Item = [i64; 4]> {
    let n: i64 = ne.iter().product();
    (0..n).map(move |k| [k % ne[0], k / ne[0] % ne[1], k / (ne[0] * ne[1]) % ne[2], k / (ne[0] * ne[1] * ne[2])])
}

/// Fills a new leaf of `dtype` and shape `ne` with `vals` (rounded to the
/// type); returns the values as stored.
fn leaf(ctx: &mut Context, dtype: DType, ne: [i64; 4], vals: &[f32]) -> (TensorId, Vec<f64>) {
    let id = ctx.new_tensor(dtype, &ne).unwrap();
    let stored: Vec<f64> = match dtype {
        DType::F32 => {
            ctx.set_data(id, vals).unwrap();
            vals.iter().map(|&v| f64::from(v)).collect()
        }
        DType::F16 => {
            let h: Vec<f16> = vals.iter().map(|&v| f16::from_f32(v)).collect();
            ctx.set_data(id, &h).unwrap();
            h.iter().map(|v| f64::from(v.to_f32())).collect()
        }
        DType::BF16 => {
            let h: Vec<rgml::bf16> = vals.iter().map(|&v| rgml::bf16::from_f32(v)).collect();
            ctx.set_data(id, &h).unwrap();
            h.iter().map(|v| f64::from(v.to_f32())).collect()
        }
        DType::I32 => {
            let h: Vec<i32> = vals.iter().map(|&v| v as i32).collect();
            ctx.set_data(id, &h).unwrap();
            h.iter().map(|&v| f64::from(v)).collect()
        }
        d => panic!("test helper: {d} not handled"),
    };
    (id, stored)
}

/// An input of logical shape `ne` laid out as `kind`, random values in `[-r, r)`.
fn input(ctx: &mut Context, rng: &mut Rng, dtype: DType, ne: [i64; 4], kind: Kind, r: f32) -> Input {
    let base_ne = match kind {
        Kind::Contig => ne,
        Kind::Padded => [ne[0] + 3, ne[1] + 1, ne[2], ne[3]],
        Kind::Transposed => [ne[1], ne[0], ne[2], ne[3]],
        Kind::Permuted => [ne[2], ne[0], ne[3], ne[1]],
    };
    let n: i64 = base_ne.iter().product();
    let raw: Vec<f32> = (0..n).map(|_| rng.f(r)).collect();
    let (base, stored) = leaf(ctx, dtype, base_ne, &raw);
    let bl = ctx.layout(base).unwrap();
    let id = match kind {
        Kind::Contig => base,
        Kind::Padded => ctx.view_4d(base, ne, [bl.nb[1], bl.nb[2], bl.nb[3]], bl.nb[1] + 2 * bl.nb[0]).unwrap(),
        Kind::Transposed => ctx.transpose(base).unwrap(),
        Kind::Permuted => ctx.permute(base, [2, 0, 3, 1]).unwrap(),
    };
    let l = ctx.layout(id).unwrap();
    assert_eq!(l.ne, ne);
    // (a permute over size-1 dims may still be contiguous; the others never are)
    if matches!(kind, Kind::Padded | Kind::Transposed) && ne[0] > 1 && ne[1] > 1 {
        assert!(!l.is_contiguous(), "{kind:?} input should not be contiguous: {l:?}");
    }
    let offs = ctx.tensor(id).unwrap().view_offs();
    let ts = dtype.type_size();
    let vals = indices(ne)
        .map(|i| {
            let byte = offs + (0..4).map(|d| i[d] as usize * l.nb[d]).sum::<usize>();
            stored[byte / ts]
        })
        .collect();
    Input { id, vals }
}

/// Runs `out` with `threads` threads (poison mode) and reads it back.
fn run(ctx: &Context, out: TensorId, threads: usize) -> Vec<f32> {
    let g = Graph::build(ctx, &[out]).unwrap();
    let cpu = CpuBackend::new(threads).unwrap().with_poison(true);
    let st = cpu.run(ctx, &g).unwrap();
    st.read_f32(ctx, out).unwrap()
}

/// Asserts `|got - want| <= atol + rtol*|want|` everywhere (infinities must
/// match exactly); returns the largest error seen, for the record.
fn check(what: &str, got: &[f32], want: &[f64], rtol: f64, atol: f64) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut worst = 0f64;
    for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
        let g = f64::from(g);
        if w.is_infinite() || g.is_infinite() {
            assert_eq!(g, w, "{what}: element {k}");
            continue;
        }
        let err = (g - w).abs();
        assert!(err <= atol + rtol * w.abs(), "{what}: element {k}: got {g}, want {w} (err {err:e})");
        worst = worst.max(err);
    }
    worst
}

// ---------------------------------------------------------------- norms

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

// ---------------------------------------------------------------- soft_max

/// ALiBi slope of head `h` of `n_head`, from the definition: the first
/// `2^floor(log2 n_head)` heads get the geometric sequence `2^(-8/n * k)`
/// generalised to `max_bias`, the rest interleave the half-step sequence.
fn alibi_ref(h: i64, n_head: i64, max_bias: f64) -> f64 {
    if max_bias <= 0.0 {
        return 1.0;
    }
    let mut p2 = 1;
    while p2 * 2 <= n_head {
        p2 *= 2;
    }
    let p2f = p2 as f64;
    if h < p2 {
        2f64.powf(-max_bias / p2f).powi(h as i32 + 1)
    } else {
        2f64.powf(-max_bias / 2.0 / p2f).powi((2 * (h - p2) + 1) as i32)
    }
}

/// `softmax(x*scale + slope*mask)` per row; an all `-inf` row gives zeros.
fn soft_max_ref(x: &[f64], ne: [i64; 4], mask: Option<(&[f64], [i64; 4])>, scale: f64, max_bias: f64) -> Vec<f64> {
    let mut out = vec![0.0; x.len()];
    for i3 in 0..ne[3] {
        for i2 in 0..ne[2] {
            for i1 in 0..ne[1] {
                let slope = alibi_ref(i2, ne[2], max_bias);
                let w: Vec<f64> = (0..ne[0])
                    .map(|i0| {
                        let mut v = x[at(ne, [i0, i1, i2, i3])] * scale;
                        if let Some((m, mne)) = mask {
                            v += slope * m[at(mne, [i0, i1, i2 % mne[2], i3 % mne[3]])];
                        }
                        v
                    })
                    .collect();
                let max = w.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> =
                    w.iter().map(|&v| if max == f64::NEG_INFINITY { 0.0 } else { (v - max).exp() }).collect();
                let sum: f64 = e.iter().sum();
                for i0 in 0..ne[0] {
                    let v = e[i0 as usize];
                    out[at(ne, [i0, i1, i2, i3])] = if v == 0.0 { 0.0 } else { v / sum };
                }
            }
        }
    }
    out
}

/// soft_max and soft_max_ext: every input layout; masks F32 and F16, padded,
/// with extra rows and broadcast over dims 2 and 3; scale; ALiBi with a head
/// count that is not a power of two; 1 and 2 threads.
/// Tolerance: 1e-5 relative plus 1e-7 absolute (values in [0, 1]).
#[test]
fn soft_max_matches_reference() {
    let mut rng = Rng(0xfeed_beef);
    // (a shape, mask shape)
    let cases = [([9, 5, 6, 2], [9, 7, 3, 1]), ([67, 23, 6, 3], [67, 23, 1, 3]), ([4, 3, 1, 1], [4, 3, 1, 1])];
    for (ne, mne) in cases {
        for kind in KINDS {
            for threads in [1, 2] {
                for (mdtype, mkind) in [(DType::F32, Kind::Contig), (DType::F16, Kind::Padded)] {
                    let mut ctx = Context::new();
                    let x = input(&mut ctx, &mut rng, DType::F32, ne, kind, 4.0);
                    let what = format!("{ne:?} {kind:?} mask {mne:?} {mdtype} {mkind:?} {threads}t");
                    // plain
                    let s = ctx.soft_max(x.id).unwrap();
                    let got = run(&ctx, s, threads);
                    check(&format!("soft_max {what}"), &got, &soft_max_ref(&x.vals, ne, None, 1.0, 0.0), 1e-5, 1e-7);
                    // scale, no mask
                    let s = ctx.soft_max_ext(x.id, None, 0.37, 0.0).unwrap();
                    let got = run(&ctx, s, threads);
                    check(
                        &format!("scale {what}"),
                        &got,
                        &soft_max_ref(&x.vals, ne, None, 0.37f32.into(), 0.0),
                        1e-5,
                        1e-7,
                    );
                    // mask with some -inf, scale, ALiBi
                    let mut m = input(&mut ctx, &mut rng, mdtype, mne, mkind, 2.0);
                    for (k, v) in m.vals.iter_mut().enumerate() {
                        if k % 5 == 3 {
                            *v = f64::NEG_INFINITY;
                        }
                    }
                    let m = masked_copy(&mut ctx, m, mdtype);
                    for max_bias in [0.0f32, 8.0] {
                        let s = ctx.soft_max_ext(x.id, Some(m.id), 0.6, max_bias).unwrap();
                        let got = run(&ctx, s, threads);
                        let want = soft_max_ref(&x.vals, ne, Some((&m.vals, mne)), 0.6f32.into(), max_bias.into());
                        check(&format!("soft_max_ext bias {max_bias} {what}"), &got, &want, 1e-5, 1e-7);
                    }
                }
            }
        }
    }
}

/// A mask holding `m.vals` (some set to `-inf`): a fresh leaf of `dtype`, seen
/// through a padded view when `m` was strided (so the kernel still reads a
/// strided mask). Returns the values as stored.
fn masked_copy(ctx: &mut Context, m: Input, dtype: DType) -> Input {
    let l = ctx.layout(m.id).unwrap();
    let ne = l.ne;
    let padded = !l.is_contiguous();
    let bne = if padded { [ne[0] + 2, ne[1], ne[2], ne[3]] } else { ne };
    let mut raw = vec![7.0f32; bne.iter().product::<i64>() as usize];
    for i in indices(ne) {
        raw[at(bne, i)] = m.vals[at(ne, i)] as f32;
    }
    let (base, stored) = leaf(ctx, dtype, bne, &raw);
    let vals = indices(ne).map(|i| stored[at(bne, i)]).collect();
    let id = if padded {
        let bl = ctx.layout(base).unwrap();
        ctx.view_4d(base, ne, [bl.nb[1], bl.nb[2], bl.nb[3]], 0).unwrap()
    } else {
        base
    };
    Input { id, vals }
}

/// Fully masked rows give zeros (ggml's CPU kernel gives NaN there), other
/// rows are unaffected; also a row that is all `-inf` in the input itself.
#[test]
fn soft_max_all_masked_row_is_zero() {
    let mut ctx = Context::new();
    let ninf = f32::NEG_INFINITY;
    let x = ctx.new_f32(&[3, 3], &[1., 2., 3., ninf, ninf, ninf, 0.5, 0.5, 0.5]).unwrap();
    let mask = ctx.new_f32(&[3, 3], &[ninf, ninf, ninf, 0., 0., 0., 0., ninf, 0.]).unwrap();
    for threads in [1, 2] {
        let s = ctx.soft_max_ext(x, Some(mask), 1.0, 0.0).unwrap();
        let got = run(&ctx, s, threads);
        assert_eq!(&got[..6], &[0.0; 6], "{got:?}");
        check("row 2", &got[6..], &[0.5, 0.0, 0.5], 1e-7, 0.0);
        let s = ctx.soft_max(x).unwrap();
        let got = run(&ctx, s, threads);
        assert_eq!(&got[3..6], &[0.0; 3], "{got:?}");
        assert!(got.iter().all(|v| v.is_finite()));
    }
}

// ---------------------------------------------------------------- diag_mask_inf

/// diag_mask_inf on every layout and F16, and the in-place twin writing into
/// its input's storage (through a strided view). Exact.
#[test]
fn diag_mask_inf_matches_reference() {
    let mut rng = Rng(42);
    for (ne, n_past) in [([7, 5, 3, 2], 0), ([11, 6, 2, 1], 3), ([200, 90, 3, 1], 17)] {
        for kind in KINDS {
            for threads in [1, 2] {
                let mut ctx = Context::new();
                let x = input(&mut ctx, &mut rng, DType::F32, ne, kind, 1.0);
                let want: Vec<f64> = indices(ne)
                    .map(|i| if i[0] > n_past + i[1] { f64::NEG_INFINITY } else { x.vals[at(ne, i)] })
                    .collect();
                let d = ctx.diag_mask_inf(x.id, n_past as i32).unwrap();
                check(&format!("diag_mask_inf {ne:?} {kind:?} {threads}t"), &run(&ctx, d, threads), &want, 0.0, 0.0);
                let d = ctx.diag_mask_inf_inplace(x.id, n_past as i32).unwrap();
                let root = ctx.storage_root(x.id).unwrap();
                assert_eq!(ctx.tensor(d).unwrap().view_src(), Some(root));
                let got = run(&ctx, d, threads);
                check(&format!("diag_mask_inf_inplace {ne:?} {kind:?} {threads}t"), &got, &want, 0.0, 0.0);
            }
        }
    }
    // F16, and a chain the planner may run in place (diag_mask over a scale result)
    let mut ctx = Context::new();
    let x = input(&mut ctx, &mut rng, DType::F16, [5, 4, 2, 1], Kind::Transposed, 1.0);
    let d = ctx.diag_mask_inf(x.id, 1).unwrap();
    assert_eq!(ctx.layout(d).unwrap().dtype, DType::F16);
    let want: Vec<f64> = indices([5, 4, 2, 1])
        .map(|i| if i[0] > 1 + i[1] { f64::NEG_INFINITY } else { x.vals[at([5, 4, 2, 1], i)] })
        .collect();
    check("diag_mask_inf f16", &run(&ctx, d, 1), &want, 0.0, 0.0);
    let s = ctx.scale(x.id, 2.0).unwrap();
    let d = ctx.diag_mask_inf(s, 1).unwrap();
    let want2: Vec<f64> = want.iter().map(|v| v * 2.0).collect();
    check("diag_mask_inf after scale", &run(&ctx, d, 2), &want2, 0.0, 0.0);
}

// ---------------------------------------------------------------- rope

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
    assert_eq!(ctx.tensor(a).unwrap().op(), rgml::Op::Rope(RopeParams::new(4, RopeParams::NEOX)));
    assert_eq!(ctx.tensor(a).unwrap().op().name(), "rope");
}

// ---------------------------------------------------------------- concat, repeat

/// concat along every dim, every layout for both operands, F32 with special
/// values (bit-exact), F16 and I32; 1 and 2 threads.
#[test]
fn concat_matches_reference() {
    let mut rng = Rng(5);
    for dim in 0..4 {
        for (ka, kb) in [(Kind::Contig, Kind::Contig), (Kind::Padded, Kind::Transposed), (Kind::Permuted, Kind::Padded)]
        {
            for dtype in [DType::F32, DType::F16, DType::I32] {
                for threads in [1, 2] {
                    let (mut nea, mut neb) = ([5, 3, 4, 2], [5, 3, 4, 2]);
                    nea[dim] = 3;
                    neb[dim] = 2;
                    if threads == 2 {
                        nea = nea.map(|v| v * 5);
                        neb = neb.map(|v| v * 5);
                    }
                    let mut ctx = Context::new();
                    let r = if dtype == DType::I32 { 3.0e6 } else { 10.0 };
                    let a = input(&mut ctx, &mut rng, dtype, nea, ka, r);
                    let b = input(&mut ctx, &mut rng, dtype, neb, kb, r);
                    let c = ctx.concat(a.id, b.id, dim).unwrap();
                    let l = ctx.layout(c).unwrap();
                    let mut ne = nea;
                    ne[dim] += neb[dim];
                    assert_eq!((l.ne, l.dtype, l.is_contiguous()), (ne, dtype, true));
                    let want: Vec<f64> = indices(ne)
                        .map(|i| {
                            if i[dim] < nea[dim] {
                                a.vals[at(nea, i)]
                            } else {
                                let mut j = i;
                                j[dim] -= nea[dim];
                                b.vals[at(neb, j)]
                            }
                        })
                        .collect();
                    let what = format!("concat dim {dim} {ka:?}+{kb:?} {dtype} {threads}t");
                    check(&what, &run(&ctx, c, threads), &want, 0.0, 0.0);
                }
            }
        }
    }
    // bit for bit: NaN payloads, -0, infinities, subnormals survive
    let mut ctx = Context::new();
    let special = [f32::from_bits(0x7fc0_1234), -0.0, f32::INFINITY, f32::from_bits(1), 1.5];
    let a = ctx.new_f32(&[5, 1], &special).unwrap();
    let at_ = ctx.transpose(a).unwrap();
    let c = ctx.concat(at_, at_, 1).unwrap();
    let got = run(&ctx, c, 1);
    let bits: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
    let want: Vec<u32> = special.iter().chain(&special).map(|v| v.to_bits()).collect();
    assert_eq!(bits, want);
}

/// repeat from every layout to shapes tiling each dim, F32/F16/I32, 1 and 2
/// threads; repeat into the same shape is a copy. Exact.
#[test]
fn repeat_matches_reference() {
    let mut rng = Rng(11);
    let cases = [
        ([3, 2, 1, 1], [9, 4, 5, 2]),
        ([1, 3, 2, 1], [7, 3, 4, 3]),
        ([5, 4, 3, 2], [5, 4, 3, 2]),
        ([7, 5, 3, 1], [70, 20, 9, 4]),
    ];
    for (nea, ne) in cases {
        for kind in KINDS {
            for dtype in [DType::F32, DType::F16, DType::I32] {
                for threads in [1, 2] {
                    let mut ctx = Context::new();
                    let a = input(&mut ctx, &mut rng, dtype, nea, kind, 100.0);
                    let b = ctx.new_tensor(DType::F32, &ne).unwrap();
                    let r = ctx.repeat(a.id, b).unwrap();
                    let l = ctx.layout(r).unwrap();
                    assert_eq!((l.ne, l.dtype), (ne, dtype));
                    let want: Vec<f64> =
                        indices(ne).map(|i| a.vals[at(nea, [0, 1, 2, 3].map(|d| i[d] % nea[d]))]).collect();
                    let what = format!("repeat {nea:?}->{ne:?} {kind:?} {dtype} {threads}t");
                    check(&what, &run(&ctx, r, threads), &want, 0.0, 0.0);
                }
            }
        }
    }
}

// ---------------------------------------------------------------- errors

#[test]
fn bad_shapes_and_types_are_errors() {
    let mut ctx = Context::new();
    let a = ctx.new_tensor(DType::F32, &[8, 4, 3]).unwrap();
    let pos3 = ctx.new_tensor_1d(DType::I32, 3).unwrap();
    let pos4 = ctx.new_tensor_1d(DType::I32, 4).unwrap();
    let posf = ctx.new_tensor_1d(DType::F32, 3).unwrap();
    let pos2d = ctx.new_tensor_2d(DType::I32, 3, 2).unwrap();
    let shape = |r: rgml::Result<TensorId>| matches!(r, Err(Error::Shape { .. }));
    // rope
    assert!(ctx.rope(a, pos3, 8, 0).is_ok());
    assert!(shape(ctx.rope(a, pos4, 8, 0)), "positions of the wrong length");
    assert!(shape(ctx.rope(a, pos2d, 8, 0)), "positions not a vector");
    assert!(matches!(ctx.rope(a, posf, 8, 0), Err(Error::DTypeMismatch { .. })), "F32 positions");
    assert!(shape(ctx.rope(a, pos3, 7, 0)), "odd n_dims");
    assert!(shape(ctx.rope(a, pos3, 10, 0)), "n_dims > head_dim");
    assert!(shape(ctx.rope(a, pos3, 0, 0)), "n_dims 0");
    assert!(matches!(ctx.rope(a, pos3, 8, 1), Err(Error::Invalid(_))), "mode 1 (removed from ggml)");
    assert!(matches!(ctx.rope(a, pos3, 8, 8), Err(Error::Invalid(_))), "mrope is not implemented");
    let ff_short = ctx.new_tensor_1d(DType::F32, 3).unwrap();
    let ff_f16 = ctx.new_tensor_1d(DType::F16, 4).unwrap();
    let p = RopeParams::new(8, 0);
    assert!(shape(ctx.rope_with(a, pos3, Some(ff_short), p)), "freq_factors too short");
    assert!(matches!(ctx.rope_with(a, pos3, Some(ff_f16), p), Err(Error::DTypeMismatch { .. })));
    let q = ctx.new_tensor(DType::Q8_0, &[32, 2, 3]).unwrap();
    assert!(matches!(ctx.rope(q, pos3, 8, 0), Err(Error::Unsupported { .. })));
    let ai = ctx.new_tensor(DType::I32, &[8, 4, 3]).unwrap();
    assert!(matches!(ctx.rope(ai, pos3, 8, 0), Err(Error::Unsupported { .. })));
    // soft_max
    let m_few_rows = ctx.new_tensor(DType::F32, &[8, 3]).unwrap();
    let m_ne0 = ctx.new_tensor(DType::F32, &[7, 4]).unwrap();
    let m_bcast = ctx.new_tensor(DType::F32, &[8, 4, 2]).unwrap();
    let m_i32 = ctx.new_tensor(DType::I32, &[8, 4]).unwrap();
    let m_ok = ctx.new_tensor(DType::F16, &[8, 6, 1]).unwrap();
    assert!(ctx.soft_max_ext(a, Some(m_ok), 0.5, 2.0).is_ok());
    assert!(shape(ctx.soft_max_ext(a, Some(m_few_rows), 1.0, 0.0)), "mask with too few rows");
    assert!(shape(ctx.soft_max_ext(a, Some(m_ne0), 1.0, 0.0)), "mask ne0 != a.ne0");
    assert!(shape(ctx.soft_max_ext(a, Some(m_bcast), 1.0, 0.0)), "a.ne2 % mask.ne2 != 0");
    assert!(matches!(ctx.soft_max_ext(a, Some(m_i32), 1.0, 0.0), Err(Error::Unsupported { .. })));
    assert!(matches!(ctx.soft_max_ext(a, None, 1.0, 8.0), Err(Error::Invalid(_))), "ALiBi without a mask");
    assert!(matches!(ctx.soft_max(ai), Err(Error::Unsupported { .. })));
    // norms
    assert!(matches!(ctx.rms_norm(ai, 1e-5), Err(Error::Unsupported { .. })));
    assert!(matches!(ctx.norm(q, 1e-5), Err(Error::Unsupported { .. })));
    assert!(matches!(ctx.rms_norm(a, -1.0), Err(Error::Invalid(_))));
    assert!(matches!(ctx.norm(a, f32::NAN), Err(Error::Invalid(_))));
    // diag_mask_inf
    assert!(matches!(ctx.diag_mask_inf(a, -1), Err(Error::Invalid(_))));
    assert!(matches!(ctx.diag_mask_inf_inplace(ai, 0), Err(Error::Unsupported { .. })));
    // concat
    let b = ctx.new_tensor(DType::F32, &[8, 5, 3]).unwrap();
    let b16 = ctx.new_tensor(DType::F16, &[8, 4, 3]).unwrap();
    assert!(ctx.concat(a, b, 1).is_ok());
    assert!(shape(ctx.concat(a, b, 0)), "concat with a mismatched other dim");
    assert!(shape(ctx.concat(a, b, 2)));
    assert!(matches!(ctx.concat(a, b16, 1), Err(Error::DTypeMismatch { .. })));
    assert!(matches!(ctx.concat(a, a, 4), Err(Error::Invalid(_))));
    assert!(matches!(ctx.concat(q, q, 1), Err(Error::Unsupported { .. })));
    // repeat
    let big = ctx.new_tensor(DType::F32, &[16, 8, 3]).unwrap();
    let odd = ctx.new_tensor(DType::F32, &[12, 8, 3]).unwrap();
    assert!(ctx.repeat(a, big).is_ok());
    assert!(shape(ctx.repeat(a, odd)), "12 is not a multiple of 8");
    assert!(shape(ctx.repeat(big, a)), "repeat cannot shrink");
    assert!(matches!(ctx.repeat(q, q), Err(Error::Unsupported { .. })));
    // messages name the shapes
    let msg = ctx.soft_max_ext(a, Some(m_few_rows), 1.0, 0.0).unwrap_err().to_string();
    assert!(msg.contains("[8, 3, 1, 1]") && msg.contains("[8, 4, 3, 1]"), "{msg}");
}

/// Ops names, and empty tensors run without touching memory.
#[test]
fn names_and_empty_tensors() {
    let mut ctx = Context::new();
    let a = ctx.new_tensor(DType::F32, &[4, 0, 2]).unwrap();
    let b = ctx.new_tensor(DType::F32, &[4, 0, 2]).unwrap();
    let ops = [
        (ctx.rms_norm(a, 1e-5).unwrap(), "rms_norm"),
        (ctx.norm(a, 1e-5).unwrap(), "norm"),
        (ctx.soft_max(a).unwrap(), "soft_max"),
        (ctx.diag_mask_inf(a, 0).unwrap(), "diag_mask_inf"),
        (ctx.concat(a, b, 1).unwrap(), "concat"),
        (ctx.repeat(a, b).unwrap(), "repeat"),
    ];
    for (id, name) in ops {
        assert_eq!(ctx.tensor(id).unwrap().op().name(), name);
        assert!(run(&ctx, id, 2).is_empty());
    }
}
