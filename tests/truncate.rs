//! `Context::mark` / `Context::truncate`: dropping the tensors made after a
//! mark, with their write history, without ever mistaking a dropped handle for
//! the tensor that later takes its index.

use rgml::{Context, CpuBackend, Error, Graph};

fn cpu() -> CpuBackend {
    CpuBackend::new(1).unwrap()
}

#[test]
fn dropped_handles_are_errors_and_indices_are_not_confused() {
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[3], &[1., 2., 3.]).unwrap();
    let mark = ctx.mark();
    let b = ctx.scale(a, 2.).unwrap();
    let g = Graph::build(&ctx, &[b]).unwrap();
    ctx.truncate(&mark).unwrap();
    assert_eq!(ctx.len(), 1);
    assert!(matches!(ctx.tensor(b), Err(Error::UnknownTensor(_))));
    // a new tensor takes b's index; b's handle still names nothing
    let c = ctx.scale(a, 10.).unwrap();
    assert_eq!(c.index(), b.index());
    assert_ne!(c, b);
    assert!(matches!(ctx.tensor(b), Err(Error::UnknownTensor(_))));
    // the old graph refuses to run rather than computing c
    assert!(matches!(cpu().run(&ctx, &g), Err(Error::UnknownTensor(_))));
    let g = Graph::build(&ctx, &[c]).unwrap();
    assert_eq!(cpu().run(&ctx, &g).unwrap().read_f32(&ctx, c).unwrap(), vec![10., 20., 30.]);
    // tensors from before the mark are untouched
    assert_eq!(ctx.data::<f32>(a).unwrap(), &[1., 2., 3.]);
}

#[test]
fn write_history_goes_back_to_the_mark() {
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[2], &[1., 2.]).unwrap();
    let mark = ctx.mark();
    // an inplace write to a, then dropped: later readers must not wait for it
    ctx.relu_inplace(a).unwrap();
    let _ = ctx.scale_inplace(a, -1.).unwrap();
    ctx.truncate(&mark).unwrap();
    let s = ctx.scale(a, 3.).unwrap();
    let g = Graph::build(&ctx, &[s]).unwrap();
    assert_eq!(g.nodes().len(), 1, "only the scale: no dropped write is pulled in");
    assert_eq!(cpu().run(&ctx, &g).unwrap().read_f32(&ctx, s).unwrap(), vec![3., 6.]);
}

#[test]
fn the_same_mark_serves_again_and_bad_marks_are_errors() {
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[1], &[1.]).unwrap();
    let m1 = ctx.mark();
    for round in 0..3 {
        let x = ctx.scale(a, round as f32).unwrap();
        ctx.scale(x, 2.).unwrap();
        ctx.truncate(&m1).unwrap();
        assert_eq!(ctx.len(), 1);
    }
    // a mark taken after m1 can be used, then no longer once m1 cut below it
    ctx.scale(a, 1.).unwrap();
    let m2 = ctx.mark();
    ctx.scale(a, 2.).unwrap();
    ctx.truncate(&m2).unwrap();
    ctx.truncate(&m1).unwrap();
    ctx.scale(a, 3.).unwrap();
    ctx.scale(a, 4.).unwrap();
    assert!(matches!(ctx.truncate(&m2), Err(Error::Invalid(_))));
    let other = Context::new();
    assert!(matches!(ctx.truncate(&other.mark()), Err(Error::Mismatch(_))));
}

#[test]
fn forgotten_writes_are_state_not_dependencies() {
    let mut ctx = Context::new();
    let cache = ctx.new_f32(&[2], &[0., 0.]).unwrap();
    let x = ctx.new_f32(&[2], &[1., 2.]).unwrap();
    // graph 1 writes the cache
    let w = ctx.cpy(x, cache).unwrap();
    let g1 = Graph::build(&ctx, &[w]).unwrap();
    // without forgetting, a reader built now pulls the write in
    let r = ctx.scale(cache, 2.).unwrap();
    assert_eq!(Graph::build(&ctx, &[r]).unwrap().nodes().len(), 2);
    ctx.forget_writes();
    // after it, a reader is one node: it reads the cache as state
    let r2 = ctx.scale(cache, 3.).unwrap();
    let g2 = Graph::build(&ctx, &[r2]).unwrap();
    assert_eq!(g2.nodes().len(), 1);
    assert!(g1.nodes().len() == 1);
}
