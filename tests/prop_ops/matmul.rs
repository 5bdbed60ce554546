//! Property 5: mul_mat.

use super::*;

#[derive(Clone, Debug)]
pub(crate) struct MmCase {
    pub(crate) k: i64,
    pub(crate) m: i64,
    pub(crate) n: i64,
    pub(crate) a23: [i64; 2],
    pub(crate) r23: [i64; 2],
    pub(crate) a_dt: DType,
    pub(crate) b_dt: DType,
    pub(crate) a_spec: Spec,
    pub(crate) b_spec: Spec,
    pub(crate) a_cont: bool,
    pub(crate) b_cont: bool,
    pub(crate) seed: u64,
}

prop_compose! {
    fn mm_case()(
        k in prop_oneof![30 => 1i64..=40, 1 => Just(0i64)],
        m in prop_oneof![30 => 1i64..=9, 1 => Just(0i64)],
        n in prop_oneof![30 => 1i64..=9, 1 => Just(0i64)],
        a23 in prop::array::uniform2(1i64..=3), r23 in prop::array::uniform2(1i64..=3),
        a_dt in prop::sample::select(FLOATS.to_vec()), b_dt in prop::sample::select(FLOATS.to_vec()),
        a_spec in spec_strategy(), b_spec in spec_strategy(),
        a_cont in prop::bool::weighted(0.2), b_cont in prop::bool::weighted(0.2),
        seed in any::<u64>(),
    ) -> MmCase {
        MmCase { k, m, n, a23, r23, a_dt, b_dt, a_spec, b_spec, a_cont, b_cont, seed }
    }
}

/// f64 reference of ggml's mul_mat and the error scale Σ|a||b| of each output.
pub(crate) fn mul_mat_ref(ane: [i64; 4], a: &[f64], bne: [i64; 4], b: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let (r2, r3) = ((bne[2] / ane[2]) as usize, (bne[3] / ane[3]) as usize);
    let one = [ane[1], bne[1], bne[2], bne[3]];
    let mut out = vec![0.0; numel(one)];
    let mut mag = vec![0.0; numel(one)];
    for (idx, (o, g)) in out.iter_mut().zip(mag.iter_mut()).enumerate() {
        let [i0, i1, i2, i3] = unravel(idx, one);
        for kk in 0..ane[0] as usize {
            let x = a[ravel([kk, i0, i2 / r2, i3 / r3], ane)];
            let y = b[ravel([kk, i1, i2, i3], bne)];
            *o += x * y;
            *g += (x * y).abs();
        }
    }
    (out, mag)
}

pub(crate) fn check_mul_mat(c: &MmCase) -> TR {
    let mut ctx = Context::new();
    let mut r = Rng(c.seed);
    let ane = [c.k, c.m, c.a23[0], c.a23[1]];
    let bne = [c.k, c.n, c.a23[0] * c.r23[0], c.a23[1] * c.r23[1]];
    let av: Vec<f64> = (0..numel(ane)).map(|_| round_to(c.a_dt, r.range(-2.0, 2.0))).collect();
    let bv: Vec<f64> = (0..numel(bne)).map(|_| round_to(c.b_dt, r.range(-2.0, 2.0))).collect();
    let ai = make_input(&mut ctx, c.a_dt, ane, &av, &c.a_spec)?;
    let bi = make_input(&mut ctx, c.b_dt, bne, &bv, &c.b_spec)?;
    let a = if c.a_cont { ck(ctx.cont(ai.id), "cont a")? } else { ai.id };
    let b = if c.b_cont { ck(ctx.cont(bi.id), "cont b")? } else { bi.id };
    let out = ck(ctx.mul_mat(a, b), "mul_mat")?;
    let lo = ck(ctx.layout(out), "layout")?;
    prop_assert_eq!(lo.ne, [c.m, c.n, bne[2], bne[3]]);
    prop_assert_eq!(lo.dtype, DType::F32);
    // shape errors: K mismatch, batch dims that a does not divide
    let bad_k = ck(ctx.new_tensor(DType::F32, &[c.k + 1, c.n, bne[2], bne[3]]), "new_tensor")?;
    prop_assert!(matches!(ctx.mul_mat(a, bad_k), Err(Error::Shape { .. })), "mul_mat with a different K");
    if c.a23[0] > 1 {
        let bad_b2 = ck(ctx.new_tensor(DType::F32, &[c.k, c.n, bne[2] + 1, bne[3]]), "new_tensor")?;
        prop_assert!(matches!(ctx.mul_mat(a, bad_b2), Err(Error::Shape { .. })), "mul_mat with b.ne2 % a.ne2 != 0");
    }
    let st = run(&ctx, &[out], 1)?;
    // like ggml, b is first rounded to a's dot partner (its own type for floats)
    let b_dot: Vec<f64> = bv.iter().map(|&x| round_to(c.a_dt, x)).collect();
    let (want, mag) = mul_mat_ref(ane, &av, bne, &b_dot);
    close(&read(&st, &ctx, out)?, &want, |k| 1e-5 * mag[k] + 1e-6, &format!("mul_mat {c:?}"))?;
    same_bits(&read(&st, &ctx, ai.root)?, &ai.storage, "a is untouched")?;
    same_bits(&read(&st, &ctx, bi.root)?, &bi.storage, "b is untouched")?;
    Ok(())
}

proptest! {
    #![proptest_config(cfg(160))]

    /// mul_mat on random shapes, batch broadcasts, types and layouts matches the f64 reference.
    #[test]
    fn mul_mat_matches_reference(c in mm_case()) {
        check_mul_mat(&c)?;
    }
}
