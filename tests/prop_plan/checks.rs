//! Checks.

use super::*;

/// An overlap check written from the public API only (it shares no code with
/// `Plan::verify`): placed roots are aligned and inside the buffer; two buffer
/// roots live at the same step share no byte unless one handed its block to
/// the other in place at its last use; in-place hand-overs obey the rules;
/// protected roots are retained and never handed over; leaves read in place
/// are never written.
pub(crate) fn independent_check(ctx: &Context, g: &Graph, plan: &Plan, rules: &dyn ReuseRules) -> TR {
    let root = |id: TensorId| ctx.storage_root(id).expect("root");
    let nodes = g.nodes();
    let last = nodes.len().saturating_sub(1);
    let mut pos = HashMap::new();
    let mut last_use = HashMap::new();
    let mut written = HashSet::new();
    for (i, &id) in nodes.iter().enumerate() {
        pos.insert(id, i);
        let t = ctx.tensor(id).expect("tensor");
        if t.op().is_metadata() {
            continue;
        }
        for &s in t.src() {
            last_use.insert(root(s), i);
        }
        last_use.insert(root(id), i);
        if t.writes_in_place() {
            written.insert(root(id));
        }
    }
    let mut protected = HashSet::new();
    for &o in g.outputs() {
        protected.insert(root(o));
    }
    for &id in nodes.iter().chain(g.leafs()) {
        let t = ctx.tensor(id).expect("tensor");
        if t.flags().output || t.flags().input || t.op() == Op::Leaf {
            protected.insert(root(id));
        }
    }
    for &r in &protected {
        prop_assert!(plan.is_retained(r), "protected root {r} is not retained");
    }
    for &id in nodes.iter().chain(g.leafs()) {
        prop_assert!(plan.place(root(id)).is_some(), "{id} (root {}) has no place", root(id));
    }
    struct Span {
        root: TensorId,
        start: usize,
        end: usize,
        lo: usize,
        hi: usize,
    }
    let mut spans = Vec::new();
    for (r, place) in plan.places() {
        let t = ctx.tensor(r).expect("tensor");
        prop_assert!(t.view_src().is_none(), "view {r} has a place");
        match place {
            Place::Leaf => {
                prop_assert!(t.op() == Op::Leaf && ctx.leaf_bytes(r).is_some(), "{r} read in place has no data");
                prop_assert!(!written.contains(&r), "leaf {r} is written by the graph but read in place");
            }
            Place::LeafCopy => {
                prop_assert!(t.op() == Op::Leaf && ctx.leaf_bytes(r).is_some(), "{r} copied has no data");
                prop_assert!(written.contains(&r), "leaf {r} is copied but never written");
            }
            Place::Buffer { offset } => {
                prop_assert!(ctx.leaf_bytes(r).is_none(), "{r} holds data in the context but is in the buffer");
                let size = t.layout().nbytes();
                prop_assert!(offset.is_multiple_of(rules.alignment()), "{r} at {offset} misaligned");
                prop_assert!(offset + size <= plan.buffer_size(), "{r} at {offset}+{size} outside buffer");
                let start = pos.get(&r).copied().unwrap_or(0);
                let end = if protected.contains(&r) { last } else { last_use.get(&r).copied().unwrap_or(start) };
                spans.push(Span { root: r, start, end, lo: offset, hi: offset + size });
            }
        }
    }
    for (i, a) in spans.iter().enumerate() {
        for b in &spans[i + 1..] {
            let time = a.start <= b.end && b.start <= a.end;
            let bytes = a.lo < b.hi && b.lo < a.hi;
            if !(time && bytes) {
                continue;
            }
            let handover = |p: &Span, n: &Span| {
                plan.reused_source(n.root) == Some(p.root) && p.end == n.start && p.lo == n.lo && n.start > p.start
            };
            prop_assert!(
                handover(a, b) || handover(b, a),
                "{} [{}..{}) live {}..={} overlaps {} [{}..{}) live {}..={}",
                a.root,
                a.lo,
                a.hi,
                a.start,
                a.end,
                b.root,
                b.lo,
                b.hi,
                b.start,
                b.end
            );
        }
    }
    // the same elements at the same bytes: strides of size-1 dims address nothing
    let same_places = |a: &rgml::Layout, b: &rgml::Layout| {
        a.dtype == b.dtype && a.ne == b.ne && (0..4).all(|d| a.ne[d] <= 1 || a.nb[d] == b.nb[d])
    };
    // every recorded hand-over follows the rules
    for &n in nodes {
        let Some(p) = plan.reused_source(n) else { continue };
        let t = ctx.tensor(n).expect("tensor");
        prop_assert!(t.view_src().is_none() && !t.op().is_metadata(), "{n} reuses {p} but is a view");
        prop_assert!(!protected.contains(&p), "{n} overwrites protected {p}");
        prop_assert!(
            !matches!(t.op(), Op::MulMat { .. } | Op::SumRows { .. } | Op::Cpy { .. }),
            "{} overwrote its source",
            t.op().name()
        );
        prop_assert_eq!(last_use.get(&p), Some(&pos[&n]), "{} reuses {} before its last use", n, p);
        prop_assert_eq!(plan.place(n), plan.place(p));
        let ok = t.src().iter().enumerate().any(|(slot, &s)| {
            let st = ctx.tensor(s).expect("tensor");
            root(s) == p
                && same_places(st.layout(), t.layout())
                && st.view_offs() == 0
                && rules.may_overwrite_source(&t.op(), slot)
        });
        prop_assert!(ok, "{n} reuses {p} without a same-layout source slot the kernel allows");
        // every other source on the same storage reads it the same way
        let same = t.src().iter().filter(|&&s| root(s) == p).all(|&s| {
            let st = ctx.tensor(s).expect("tensor");
            same_places(st.layout(), t.layout()) && st.view_offs() == 0
        });
        prop_assert!(same, "{n} reuses {p} while another source views it differently");
    }
    Ok(())
}

/// Places, size, reuses and stats of two plans of the same graph built in
/// (possibly) different contexts, compared by tensor index.
pub(crate) fn same_plan(ga: &Graph, a: &Plan, gb: &Graph, b: &Plan) -> TR {
    prop_assert_eq!(a.buffer_size(), b.buffer_size());
    prop_assert_eq!(a.stats(), b.stats());
    let by_index = |p: &Plan| {
        let mut v: Vec<(usize, Place)> = p.places().map(|(id, pl)| (id.index(), pl)).collect();
        v.sort_by_key(|x| x.0);
        v
    };
    prop_assert_eq!(by_index(a), by_index(b));
    prop_assert_eq!(ga.nodes().len(), gb.nodes().len());
    for (&na, &nb) in ga.nodes().iter().zip(gb.nodes()) {
        prop_assert_eq!(na.index(), nb.index());
        prop_assert_eq!(a.reused_source(na).map(TensorId::index), b.reused_source(nb).map(TensorId::index));
        prop_assert_eq!(a.is_retained(na), b.is_retained(nb));
    }
    for step in 0..ga.nodes().len() {
        prop_assert_eq!(a.freed_after(step), b.freed_after(step));
    }
    Ok(())
}

/// Sets the values of every data-less leaf of the graph on the backend.
pub(crate) fn set_inputs(b: &Built, st: &mut CpuStorage) -> TR {
    if !b.ctx.is_no_alloc() {
        return Ok(());
    }
    for (id, vals) in &b.leaves {
        if !b.graph.contains(*id) {
            continue;
        }
        match vals {
            Vals::F32(v) => ck(st.set_data(&b.ctx, *id, v), "set_data")?,
            Vals::F16(v) => ck(st.set_data(&b.ctx, *id, v), "set_data")?,
        }
    }
    Ok(())
}

/// Runs `plan` and returns the storage.
pub(crate) fn execute(b: &Built, plan: Plan, threads: usize, poison: bool) -> TR<CpuStorage> {
    let cpu = backend(threads, poison);
    let mut st = ck(cpu.alloc(&b.ctx, &b.graph, plan), "alloc")?;
    set_inputs(b, &mut st)?;
    ck(cpu.compute(&b.ctx, &b.graph, &mut st), "compute")?;
    Ok(st)
}

/// Compares every readable tensor of `planned` with `naive`, bit for bit, and
/// checks that unreadable ones are refused. Returns (compared, refused).
pub(crate) fn compare(b: &Built, planned: &CpuStorage, naive: &CpuStorage) -> TR<(usize, usize)> {
    let ctx = &b.ctx;
    let (mut compared, mut refused) = (0, 0);
    for &o in b.graph.outputs() {
        prop_assert!(planned.plan().is_retained(ctx.storage_root(o).expect("root")), "output {o} not retained");
    }
    for &m in &b.marked {
        if b.graph.contains(m) {
            prop_assert!(planned.plan().is_retained(ctx.storage_root(m).expect("root")), "marked {m} not retained");
        }
    }
    for &id in b.graph.nodes().iter().chain(b.graph.leafs()) {
        let root = ctx.storage_root(id).expect("root");
        let want = ck(naive.read_f32(ctx, id), "naive read_f32")?;
        prop_assert!(want.iter().all(|v| !v.is_nan()), "the generator let a NaN into {id} (unplanned run)");
        if planned.plan().is_retained(root) {
            let got = ck(planned.read_f32(ctx, id), "planned read_f32")?;
            prop_assert_eq!(got.len(), want.len());
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                prop_assert!(!g.is_nan(), "{id} ({}) [{k}] is NaN after the planned run (poison)", ctx.label(id));
                prop_assert!(g.to_bits() == w.to_bits(), "{id} [{k}]: planned {g} != naive {w}");
            }
            compared += 1;
        } else {
            prop_assert!(ctx.tensor(id).expect("tensor").op() != Op::Leaf, "leaf {id} not retained");
            match planned.read_f32(ctx, id) {
                Err(Error::Invalid(_)) => refused += 1,
                other => {
                    return Err(TestCaseError::fail(format!(
                        "read_f32 of freed intermediate {id}: expected Error::Invalid, got {other:?}"
                    )))
                }
            }
        }
    }
    Ok((compared, refused))
}

/// Coverage of the random graphs, summed over all cases.
#[derive(Default)]
pub(crate) struct Coverage {
    pub(crate) cases: AtomicUsize,
    pub(crate) no_alloc: AtomicUsize,
    pub(crate) two_threads: AtomicUsize,
    pub(crate) nodes: AtomicUsize,
    pub(crate) ops_built: AtomicUsize,
    pub(crate) ops_refused: AtomicUsize,
    pub(crate) inplace: AtomicUsize,
    pub(crate) with_reuse: AtomicUsize,
    pub(crate) reuses: AtomicUsize,
    pub(crate) with_leaf_copy: AtomicUsize,
    pub(crate) with_view_output: AtomicUsize,
    pub(crate) with_refused_read: AtomicUsize,
    pub(crate) with_freed_ranges: AtomicUsize,
    pub(crate) multi_output: AtomicUsize,
    pub(crate) mul_mat: AtomicUsize,
    pub(crate) expand: AtomicUsize,
    pub(crate) f16: AtomicUsize,
    pub(crate) compared: AtomicUsize,
    pub(crate) saved_bytes: AtomicUsize,
}

pub(crate) fn bump(c: &AtomicUsize, n: usize) {
    c.fetch_add(n, Ordering::Relaxed);
}

pub(crate) fn check_case(case: &Case, cov: &Coverage) -> TR {
    let b = build(case)?;
    let (ctx, g) = (&b.ctx, &b.graph);
    let alloc = Allocator::new(CpuRules);
    let plan = ck(alloc.plan(ctx, g), "plan")?;
    ck(plan.verify(ctx, g, &CpuRules), "verify")?;
    independent_check(ctx, g, &plan, &CpuRules)?;

    // determinism: the same graph twice, and the same case rebuilt in a new context
    let again = ck(alloc.plan(ctx, g), "plan again")?;
    same_plan(g, &plan, g, &again)?;
    let b2 = build(case)?;
    let other = ck(Allocator::new(CpuRules).plan(&b2.ctx, &b2.graph), "plan rebuilt")?;
    same_plan(g, &plan, &b2.graph, &other)?;

    // sizes
    let naive = ck(Plan::naive(ctx, g, CPU_ALIGNMENT), "Plan::naive")?;
    ck(naive.verify(ctx, g, &CpuRules), "verify naive")?;
    ck(naive.verify(ctx, g, &NoReuse { alignment: CPU_ALIGNMENT }), "verify naive (NoReuse)")?;
    independent_check(ctx, g, &naive, &NoReuse { alignment: CPU_ALIGNMENT })?;
    let s = plan.stats();
    prop_assert!(s.lower_bound <= s.planned && s.planned <= s.naive, "stats out of order: {:?}", s);
    prop_assert_eq!(s.planned, plan.buffer_size());
    prop_assert_eq!(s.naive, naive.stats().naive);
    prop_assert!(naive.buffer_size() <= s.naive && naive.buffer_size() >= s.planned);
    let align = |n: usize| n.next_multiple_of(CPU_ALIGNMENT);
    let protected_bytes: usize = plan
        .places()
        .filter(|&(r, p)| matches!(p, Place::Buffer { .. }) && plan.is_retained(r))
        .map(|(r, _)| align(ctx.layout(r).expect("layout").nbytes()))
        .sum();
    prop_assert!(s.lower_bound >= protected_bytes, "lower bound {} < retained bytes {protected_bytes}", s.lower_bound);
    let reuses = g.nodes().iter().filter(|&&n| plan.reused_source(n).is_some()).count();
    if reuses > 0 {
        // a hand-over is an overlap no rule-less verifier accepts
        let e = plan.verify(ctx, g, &NoReuse { alignment: CPU_ALIGNMENT });
        prop_assert!(matches!(e, Err(Error::Invalid(_))), "verify under NoReuse accepted in-place reuse: {e:?}");
    }
    if plan.places().any(|(_, p)| matches!(p, Place::Buffer { offset } if !offset.is_multiple_of(CUDA_ALIGNMENT))) {
        let e = plan.verify(ctx, g, &NoReuse { alignment: CUDA_ALIGNMENT });
        prop_assert!(matches!(e, Err(Error::Invalid(_))), "verify accepted 64-byte offsets under 256: {e:?}");
    }

    // a plan without in-place reuse (CUDA alignment) is valid too, and runs the same
    let plain = ck(Allocator::new(NoReuse { alignment: CUDA_ALIGNMENT }).plan(ctx, g), "plan NoReuse")?;
    ck(plain.verify(ctx, g, &NoReuse { alignment: CUDA_ALIGNMENT }), "verify NoReuse")?;
    independent_check(ctx, g, &plain, &NoReuse { alignment: CUDA_ALIGNMENT })?;
    prop_assert!(g.nodes().iter().all(|&n| plain.reused_source(n).is_none()));

    // run: planned + poison against naive without poison
    let t = case.threads;
    let freed = (0..g.nodes().len()).any(|i| !plan.freed_after(i).is_empty());
    let has_leaf_copy = plan.places().any(|(_, p)| p == Place::LeafCopy);
    let want = execute(&b, naive, t, false)?;
    let got = execute(&b, plan, t, true)?;
    let (compared, refused) = compare(&b, &got, &want)?;
    let got_plain = execute(&b, plain, t, true)?;
    compare(&b, &got_plain, &want)?;

    bump(&cov.cases, 1);
    bump(&cov.no_alloc, case.no_alloc as usize);
    bump(&cov.two_threads, (t == 2) as usize);
    bump(&cov.nodes, g.nodes().len());
    bump(&cov.ops_built, b.built);
    bump(&cov.ops_refused, b.refused);
    bump(&cov.inplace, b.inplace);
    bump(&cov.with_reuse, (reuses > 0) as usize);
    bump(&cov.reuses, reuses);
    bump(&cov.with_leaf_copy, has_leaf_copy as usize);
    let view_out = g.outputs().iter().any(|&o| ctx.tensor(o).map(|t| t.view_src().is_some()).unwrap_or(false));
    bump(&cov.with_view_output, view_out as usize);
    bump(&cov.with_refused_read, (refused > 0) as usize);
    bump(&cov.with_freed_ranges, freed as usize);
    bump(&cov.multi_output, (g.outputs().len() > 1) as usize);
    let has = |f: &dyn Fn(Op) -> bool| g.nodes().iter().any(|&n| f(ctx.tensor(n).expect("tensor").op()));
    bump(&cov.mul_mat, has(&|op| matches!(op, Op::MulMat { .. })) as usize);
    bump(&cov.expand, has(&|op| matches!(op, Op::Expand { .. })) as usize);
    let f16s = g.nodes().iter().chain(g.leafs()).any(|&n| ctx.layout(n).expect("layout").dtype == DType::F16);
    bump(&cov.f16, f16s as usize);
    bump(&cov.compared, compared);
    bump(&cov.saved_bytes, s.naive - s.planned);
    Ok(())
}

/// The acceptance property: at least 1000 random graphs, planned, verified,
/// and run with poison, agree bit for bit with the unplanned executor.
#[test]
pub(crate) fn planned_graphs_match_the_naive_executor() {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(3000);
    let config = ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(cases) };
    let mut runner = TestRunner::new(config);
    let cov = Coverage::default();
    let result = runner.run(&case_strategy(), |case| check_case(&case, &cov));
    if let Err(e) = result {
        panic!("{e}");
    }
    let n = |c: &AtomicUsize| c.load(Ordering::Relaxed);
    let total = n(&cov.cases);
    eprintln!(
        "prop_plan: {total} graphs ({} no_alloc, {} on 2 threads), {} nodes, {} ops built, {} refused at build, \
         {} in-place writes; {} graphs with in-place reuse ({} reuses), {} with leaf copies, {} with a view \
         output, {} with >1 output, {} with freed ranges, {} with a refused read of a freed intermediate, {} with \
         mul_mat, {} with expand, {} with F16; {} tensors compared; {} bytes saved over naive",
        n(&cov.no_alloc),
        n(&cov.two_threads),
        n(&cov.nodes),
        n(&cov.ops_built),
        n(&cov.ops_refused),
        n(&cov.inplace),
        n(&cov.with_reuse),
        n(&cov.reuses),
        n(&cov.with_leaf_copy),
        n(&cov.with_view_output),
        n(&cov.multi_output),
        n(&cov.with_freed_ranges),
        n(&cov.with_refused_read),
        n(&cov.mul_mat),
        n(&cov.expand),
        n(&cov.f16),
        n(&cov.compared),
        n(&cov.saved_bytes),
    );
    // the generator must keep exercising what the property is about
    if cases >= 1000 {
        assert!(total >= cases as usize);
        let at_least = |what: &str, c: &AtomicUsize, pct: usize| {
            assert!(n(c) * 100 >= total * pct, "only {} of {total} graphs have {what}", n(c));
        };
        at_least("a no_alloc context", &cov.no_alloc, 30);
        at_least("2 threads", &cov.two_threads, 30);
        at_least("in-place reuse", &cov.with_reuse, 15);
        at_least("leaf copies", &cov.with_leaf_copy, 3);
        at_least("a view output", &cov.with_view_output, 15);
        at_least("several outputs", &cov.multi_output, 30);
        at_least("freed ranges", &cov.with_freed_ranges, 30);
        at_least("a refused read", &cov.with_refused_read, 30);
        at_least("mul_mat", &cov.mul_mat, 10);
        at_least("expand", &cov.expand, 5);
        at_least("F16 tensors", &cov.f16, 5);
    }
}
