//! Graph building in one expression: the op constructors take `&Context`, so
//! ops nest (`ctx.cont(ctx.transpose(a)?)?`), references to earlier headers
//! stay valid while nodes are added, program order is the order the nodes are
//! made (arguments first), and threads may build on one context at once.

use rgml::{Context, CpuBackend, Graph, Op, TensorId};

fn run(ctx: &Context, out: TensorId) -> Vec<f32> {
    let g = Graph::build(ctx, &[out]).unwrap();
    CpuBackend::new(2).unwrap().run(ctx, &g).unwrap().read_f32(ctx, out).unwrap()
}

#[test]
fn ops_nest_in_one_expression() {
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[3, 2], &[1., 2., 3., 4., 5., 6.]).unwrap();
    let b = ctx.new_f32(&[2], &[10., 20.]).unwrap();
    // (aᵀ + b) * 2, each intermediate an argument of the next op
    let out = ctx.scale(ctx.add(ctx.cont(ctx.transpose(a).unwrap()).unwrap(), b).unwrap(), 2.0).unwrap();
    assert_eq!(run(&ctx, out), vec![22., 48., 24., 50., 26., 52.]);
    // the nodes were made innermost first: transpose, cont, add, scale
    let names: Vec<&str> = ctx.tensors().skip(2).map(|(_, t)| t.op().name()).collect();
    assert_eq!(names, ["transpose", "cont", "add", "scale"]);
}

#[test]
fn headers_stay_valid_while_nodes_are_added() {
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[4], &[1., 2., 3., 4.]).unwrap();
    let header = ctx.tensor(a).unwrap();
    let mut last = a;
    for _ in 0..5000 {
        last = ctx.neg(last).unwrap();
    }
    // the reference taken before 5000 pushes still reads the same header
    assert_eq!(header.layout().ne, [4, 1, 1, 1]);
    assert!(header.op().is_leaf());
    assert_eq!(run(&ctx, last), vec![1., 2., 3., 4.]);
}

/// In-place writes keep eager program order when nested: the argument (a
/// read of `x`) is made, and so runs, before the write that consumes it.
#[test]
fn nested_in_place_ops_keep_program_order() {
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[3], &[1., 2., 3.]).unwrap();
    let w = ctx.add_inplace(x, ctx.scale(x, 2.0).unwrap()).unwrap(); // x += 2x
    let after = ctx.scale(x, 1.0).unwrap(); // reads x after the write
    assert!(matches!(ctx.tensor(w).unwrap().op(), Op::Binary { .. }));
    let g = Graph::build(&ctx, &[w, after]).unwrap();
    let st = CpuBackend::new(1).unwrap().run(&ctx, &g).unwrap();
    assert_eq!(st.read_f32(&ctx, after).unwrap(), vec![3., 6., 9.]);
}

/// Two threads adding nodes to one context: every id is distinct and
/// resolves to the node its thread made, and each thread's chain computes.
#[test]
fn threads_build_on_one_context() {
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[2], &[1., -1.]).unwrap();
    let (ctx, n) = (&ctx, 300);
    let chains: Vec<Vec<TensorId>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|k| {
                s.spawn(move || {
                    let mut ids = vec![a];
                    for _ in 0..n {
                        let prev = *ids.last().unwrap();
                        ids.push(if k == 0 { ctx.neg(prev).unwrap() } else { ctx.scale(prev, 1.0).unwrap() });
                    }
                    ids
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all: Vec<TensorId> = chains.iter().flat_map(|c| c[1..].to_vec()).collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 2 * n);
    assert_eq!(ctx.len(), 1 + 2 * n);
    for (k, chain) in chains.iter().enumerate() {
        let want = if k == 0 { "neg" } else { "scale" };
        assert!(chain[1..].iter().all(|&id| ctx.tensor(id).unwrap().op().name() == want));
        assert_eq!(run(ctx, *chain.last().unwrap()), vec![1., -1.]);
    }
}
