//! Profiling: with it on, every compute adds each node's time to the CPU
//! backend's profile by op kind (matrix products apart by weight type), and
//! taking the profile starts a new one; without it there is none.

use rgml::{Backend, Context, CpuBackend, DType, Graph, OpKind};

#[test]
fn nodes_are_counted_by_kind_and_the_profile_restarts() {
    let mut ctx = Context::new();
    let w = ctx.new_f32(&[4, 3], &[1.0; 12]).unwrap();
    let x = ctx.new_f32(&[4, 2], &[0.5; 8]).unwrap();
    let y = ctx.mul_mat(w, x).unwrap();
    let out = ctx.add(ctx.add(y, y).unwrap(), y).unwrap();
    let g = Graph::build(&ctx, &[out]).unwrap();
    let cpu = CpuBackend::new(2).unwrap().with_profile(true);
    let mut st = cpu.run(&ctx, &g).unwrap();
    cpu.compute(&ctx, &g, &mut st).unwrap();
    assert_eq!(st.read_f32(&ctx, out).unwrap(), vec![6.0; 6]);
    let p = cpu.take_profile().expect("profiling is on");
    let calls: Vec<(String, u64)> = p.by_time().iter().map(|(k, t)| (k.to_string(), t.calls)).collect();
    let find = |name: &str| calls.iter().find(|(k, _)| k == name).map(|c| c.1);
    assert_eq!(find("mul_mat(f32)"), Some(2), "{calls:?}");
    assert_eq!(find("add"), Some(4), "{calls:?}");
    assert_eq!(calls.len(), 2);
    assert!(p.by_time().iter().any(|(k, _)| *k == OpKind { op: "mul_mat", weight: Some(DType::F32) }));
    // taken: the next profile starts empty
    assert!(cpu.take_profile().unwrap().is_empty());
    assert!(CpuBackend::new(1).unwrap().take_profile().is_none());
}
