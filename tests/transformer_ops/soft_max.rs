//! `soft_max_ext` against an f64 reference: masks of every layout and type,
//! scale, ALiBi slopes, and fully masked rows.

use super::*;

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
