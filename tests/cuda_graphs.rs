//! CUDA graphs (`CudaBackend::with_graphs`): a decode-like graph (an
//! embedding row picked by an input index, a Q4_0 and an F16 `mul_mat`, a
//! norm, a row written into a cache leaf at an input position, attention
//! scores over the cache with an input mask) run step after step with new
//! inputs. With graphs, the first run is eager, the second is captured, the
//! rest are replays; every step's outputs must be the same bits as a backend
//! without graphs, and close to the CPU's. Without a CUDA device the tests
//! print `SKIP: …` and pass. Also: the device scratch memory that node
//! temporaries come from (and that a captured graph's addresses depend on)
//! growing in the middle of a node.

#![cfg(feature = "cuda")]

mod common;
use common::{cuda, Rng};
use rgml::{quant, Backend, BackendStorage, Context, CpuBackend, CudaBackend, DType, Graph, GraphStats, TensorId};

const K: i64 = 64;
const M: i64 = 48;
const D: i64 = 32;
const CTX: i64 = 8;
const VOCAB: i64 = 10;

struct Model {
    ctx: Context,
    graph: Graph,
    tok: TensorId,
    pos: TensorId,
    mask: TensorId,
    outs: Vec<TensorId>,
}

fn model() -> Model {
    let mut rng = Rng(7);
    let mut ctx = Context::new();
    let emb = ctx.new_f32(&[K, VOCAB], &rng.vec((K * VOCAB) as usize, 1.0)).unwrap();
    let wq = ctx.new_tensor(DType::Q4_0, &[K, M]).unwrap();
    let vals = rng.vec((K * M) as usize, 0.5);
    let mut bytes = vec![0u8; DType::Q4_0.row_size(K).unwrap() * M as usize];
    let rs = DType::Q4_0.row_size(K).unwrap();
    for (src, q) in vals.chunks(K as usize).zip(bytes.chunks_mut(rs)) {
        quant::quantize_row(DType::Q4_0, src, q).unwrap();
    }
    ctx.set_bytes(wq, &bytes).unwrap();
    let wh = ctx.new_tensor(DType::F16, &[M, D]).unwrap();
    let halves: Vec<rgml::f16> = rng.vec((M * D) as usize, 0.3).into_iter().map(rgml::f16::from_f32).collect();
    ctx.set_data(wh, &halves).unwrap();
    let cache = ctx.new_f32(&[D, CTX], &vec![0.0; (D * CTX) as usize]).unwrap();
    let tok = ctx.new_tensor(DType::I32, &[1]).unwrap();
    let pos = ctx.new_tensor(DType::I32, &[1]).unwrap();
    let mask = ctx.new_f32(&[CTX, 1], &vec![0.0; CTX as usize]).unwrap();
    for t in [tok, pos, mask] {
        ctx.set_input(t).unwrap();
    }
    let x = ctx.get_rows(emb, tok).unwrap(); // [K, 1]
    let h = ctx.mul_mat(wq, x).unwrap(); // [M, 1]: quantized activations, dot kernels
    let h = ctx.rms_norm(h, 1e-5).unwrap();
    let h = ctx.gelu(h).unwrap();
    let q = ctx.mul_mat(wh, h).unwrap(); // [D, 1]: F16 GEMM (activations converted in scratch)
    let kv = ctx.set_rows(cache, q, pos).unwrap(); // the cache, row `pos` written
    let scores = ctx.mul_mat(kv, q).unwrap(); // [CTX, 1]
    let probs = ctx.soft_max_ext(scores, Some(mask), 0.125, 0.0).unwrap();
    let outs = vec![q, probs];
    let graph = Graph::build(&ctx, &outs).unwrap();
    Model { ctx, graph, tok, pos, mask, outs }
}

/// Sets step `t`'s inputs: token `tok`, cache row `t`, positions after `t` masked.
fn set_step(m: &mut Model, t: i64, tok: i32) {
    m.ctx.set_data(m.tok, &[tok]).unwrap();
    m.ctx.set_data(m.pos, &[t as i32]).unwrap();
    let mask: Vec<f32> = (0..CTX).map(|p| if p <= t { 0.0 } else { f32::NEG_INFINITY }).collect();
    m.ctx.set_data(m.mask, &mask).unwrap();
}

/// Every output of `steps` steps on backend `b` (one storage throughout).
fn run_steps<B: Backend>(b: &B, steps: i64) -> (Vec<Vec<f32>>, B::Storage) {
    let mut m = model();
    let plan = b.plan(&m.ctx, &m.graph).unwrap();
    let mut st = b.alloc(&m.ctx, &m.graph, plan).unwrap();
    let mut out = Vec::new();
    for t in 0..steps {
        set_step(&mut m, t, (t * 3 % VOCAB) as i32);
        b.compute(&m.ctx, &m.graph, &mut st).unwrap();
        for &o in &m.outs {
            out.push(st.read_f32(&m.ctx, o).unwrap());
        }
    }
    (out, st)
}

#[test]
fn replays_compute_the_eager_bits_and_see_new_inputs_and_state() {
    let steps = 6;
    let (cpu, _) = run_steps(&CpuBackend::new(2).unwrap(), steps);
    let Some(gpu) = cuda() else { return };
    let (eager, st) = run_steps(&gpu.clone().with_graphs(false), steps);
    assert_eq!(st.graph_stats(), GraphStats::default(), "graphs off: no graph work");
    let (graphs, st) = run_steps(&gpu.with_graphs(true), steps);
    let stats = st.graph_stats();
    assert_eq!(stats.fallback, None, "{stats:?}");
    assert_eq!((stats.eager, stats.captured, stats.replayed), (1, 1, steps as u64 - 2), "{stats:?}");
    for (i, ((g, e), c)) in graphs.iter().zip(&eager).zip(&cpu).enumerate() {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(g), bits(e), "step {} output {}: graph replay vs eager", i / 2, i % 2);
        for (&x, &y) in e.iter().zip(c) {
            assert!((x - y).abs() <= 2e-3 * (1.0 + y.abs()), "step {} output {}: cuda {x} vs cpu {y}", i / 2, i % 2);
        }
    }
    // the steps differ (new tokens, a growing cache): a replay of stale
    // inputs would have repeated the first step's values
    assert_ne!(graphs[0], graphs[2]);
    assert_ne!(graphs[1], graphs[steps as usize * 2 - 1]);
}

#[test]
fn a_new_graph_a_rebind_or_a_grow_is_captured_anew() {
    let Some(gpu) = cuda() else { return };
    let gpu = gpu.with_graphs(true);
    let mut m = model();
    let other = Graph::build(&m.ctx, &m.outs[..1]).unwrap();
    let (pa, pb) = (gpu.plan(&m.ctx, &m.graph).unwrap(), gpu.plan(&m.ctx, &other).unwrap());
    let cap = pa.buffer_size().max(pb.buffer_size());
    let mut st = gpu.alloc_with_capacity(&m.ctx, &m.graph, pa.clone(), cap).unwrap();
    set_step(&mut m, 0, 4);
    let want = gpu.clone().with_graphs(false).run(&m.ctx, &m.graph).unwrap().read_f32(&m.ctx, m.outs[0]).unwrap();
    // alternate the two graphs: each is captured on its second run, then replayed
    let main = m.graph.clone();
    for round in 0..3 {
        for (g, p) in [(&main, &pa), (&other, &pb)] {
            st.rebind(&m.ctx, g, p.clone()).unwrap();
            set_step(&mut m, 0, 4);
            gpu.compute(&m.ctx, g, &mut st).unwrap();
            let got = st.read_f32(&m.ctx, m.outs[0]).unwrap();
            assert_eq!(got, want, "round {round}");
        }
    }
    let s = st.graph_stats();
    assert_eq!((s.eager, s.captured, s.replayed, s.fallback.clone()), (2, 2, 2, None), "{s:?}");
    // a larger buffer moves every tensor: the next run is eager again, then captured
    st.grow(cap * 2 + 4096).unwrap();
    for _ in 0..3 {
        st.rebind(&m.ctx, &other, pb.clone()).unwrap();
        set_step(&mut m, 0, 4);
        gpu.compute(&m.ctx, &other, &mut st).unwrap();
        assert_eq!(st.read_f32(&m.ctx, m.outs[0]).unwrap(), want);
    }
    let s = st.graph_stats();
    assert_eq!((s.eager, s.captured, s.replayed), (3, 3, 3), "{s:?}");
}

#[test]
fn index_errors_are_reported_after_a_replay() {
    let Some(gpu) = cuda() else { return };
    let gpu: CudaBackend = gpu.with_graphs(true);
    let mut m = model();
    let plan = gpu.plan(&m.ctx, &m.graph).unwrap();
    let mut st = gpu.alloc(&m.ctx, &m.graph, plan).unwrap();
    for t in 0..3 {
        set_step(&mut m, t, 1);
        gpu.compute(&m.ctx, &m.graph, &mut st).unwrap();
    }
    assert_eq!(st.graph_stats().replayed, 1);
    // a token outside the embedding's rows, then a cache row outside the cache
    set_step(&mut m, 3, VOCAB as i32);
    let e = gpu.compute(&m.ctx, &m.graph, &mut st).unwrap_err();
    assert!(e.to_string().contains("outside the rows"), "{e}");
    set_step(&mut m, 3, 1);
    m.ctx.set_data(m.pos, &[CTX as i32]).unwrap();
    let e = gpu.compute(&m.ctx, &m.graph, &mut st).unwrap_err();
    assert!(e.to_string().contains("outside the rows"), "{e}");
    // and the flags are clear again for a good step
    set_step(&mut m, 3, 1);
    gpu.compute(&m.ctx, &m.graph, &mut st).unwrap();
    assert_eq!(st.graph_stats().replayed, 4);
}

/// The first `mul_mat` on a fresh device converts a small transposed weight
/// matrix (the scratch buffer's first 1 MiB), then activations too large for
/// it: the buffer grows while the first range is still to be read by the
/// GEMM, which must find it intact (the outgrown buffer lives until the node
/// is queued; under the CUDA emulator, freed device memory is unmapped).
#[test]
fn scratch_grows_in_the_middle_of_a_node() {
    let mut rng = Rng(11);
    let mut ctx = Context::new();
    let (k, m, n) = (64, 48, 5000);
    let a_src = ctx.new_f32(&[m, k], &rng.vec((m * k) as usize, 1.0)).unwrap();
    let b_src = ctx.new_f32(&[n, k], &rng.vec((n * k) as usize, 1.0)).unwrap();
    let (a, b) = (ctx.transpose(a_src).unwrap(), ctx.transpose(b_src).unwrap()); // [k, m], [k, n]: not GEMM-ready
    let c = ctx.mul_mat(a, b).unwrap();
    let graph = Graph::build(&ctx, &[c]).unwrap();
    let want = CpuBackend::new(2).unwrap().run(&ctx, &graph).unwrap().read_f32(&ctx, c).unwrap();
    let Some(gpu) = cuda() else { return };
    let got = gpu.run(&ctx, &graph).unwrap().read_f32(&ctx, c).unwrap();
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= 1e-4 * (1.0 + w.abs()), "[{i}]: cuda {g} vs cpu {w}");
    }
}

/// One thread captures graphs (a new graph twice: an eager run, then a
/// capture) while another allocates and drops storages on the same device:
/// the drops' frees are stream work too, and must wait instead of landing in
/// the capture (which would make the capture fail, or free that memory at
/// every replay). A stress test: the capture windows are short, so a
/// missing lock shows only when a drop happens to fall in one.
#[test]
fn storages_dropped_by_another_thread_stay_out_of_a_capture() {
    let Some(gpu) = cuda() else { return };
    let gpu = gpu.with_graphs(true);
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let other = gpu.clone();
        let done = &done;
        let dropper = s.spawn(move || {
            let mut ctx = Context::new();
            let a = ctx.new_f32(&[256], &[1.0; 256]).unwrap();
            let b = ctx.scale(a, 2.0).unwrap();
            let g = Graph::build(&ctx, &[b]).unwrap();
            let (mut n, mut held) = (0, Vec::new());
            while !done.load(std::sync::atomic::Ordering::Relaxed) || n == 0 {
                // allocate a batch, then drop it one storage at a time
                if held.is_empty() {
                    held.extend((0..32).map(|_| other.alloc(&ctx, &g, other.plan(&ctx, &g).unwrap()).unwrap()));
                }
                drop(held.pop());
                std::thread::yield_now();
                n += 1;
            }
            n
        });
        let mut m = model();
        for round in 0..12 {
            let graph = Graph::build(&m.ctx, &m.outs).unwrap();
            let plan = gpu.plan(&m.ctx, &graph).unwrap();
            let mut st = gpu.alloc(&m.ctx, &graph, plan).unwrap();
            for t in 0..2 {
                set_step(&mut m, t, 2);
                gpu.compute(&m.ctx, &graph, &mut st).unwrap();
            }
            let stats = st.graph_stats();
            assert_eq!((stats.captured, stats.fallback.clone()), (1, None), "round {round}: {stats:?}");
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let n = dropper.join().unwrap();
        println!("ok: 12 captures while another thread allocated and dropped {n} storages");
    });
}
