//! Eager program-order semantics on a static graph, and refused overlapping writes.

use rgml::{Context, CpuBackend, Error, Graph, Op};

fn cpu() -> CpuBackend {
    CpuBackend::new(2).unwrap()
}

/// The seed's example: `b = a[0]; b += 1` visibly changes `a`.
#[test]
fn write_through_a_view_changes_the_base() {
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[3, 2], &[1., 2., 3., 4., 5., 6.]).unwrap();
    let b = ctx.view_1d(a, 3, 0).unwrap();
    let one = ctx.new_f32(&[1], &[1.]).unwrap();
    let b2 = ctx.add_inplace(b, one).unwrap();
    assert_eq!(ctx.tensor(b2).unwrap().view_src(), Some(a), "an inplace result is a view of its input's storage");
    let g = Graph::build(&ctx, &[b2]).unwrap();
    let st = cpu().run(&ctx, &g).unwrap();
    assert_eq!(st.read_f32(&ctx, a).unwrap(), vec![2., 3., 4., 4., 5., 6.]);
    assert_eq!(st.read_f32(&ctx, b).unwrap(), vec![2., 3., 4.]);
    // the context still holds the values the leaf had before the run
    assert_eq!(ctx.data::<f32>(a).unwrap(), &[1., 2., 3., 4., 5., 6.]);
}

/// A node built before an inplace write sees the old values; one built after sees the new.
#[test]
fn readers_are_ordered_around_an_inplace_write() {
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[4], &[1., 2., 3., 4.]).unwrap();
    let before = ctx.scale(a, 10.).unwrap();
    let w = ctx.scale_inplace(a, -1.).unwrap();
    let after = ctx.scale(a, 10.).unwrap();
    // the graph is asked for the readers only, `after` first: the write must
    // still be pulled in, and ordered between them
    let g = Graph::build(&ctx, &[after, before]).unwrap();
    assert!(g.contains(w), "a reader built after a write pulls the write into the graph");
    let pos = |id| g.nodes().iter().position(|&n| n == id).unwrap();
    assert!(pos(before) < pos(w) && pos(w) < pos(after));
    let st = cpu().run(&ctx, &g).unwrap();
    assert_eq!(st.read_f32(&ctx, before).unwrap(), vec![10., 20., 30., 40.]);
    assert_eq!(st.read_f32(&ctx, after).unwrap(), vec![-10., -20., -30., -40.]);
}

/// Two writes to one storage through different views run in program order.
#[test]
fn writes_through_different_views_keep_program_order() {
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[2, 2], &[1., 1., 1., 1.]).unwrap();
    let two = ctx.new_f32(&[1], &[2.]).unwrap();
    let col0 = ctx.view_2d(a, 1, 2, 8, 0).unwrap();
    let at = ctx.transpose(a).unwrap();
    let w1 = ctx.mul_inplace(col0, two).unwrap(); // a[:,0] *= 2
    let w2 = ctx.add_inplace(at, two).unwrap(); // a^T += 2 (all of a)
    let snapshot = ctx.cont(a).unwrap();
    let g = Graph::build(&ctx, &[snapshot]).unwrap();
    assert!(g.contains(w1) && g.contains(w2));
    let st = cpu().run(&ctx, &g).unwrap();
    assert_eq!(st.read_f32(&ctx, snapshot).unwrap(), vec![4., 3., 4., 3.]);
}

/// An inplace write on an intermediate result is seen by later readers of that result.
#[test]
fn inplace_on_an_intermediate() {
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[3], &[1., -2., 3.]).unwrap();
    let y = ctx.scale(x, 2.).unwrap();
    let early = ctx.sum_rows(y).unwrap();
    ctx.relu_inplace(y).unwrap();
    let late = ctx.sum_rows(y).unwrap();
    let g = Graph::build(&ctx, &[early, late]).unwrap();
    let st = cpu().run(&ctx, &g).unwrap();
    assert!(matches!(st.read_f32(&ctx, y), Err(Error::Invalid(_))), "y is not an output: its memory may be reused");
    let g = Graph::build(&ctx, &[early, late, y]).unwrap();
    let st = cpu().run(&ctx, &g).unwrap();
    assert_eq!(st.read_f32(&ctx, early).unwrap(), vec![4.]);
    assert_eq!(st.read_f32(&ctx, late).unwrap(), vec![8.]);
    assert_eq!(st.read_f32(&ctx, y).unwrap(), vec![2., 0., 6.]);
}

/// ggml bug class: inplace add into an expanded (stride-0) tensor.
#[test]
fn inplace_write_into_expand_is_refused() {
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[4, 1], &[1., 2., 3., 4.]).unwrap();
    let e = ctx.expand(a, [4, 3, 1, 1]).unwrap();
    let b = ctx.new_f32(&[4, 3], &[0.; 12]).unwrap();
    assert!(matches!(ctx.add_inplace(e, b), Err(Error::OverlappingWrite { .. })));
    assert!(matches!(ctx.relu_inplace(e), Err(Error::OverlappingWrite { .. })));
    assert!(matches!(ctx.cpy(b, e), Err(Error::OverlappingWrite { .. })));
    // reading an expanded tensor is fine
    let s = ctx.add(b, e).unwrap();
    let g = Graph::build(&ctx, &[s]).unwrap();
    let st = cpu().run(&ctx, &g).unwrap();
    assert_eq!(st.read_f32(&ctx, s).unwrap(), [1., 2., 3., 4.].repeat(3));
}

#[test]
fn overlapping_views_are_refused_as_destinations() {
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[8], &[0.; 8]).unwrap();
    // rows of 4 floats starting 2 floats apart: they share bytes
    let ov = ctx.view_2d(a, 4, 2, 8, 0).unwrap();
    assert!(matches!(ctx.scale_inplace(ov, 2.), Err(Error::OverlappingWrite { .. })));
    // a source that partly overlaps the destination in the same storage
    let lo = ctx.view_1d(a, 4, 0).unwrap();
    let mid = ctx.view_1d(a, 4, 8).unwrap();
    assert!(matches!(ctx.add_inplace(lo, mid), Err(Error::OverlappingWrite { .. })));
    assert!(matches!(ctx.cpy(mid, lo), Err(Error::OverlappingWrite { .. })));
    // disjoint halves and exact self-aliasing are fine
    let hi = ctx.view_1d(a, 4, 16).unwrap();
    ctx.add_inplace(lo, hi).unwrap();
    ctx.add_inplace(lo, lo).unwrap();
    // interleaved but disjoint views are fine
    let even = ctx.view_strided(a, [4, 1, 1, 1], [8, 32, 32, 32], 0).unwrap();
    let odd = ctx.view_strided(a, [4, 1, 1, 1], [8, 32, 32, 32], 4).unwrap();
    ctx.sub_inplace(even, odd).unwrap();
}

/// A copy into a strided destination view (a KV-cache style write) keeps the
/// rest of the storage, and readers after it see it.
#[test]
fn cpy_into_a_strided_view() {
    let mut ctx = Context::new();
    let cache = ctx.new_f32(&[3, 4], &[0.; 12]).unwrap();
    let k = ctx.new_f32(&[3], &[7., 8., 9.]).unwrap();
    let slot = ctx.view_1d(cache, 3, 2 * 12).unwrap();
    let w = ctx.cpy(k, slot).unwrap();
    assert_eq!(ctx.tensor(w).unwrap().op(), Op::Cpy { src: k, dst: slot });
    let total = ctx.sum_rows(cache).unwrap();
    let g = Graph::build(&ctx, &[total]).unwrap();
    let st = cpu().run(&ctx, &g).unwrap();
    assert_eq!(st.read_f32(&ctx, total).unwrap(), vec![0., 0., 24., 0.]);
}

/// The graph's order is program order; dependency edges include the aliasing ones.
#[test]
fn dependencies_have_order_edges() {
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[2], &[1., 2.]).unwrap();
    let r = ctx.neg(a).unwrap();
    let w = ctx.sqr_inplace(a).unwrap();
    let g = Graph::build(&ctx, &[r, w]).unwrap();
    let deps = g.dependencies(&ctx).unwrap();
    let has_order = deps.edge_indices().any(|e| {
        let (x, y) = deps.edge_endpoints(e).unwrap();
        deps[x] == r && deps[y] == w && deps[e] == rgml::Dep::Order
    });
    assert!(has_order, "the write must be ordered after the earlier reader");
    let dot = g.to_dot(&ctx, None).unwrap();
    assert!(dot.contains("inplace") && dot.contains("order") && dot.starts_with("digraph"));
}

/// Running a graph twice on the same storage applies an inplace write twice (like ggml).
#[test]
fn storage_persists_across_computes() {
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[2], &[1., 2.]).unwrap();
    let w = ctx.scale_inplace(a, 3.).unwrap();
    let g = Graph::build(&ctx, &[w]).unwrap();
    let cpu = cpu();
    let plan = rgml::Plan::naive(&ctx, &g, rgml::CPU_ALIGNMENT).unwrap();
    let mut st = cpu.alloc(&ctx, &g, plan).unwrap();
    cpu.compute(&ctx, &g, &mut st).unwrap();
    cpu.compute(&ctx, &g, &mut st).unwrap();
    assert_eq!(st.read_f32(&ctx, a).unwrap(), vec![9., 18.]);
}

/// A view that differs from its source only in the stride of a size-1 dim
/// addresses the same bytes: an inplace op from one into the other is a plain
/// elementwise update (not a partial overlap), and the planner may reuse it.
#[test]
fn size_one_dim_strides_do_not_make_an_overlap() {
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[4, 3], &(0..12).map(|i| i as f32).collect::<Vec<_>>()).unwrap();
    let y = ctx.scale(a, 2.).unwrap();
    // y as [4, 1, 3]: the size-1 dim gets an arbitrary stride (20) or the packed one (16)
    let odd = ctx.view_4d(y, [4, 1, 3, 1], [20, 16, 48], 0).unwrap();
    let packed = ctx.reshape(y, &[4, 1, 3]).unwrap();
    let z = ctx.add_inplace(odd, packed).unwrap();
    let g = Graph::build(&ctx, &[z]).unwrap();
    let st = cpu().run(&ctx, &g).unwrap();
    assert_eq!(st.read_f32(&ctx, z).unwrap(), (0..12).map(|i| 4.0 * i as f32).collect::<Vec<_>>());
}
