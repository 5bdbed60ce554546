//! Property 2: out-of-bounds and wild views.

use super::*;

const VIEW_TYPES: [DType; 3] = [DType::F32, DType::F16, DType::I8];

/// The layout (ne, nb in bytes) a view call of `kind` (1d, 2d, 3d, 4d, strided) makes,
/// or `None` when computing its implied strides overflows.
fn view_layout(kind: usize, ts: usize, ne: [i64; 4], nb: [usize; 4]) -> Option<([i64; 4], [usize; 4])> {
    let mul = |s: usize, n: i64| usize::try_from(n).ok().and_then(|n| s.checked_mul(n));
    Some(match kind {
        0 => {
            let row = mul(ts, ne[0])?;
            ([ne[0], 1, 1, 1], [ts, row, row, row])
        }
        1 => {
            let s2 = mul(nb[1], ne[1])?;
            ([ne[0], ne[1], 1, 1], [ts, nb[1], s2, s2])
        }
        2 => ([ne[0], ne[1], ne[2], 1], [ts, nb[1], nb[2], mul(nb[2], ne[2])?]),
        3 => (ne, [ts, nb[1], nb[2], nb[3]]),
        _ => (ne, nb),
    })
}

fn call_view(
    ctx: &mut Context,
    a: TensorId,
    kind: usize,
    ne: [i64; 4],
    nb: [usize; 4],
    off: usize,
) -> rgml::Result<TensorId> {
    match kind {
        0 => ctx.view_1d(a, ne[0], off),
        1 => ctx.view_2d(a, ne[0], ne[1], nb[1], off),
        2 => ctx.view_3d(a, [ne[0], ne[1], ne[2]], nb[1], nb[2], off),
        3 => ctx.view_4d(a, ne, [nb[1], nb[2], nb[3]], off),
        _ => ctx.view_strided(a, ne, nb, off),
    }
}

/// Last byte + 1 of a layout at `off`, in u128 (no overflow possible for i64/usize inputs
/// except in the sum, which is checked): `None` when it overflows u128.
fn extent_end(ts: usize, ne: [i64; 4], nb: [usize; 4], off: u128) -> Option<u128> {
    if ne.contains(&0) {
        return Some(off);
    }
    let mut e = off.checked_add(ts as u128)?;
    for i in 0..4 {
        e = e.checked_add((ne[i] as u128 - 1).checked_mul(nb[i] as u128)?)?;
    }
    Some(e)
}

/// A leaf of `dt` holding small integers (exact in every type), and its values.
fn int_leaf(ctx: &mut Context, dt: DType, shape: &[i64]) -> TR<(TensorId, Vec<f64>)> {
    let leaf = ck(ctx.new_tensor(dt, shape), "new_tensor")?;
    let n: i64 = shape.iter().product();
    let vals: Vec<f64> = (0..n).map(|i| (i % 200 - 100) as f64).collect();
    set_values(ctx, leaf, dt, &vals)?;
    Ok((leaf, vals))
}

fn nonempty_shape() -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(1i64..=6, 1..=4)
}

fn wild_ne() -> impl Strategy<Value = i64> {
    prop_oneof![8 => 0i64..=6, 1 => Just(-1i64), 1 => Just(i64::MAX), 1 => any::<i64>(), 1 => (1i64 << 30)..(1i64 << 34)]
}

fn wild_nb() -> impl Strategy<Value = usize> {
    prop_oneof![8 => 0usize..=40, 1 => Just(usize::MAX), 1 => any::<usize>(), 1 => (1usize << 40)..(1usize << 62)]
}

proptest! {
    #![proptest_config(cfg(256))]

    /// A view whose strided extent passes the end of its storage by >= 1 byte is
    /// `InvalidView`; the same view moved back to end exactly at the storage's end is
    /// accepted and reads the right values.
    #[test]
    fn out_of_bounds_views_are_errors(
        dt in prop::sample::select(VIEW_TYPES.to_vec()),
        shape in nonempty_shape(),
        pre in 0usize..4,
        kind in 0usize..5,
        ne in prop::array::uniform4(1i64..=6),
        st in prop::array::uniform4(0usize..=8),
        off in 0usize..16,
        excess in 1usize..=3,
    ) {
        let mut ctx = Context::new();
        let ts = dt.type_size();
        let (leaf, vals) = int_leaf(&mut ctx, dt, &shape)?;
        let n = vals.len();
        let storage = n * ts;
        // maybe through a view that starts `pre` elements in: offsets add up
        let (cur, pre_b) = if pre > 0 && pre < n {
            (ck(ctx.view_1d(leaf, (n - pre) as i64, pre * ts), "view_1d")?, pre * ts)
        } else {
            (leaf, 0)
        };
        let (lne, lnb) = view_layout(kind, ts, ne, st.map(|s| s * ts)).unwrap();
        let end0 = extent_end(ts, lne, lnb, pre_b as u128).unwrap() as usize;
        // the smallest aligned offset >= off*ts that ends `excess` elements past the storage
        let off_b = (off * ts).max((storage + excess * ts).saturating_sub(end0));
        let end = end0 + off_b;
        prop_assert!(end > storage);
        let res = call_view(&mut ctx, cur, kind, ne, st.map(|s| s * ts), off_b);
        prop_assert!(
            matches!(res, Err(Error::InvalidView { .. })),
            "kind {} ne={:?} nb={:?} offset {}+{} ends at byte {} of {}: {:?}", kind, lne, lnb, pre_b, off_b, end, storage, res
        );
        // the same view ending exactly at the storage's end
        let over = end - storage;
        if off_b >= over {
            let fit = off_b - over;
            let v = ck(call_view(&mut ctx, cur, kind, ne, st.map(|s| s * ts), fit), "exactly fitting view")?;
            let l = ck(ctx.layout(v), "layout")?;
            prop_assert_eq!((l.ne, l.nb), (lne, lnb));
            prop_assert_eq!(ck(ctx.tensor(v), "tensor")?.view_offs(), pre_b + fit);
            let m = Model { ne: lne, st: lnb.map(|b| b / ts), off: (pre_b + fit) / ts };
            let st = run(&ctx, &[v], 1)?;
            same_bits(&read(&st, &ctx, v)?, &m.read(&vals), "exactly fitting view")?;
        }
    }

    /// Any view arguments (negative, huge, misaligned, overflowing): accepted exactly
    /// when the dims are >= 0 with an i64 element count, offset and strides are
    /// aligned, and the extent (computed without overflow) fits; else `InvalidView`.
    #[test]
    fn wild_views_are_checked_without_panics(
        dt in prop::sample::select(VIEW_TYPES.to_vec()),
        shape in nonempty_shape(),
        pre in 0usize..3,
        kind in 0usize..5,
        ne in prop::array::uniform4(wild_ne()),
        nb in prop::array::uniform4(wild_nb()),
        off in wild_nb(),
    ) {
        let mut ctx = Context::new();
        let ts = dt.type_size();
        let (leaf, _) = int_leaf(&mut ctx, dt, &shape)?;
        let n = numel({ let mut a = [1; 4]; a[..shape.len()].copy_from_slice(&shape); a });
        let storage = n * ts;
        let (cur, pre_b) = if pre > 0 && pre < n {
            (ck(ctx.view_1d(leaf, (n - pre) as i64, pre * ts), "view_1d")?, pre * ts)
        } else {
            (leaf, 0)
        };
        let res = call_view(&mut ctx, cur, kind, ne, nb, off);
        let expect = view_layout(kind, ts, ne, nb).filter(|(lne, lnb)| {
            let abs = pre_b as u128 + off as u128;
            lne.iter().all(|&x| x >= 0)
                && lne.iter().try_fold(1i64, |acc, &x| acc.checked_mul(x)).is_some()
                && abs.is_multiple_of(dt.align() as u128)
                && (0..4).all(|i| lne[i] <= 1 || lnb[i] % dt.align() == 0)
                && extent_end(ts, *lne, *lnb, abs).is_some_and(|e| e <= storage as u128)
        });
        match (expect, res) {
            (Some((lne, lnb)), Ok(v)) => {
                let l = ck(ctx.layout(v), "layout")?;
                prop_assert_eq!((l.ne, l.nb), (lne, lnb));
                prop_assert_eq!(ck(ctx.tensor(v), "tensor")?.view_offs(), pre_b + off);
            }
            (None, Err(Error::InvalidView { .. })) => {}
            (e, r) => prop_assert!(false, "kind {} ne={:?} nb={:?} offset {}+{} over {} bytes: expected {:?}, got {:?}", kind, ne, nb, pre_b, off, storage, e, r),
        }
    }
}
