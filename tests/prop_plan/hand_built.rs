//! Hand-built graphs.

use super::*;

fn vals(n: usize, k: f32) -> Vec<f32> {
    (0..n).map(|i| ((i as f32 * 0.37 + k).sin()) * 1.5).collect()
}

/// Plans with CpuRules, verifies, runs with poison and compares every readable
/// tensor to the naive run; returns the plan (from the planned storage).
fn plan_and_run(ctx: &Context, g: &Graph) -> Plan {
    let plan = Allocator::new(CpuRules).plan(ctx, g).unwrap();
    plan.verify(ctx, g, &CpuRules).unwrap();
    independent_check(ctx, g, &plan, &CpuRules).unwrap();
    let naive = Plan::naive(ctx, g, CPU_ALIGNMENT).unwrap();
    let mut want_st = backend(1, false).alloc(ctx, g, naive).unwrap();
    backend(1, false).compute(ctx, g, &mut want_st).unwrap();
    let mut got_st = backend(2, true).alloc(ctx, g, plan.clone()).unwrap();
    backend(2, true).compute(ctx, g, &mut got_st).unwrap();
    for &id in g.nodes().iter().chain(g.leafs()) {
        if plan.is_retained(ctx.storage_root(id).unwrap()) {
            let got = got_st.read_f32(ctx, id).unwrap();
            let want = want_st.read_f32(ctx, id).unwrap();
            assert!(got.iter().all(|v| !v.is_nan()), "{id} is NaN after a planned run");
            assert_eq!(
                got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
        } else {
            assert!(matches!(got_st.read_f32(ctx, id), Err(Error::Invalid(_))));
        }
    }
    plan
}

/// x → mul_mat → add bias → gelu: the add takes the product's block, the gelu the add's.
#[test]
fn inplace_reuse_happens_along_a_chain() {
    for no_alloc in [false, true] {
        let mut ctx = if no_alloc { Context::new_no_alloc() } else { Context::new() };
        let (w, x, bias) = if no_alloc {
            let w = ctx.new_tensor(DType::F32, &[4, 3]).unwrap();
            let x = ctx.new_tensor(DType::F32, &[4, 2]).unwrap();
            let bias = ctx.new_tensor(DType::F32, &[3, 1]).unwrap();
            ctx.set_input(x).unwrap();
            (w, x, bias)
        } else {
            let w = ctx.new_f32(&[4, 3], &vals(12, 0.1)).unwrap();
            let x = ctx.new_f32(&[4, 2], &vals(8, 0.7)).unwrap();
            let bias = ctx.new_f32(&[3, 1], &vals(3, 1.3)).unwrap();
            (w, x, bias)
        };
        let mm = ctx.mul_mat(w, x).unwrap();
        let h = ctx.add(mm, bias).unwrap();
        let y = ctx.gelu(h).unwrap();
        let g = Graph::build(&ctx, &[y]).unwrap();
        let plan = Allocator::new(CpuRules).plan(&ctx, &g).unwrap();
        plan.verify(&ctx, &g, &CpuRules).unwrap();
        assert_eq!(plan.reused_source(mm), None, "mul_mat never writes over a source");
        assert_eq!(plan.reused_source(h), Some(mm));
        assert_eq!(plan.reused_source(y), Some(h));
        assert_eq!(plan.place(y), plan.place(mm));
        assert!(plan.is_retained(y) && !plan.is_retained(mm) && !plan.is_retained(h));
        let s = plan.stats();
        let inputs = if no_alloc { 3 * 64 } else { 0 };
        assert_eq!(s.planned, inputs + 64, "one 64-byte block for the whole chain: {s:?}");
        assert_eq!(s.lower_bound, s.planned);
        assert_eq!(s.naive, inputs + 3 * 64);
        if !no_alloc {
            let plan = plan_and_run(&ctx, &g);
            assert_eq!(plan.reused_source(y), Some(h));
            // the values: gelu(W·x + bias), computed here
            let (wv, xv, bv) = (vals(12, 0.1), vals(8, 0.7), vals(3, 1.3));
            let st = backend(1, true).run(&ctx, &g).unwrap();
            let out = st.read_f32(&ctx, y).unwrap();
            for n in 0..2 {
                for m in 0..3 {
                    let dot: f32 = (0..4).map(|k| wv[m * 4 + k] * xv[n * 4 + k]).sum();
                    let v = dot + bv[m];
                    let gelu = 0.5 * v * (1.0 + (0.797_884_6 * (v + 0.044_715 * v * v * v)).tanh());
                    // ggml's GELU is rounded to f16 (2^-11 relative) from an f16 input
                    assert!((out[n * 3 + m] - gelu).abs() < 1e-3 * gelu.abs().max(1.0), "{} vs {gelu}", out[n * 3 + m]);
                }
            }
        } else {
            // inputs set on the backend, run with poison, against the naive run
            let cpu = backend(1, true);
            let mut st = cpu.alloc(&ctx, &g, plan).unwrap();
            let mut st0 = backend(1, false).alloc(&ctx, &g, Plan::naive(&ctx, &g, CPU_ALIGNMENT).unwrap()).unwrap();
            for (id, v) in [(w, vals(12, 0.1)), (x, vals(8, 0.7)), (bias, vals(3, 1.3))] {
                st.set_data(&ctx, id, &v).unwrap();
                st0.set_data(&ctx, id, &v).unwrap();
            }
            cpu.compute(&ctx, &g, &mut st).unwrap();
            backend(1, false).compute(&ctx, &g, &mut st0).unwrap();
            assert_eq!(st.read_f32(&ctx, y).unwrap(), st0.read_f32(&ctx, y).unwrap());
            assert_eq!(st.read_f32(&ctx, x).unwrap(), vals(8, 0.7), "inputs stay readable");
            assert!(matches!(st.read_f32(&ctx, mm), Err(Error::Invalid(_))));
        }
    }
}

/// In-place reuse on tensors large enough to be split across 2 threads, with
/// poison, against the naive run on 1 thread.
#[test]
fn inplace_reuse_on_threaded_kernels() {
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[256, 160], &vals(256 * 160, 0.3)).unwrap();
    let b = ctx.new_f32(&[256, 1], &vals(256, 0.8)).unwrap();
    let h = ctx.add(x, b).unwrap();
    let h2 = ctx.gelu(h).unwrap();
    let h3 = ctx.mul(h2, x).unwrap();
    let h4 = ctx.scale(h3, 0.5).unwrap();
    let t = ctx.transpose(h4).unwrap();
    let c = ctx.cont(t).unwrap();
    let y = ctx.silu(h4).unwrap();
    let s = ctx.sum_rows(c).unwrap();
    let z = ctx.sub(y, x).unwrap();
    let g = Graph::build(&ctx, &[s, z]).unwrap();
    let plan = plan_and_run(&ctx, &g);
    assert_eq!(plan.reused_source(h), None, "x is a leaf");
    assert_eq!(plan.reused_source(h2), Some(h));
    assert_eq!(plan.reused_source(h3), Some(h2));
    assert_eq!(plan.reused_source(h4), Some(h3));
    assert_eq!(plan.reused_source(c), None, "transposed source");
    assert_eq!(plan.reused_source(y), Some(h4), "after the transposed copy read it");
    assert_eq!(plan.reused_source(z), Some(y));
    assert_eq!(plan.reused_source(s), None);
    let st = plan.stats();
    assert!(st.planned < st.naive && st.lower_bound <= st.planned, "{st:?}");
}

/// mul_mat and sum_rows never write over a source, even one of their exact layout.
#[test]
fn no_reuse_for_matmul_and_reductions() {
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[4, 4], &vals(16, 0.3)).unwrap();
    let w = ctx.new_f32(&[4, 4], &vals(16, 0.9)).unwrap();
    let h = ctx.relu(x).unwrap(); // [4,4], dead after mm
    let mm = ctx.mul_mat(w, h).unwrap(); // [4,4], same layout as h
    let col = ctx.new_f32(&[1, 4], &vals(4, 0.5)).unwrap();
    let c = ctx.neg(col).unwrap(); // [1,4], dead after the sum
    let s = ctx.sum_rows(c).unwrap(); // [1,4], same layout as c
    let g = Graph::build(&ctx, &[mm, s]).unwrap();
    let plan = plan_and_run(&ctx, &g);
    assert_eq!(ctx.layout(h).unwrap(), ctx.layout(mm).unwrap());
    assert_eq!(ctx.layout(c).unwrap(), ctx.layout(s).unwrap());
    assert_eq!(plan.reused_source(mm), None);
    assert_eq!(plan.reused_source(s), None);
    assert_ne!(plan.place(mm), plan.place(h));
    assert_ne!(plan.place(s), plan.place(c));
}

/// A source that is an output (directly, by flag, or through a view) or an
/// input is never overwritten.
#[test]
fn no_reuse_of_outputs_and_inputs() {
    // output passed to the graph
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[5, 2], &vals(10, 0.2)).unwrap();
    let h = ctx.relu(x).unwrap();
    let y = ctx.neg(h).unwrap();
    let g = Graph::build(&ctx, &[h, y]).unwrap();
    let plan = plan_and_run(&ctx, &g);
    assert_eq!(plan.reused_source(y), None);
    assert!(plan.is_retained(h));

    // output by flag only
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[5, 2], &vals(10, 0.2)).unwrap();
    let h = ctx.relu(x).unwrap();
    ctx.set_output(h).unwrap();
    let y = ctx.neg(h).unwrap();
    let g = Graph::build(&ctx, &[y]).unwrap();
    let plan = plan_and_run(&ctx, &g);
    assert_eq!(plan.reused_source(y), None);
    assert!(plan.is_retained(h));

    // output through a view of the source: its root is protected
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[5, 2], &vals(10, 0.2)).unwrap();
    let h = ctx.relu(x).unwrap();
    let y = ctx.neg(h).unwrap();
    let v = ctx.transpose(h).unwrap();
    let g = Graph::build(&ctx, &[y, v]).unwrap();
    let plan = plan_and_run(&ctx, &g);
    assert_eq!(plan.reused_source(y), None);
    assert!(plan.is_retained(h));

    // an intermediate flagged as input
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[5, 2], &vals(10, 0.2)).unwrap();
    let h = ctx.relu(x).unwrap();
    ctx.set_input(h).unwrap();
    let y = ctx.neg(h).unwrap();
    let g = Graph::build(&ctx, &[y]).unwrap();
    let plan = plan_and_run(&ctx, &g);
    assert_eq!(plan.reused_source(y), None);

    // a data-less input leaf (no_alloc) and a data leaf
    let mut ctx = Context::new_no_alloc();
    let x = ctx.new_tensor(DType::F32, &[5, 2]).unwrap();
    ctx.set_input(x).unwrap();
    let y = ctx.neg(x).unwrap();
    let z = ctx.relu(y).unwrap();
    let g = Graph::build(&ctx, &[z]).unwrap();
    let plan = Allocator::new(CpuRules).plan(&ctx, &g).unwrap();
    plan.verify(&ctx, &g, &CpuRules).unwrap();
    assert_eq!(plan.reused_source(y), None);
    assert_eq!(plan.reused_source(z), Some(y));
    assert!(matches!(plan.place(x), Some(Place::Buffer { .. })));
    assert_ne!(plan.place(x), plan.place(y));
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[5, 2], &vals(10, 0.2)).unwrap();
    let y = ctx.neg(x).unwrap();
    let g = Graph::build(&ctx, &[y]).unwrap();
    let plan = plan_and_run(&ctx, &g);
    assert_eq!(plan.place(x), Some(Place::Leaf));
    assert_eq!(plan.reused_source(y), None);
}

/// A source read later (directly, through a view, or written in place later)
/// is not overwritten; a source another operand views differently is not either.
#[test]
fn no_reuse_of_sources_still_needed() {
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[4, 3], &vals(12, 0.4)).unwrap();
    let h = ctx.relu(x).unwrap();
    let y = ctx.neg(h).unwrap();
    let z = ctx.add(y, h).unwrap(); // h read again
    let g = Graph::build(&ctx, &[z]).unwrap();
    let plan = plan_and_run(&ctx, &g);
    assert_eq!(plan.reused_source(y), None);
    assert_eq!(plan.reused_source(z), Some(y), "slot 0 is at its last use");

    // read later through a view created earlier
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[4, 3], &vals(12, 0.4)).unwrap();
    let h = ctx.relu(x).unwrap();
    let v = ctx.transpose(h).unwrap();
    let y = ctx.neg(h).unwrap();
    let z = ctx.cont(v).unwrap();
    let g = Graph::build(&ctx, &[y, z]).unwrap();
    let plan = plan_and_run(&ctx, &g);
    assert_eq!(plan.reused_source(y), None);

    // written in place later: the reader before the write must not take the block
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[4, 3], &vals(12, 0.4)).unwrap();
    let h = ctx.relu(x).unwrap();
    let y = ctx.neg(h).unwrap();
    let w = ctx.scale_inplace(h, 3.0).unwrap();
    let z = ctx.sqr(w).unwrap();
    let q = ctx.add(z, y).unwrap();
    let g = Graph::build(&ctx, &[q]).unwrap();
    let plan = plan_and_run(&ctx, &g);
    assert_eq!(plan.reused_source(y), None);
    assert_eq!(plan.reused_source(z), Some(h), "the write's view has h's layout at offset 0");

    // another operand views the source's storage with a different layout
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[4, 2], &vals(8, 0.4)).unwrap();
    let h = ctx.exp(x).unwrap();
    let row0 = ctx.view_2d(h, 4, 1, 16, 0).unwrap(); // [4,1]: tiles into h
    let z = ctx.add(h, row0).unwrap();
    let g = Graph::build(&ctx, &[z]).unwrap();
    let plan = plan_and_run(&ctx, &g);
    assert_eq!(plan.reused_source(z), None, "writing row 0 first would change what row 1 reads");

    // a transposed source (other strides) is not overwritten
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[3, 2], &vals(6, 0.4)).unwrap();
    let h = ctx.exp(x).unwrap();
    let t = ctx.transpose(h).unwrap();
    let z = ctx.neg(t).unwrap();
    let g = Graph::build(&ctx, &[z]).unwrap();
    let plan = plan_and_run(&ctx, &g);
    assert_eq!(plan.reused_source(z), None);
}

/// `reserve` sizes for the largest graph; `alloc_graph` refuses a graph that
/// does not fit, naming both sizes; a storage sized for the big graph runs the small one.
#[test]
fn reserve_then_alloc_graph() {
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[4], &[1., -2., 3., -4.]).unwrap();
    let small = ctx.relu(x).unwrap();
    let big_in = ctx.new_f32(&[32, 32], &vals(1024, 0.1)).unwrap();
    let e = ctx.scale(big_in, 2.0).unwrap();
    let big = ctx.mul_mat(e, e).unwrap();
    let g1 = Graph::build(&ctx, &[small]).unwrap();
    let g2 = Graph::build(&ctx, &[big]).unwrap();

    let mut a = Allocator::new(CpuRules);
    assert_eq!(a.reserved(), 0);
    let n1 = a.reserve(&ctx, &g1).unwrap();
    assert_eq!(n1, 64);
    assert_eq!(a.reserved(), n1);
    let need2 = a.plan(&ctx, &g2).unwrap().buffer_size();
    assert!(need2 > n1);
    match a.alloc_graph(&ctx, &g2) {
        Err(Error::Invalid(msg)) => {
            assert!(msg.contains(&need2.to_string()) && msg.contains(&n1.to_string()), "{msg}");
        }
        other => panic!("expected Error::Invalid, got {other:?}"),
    }
    a.alloc_graph(&ctx, &g1).unwrap();

    let n2 = a.reserve(&ctx, &g2).unwrap();
    assert_eq!(n2, need2);
    assert_eq!(a.reserve(&ctx, &g1).unwrap(), n1, "reserve returns this graph's need");
    assert_eq!(a.reserved(), n2, "a smaller graph does not shrink the reservation");
    let p1 = a.alloc_graph(&ctx, &g1).unwrap();
    let p2 = a.alloc_graph(&ctx, &g2).unwrap();
    p1.verify(&ctx, &g1, &CpuRules).unwrap();
    p2.verify(&ctx, &g2, &CpuRules).unwrap();

    let cpu = backend(2, true);
    let mut st = cpu.alloc_with_capacity(&ctx, &g1, p1.clone(), a.reserved()).unwrap();
    assert_eq!(st.capacity(), n2);
    cpu.compute(&ctx, &g1, &mut st).unwrap();
    assert_eq!(st.read_f32(&ctx, small).unwrap(), vec![1., 0., 3., 0.]);
    st.rebind(&ctx, &g2, p2).unwrap();
    cpu.compute(&ctx, &g2, &mut st).unwrap();
    let got = st.read_f32(&ctx, big).unwrap();
    let want = backend(1, false).run(&ctx, &g2).unwrap().read_f32(&ctx, big).unwrap();
    assert_eq!(got, want);
    st.rebind(&ctx, &g1, p1).unwrap();
    cpu.compute(&ctx, &g1, &mut st).unwrap();
    assert_eq!(st.read_f32(&ctx, small).unwrap(), vec![1., 0., 3., 0.]);

    // a storage sized for the small graph refuses the big plan
    let mut st = cpu.alloc(&ctx, &g1, a.alloc_graph(&ctx, &g1).unwrap()).unwrap();
    assert!(matches!(st.rebind(&ctx, &g2, a.alloc_graph(&ctx, &g2).unwrap()), Err(Error::Invalid(_))));
}

/// `verify` (and the executor) refuse a plan made for another graph, another
/// revision of the same graph, or another context's graph.
#[test]
fn verify_rejects_plans_of_other_graphs() {
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[4, 2], &vals(8, 0.2)).unwrap();
    let a = ctx.relu(x).unwrap();
    let b = ctx.exp(a).unwrap();
    let c = ctx.neg(b).unwrap();
    let g1 = Graph::build(&ctx, &[b]).unwrap();
    let g2 = Graph::build(&ctx, &[c]).unwrap();
    let g1_twin = Graph::build(&ctx, &[b]).unwrap();
    let alloc = Allocator::new(CpuRules);
    let p1 = alloc.plan(&ctx, &g1).unwrap();
    p1.verify(&ctx, &g1, &CpuRules).unwrap();
    assert!(matches!(p1.verify(&ctx, &g2, &CpuRules), Err(Error::Mismatch(_))));
    assert!(matches!(p1.verify(&ctx, &g1_twin, &CpuRules), Err(Error::Mismatch(_))), "same nodes, other graph");
    let cpu = backend(1, false);
    let mut st = cpu.alloc(&ctx, &g1, p1.clone()).unwrap();
    assert!(matches!(cpu.compute(&ctx, &g2, &mut st), Err(Error::Mismatch(_))));

    // a graph grown after planning is a new revision
    let mut g = Graph::build(&ctx, &[b]).unwrap();
    let p = alloc.plan(&ctx, &g).unwrap();
    g.build_forward_expand(&ctx, c).unwrap();
    assert!(matches!(p.verify(&ctx, &g, &CpuRules), Err(Error::Mismatch(_))));
    alloc.plan(&ctx, &g).unwrap().verify(&ctx, &g, &CpuRules).unwrap();

    // another context
    let mut ctx2 = Context::new();
    let y = ctx2.new_f32(&[4, 2], &vals(8, 0.2)).unwrap();
    let r = ctx2.relu(y).unwrap();
    let g3 = Graph::build(&ctx2, &[r]).unwrap();
    assert!(matches!(p1.verify(&ctx2, &g3, &CpuRules), Err(Error::Mismatch(_))));
    // (verify does not check the context first: the foreign ids come back as UnknownTensor)
    let e = p1.verify(&ctx2, &g1, &CpuRules);
    assert!(matches!(e, Err(Error::Mismatch(_) | Error::UnknownTensor(_))), "graph of another context: {e:?}");
    assert!(alloc.plan(&ctx2, &g1).is_err());

    // rules with another alignment: the 64-byte offsets are refused under 256
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[4], &[1., 2., 3., 4.]).unwrap();
    let p = ctx.exp(x).unwrap();
    let q = ctx.exp(x).unwrap();
    let s = ctx.add(p, q).unwrap();
    let g = Graph::build(&ctx, &[p, q, s]).unwrap();
    let plan = alloc.plan(&ctx, &g).unwrap();
    plan.verify(&ctx, &g, &CpuRules).unwrap();
    assert!(plan.places().any(|(_, pl)| pl == Place::Buffer { offset: 64 }));
    assert!(matches!(plan.verify(&ctx, &g, &NoReuse { alignment: CUDA_ALIGNMENT }), Err(Error::Invalid(_))));
}

/// Planning the same graph twice, and rebuilding it in a new context, gives
/// identical offsets (the random property checks this too, per case).
#[test]
fn planning_is_deterministic() {
    let make = || {
        let mut ctx = Context::new_no_alloc();
        let mut outs = Vec::new();
        let x = ctx.new_tensor(DType::F32, &[6, 5]).unwrap();
        let mut cur = x;
        for i in 0..40 {
            cur = match i % 5 {
                0 => ctx.relu(cur).unwrap(),
                1 => ctx.add(cur, x).unwrap(),
                2 => ctx.scale_inplace(cur, 0.5).unwrap(),
                3 => {
                    let t = ctx.transpose(cur).unwrap();
                    let c = ctx.cont(t).unwrap();
                    ctx.transpose(c).unwrap()
                }
                _ => ctx.mul_mat(x, cur).unwrap(),
            };
            if ctx.layout(cur).unwrap().ne != [6, 5, 1, 1] {
                cur = ctx.cont_reshape(cur, &[6, 5]).unwrap_or(x);
            }
            if i % 13 == 0 {
                outs.push(cur);
            }
        }
        outs.push(cur);
        let g = Graph::build(&ctx, &outs).unwrap();
        (ctx, g)
    };
    let (c1, g1) = make();
    let (c2, g2) = make();
    let a = Allocator::new(CpuRules);
    let p1 = a.plan(&c1, &g1).unwrap();
    let p1b = a.plan(&c1, &g1).unwrap();
    let p2 = a.plan(&c2, &g2).unwrap();
    p1.verify(&c1, &g1, &CpuRules).unwrap();
    same_plan(&g1, &p1, &g1, &p1b).unwrap();
    same_plan(&g1, &p1, &g2, &p2).unwrap();
    for &id in g1.nodes().iter().chain(g1.leafs()) {
        assert_eq!(p1.place(id), p1b.place(id));
    }
}
