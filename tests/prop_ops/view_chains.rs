//! Property 1: random view chains.

use super::*;

/// A tensor as the test sees it: shape, element strides, element offset into the leaf.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Model {
    pub(crate) ne: [i64; 4],
    pub(crate) st: [usize; 4],
    pub(crate) off: usize,
}

impl Model {
    pub(crate) fn nb(&self) -> [usize; 4] {
        self.st.map(|s| s * 4)
    }
    pub(crate) fn read(&self, data: &[f64]) -> Vec<f64> {
        (0..numel(self.ne))
            .map(|k| {
                let ix = unravel(k, self.ne);
                data[self.off + (0..4).map(|i| ix[i] * self.st[i]).sum::<usize>()]
            })
            .collect()
    }
}

/// rgml's header of `id` equals the model.
pub(crate) fn check_meta(ctx: &Context, id: TensorId, leaf: TensorId, m: &Model, what: &str) -> TR {
    let t = ck(ctx.tensor(id), "tensor")?;
    let l = *t.layout();
    prop_assert_eq!(l.dtype, DType::F32, "{}", what);
    prop_assert_eq!(l.ne, m.ne, "{}: ne", what);
    prop_assert_eq!(l.nb, m.nb(), "{}: nb (ne={:?})", what, m.ne);
    prop_assert_eq!(t.view_offs(), if id == leaf { 0 } else { m.off * 4 }, "{}: view offset", what);
    prop_assert_eq!(ck(ctx.storage_root(id), "storage_root")?, leaf, "{}: storage root", what);
    prop_assert_eq!(
        l.is_contiguous(),
        packed_in_order(m.ne, m.nb(), 4),
        "{}: is_contiguous for ne={:?} nb={:?}",
        what,
        m.ne,
        m.nb()
    );
    Ok(())
}

/// One metadata op chosen by `kind` (its arguments drawn from `r`) applied to
/// `cur` (modelled by `m`): the new tensor and model, or `None` when the op was
/// (correctly) refused.
pub(crate) fn chain_step(
    ctx: &mut Context,
    cur: TensorId,
    m: &Model,
    nstore: usize,
    kind: u8,
    r: &mut Rng,
) -> TR<Option<(TensorId, Model, String)>> {
    let mut out = m.clone();
    match kind {
        0 => {
            out.ne.swap(0, 1);
            out.st.swap(0, 1);
            Ok(Some((ck(ctx.transpose(cur), "transpose")?, out, "transpose".into())))
        }
        1 => {
            let axes = r.perm();
            for (i, &ax) in axes.iter().enumerate() {
                out.ne[ax] = m.ne[i];
                out.st[ax] = m.st[i];
            }
            Ok(Some((ck(ctx.permute(cur, axes), "permute")?, out, format!("permute {axes:?}"))))
        }
        2 => {
            let n = numel(m.ne);
            let nd = 1 + r.below(4);
            let mut ne = [1i64; 4];
            if n == 0 {
                for d in ne.iter_mut().take(nd) {
                    *d = 1 + r.below(3) as i64;
                }
                ne[r.below(nd)] = 0;
            } else {
                let mut rem = n as i64;
                for d in ne.iter_mut().take(nd - 1) {
                    let ds = divisors(rem);
                    *d = ds[r.below(ds.len())];
                    rem /= *d;
                }
                ne[nd - 1] = rem;
            }
            let res = ctx.reshape(cur, &ne[..nd]);
            if !packed_in_order(m.ne, m.nb(), 4) {
                prop_assert!(
                    matches!(res, Err(Error::NotContiguous { .. })),
                    "reshape of non-contiguous ne={:?} nb={:?} must be NotContiguous, got {:?}",
                    m.ne,
                    m.nb(),
                    res
                );
                return Ok(None);
            }
            out.ne = ne;
            out.st = packed_strides(ne);
            Ok(Some((ck(res, "reshape")?, out, format!("reshape {:?}", &ne[..nd]))))
        }
        3 => {
            let vk = r.below(5); // view_1d, _2d, _3d, _4d, _strided
            let avail = nstore - m.off;
            if avail == 0 {
                out.ne = [0, 1, 1, 1];
                out.st = [1, 0, 0, 0];
                return Ok(Some((ck(ctx.view_1d(cur, 0, 0), "view_1d")?, out, "view_1d empty".into())));
            }
            let o = r.below(avail);
            let mut budget = avail - o - 1; // elements reachable past the first
            let dims = [1, 2, 3, 4, 4][vk];
            let mut ne = [1i64; 4];
            let mut st = [1usize, 0, 0, 0];
            let mut span = 1usize;
            for i in 0..dims {
                if i > 0 || vk == 4 {
                    st[i] = if r.chance(0.5) { span + r.below(2) } else { r.below((budget + 2).min(10)) };
                }
                let maxn = budget.checked_div(st[i]).map_or(4, |q| (q + 1).min(5)); // stride 0: any size
                ne[i] = 1 + r.below(maxn) as i64;
                budget -= (ne[i] as usize - 1) * st[i];
                span += (ne[i] as usize - 1) * st[i];
            }
            if r.chance(0.08) {
                ne[r.below(dims)] = 0;
            }
            let ob = o * 4;
            let nb = st.map(|s| s * 4);
            let (res, st) = match vk {
                0 => (ctx.view_1d(cur, ne[0], ob), [1, ne[0] as usize, ne[0] as usize, ne[0] as usize]),
                1 => {
                    let s2 = st[1] * ne[1] as usize;
                    (ctx.view_2d(cur, ne[0], ne[1], nb[1], ob), [1, st[1], s2, s2])
                }
                2 => (
                    ctx.view_3d(cur, [ne[0], ne[1], ne[2]], nb[1], nb[2], ob),
                    [1, st[1], st[2], st[2] * ne[2] as usize],
                ),
                3 => (ctx.view_4d(cur, ne, [nb[1], nb[2], nb[3]], ob), st),
                _ => (ctx.view_strided(cur, ne, nb, ob), st),
            };
            out.ne = ne;
            out.st = st;
            out.off = m.off + o;
            let what = format!("view kind {vk} ne={ne:?} st={st:?} offset {o} (elements) over {nstore}");
            Ok(Some((ck(res, &what)?, out, what)))
        }
        _ => {
            let mut ne = m.ne;
            for (i, n) in ne.iter_mut().enumerate() {
                if *n == 1 {
                    *n = r.below(5) as i64;
                    if *n != 1 {
                        out.ne[i] = *n;
                        out.st[i] = 0;
                    }
                }
            }
            // a dim of size > 1 does not broadcast
            if let Some(i) = (0..4).find(|&i| m.ne[i] > 1) {
                let mut bad = m.ne;
                bad[i] += 1;
                let res = ctx.expand(cur, bad);
                prop_assert!(matches!(res, Err(Error::Shape { .. })), "expand {:?} to {:?}: {:?}", m.ne, bad, res);
            }
            Ok(Some((ck(ctx.expand(cur, ne), "expand")?, out, format!("expand to {ne:?}"))))
        }
    }
}

pub(crate) fn leaf_shape() -> impl Strategy<Value = Vec<i64>> {
    (1usize..=4, prop::array::uniform4(1i64..=6), prop::option::weighted(0.12, 0usize..4)).prop_map(|(nd, ne, z)| {
        let mut v = ne[..nd].to_vec();
        if let Some(z) = z {
            v[z % nd] = 0;
        }
        v
    })
}

pub(crate) fn check_view_chain(shape: &[i64], steps: &[(u8, u64)], seed: u64, use_dup: bool, threads: usize) -> TR {
    let mut ctx = Context::new();
    let mut ne = [1i64; 4];
    ne[..shape.len()].copy_from_slice(shape);
    let n = numel(ne);
    let mut rng = Rng(seed);
    let data: Vec<f64> = (0..n).map(|_| round_to(DType::F32, rng.range(-100.0, 100.0))).collect();
    let leaf = ck(ctx.new_f32(shape, &data.iter().map(|&x| x as f32).collect::<Vec<_>>()), "new_f32")?;
    let mut m = Model { ne, st: packed_strides(ne), off: 0 };
    check_meta(&ctx, leaf, leaf, &m, "leaf")?;
    let mut cur = leaf;
    let mut trail = vec![(leaf, m.clone(), "leaf".to_string())];
    for &(kind, s) in steps {
        let mut r = Rng(s);
        if let Some((id, nm, what)) = chain_step(&mut ctx, cur, &m, n, kind, &mut r)? {
            let what = format!("step {} ({what})", trail.len());
            check_meta(&ctx, id, leaf, &nm, &what)?;
            trail.push((id, nm.clone(), what));
            cur = id;
            m = nm;
        }
    }
    let out = ck(if use_dup { ctx.dup(cur) } else { ctx.cont(cur) }, "cont/dup")?;
    let lo = ck(ctx.layout(out), "layout")?;
    prop_assert_eq!(lo.ne, m.ne);
    prop_assert_eq!(lo.nb, packed_strides(m.ne).map(|s| s * 4));
    prop_assert!(ck(ctx.tensor(out), "tensor")?.view_src().is_none(), "cont makes a new tensor");
    let st = run(&ctx, &[out], threads)?;
    let want = m.read(&data);
    same_bits(&read(&st, &ctx, out)?, &want, &format!("cont of chain {trail:?}"))?;
    for (id, tm, what) in &trail {
        same_bits(&read(&st, &ctx, *id)?, &tm.read(&data), &format!("read_f32 of {what}"))?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(cfg(256))]

    /// Chains of metadata ops, then `cont`/`dup`: headers, contiguity and values match the model.
    #[test]
    fn view_chains_match_the_model(
        shape in leaf_shape(),
        steps in prop::collection::vec((0u8..5, any::<u64>()), 1..=5),
        seed in any::<u64>(),
        use_dup in any::<bool>(),
        threads in 1usize..=2,
    ) {
        check_view_chain(&shape, &steps, seed, use_dup, threads)?;
    }
}
