//! Bad input gives a clear `Error` naming shapes and strides, never a panic;
//! ggml's known bug classes are refused at build time.

use rgml::{Context, CpuBackend, DType, Error, Graph, Plan, CPU_ALIGNMENT};

fn msg<T: std::fmt::Debug>(r: rgml::Result<T>) -> String {
    r.expect_err("expected an error").to_string()
}

/// ggml bug class: a strided view whose last element lies past its storage.
#[test]
fn strided_view_past_the_end() {
    let mut ctx = Context::new();
    let a = ctx.new_tensor_2d(DType::F32, 4, 4).unwrap(); // 64 bytes
                                                          // 4 rows 20 bytes apart: last row starts at 60 and reads 16 bytes
    let e = ctx.view_2d(a, 4, 4, 20, 0);
    assert!(matches!(e, Err(Error::InvalidView { .. })), "{e:?}");
    let m = msg(ctx.view_2d(a, 4, 4, 20, 0));
    assert!(m.contains("[4, 4, 1, 1]") && m.contains("76") && m.contains("64"), "{m}");
    // an offset that pushes a contiguous view out by one element
    assert!(matches!(ctx.view_1d(a, 16, 4), Err(Error::InvalidView { .. })));
    // the same through a view of a view: offsets add up
    let v = ctx.view_1d(a, 8, 32).unwrap();
    assert!(matches!(ctx.view_1d(v, 8, 4), Err(Error::InvalidView { .. })));
    assert!(ctx.view_1d(v, 7, 4).is_ok());
    // huge strides overflow instead of wrapping
    assert!(matches!(ctx.view_strided(a, [2, 2, 1, 1], [4, usize::MAX / 2, 0, 0], 0), Err(Error::InvalidView { .. })));
    // misaligned offsets and strides
    assert!(matches!(ctx.view_1d(a, 2, 2), Err(Error::InvalidView { .. })));
    assert!(matches!(ctx.view_2d(a, 2, 2, 6, 0), Err(Error::InvalidView { .. })));
    // quantized views keep dim 0 whole blocks
    let q = ctx.new_tensor_2d(DType::Q4_0, 64, 2).unwrap();
    assert!(matches!(ctx.view_1d(q, 16, 0), Err(Error::InvalidView { .. })));
    assert!(ctx.view_1d(q, 32, 18).is_ok());
    // stride-aware: a transposed window that fits by element count but not by extent
    let t = ctx.view_strided(a, [4, 4, 1, 1], [16, 4, 64, 64], 4);
    assert!(matches!(t, Err(Error::InvalidView { .. })), "{t:?}");
}

/// ggml bug class: permute with a repeated axis.
#[test]
fn permute_with_repeated_axis() {
    let mut ctx = Context::new();
    let a = ctx.new_tensor_3d(DType::F32, 2, 3, 4).unwrap();
    assert!(matches!(ctx.permute(a, [0, 0, 1, 2]), Err(Error::InvalidView { .. })));
    assert!(matches!(ctx.permute(a, [0, 1, 2, 4]), Err(Error::InvalidView { .. })));
    let p = ctx.permute(a, [2, 0, 1, 3]).unwrap();
    assert_eq!(ctx.layout(p).unwrap().ne, [3, 4, 2, 1]);
    assert_eq!(ctx.layout(p).unwrap().nb, [8, 24, 4, 96]);
}

/// ggml bug class: reshape of a transposed tensor must not silently copy or misread.
#[test]
fn reshape_of_transposed_is_not_contiguous() {
    let mut ctx = Context::new();
    let a = ctx.new_tensor_2d(DType::F32, 3, 2).unwrap();
    let t = ctx.transpose(a).unwrap();
    let e = ctx.reshape_1d(t, 6);
    assert!(matches!(e, Err(Error::NotContiguous { op: "reshape", .. })), "{e:?}");
    assert!(msg(ctx.reshape_1d(t, 6)).contains("nb=[12, 4, 24, 24]"));
    // the explicit copy makes it reshapeable
    let c = ctx.cont(t).unwrap();
    assert!(ctx.reshape_1d(c, 6).is_ok());
    assert!(matches!(ctx.reshape_2d(c, 4, 2), Err(Error::Shape { .. })));
}

#[test]
fn shapes_that_do_not_broadcast() {
    let mut ctx = Context::new();
    let a = ctx.new_tensor_2d(DType::F32, 4, 3).unwrap();
    let b = ctx.new_tensor_2d(DType::F32, 3, 3).unwrap();
    let m = msg(ctx.add(a, b));
    assert!(m.contains("[3, 3, 1, 1]") && m.contains("[4, 3, 1, 1]"), "{m}");
    // b bigger than a
    let big = ctx.new_tensor_2d(DType::F32, 8, 3).unwrap();
    assert!(matches!(ctx.mul(a, big), Err(Error::Shape { .. })));
    // mul_mat: K mismatch, batch not a multiple
    assert!(matches!(ctx.mul_mat(a, b), Err(Error::Shape { .. })));
    let a3 = ctx.new_tensor_3d(DType::F32, 4, 2, 2).unwrap();
    let b3 = ctx.new_tensor_3d(DType::F32, 4, 2, 3).unwrap();
    assert!(matches!(ctx.mul_mat(a3, b3), Err(Error::Shape { .. })));
    // cpy: element counts differ
    assert!(matches!(ctx.cpy(a, b), Err(Error::Shape { .. })));
    // expand: only size-1 dims broadcast
    assert!(matches!(ctx.expand(a, [4, 6, 1, 1]), Err(Error::Shape { .. })));
    assert!(matches!(ctx.expand(a, [4, 3, -1, 1]), Err(Error::Shape { .. })));
}

#[test]
fn unsupported_types_are_reported_at_build_time() {
    let mut ctx = Context::new();
    let q = ctx.new_tensor_2d(DType::Q8_0, 32, 2).unwrap();
    let f = ctx.new_tensor_2d(DType::F32, 32, 2).unwrap();
    assert!(matches!(ctx.add(q, f), Err(Error::Unsupported { op: "add", dtype: DType::Q8_0 })));
    assert!(matches!(ctx.gelu(q), Err(Error::Unsupported { .. })));
    // a quantized transpose is a view whose blocks run along dim 1
    let qt = ctx.transpose(q).unwrap();
    let l = ctx.layout(qt).unwrap();
    assert_eq!((l.ne, l.nb, l.block_dim, l.is_contiguous()), ([2, 32, 1, 1], [34, 34, 68, 68], 1, false));
    let row = ctx.view_1d(q, 32, 0).unwrap();
    assert!(ctx.expand(row, [32, 4, 1, 1]).is_ok(), "dims other than the block dim broadcast");
    assert!(ctx.expand(row, [64, 1, 1, 1]).is_err(), "the block dim does not");
    let i = ctx.new_tensor_1d(DType::I32, 4).unwrap();
    assert!(matches!(ctx.scale(i, 2.0), Err(Error::Unsupported { .. })));
}

#[test]
fn bad_leaf_data_and_foreign_ids() {
    let mut ctx = Context::new();
    let a = ctx.new_tensor_1d(DType::F32, 4).unwrap();
    assert!(matches!(ctx.set_data(a, &[1f32; 3]), Err(Error::DataSize { expected: 16, found: 12, .. })));
    assert!(matches!(ctx.set_data(a, &[1i32; 4]), Err(Error::DTypeMismatch { .. })));
    let v = ctx.view_1d(a, 2, 0).unwrap();
    assert!(matches!(ctx.set_data(v, &[1f32; 2]), Err(Error::Invalid(_))));
    assert!(matches!(ctx.new_tensor(DType::F32, &[]), Err(Error::Shape { .. })));
    assert!(matches!(ctx.new_tensor(DType::F32, &[1, 2, 3, 4, 5]), Err(Error::Shape { .. })));
    assert!(matches!(ctx.new_tensor_1d(DType::Q4_0, 33), Err(Error::Shape { .. })));

    let mut other = Context::new();
    let b = other.new_tensor_1d(DType::F32, 4).unwrap();
    assert!(matches!(ctx.add(a, b), Err(Error::UnknownTensor(_))));
    assert!(matches!(Graph::build(&ctx, &[b]), Err(Error::UnknownTensor(_))));
    let g = Graph::build(&other, &[b]).unwrap();
    assert!(matches!(CpuBackend::new(1).unwrap().run(&ctx, &g), Err(Error::Mismatch(_))));
}

#[test]
fn plans_are_tied_to_their_graph() {
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[2], &[1., 2.]).unwrap();
    let b = ctx.neg(a).unwrap();
    let c = ctx.exp(a).unwrap();
    let mut g = Graph::build(&ctx, &[b]).unwrap();
    let plan = Plan::naive(&ctx, &g, CPU_ALIGNMENT).unwrap();
    g.build_forward_expand(&ctx, c).unwrap();
    let cpu = CpuBackend::new(1).unwrap();
    assert!(matches!(cpu.alloc(&ctx, &g, plan), Err(Error::Mismatch(_))), "a plan made before an expand is stale");
    let g2 = Graph::build(&ctx, &[b]).unwrap();
    let plan2 = Plan::naive(&ctx, &g2, CPU_ALIGNMENT).unwrap();
    assert!(matches!(cpu.alloc(&ctx, &g, plan2), Err(Error::Mismatch(_))), "a plan of another graph");
    assert!(matches!(Plan::naive(&ctx, &g, 48), Err(Error::Invalid(_))));
}

#[test]
fn no_alloc_graphs_build_any_size_and_take_inputs_on_the_backend() {
    let mut ctx = Context::new_no_alloc();
    let a = ctx.new_tensor_2d(DType::F32, 1 << 20, 1 << 20).unwrap(); // 4 TiB, shape only
    let b = ctx.transpose(a).unwrap();
    let c = ctx.cont(b).unwrap();
    let g = Graph::build(&ctx, &[c]).unwrap();
    assert_eq!(g.nodes().len(), 2);
    let mut alloc = rgml::Allocator::new(rgml::CpuRules);
    assert_eq!(alloc.reserve(&ctx, &g).unwrap(), 2 << 42, "input and result, measured without touching memory");

    let mut ctx = Context::new_no_alloc();
    let x = ctx.new_tensor_1d(DType::F32, 4).unwrap();
    ctx.set_input(x).unwrap();
    let y = ctx.neg(x).unwrap();
    let g = Graph::build(&ctx, &[y]).unwrap();
    let cpu = CpuBackend::new(1).unwrap();
    let mut st = cpu.alloc(&ctx, &g, Plan::naive(&ctx, &g, CPU_ALIGNMENT).unwrap()).unwrap();
    assert!(matches!(ctx.data::<f32>(x), Err(Error::NoData(_))));
    assert!(matches!(st.set_data(&ctx, x, &[1f32; 3]), Err(Error::DataSize { .. })));
    st.set_data(&ctx, x, &[1f32, 2., 3., 4.]).unwrap();
    cpu.compute(&ctx, &g, &mut st).unwrap();
    assert_eq!(st.read_f32(&ctx, y).unwrap(), vec![-1., -2., -3., -4.]);
}

#[test]
fn empty_tensors_run() {
    let mut ctx = Context::new();
    let a = ctx.new_tensor_2d(DType::F32, 0, 3).unwrap();
    let b = ctx.new_tensor_2d(DType::F32, 4, 0).unwrap();
    let c = ctx.new_tensor_2d(DType::F32, 4, 2).unwrap();
    let outs = [
        ctx.cont(a).unwrap(),
        ctx.neg(a).unwrap(),
        ctx.sum_rows(b).unwrap(),
        ctx.mul_mat(b, c).unwrap(),
        ctx.transpose(b).unwrap(),
    ];
    let k0a = ctx.new_tensor_2d(DType::F32, 0, 2).unwrap();
    let k0b = ctx.new_tensor_2d(DType::F32, 0, 3).unwrap();
    let mm0 = ctx.mul_mat(k0a, k0b).unwrap(); // K = 0: all zeros
    let g = Graph::build(&ctx, &[outs.as_slice(), &[mm0]].concat()).unwrap();
    let st = CpuBackend::new(2).unwrap().run(&ctx, &g).unwrap();
    for o in outs {
        assert!(st.read_f32(&ctx, o).unwrap().is_empty());
    }
    assert_eq!(st.read_f32(&ctx, mm0).unwrap(), vec![0.; 6]);
}

/// Graph building is iterative: a 100k-node chain neither overflows the stack nor takes long.
#[test]
fn long_chain_builds_and_runs() {
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[2], &[0., 1.]).unwrap();
    let one = ctx.new_f32(&[1], &[1.]).unwrap();
    let mut t = x;
    for _ in 0..100_000 {
        t = ctx.add(t, one).unwrap();
    }
    let g = Graph::build(&ctx, &[t]).unwrap();
    assert_eq!(g.nodes().len(), 100_000);
    assert_eq!(g.leafs().len(), 2);
    let st = CpuBackend::new(1).unwrap().run(&ctx, &g).unwrap();
    assert_eq!(st.read_f32(&ctx, t).unwrap(), vec![100_000., 100_001.]);
}
