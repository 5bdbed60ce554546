//! Property 8: random graphs over computed intermediates (planner reuse, eager semantics).

use super::*;

/// A storage root of the random graph: its values and a bound on their rounding error.
struct Store {
    val: Vec<f64>,
    err: Vec<f64>,
}

/// A tensor of the random graph: a layout (in elements) over one of the stores.
#[derive(Clone, Debug)]
struct Entry {
    id: TensorId,
    store: usize,
    m: Model,
}

/// Storage index of each logical element of `m`.
fn positions(m: &Model) -> Vec<usize> {
    (0..numel(m.ne))
        .map(|k| {
            let ix = unravel(k, m.ne);
            m.off + (0..4).map(|i| ix[i] * m.st[i]).sum::<usize>()
        })
        .collect()
}

/// True if two elements of `m` are the same storage element (a write would race).
fn self_overlapping(m: &Model) -> bool {
    let mut p = positions(m);
    p.sort_unstable();
    p.windows(2).any(|w| w[0] == w[1])
}

/// rgml's rule for a write into `dst` reading `src`: fine in another storage, in the
/// same storage when disjoint or exactly the same layout; else `OverlappingWrite`.
fn write_conflict(dst: &Entry, src: &Entry) -> bool {
    // the same places: the strides of size-1 dims address nothing
    let same_st = (0..4).all(|i| dst.m.ne[i] <= 1 || dst.m.st[i] == src.m.st[i]);
    if dst.store != src.store || (dst.m.ne == src.m.ne && same_st && dst.m.off == src.m.off) {
        return false;
    }
    let d: std::collections::HashSet<usize> = positions(&dst.m).into_iter().collect();
    positions(&src.m).iter().any(|p| d.contains(p))
}

/// Values and error bounds of an entry, in logical order.
fn entry_values(stores: &[Store], e: &Entry) -> (Vec<f64>, Vec<f64>) {
    let s = &stores[e.store];
    positions(&e.m).into_iter().map(|p| (s.val[p], s.err[p])).unzip()
}

const EPS: f64 = 1e-7; // >= one f32 rounding (2^-24)

fn graph_unary(op: EwOp, x: f64, e: f64) -> (f64, f64) {
    match op {
        EwOp::Scale(s) => (x * s as f64, e * (s as f64).abs() + EPS * (x * s as f64).abs()),
        EwOp::Unary(u) => {
            let y = unary_ref(u, x);
            match u {
                UnaryOp::Neg | UnaryOp::Relu => (y, e),
                // its input rounded to f16, its result too: an input off by the error bound
                // can land one f16 step (2^-10 relative) away, on top of the Lipschitz part
                UnaryOp::Gelu => (y, 1.2 * e + 2f64.powi(-10) * y.abs() + 1e-6),
                // Lipschitz constants of gelu and silu are below 1.2
                _ => (y, 1.2 * e + 1e-6 * y.abs() + 2e-7),
            }
        }
        _ => unreachable!(),
    }
}

fn graph_binary(op: BinaryOp, x: f64, ex: f64, y: f64, ey: f64) -> (f64, f64) {
    let r = binary_ref(op, x, y);
    let e = match op {
        BinaryOp::Add | BinaryOp::Sub => ex + ey,
        BinaryOp::Mul => x.abs() * ey + y.abs() * ex + ex * ey,
        BinaryOp::Div => unreachable!(),
    };
    (r, e + EPS * r.abs())
}

/// Builds a random graph of `nsteps` ops over a few leaves: views (reusing the
/// chain generator), out-of-place and inplace unary/scale/binary ops, cpy, cont and
/// mul_mat(x, x), modelled eagerly; then checks a few outputs after one run.
fn check_random_graph(seed: u64, nsteps: usize, threads: usize) -> TR {
    let mut r = Rng(seed);
    let mut ctx = Context::new();
    let ne: [i64; 4] = std::array::from_fn(|_| 1 + r.below(3) as i64);
    let tile: [i64; 4] = std::array::from_fn(|i| if r.chance(0.5) { 1 } else { ne[i] });
    let mut stores: Vec<Store> = Vec::new();
    let mut pool: Vec<Entry> = Vec::new();
    let mut log: Vec<String> = Vec::new();
    for shape in [ne, ne, tile] {
        let v: Vec<f64> = (0..numel(shape)).map(|_| round_to(DType::F32, r.range(-2.0, 2.0))).collect();
        let id = ck(ctx.new_f32(&shape, &v.iter().map(|&x| x as f32).collect::<Vec<_>>()), "leaf")?;
        pool.push(Entry { id, store: stores.len(), m: Model { ne: shape, st: packed_strides(shape), off: 0 } });
        stores.push(Store { val: v, err: vec![0.0; numel(shape)] });
        log.push(format!("#{} = leaf {shape:?}", pool.len() - 1));
    }
    let uops = [
        EwOp::Unary(UnaryOp::Neg),
        EwOp::Unary(UnaryOp::Relu),
        EwOp::Unary(UnaryOp::Gelu),
        EwOp::Unary(UnaryOp::Silu),
        EwOp::Scale(0.75),
        EwOp::Scale(-1.25),
    ];
    // a new computed root holding `vals`
    fn push_root(stores: &mut Vec<Store>, pool: &mut Vec<Entry>, id: TensorId, ne: [i64; 4], v: (Vec<f64>, Vec<f64>)) {
        pool.push(Entry { id, store: stores.len(), m: Model { ne, st: packed_strides(ne), off: 0 } });
        stores.push(Store { val: v.0, err: v.1 });
    }
    for _ in 0..nsteps {
        let live: Vec<usize> = (0..pool.len()).filter(|&i| numel(pool[i].m.ne) > 0).collect();
        // mostly the newest tensor: chains of intermediates that die young, so the planner reuses blocks
        let e = pool[if r.chance(0.6) { live[live.len() - 1] } else { live[r.below(live.len())] }].clone();
        let (ev, ee) = entry_values(&stores, &e);
        let big = ev.iter().fold(0f64, |a, &x| a.max(x.abs())) > 1e3;
        let kind = r.below(8);
        let what = format!("#{} = kind {kind} of #{}", pool.len(), pool.iter().position(|p| p.id == e.id).unwrap());
        match kind {
            0 => {
                let n = stores[e.store].val.len();
                let vk = r.below(5) as u8;
                if let Some((id, m, w)) = chain_step(&mut ctx, e.id, &e.m, n, vk, &mut r)? {
                    log.push(format!("{what}: {w}"));
                    pool.push(Entry { id, store: e.store, m });
                }
            }
            1 | 3 => {
                let op = uops[r.below(uops.len())];
                let inplace = kind == 3;
                let res = apply(&mut ctx, op, e.id, e.id, inplace);
                log.push(format!("{what}: {op:?} inplace={inplace}"));
                let new: (Vec<f64>, Vec<f64>) = ev.iter().zip(&ee).map(|(&x, &er)| graph_unary(op, x, er)).unzip();
                if !inplace {
                    push_root(&mut stores, &mut pool, ck(res, &what)?, e.m.ne, new);
                } else if self_overlapping(&e.m) {
                    prop_assert!(matches!(res, Err(Error::OverlappingWrite { .. })), "{}: {:?}", what, res);
                } else {
                    let id = ck(res, &what)?;
                    for (k, p) in positions(&e.m).into_iter().enumerate() {
                        stores[e.store].val[p] = new.0[k];
                        stores[e.store].err[p] = new.1[k];
                    }
                    pool.push(Entry { id, store: e.store, m: e.m.clone() });
                }
            }
            2 | 4 => {
                let tiles: Vec<&Entry> =
                    pool.iter().filter(|b| numel(b.m.ne) > 0 && (0..4).all(|i| e.m.ne[i] % b.m.ne[i] == 0)).collect();
                // often another view of the same storage: aliasing for the planner and the overlap checks
                let same: Vec<&Entry> = tiles.iter().copied().filter(|b| b.store == e.store).collect();
                let from = if !same.is_empty() && r.chance(0.4) { same } else { tiles };
                let mut b = from[r.below(from.len())].clone();
                // or e with two of its equal dims swapped: same shape, same bytes, another order
                let pairs: Vec<(usize, usize)> = (0..4)
                    .flat_map(|i| (i + 1..4).map(move |j| (i, j)))
                    .filter(|&(i, j)| e.m.ne[i] == e.m.ne[j] && e.m.ne[i] > 1)
                    .collect();
                if !pairs.is_empty() && r.chance(0.3) {
                    let (i, j) = pairs[r.below(pairs.len())];
                    let mut axes = [0, 1, 2, 3];
                    axes.swap(i, j);
                    let id = ck(ctx.permute(e.id, axes), "permute")?;
                    let mut m = e.m.clone();
                    m.st.swap(i, j);
                    log.push(format!(
                        "#{} = permute {axes:?} of #{}",
                        pool.len(),
                        pool.iter().position(|p| p.id == e.id).unwrap()
                    ));
                    b = Entry { id, store: e.store, m };
                    pool.push(b.clone());
                }
                let (bv, be) = entry_values(&stores, &b);
                let bbig = bv.iter().fold(0f64, |a, &x| a.max(x.abs())) > 1e3;
                let op = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul][r.below(if big || bbig { 2 } else { 3 })];
                let inplace = kind == 4;
                let res = apply(&mut ctx, EwOp::Bin(op), e.id, b.id, inplace);
                let bi = pool.iter().position(|p| p.id == b.id).unwrap();
                log.push(format!("{what}: {op:?} with #{bi} inplace={inplace}"));
                let new: (Vec<f64>, Vec<f64>) = (0..ev.len())
                    .map(|k| {
                        let ix = unravel(k, e.m.ne);
                        let j = ravel(std::array::from_fn(|i| ix[i] % b.m.ne[i] as usize), b.m.ne);
                        graph_binary(op, ev[k], ee[k], bv[j], be[j])
                    })
                    .unzip();
                if !inplace {
                    push_root(&mut stores, &mut pool, ck(res, &what)?, e.m.ne, new);
                } else if self_overlapping(&e.m) || write_conflict(&e, &b) {
                    prop_assert!(matches!(res, Err(Error::OverlappingWrite { .. })), "{}: {:?}", what, res);
                } else {
                    let id = ck(res, &what)?;
                    for (k, p) in positions(&e.m).into_iter().enumerate() {
                        stores[e.store].val[p] = new.0[k];
                        stores[e.store].err[p] = new.1[k];
                    }
                    pool.push(Entry { id, store: e.store, m: e.m.clone() });
                }
            }
            5 => {
                // cpy e into an entry with as many elements (possibly another shape)
                let dsts: Vec<&Entry> = pool.iter().filter(|d| numel(d.m.ne) == ev.len()).collect();
                let d = dsts[r.below(dsts.len())].clone();
                let res = ctx.cpy(e.id, d.id);
                let di = pool.iter().position(|p| p.id == d.id).unwrap();
                log.push(format!("{what}: cpy into #{di}"));
                if self_overlapping(&d.m) || write_conflict(&d, &e) {
                    prop_assert!(matches!(res, Err(Error::OverlappingWrite { .. })), "{}: {:?}", what, res);
                } else {
                    let id = ck(res, &what)?;
                    for (k, p) in positions(&d.m).into_iter().enumerate() {
                        stores[d.store].val[p] = ev[k];
                        stores[d.store].err[p] = ee[k];
                    }
                    pool.push(Entry { id, store: d.store, m: d.m.clone() });
                }
            }
            6 => {
                let id = ck(ctx.cont(e.id), &what)?;
                log.push(format!("{what}: cont"));
                push_root(&mut stores, &mut pool, id, e.m.ne, (ev, ee));
            }
            _ => {
                if big {
                    continue;
                }
                let id = ck(ctx.mul_mat(e.id, e.id), &what)?;
                log.push(format!("{what}: mul_mat with itself"));
                let [k, m, n2, n3] = e.m.ne.map(|x| x as usize);
                let one = [m as i64, m as i64, n2 as i64, n3 as i64];
                let at = |i0: usize, i1: usize, i2: usize, i3: usize| ravel([i0, i1, i2, i3], e.m.ne);
                let out: (Vec<f64>, Vec<f64>) = (0..numel(one))
                    .map(|idx| {
                        let [i0, i1, i2, i3] = unravel(idx, one);
                        let (mut s, mut er, mut mag) = (0.0, 0.0, 0.0);
                        for kk in 0..k {
                            let (x, y) = (at(kk, i0, i2, i3), at(kk, i1, i2, i3));
                            s += ev[x] * ev[y];
                            mag += (ev[x] * ev[y]).abs();
                            er += ev[x].abs() * ee[y] + ev[y].abs() * ee[x] + ee[x] * ee[y];
                        }
                        (s, er + 1e-6 * mag)
                    })
                    .unzip();
                push_root(&mut stores, &mut pool, id, one, out);
            }
        }
    }
    // outputs: the last tensor and up to two others
    let mut outs = vec![pool.len() - 1];
    for _ in 0..r.below(3) {
        outs.push(r.below(pool.len()));
    }
    outs.sort_unstable();
    outs.dedup();
    let ids: Vec<TensorId> = outs.iter().map(|&i| pool[i].id).collect();
    let g = ck(Graph::build(&ctx, &ids), "Graph::build")?;
    // planned (liveness, reuse) in poison mode, and a naive plan where nothing is reused
    let st = ck(poisoned(threads).run(&ctx, &g), "run")?;
    let naive_plan = ck(Plan::naive(&ctx, &g, CPU_ALIGNMENT), "Plan::naive")?;
    let mut naive = ck(backend(threads).alloc(&ctx, &g, naive_plan), "alloc")?;
    ck(backend(threads).compute(&ctx, &g, &mut naive), "compute")?;
    for &i in &outs {
        let (want, err) = entry_values(&stores, &pool[i]);
        let got = read(&st, &ctx, pool[i].id)?;
        let what = format!("output #{i} of\n{}", log.join("\n"));
        close(&got, &want, |k| 4.0 * err[k] + 1e-6, &what)?;
        same_bits(&got, &read(&naive, &ctx, pool[i].id)?, &format!("planned vs naive plan: {what}"))?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(cfg(1000))]

    /// Random graphs mixing views, out-of-place and inplace ops, cpy, cont and mul_mat
    /// over computed intermediates (so the planner frees and reuses their blocks):
    /// outputs hold the eagerly modelled values.
    #[test]
    fn random_graphs_match_eager_model(seed in any::<u64>(), nsteps in 1usize..=12, threads in 1usize..=2) {
        check_random_graph(seed, nsteps, threads)?;
    }
}
