//! Property 3 & 4: elementwise ops, out of place and in place.

use super::*;

#[derive(Clone, Copy, Debug)]
pub(crate) enum EwOp {
    Bin(BinaryOp),
    Scale(f32),
    Unary(UnaryOp),
    SumRows,
}

pub(crate) fn ew_op() -> impl Strategy<Value = EwOp> {
    prop_oneof![
        4 => prop::sample::select(vec![BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div]).prop_map(EwOp::Bin),
        1 => (-4.0f32..4.0).prop_map(EwOp::Scale),
        4 => prop::sample::select(UnaryOp::ALL.to_vec()).prop_map(EwOp::Unary),
        1 => Just(EwOp::SumRows),
    ]
}

#[derive(Clone, Debug)]
pub(crate) struct EwCase {
    pub(crate) op: EwOp,
    pub(crate) a_dt: DType,
    pub(crate) b_dt: DType,
    pub(crate) ne: [i64; 4],
    /// b's shape: `bdiv[i]` picks a divisor of `ne[i]`
    pub(crate) bdiv: [usize; 4],
    /// dims of b made by `expand` from size 1
    pub(crate) bexp: [bool; 4],
    /// b is a itself
    pub(crate) self_b: bool,
    pub(crate) a_spec: Spec,
    pub(crate) b_spec: Spec,
    pub(crate) seed: u64,
    pub(crate) threads: usize,
}

prop_compose! {
    fn ew_case(zero_dims: bool)(
        op in ew_op(),
        a_dt in prop::sample::select(FLOATS.to_vec()),
        b_dt in prop::sample::select(FLOATS.to_vec()),
        ne in prop::array::uniform4((0i64..25).prop_map(move |x| if zero_dims && x == 0 { 0 } else { 1 + x % 5 })),
        bdiv in prop::array::uniform4(0usize..6),
        bexp in prop::array::uniform4(prop::bool::weighted(0.3)),
        self_b in prop::bool::weighted(0.1),
        a_spec in spec_strategy(),
        b_spec in spec_strategy(),
        seed in any::<u64>(),
        threads in 1usize..=2,
    ) -> EwCase {
        EwCase { op, a_dt, b_dt, ne, bdiv, bexp, self_b, a_spec, b_spec, seed, threads }
    }
}

pub(crate) fn unary_ref(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Relu => x.max(0.0),
        UnaryOp::Gelu => gelu_ref(x),
        UnaryOp::Silu => x / (1.0 + (-x).exp()),
        UnaryOp::Neg => -x,
        UnaryOp::Sqr => x * x,
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
    }
}

/// ggml's CPU GELU (its f16 lookup table): the tanh approximation of the input rounded
/// to f16, rounded to f16; 0 from -10 down, the input from 10 up.
fn gelu_ref(x: f64) -> f64 {
    if x <= -10.0 {
        return 0.0;
    }
    if x >= 10.0 {
        return x;
    }
    let f16 = |v: f64| rgml::f16::from_f64(v).to_f64();
    let h = f16(x);
    f16(0.5 * h * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (h + 0.044715 * h * h * h)).tanh()))
}

pub(crate) fn binary_ref(op: BinaryOp, x: f64, y: f64) -> f64 {
    match op {
        BinaryOp::Add => x + y,
        BinaryOp::Sub => x - y,
        BinaryOp::Mul => x * y,
        BinaryOp::Div => x / y,
    }
}

/// The named op (not the generic dispatcher), out of place or in place.
pub(crate) fn apply(ctx: &mut Context, op: EwOp, a: TensorId, b: TensorId, inplace: bool) -> rgml::Result<TensorId> {
    use BinaryOp as B;
    use UnaryOp as U;
    match (op, inplace) {
        (EwOp::Bin(B::Add), false) => ctx.add(a, b),
        (EwOp::Bin(B::Add), true) => ctx.add_inplace(a, b),
        (EwOp::Bin(B::Sub), false) => ctx.sub(a, b),
        (EwOp::Bin(B::Sub), true) => ctx.sub_inplace(a, b),
        (EwOp::Bin(B::Mul), false) => ctx.mul(a, b),
        (EwOp::Bin(B::Mul), true) => ctx.mul_inplace(a, b),
        (EwOp::Bin(B::Div), false) => ctx.div(a, b),
        (EwOp::Bin(B::Div), true) => ctx.div_inplace(a, b),
        (EwOp::Scale(s), false) => ctx.scale(a, s),
        (EwOp::Scale(s), true) => ctx.scale_inplace(a, s),
        (EwOp::Unary(u), false) => match u {
            U::Relu => ctx.relu(a),
            U::Gelu => ctx.gelu(a),
            U::Silu => ctx.silu(a),
            U::Neg => ctx.neg(a),
            U::Sqr => ctx.sqr(a),
            U::Sqrt => ctx.sqrt(a),
            U::Exp => ctx.exp(a),
            U::Sigmoid => ctx.sigmoid(a),
        },
        (EwOp::Unary(u), true) => match u {
            U::Relu => ctx.relu_inplace(a),
            U::Gelu => ctx.gelu_inplace(a),
            U::Silu => ctx.silu_inplace(a),
            U::Neg => ctx.neg_inplace(a),
            U::Sqr => ctx.sqr_inplace(a),
            U::Sqrt => ctx.sqrt_inplace(a),
            U::Exp => ctx.exp_inplace(a),
            U::Sigmoid => ctx.sigmoid_inplace(a),
        },
        (EwOp::SumRows, _) => ctx.sum_rows(a),
    }
}

/// A value for input `a` of `op` (sqrt: positive; div: |x| >= 0.25 so that b = a works).
pub(crate) fn a_value(op: EwOp, r: &mut Rng) -> f64 {
    match op {
        EwOp::Unary(UnaryOp::Sqrt) => r.range(0.01, 50.0),
        EwOp::Unary(UnaryOp::Exp) => r.range(-8.0, 8.0),
        EwOp::Unary(_) => r.range(-6.0, 6.0),
        EwOp::Bin(BinaryOp::Div) => nonsmall(r),
        _ => r.range(-10.0, 10.0),
    }
}

/// `±[0.25, 4]`.
pub(crate) fn nonsmall(r: &mut Rng) -> f64 {
    let m = r.range(0.25, 4.0);
    if r.chance(0.5) {
        -m
    } else {
        m
    }
}

/// Relative and absolute tolerance of computing `op` in f32. The correctly rounded
/// ops (IEEE +, -, *, /, sqrt, and the exact ones) are within half an f32 ulp of the
/// f64 result; allow 2 ulp. exp/silu: 1e-5 relative, and 1e-6 absolute. gelu: its f32
/// result is rounded to f16 as the reference's f64 one is, so the two can land one f16
/// step apart (2^-10 relative), and 1e-6 absolute for the cancellation in `1 + tanh` at
/// negative inputs.
pub(crate) fn op_tol(op: EwOp) -> (f64, f64) {
    match op {
        EwOp::Unary(UnaryOp::Gelu) => (2f64.powi(-10), 1e-6),
        EwOp::Unary(UnaryOp::Exp | UnaryOp::Silu | UnaryOp::Sigmoid) => (1e-5, 1e-6),
        EwOp::SumRows => (1e-6, 1e-6),
        _ => (2f64.powi(-22), 0.0),
    }
}

/// Absolute rounding of storing a tiny value into `d` (half the F16 subnormal spacing).
pub(crate) fn out_abs(d: DType) -> f64 {
    if d == DType::F16 {
        2f64.powi(-25)
    } else {
        0.0
    }
}

/// Builds `op` on the inputs `case` describes; with `inplace`, also the inplace twin
/// and readers of `a` built before and after it, and checks everything.
pub(crate) fn check_elementwise(c: &EwCase, inplace: bool) -> TR {
    let mut ctx = Context::new();
    let mut r = Rng(c.seed);
    let ne = c.ne;
    let n = numel(ne);
    let avals: Vec<f64> = (0..n).map(|_| round_to(c.a_dt, a_value(c.op, &mut r))).collect();
    let a = make_input(&mut ctx, c.a_dt, ne, &avals, &c.a_spec)?;

    // b: a tiling of a (a divisor of each dim), laid out by its spec, some dims expanded from 1
    let mut b_in: Option<Input> = None;
    let (b, bne, bvals) = match c.op {
        EwOp::Bin(_) if c.self_b => (a.id, ne, avals.clone()),
        EwOp::Bin(op) => {
            let bne: [i64; 4] = std::array::from_fn(|i| {
                if ne[i] == 0 {
                    1 + (c.bdiv[i] % 3) as i64
                } else {
                    let ds = divisors(ne[i]);
                    ds[c.bdiv[i] % ds.len()]
                }
            });
            let bl: [i64; 4] = std::array::from_fn(|i| if c.bexp[i] { 1 } else { bne[i] });
            let blvals: Vec<f64> = (0..numel(bl))
                .map(|_| round_to(c.b_dt, if op == BinaryOp::Div { nonsmall(&mut r) } else { r.range(-10.0, 10.0) }))
                .collect();
            let bi = make_input(&mut ctx, c.b_dt, bl, &blvals, &c.b_spec)?;
            let b = if bl != bne { ck(ctx.expand(bi.id, bne), "expand b")? } else { bi.id };
            let bvals: Vec<f64> = (0..numel(bne))
                .map(|k| {
                    let ix = unravel(k, bne);
                    blvals[ravel(std::array::from_fn(|i| if bl[i] == 1 { 0 } else { ix[i] }), bl)]
                })
                .collect();
            b_in = Some(bi);
            (b, bne, bvals)
        }
        _ => (a.id, ne, avals.clone()),
    };

    // the f64 reference
    let rne = if matches!(c.op, EwOp::SumRows) { [1, ne[1], ne[2], ne[3]] } else { ne };
    let mut want = vec![0f64; numel(rne)];
    let mut scale = vec![0f64; numel(rne)]; // magnitude the rounding errors scale with
    for (k, (w, s)) in want.iter_mut().zip(scale.iter_mut()).enumerate() {
        let ix = unravel(k, rne);
        match c.op {
            EwOp::Bin(op) => {
                let y = bvals[ravel(std::array::from_fn(|i| ix[i] % bne[i] as usize), bne)];
                *w = binary_ref(op, avals[k], y);
                *s = w.abs();
            }
            EwOp::Scale(f) => {
                *w = avals[k] * f as f64;
                *s = w.abs();
            }
            EwOp::Unary(u) => {
                *w = unary_ref(u, avals[k]);
                *s = w.abs();
            }
            EwOp::SumRows => {
                for i0 in 0..ne[0] as usize {
                    let x = avals[ravel([i0, ix[1], ix[2], ix[3]], ne)];
                    *w += x;
                    *s += x.abs();
                }
            }
        }
    }
    let (op_rel, op_abs) = op_tol(c.op);
    let (rel, abs) = (op_rel.max(out_rel(c.a_dt)), op_abs + out_abs(c.a_dt));
    let tol = |k: usize| {
        if matches!(c.op, EwOp::SumRows) {
            op_rel * scale[k] + out_rel(c.a_dt) * want[k].abs() + abs
        } else {
            rel * scale[k] + abs
        }
    };

    let before = if inplace { Some(ck(ctx.cont(a.id), "cont before")?) } else { None };
    let out = ck(apply(&mut ctx, c.op, a.id, b, false), "op")?;
    let lo = ck(ctx.layout(out), "layout")?;
    prop_assert_eq!(lo.ne, rne);
    prop_assert_eq!(lo.dtype, c.a_dt, "result has a's type");
    prop_assert!(lo.is_contiguous());
    let mut outs = vec![out];
    let mut w_after = None;
    if inplace {
        let w = ck(apply(&mut ctx, c.op, a.id, b, true), "inplace op")?;
        prop_assert_eq!(ck(ctx.storage_root(w), "root")?, a.root, "inplace result is a view of a's storage");
        prop_assert_eq!(ck(ctx.layout(w), "layout")?, ck(ctx.layout(a.id), "layout")?);
        let after = ck(ctx.cont(a.id), "cont after")?;
        outs.extend([before.unwrap(), w, after]);
        w_after = Some((w, after));
    }
    let st = run(&ctx, &outs, c.threads)?;
    let got = read(&st, &ctx, out)?;
    close(&got, &want, tol, &format!("{:?} {:?}", c.op, c))?;
    if let Some((w, after)) = w_after {
        same_bits(&read(&st, &ctx, w)?, &got, "inplace result vs out-of-place")?;
        same_bits(&read(&st, &ctx, after)?, &got, "reader built after the inplace write")?;
        same_bits(&read(&st, &ctx, before.unwrap())?, &avals, "reader built before the inplace write")?;
        let mut store = a.storage.clone();
        for (k, &p) in a.pos.iter().enumerate() {
            store[p] = got[k];
        }
        same_bits(&read(&st, &ctx, a.root)?, &store, "a's storage after the inplace write")?;
    }
    if let Some(bi) = b_in {
        same_bits(&read(&st, &ctx, bi.root)?, &bi.storage, "b's storage is untouched")?;
    }
    if !inplace && a.root != a.id {
        same_bits(&read(&st, &ctx, a.root)?, &a.storage, "a's storage is untouched")?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(cfg(256))]

    /// Elementwise ops on strided/permuted/expanded F32/F16/BF16 inputs match the f64 reference.
    #[test]
    fn elementwise_matches_reference(c in ew_case(true)) {
        check_elementwise(&c, false)?;
    }
}

proptest! {
    #![proptest_config(cfg(160))]

    /// `*_inplace` equals the out-of-place op, writes exactly a's elements, and readers
    /// built before/after the write see the old/new values.
    #[test]
    fn inplace_matches_out_of_place(c in ew_case(false).prop_filter("sum_rows has no inplace twin", |c| !matches!(c.op, EwOp::SumRows))) {
        check_elementwise(&c, true)?;
    }

    /// `scale_inplace` through any in-bounds strided view of a leaf: refused with
    /// `OverlappingWrite` exactly when two elements share bytes; otherwise it scales
    /// exactly those elements.
    #[test]
    fn inplace_through_arbitrary_views(n in 1usize..=40, seed in any::<u64>()) {
        let mut ctx = Context::new();
        let mut r = Rng(seed);
        let data: Vec<f64> = (0..n).map(|i| (i as f64) - 20.0).collect();
        let leaf = ck(ctx.new_f32(&[n as i64], &data.iter().map(|&x| x as f32).collect::<Vec<_>>()), "new_f32")?;
        let m = Model { ne: [n as i64, 1, 1, 1], st: [1, 1, 1, 1], off: 0 };
        let Some((v, vm, what)) = chain_step(&mut ctx, leaf, &m, n, 3, &mut r)? else { unreachable!() };
        let cells: Vec<usize> = (0..numel(vm.ne))
            .map(|k| { let ix = unravel(k, vm.ne); vm.off + (0..4).map(|i| ix[i] * vm.st[i]).sum::<usize>() })
            .collect();
        let mut sorted = cells.clone();
        sorted.sort_unstable();
        let overlaps = sorted.windows(2).any(|w| w[0] == w[1]);
        let res = ctx.scale_inplace(v, 2.0);
        if overlaps {
            prop_assert!(matches!(res, Err(Error::OverlappingWrite { .. })), "{}: {:?}", what, res);
        } else {
            let w = ck(res, &what)?;
            let st = run(&ctx, &[w], 1)?;
            let mut want = data.clone();
            for &p in &cells {
                want[p] *= 2.0;
            }
            same_bits(&read(&st, &ctx, leaf)?, &want, &what)?;
        }
    }
}
