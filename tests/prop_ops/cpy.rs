//! Property 6: cpy.

use super::*;

#[derive(Clone, Debug)]
struct CpyCase {
    src_dt: DType,
    dst_dt: DType,
    ne: [i64; 4],
    src_spec: Spec,
    dst_spec: Spec,
    seed: u64,
}

prop_compose! {
    fn cpy_case()(
        src_dt in prop::sample::select(FLOATS.to_vec()), dst_dt in prop::sample::select(FLOATS.to_vec()),
        ne in prop::array::uniform4(1i64..=5), src_spec in spec_strategy(), dst_spec in spec_strategy(),
        seed in any::<u64>(),
    ) -> CpyCase {
        CpyCase { src_dt, dst_dt, ne, src_spec, dst_spec, seed }
    }
}

fn check_cpy(c: &CpyCase) -> TR {
    let mut ctx = Context::new();
    let mut r = Rng(c.seed);
    let n = numel(c.ne);
    let sv: Vec<f64> = (0..n).map(|_| round_to(c.src_dt, r.wide())).collect();
    let si = make_input(&mut ctx, c.src_dt, c.ne, &sv, &c.src_spec)?;
    let dne = factorize(n, &mut r);
    let old: Vec<f64> = (0..n).map(|k| round_to(c.dst_dt, 3.0 + k as f64)).collect();
    let di = make_input(&mut ctx, c.dst_dt, dne, &old, &c.dst_spec)?;
    let bad = ck(ctx.new_tensor(c.dst_dt, &[n as i64 + 1]), "new_tensor")?;
    prop_assert!(matches!(ctx.cpy(si.id, bad), Err(Error::Shape { .. })), "cpy with different element counts");
    let before = ck(ctx.cont(di.id), "cont before")?;
    let w = ck(ctx.cpy(si.id, di.id), "cpy")?;
    prop_assert_eq!(ck(ctx.layout(w), "layout")?, ck(ctx.layout(di.id), "layout")?);
    prop_assert_eq!(ck(ctx.storage_root(w), "root")?, di.root);
    // cont_reshape: the same logical order, no conversion, a fresh contiguous tensor
    let cr = ck(ctx.cont_reshape(si.id, &dne), "cont_reshape")?;
    let lcr = ck(ctx.layout(cr), "layout")?;
    prop_assert_eq!((lcr.ne, lcr.dtype), (dne, c.src_dt));
    prop_assert!(lcr.is_contiguous());
    let st = run(&ctx, &[before, w, cr], 1)?;
    same_bits(&read(&st, &ctx, cr)?, &sv, "cont_reshape")?;
    // values cross in logical order, rounded to the destination type (nearest even)
    let want: Vec<f64> = sv.iter().map(|&x| round_to(c.dst_dt, x)).collect();
    let what = format!("cpy {c:?} into ne={dne:?}");
    same_bits(&read(&st, &ctx, w)?, &want, &what)?;
    same_bits(&read(&st, &ctx, di.id)?, &want, &what)?;
    same_bits(&read(&st, &ctx, before)?, &old, "reader built before the cpy")?;
    let mut store = di.storage.clone();
    for (k, &p) in di.pos.iter().enumerate() {
        store[p] = want[k];
    }
    same_bits(&read(&st, &ctx, di.root)?, &store, "destination storage after cpy")?;
    same_bits(&read(&st, &ctx, si.root)?, &si.storage, "source storage is untouched")?;
    Ok(())
}

proptest! {
    #![proptest_config(cfg(256))]

    /// cpy between F32/F16/BF16, any source layout, into a differently shaped strided
    /// destination: bit-exact round-to-nearest-even conversion in logical order.
    #[test]
    fn cpy_converts_in_logical_order(c in cpy_case()) {
        check_cpy(&c)?;
    }
}
