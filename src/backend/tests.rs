//! The backend traits, written once and run on the CPU (always) and on CUDA
//! device 0 when one is present (else the CUDA half prints `SKIP: …`; with
//! `RGML_REQUIRE_CUDA=1` a missing device is a failure).

// Without the `cuda` feature the CUDA halves are dead code (the types are uninhabited).
#![cfg_attr(not(feature = "cuda"), allow(unreachable_code))]

use super::{AnyBackend, Backend, BackendStorage};
use crate::{Context, CpuBackend, CudaBackend, DType, Error, Graph, TensorId};

fn cuda() -> Option<CudaBackend> {
    match CudaBackend::new(0) {
        Ok(b) => Some(b),
        Err(e) => {
            assert!(matches!(e, Error::Unavailable { .. }), "CudaBackend::new must fail with Unavailable: {e}");
            if std::env::var("RGML_REQUIRE_CUDA").is_ok_and(|v| v == "1") {
                panic!("RGML_REQUIRE_CUDA=1 but {e}");
            }
            println!("SKIP: CUDA: {e}");
            None
        }
    }
}

/// A small graph through the trait only: `cont(transpose(a + b)) * 0.5` and `sum_rows`.
fn small_graph<B: Backend>(b: &B) -> (Vec<f32>, Vec<f32>, Vec<u8>) {
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[3, 2], &[1., 2., 3., 4., 5., 6.]).unwrap();
    let bias = ctx.new_f32(&[3], &[10., 20., 30.]).unwrap();
    let s = ctx.add(a, bias).unwrap();
    let t = ctx.transpose(s).unwrap();
    let c = ctx.cont(t).unwrap();
    let c = ctx.scale(c, 0.5).unwrap();
    ctx.set_output(c).unwrap();
    let r = ctx.sum_rows(s).unwrap();
    let g = Graph::build(&ctx, &[c, r]).unwrap();
    let st = b.run(&ctx, &g).unwrap();
    assert_eq!(st.plan().alignment(), crate::ReuseRules::alignment(&b.rules()));
    assert!(st.capacity() >= st.plan().buffer_size());
    // read_bytes: raw bytes of a contiguous tensor; a transposed view is refused
    let bytes = st.read_bytes(&ctx, c).unwrap();
    let at = ctx.transpose(a).unwrap();
    assert!(matches!(st.read_bytes(&ctx, at), Err(Error::NotContiguous { .. })));
    // the leaf itself through a non-contiguous view reads in logical order
    assert_eq!(st.read_f32(&ctx, at).unwrap(), vec![1., 4., 2., 5., 3., 6.]);
    (st.read_f32(&ctx, c).unwrap(), st.read_f32(&ctx, r).unwrap(), bytes)
}

#[test]
fn a_generic_graph_runs_on_every_backend() {
    let want_c = vec![5.5, 7.0, 11.0, 12.5, 16.5, 18.0];
    let want_r = vec![66.0, 75.0];
    let cpu = CpuBackend::new(2).unwrap();
    let (c, r, bytes) = small_graph(&cpu);
    assert_eq!((c.clone(), r.clone()), (want_c.clone(), want_r.clone()));
    assert_eq!(bytes, bytemuck::cast_slice::<f32, u8>(&want_c));
    let (c, r, _) = small_graph(&AnyBackend::cpu(1).unwrap());
    assert_eq!((c, r), (want_c.clone(), want_r.clone()));
    if let Some(gpu) = cuda() {
        let (c, r, bytes) = small_graph(&gpu);
        assert_eq!((c, r), (want_c.clone(), want_r.clone()));
        assert_eq!(bytes, bytemuck::cast_slice::<f32, u8>(&want_c));
        let (c, r, _) = small_graph(&AnyBackend::Cuda(gpu.with_poison(true)));
        assert_eq!((c, r), (want_c, want_r));
    }
}

/// A cache leaf written with `set_rows` at input positions by two graphs
/// (batch 1 and batch 2), like a KV cache.
struct Cache {
    ctx: Context,
    cache: TensorId,
    rows1: TensorId,
    pos1: TensorId,
    out1: TensorId,
    g1: Graph,
    pos2: TensorId,
    out2: TensorId,
    g2: Graph,
}

fn cache_graphs() -> Cache {
    let mut ctx = Context::new();
    let cache = ctx.new_tensor_2d(DType::F32, 4, 3).unwrap();
    let rows1 = ctx.new_f32(&[4, 1], &[1., 1., 1., 1.]).unwrap();
    let pos1 = ctx.new_tensor_1d(DType::I32, 1).unwrap();
    ctx.set_input(pos1).unwrap();
    let w = ctx.set_rows(cache, rows1, pos1).unwrap();
    let out1 = ctx.sum_rows(w).unwrap();
    ctx.set_output(out1).unwrap();
    let g1 = Graph::build(&ctx, &[out1]).unwrap();
    // the second graph has a larger intermediate (the scaled cache)
    let rows2 = ctx.new_f32(&[4, 2], &[2., 2., 2., 2., 3., 3., 3., 3.]).unwrap();
    let pos2 = ctx.new_tensor_1d(DType::I32, 2).unwrap();
    ctx.set_input(pos2).unwrap();
    let w = ctx.set_rows(cache, rows2, pos2).unwrap();
    let s = ctx.scale(w, 1.0).unwrap();
    let out2 = ctx.sum_rows(s).unwrap();
    ctx.set_output(out2).unwrap();
    let g2 = Graph::build(&ctx, &[out2]).unwrap();
    Cache { ctx, cache, rows1, pos1, out1, g1, pos2, out2, g2 }
}

/// Rebind keeps written leaves, grow makes room, reset_leaf clears, inputs
/// set in the context are seen by the next compute.
fn state_across_graphs<B: Backend>(b: &B) {
    let mut m = cache_graphs();
    let p1 = b.plan(&m.ctx, &m.g1).unwrap();
    let p2 = b.plan(&m.ctx, &m.g2).unwrap();
    assert!(p2.buffer_size() > p1.buffer_size(), "{} vs {}", p2.buffer_size(), p1.buffer_size());
    let mut st = b.alloc(&m.ctx, &m.g1, p1.clone()).unwrap();
    m.ctx.set_data(m.pos1, &[0i32]).unwrap();
    b.compute(&m.ctx, &m.g1, &mut st).unwrap();
    assert_eq!(st.read_f32(&m.ctx, m.out1).unwrap(), vec![4., 0., 0.]);

    // the bigger plan does not fit until the buffer grows
    assert!(matches!(st.rebind(&m.ctx, &m.g2, p2.clone()), Err(Error::Invalid(_))));
    st.grow(p2.buffer_size()).unwrap();
    assert!(st.capacity() >= p2.buffer_size());
    st.rebind(&m.ctx, &m.g2, p2).unwrap();
    m.ctx.set_data(m.pos2, &[1i32, 2]).unwrap();
    b.compute(&m.ctx, &m.g2, &mut st).unwrap();
    assert_eq!(st.read_f32(&m.ctx, m.out2).unwrap(), vec![4., 8., 12.], "row 0 kept across the rebind");

    // back to the first graph: the cache still holds what both wrote
    st.rebind(&m.ctx, &m.g1, p1).unwrap();
    m.ctx.set_data(m.pos1, &[2i32]).unwrap();
    b.compute(&m.ctx, &m.g1, &mut st).unwrap();
    assert_eq!(st.read_f32(&m.ctx, m.out1).unwrap(), vec![4., 8., 4.]);
    assert_eq!(st.read_f32(&m.ctx, m.cache).unwrap()[4..8], [2., 2., 2., 2.]);

    // reset_leaf: the cache is the context's zeros again; a read-only leaf has no copy
    st.reset_leaf(&m.ctx, m.cache).unwrap();
    assert_eq!(st.read_f32(&m.ctx, m.cache).unwrap(), vec![0.; 12]);
    assert!(st.reset_leaf(&m.ctx, m.rows1).is_err());
    assert!(st.set_bytes(&m.ctx, m.rows1, &[0u8; 16]).is_err(), "data in the context: set it there");
    let mut rows = vec![0f32; 12];
    rows[..4].fill(5.0);
    st.set_data(&m.ctx, m.cache, &rows).unwrap();
    assert_eq!(st.read_f32(&m.ctx, m.cache).unwrap(), rows, "a written leaf's copy can be set");
    st.reset_leaf(&m.ctx, m.cache).unwrap();
    m.ctx.set_data(m.pos1, &[1i32]).unwrap();
    b.compute(&m.ctx, &m.g1, &mut st).unwrap();
    assert_eq!(st.read_f32(&m.ctx, m.out1).unwrap(), vec![0., 4., 0.]);

    // an index out of range is an error, not a crash
    m.ctx.set_data(m.pos1, &[3i32]).unwrap();
    assert!(b.compute(&m.ctx, &m.g1, &mut st).is_err());
}

#[test]
fn written_leaves_persist_across_rebinds_on_every_backend() {
    state_across_graphs(&CpuBackend::new(1).unwrap());
    state_across_graphs(&CpuBackend::new(2).unwrap().with_poison(true));
    state_across_graphs(&AnyBackend::cpu(1).unwrap());
    if let Some(gpu) = cuda() {
        state_across_graphs(&gpu);
        state_across_graphs(&AnyBackend::Cuda(gpu.with_poison(true)));
    }
}

/// Inputs of a `no_alloc` context live in the plan buffer: set through the storage.
fn buffer_inputs<B: Backend>(b: &B) {
    let mut ctx = Context::new_no_alloc();
    let x = ctx.new_tensor_1d(DType::F32, 4).unwrap();
    ctx.set_input(x).unwrap();
    let y = ctx.relu(x).unwrap();
    let g = Graph::build(&ctx, &[y]).unwrap();
    let plan = b.plan(&ctx, &g).unwrap();
    let mut st = b.alloc_with_capacity(&ctx, &g, plan, 4096).unwrap();
    assert!(st.capacity() >= 4096);
    st.set_data(&ctx, x, &[-1f32, 2., -3., 4.]).unwrap();
    assert!(matches!(st.set_data(&ctx, x, &[1i32, 2, 3, 4]), Err(Error::DTypeMismatch { .. })));
    assert!(matches!(st.set_bytes(&ctx, x, &[0u8; 3]), Err(Error::DataSize { .. })));
    assert!(st.set_bytes(&ctx, y, &[0u8; 16]).is_err(), "not a leaf");
    b.compute(&ctx, &g, &mut st).unwrap();
    assert_eq!(st.read_f32(&ctx, y).unwrap(), vec![0., 2., 0., 4.]);
    assert_eq!(st.read_f32(&ctx, x).unwrap(), vec![-1., 2., -3., 4.], "inputs survive poison");
}

#[test]
fn inputs_in_the_buffer_on_every_backend() {
    buffer_inputs(&CpuBackend::new(1).unwrap().with_poison(true));
    buffer_inputs(&AnyBackend::cpu(1).unwrap());
    if let Some(gpu) = cuda() {
        buffer_inputs(&gpu.with_poison(true));
    }
}

#[test]
fn any_backend_refuses_the_other_kinds_storage() {
    let Some(gpu) = cuda() else { return };
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[2], &[1., 2.]).unwrap();
    let n = ctx.neg(a).unwrap();
    let g = Graph::build(&ctx, &[n]).unwrap();
    let cpu = AnyBackend::cpu(1).unwrap();
    let gpu = AnyBackend::Cuda(gpu);
    let mut st = cpu.run(&ctx, &g).unwrap();
    assert!(matches!(gpu.compute(&ctx, &g, &mut st), Err(Error::Mismatch(_))));
}

/// CUDA poison mode fills the ranges the plan frees with 0xFF, like the CPU's.
#[cfg(feature = "cuda")]
#[test]
fn cuda_poison_mode_fills_freed_ranges_with_nan() {
    use crate::{Allocator, CudaRules, Place};
    let Some(gpu) = cuda() else { return };
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[4, 4], &[0.5; 16]).unwrap();
    let a = ctx.neg(x).unwrap();
    let b = ctx.mul_mat(a, a).unwrap(); // cannot write over a; a is freed after it
    let g = Graph::build(&ctx, &[b]).unwrap();
    for poison in [false, true] {
        let plan = Allocator::new(CudaRules).plan(&ctx, &g).unwrap();
        let offset = match plan.place(a) {
            Some(Place::Buffer { offset }) => offset,
            other => unreachable!("a must be planned in the buffer, got {other:?}"),
        };
        let freed = plan.freed_after(1).to_vec();
        assert!(freed.iter().any(|&(o, _)| o == offset), "{freed:?}");
        let backend = gpu.clone().with_poison(poison);
        let mut st = backend.alloc(&ctx, &g, plan).unwrap();
        backend.compute(&ctx, &g, &mut st).unwrap();
        let buf = st.buffer_bytes().unwrap();
        for (o, n) in freed {
            assert_eq!(buf[o..o + n].iter().all(|&b| b == 0xFF), poison, "poison={poison}");
        }
        assert_eq!(st.read_f32(&ctx, b).unwrap(), vec![1.0; 16]);
    }
}
