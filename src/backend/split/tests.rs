//! The split scheduler on two CPU backends: the same kernels, so a split run
//! must give the bits of a single backend's, whatever crosses.

use super::SplitBackend;
use crate::{AnyBackend, Backend, BackendStorage, Context, CpuBackend, DType, Graph, TensorId};

/// Two single-thread CPU backends, leaves homed by name prefix: `a.` on 0, `b.` on 1.
fn split() -> SplitBackend<AnyBackend> {
    let backends = vec![AnyBackend::cpu(1).unwrap(), AnyBackend::cpu(1).unwrap()];
    SplitBackend::with_homes(backends, |ctx: &Context, id: TensorId| {
        let t = ctx.tensor(id).ok()?;
        match t.name().split('.').next() {
            Some("a") => Some(0),
            Some("b") => Some(1),
            _ => None,
        }
    })
    .unwrap()
}

fn weight(ctx: &mut Context, name: &str, ne: &[i64], seed: u32) -> TensorId {
    let n: i64 = ne.iter().product();
    let v: Vec<f32> = (0..n).map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 97) as f32 / 48.0 - 1.0).collect();
    let t = ctx.new_f32(ne, &v).unwrap();
    ctx.set_name(t, name).unwrap();
    t
}

/// A chain through weights on both homes, with an in-place write on home 1
/// into a root computed on home 0, read again on home 0.
fn chain(ctx: &mut Context) -> (TensorId, TensorId) {
    let x = weight(ctx, "x", &[16, 3], 1);
    let w0 = weight(ctx, "a.w0", &[16, 8], 2);
    let w1 = weight(ctx, "b.w1", &[8], 3);
    let w2 = weight(ctx, "a.w2", &[8, 8], 4);
    let h = ctx.mul_mat(w0, x).unwrap(); // home 0
    let h2 = ctx.rms_norm(h, 1e-5).unwrap(); // follows: 0
    let g = ctx.add_inplace(h2, w1).unwrap(); // home 1, writes h2's root in place
    let s = ctx.scale(g, 0.5).unwrap(); // follows: 1
    let y = ctx.mul_mat(w2, s).unwrap(); // home 0
    let z = ctx.add(y, h).unwrap(); // 0: reads h, from the first part
    ctx.set_output(z).unwrap();
    (z, g)
}

#[test]
fn a_split_chain_gives_the_single_backends_bits() {
    let mut ctx = Context::new();
    let (z, g) = chain(&mut ctx);
    let graph = Graph::build(&ctx, &[z, g]).unwrap();
    let one = CpuBackend::new(1).unwrap().run(&ctx, &graph).unwrap();
    let sb = split();
    let st = sb.run(&ctx, &graph).unwrap();
    assert_eq!(st.parts().iter().map(|p| p.0).collect::<Vec<_>>(), [0, 1, 0], "{st:?}");
    assert_eq!(st.read_f32(&ctx, z).unwrap(), one.read_f32(&ctx, z).unwrap());
    assert_eq!(st.read_f32(&ctx, g).unwrap(), one.read_f32(&ctx, g).unwrap());
    // h2 crosses to part 1 (written there in place: g is read from backend
    // 1), s to part 2; h stays in backend 0's one buffer for parts 0 and 2,
    // and the weights stay plain leaves
    assert_eq!(st.crossing_bytes(), 2 * (3 * 8 * 4), "{st:?}");
    assert_eq!(st.buffers().iter().map(|b| b.0).collect::<Vec<_>>(), [0, 1], "{st:?}");
    assert!(sb.describe().starts_with("split: cpu"));
}

#[test]
fn one_backend_is_one_part() {
    let mut ctx = Context::new();
    let (z, _) = chain(&mut ctx);
    let graph = Graph::build(&ctx, &[z]).unwrap();
    let sb = SplitBackend::new(vec![AnyBackend::cpu(2).unwrap()]).unwrap();
    let st = sb.run(&ctx, &graph).unwrap();
    assert_eq!(st.parts().len(), 1);
    assert_eq!(st.crossing_bytes(), 0);
    assert_eq!(st.buffers().len(), 1);
    let one = CpuBackend::new(2).unwrap().run(&ctx, &graph).unwrap();
    assert_eq!(st.read_f32(&ctx, z).unwrap(), one.read_f32(&ctx, z).unwrap());
    assert!(SplitBackend::<AnyBackend>::new(Vec::new()).is_err());
}

/// A cache on home 1 written at an input position each step and summed over
/// (state that carries over computes and rebinds), after a layer on home 0.
struct Cached {
    ctx: Context,
    cache: TensorId,
    graphs: Vec<(Graph, TensorId, TensorId, TensorId)>,
}

impl Cached {
    fn new() -> Cached {
        let mut ctx = Context::new();
        let cache = ctx.new_tensor_2d(DType::F32, 4, 6).unwrap();
        ctx.set_name(cache, "b.cache").unwrap();
        ctx.set_data(cache, &[0f32; 24]).unwrap();
        Cached { ctx, cache, graphs: Vec::new() }
    }
    /// Graph `k`: `n` new rows through a home-0 weight (and for odd `k` a
    /// home-1 step first, so the cache's writer is another part), stored at
    /// `pos`, then the cache's row sums.
    fn build(&mut self, k: usize, n: i64) {
        let c = &mut self.ctx;
        let x = c.new_tensor_2d(DType::F32, 4, n).unwrap();
        let pos = c.new_tensor_1d(DType::I32, n).unwrap();
        c.set_input(x).unwrap();
        c.set_input(pos).unwrap();
        let mut h = x;
        if k % 2 == 1 {
            let wb = weight(c, &format!("b.pre{k}"), &[4], 7);
            h = c.mul(h, wb).unwrap();
        }
        let w = weight(c, &format!("a.w{k}"), &[4, 4], 5 + k as u32);
        let v = c.mul_mat(w, h).unwrap();
        let stored = c.set_rows(self.cache, v, pos).unwrap();
        let sums = c.sum_rows(stored).unwrap();
        c.set_output(sums).unwrap();
        let g = Graph::build(c, &[sums]).unwrap();
        c.forget_writes();
        self.graphs.push((g, x, pos, sums));
    }
}

/// Runs the steps `(graph, first position, n)` on `b`, one storage rebound
/// between graphs; returns every step's sums.
fn run_steps<B: Backend>(m: &mut Cached, b: &B, steps: &[(usize, i32, i64)]) -> Vec<Vec<f32>> {
    let mut st: Option<B::Storage> = None;
    let mut out = Vec::new();
    for (i, &(k, p0, n)) in steps.iter().enumerate() {
        let (g, x, pos, sums) = &m.graphs[k];
        let xs: Vec<f32> = (0..4 * n).map(|v| (v as f32 + i as f32) * 0.25).collect();
        let ps: Vec<i32> = (p0..p0 + n as i32).collect();
        m.ctx.set_data(*x, &xs).unwrap();
        m.ctx.set_data(*pos, &ps).unwrap();
        let plan = b.plan(&m.ctx, g).unwrap();
        let s = match st.as_mut() {
            None => st.insert(b.alloc(&m.ctx, g, plan).unwrap()),
            Some(s) => {
                s.grow(plan.buffer_size()).unwrap();
                s.rebind(&m.ctx, g, plan).unwrap();
                s
            }
        };
        b.compute(&m.ctx, g, s).unwrap();
        out.push(s.read_f32(&m.ctx, *sums).unwrap());
    }
    let s = st.as_mut().unwrap();
    s.reset_leaf(&m.ctx, m.cache).unwrap();
    assert_eq!(s.read_f32(&m.ctx, m.cache).unwrap(), vec![0.0; 24], "reset_leaf clears the cache where it is held");
    out
}

#[test]
fn a_cache_carries_over_computes_and_rebinds_across_parts() {
    let mut m = Cached::new();
    for (k, n) in [(0, 3), (1, 1), (2, 1)] {
        m.build(k, n);
    }
    // graph 1 puts a home-1 part first: the cache's writer moves to another storage
    let steps = [(0, 0, 3), (0, 3, 3), (1, 1, 1), (2, 5, 1), (1, 2, 1), (0, 0, 3)];
    let want = run_steps(&mut m, &CpuBackend::new(1).unwrap(), &steps);
    let sb = split();
    let got = run_steps(&mut m, &sb, &steps);
    assert_eq!(got, want);
    // the parts as meant: graph 0 is [home 0, home 1], graph 1 [1, 0, 1]
    let plan = sb.plan(&m.ctx, &m.graphs[1].0).unwrap();
    let st = sb.alloc(&m.ctx, &m.graphs[1].0, plan).unwrap();
    assert_eq!(st.parts().iter().map(|p| p.0).collect::<Vec<_>>(), [1, 0, 1]);
}

#[test]
fn a_split_storage_refuses_another_graph_and_unknown_tensors() {
    let mut ctx = Context::new();
    let (z, _) = chain(&mut ctx);
    let g1 = Graph::build(&ctx, &[z]).unwrap();
    let g2 = Graph::build(&ctx, &[z]).unwrap();
    let sb = split();
    let mut st = sb.run(&ctx, &g1).unwrap();
    assert!(matches!(sb.compute(&ctx, &g2, &mut st), Err(crate::Error::Mismatch(_))));
    assert!(matches!(sb.compute_steps(&ctx, &g1, &mut st, 0..1), Err(crate::Error::Invalid(_))));
    let other = ctx.new_tensor_1d(DType::F32, 2).unwrap();
    assert!(st.read_f32(&ctx, other).is_err());
    assert!(st.set_bytes(&ctx, other, &[0; 8]).is_err());
    assert!(st.reset_leaf(&ctx, other).is_err());
}

#[test]
fn a_graph_run_in_steps_gives_the_whole_runs_bits() {
    let mut ctx = Context::new();
    let (z, g) = chain(&mut ctx);
    let graph = Graph::build(&ctx, &[z, g]).unwrap();
    let cpu = CpuBackend::new(2).unwrap().with_poison(true);
    let whole = cpu.run(&ctx, &graph).unwrap();
    let plan = cpu.plan(&ctx, &graph).unwrap();
    let mut st = cpu.alloc(&ctx, &graph, plan).unwrap();
    let n = graph.nodes().len();
    for steps in [0..2, 2..2, 2..n - 1, n - 1..n] {
        cpu.compute_steps(&ctx, &graph, &mut st, steps).unwrap();
    }
    assert_eq!(st.read_f32(&ctx, z).unwrap(), whole.read_f32(&ctx, z).unwrap());
    assert_eq!(st.read_f32(&ctx, g).unwrap(), whole.read_f32(&ctx, g).unwrap());
    for bad in [0..n + 1, n + 1..n + 2] {
        assert!(matches!(cpu.compute_steps(&ctx, &graph, &mut st, bad), Err(crate::Error::Invalid(_))));
    }
}

#[test]
fn parts_on_one_backend_share_its_buffer() {
    // h crosses backends at every part boundary: 0 -> 1 -> 0 -> 1
    let mut ctx = Context::new();
    let x = weight(&mut ctx, "x", &[8, 2], 1);
    let mut h = x;
    for (i, home) in ["a", "b", "a", "b"].iter().enumerate() {
        let w = weight(&mut ctx, &format!("{home}.w{i}"), &[8, 8], 10 + i as u32);
        h = ctx.mul_mat(w, h).unwrap();
        h = ctx.add(h, x).unwrap(); // x: a plain leaf on both
    }
    ctx.set_output(h).unwrap();
    let graph = Graph::build(&ctx, &[h]).unwrap();
    let one = CpuBackend::new(1).unwrap().run(&ctx, &graph).unwrap();
    let sb = split();
    let st = sb.run(&ctx, &graph).unwrap();
    assert_eq!(st.parts().iter().map(|p| p.0).collect::<Vec<_>>(), [0, 1, 0, 1], "{st:?}");
    assert_eq!(st.buffers().len(), 2, "{st:?}");
    assert_eq!(st.read_f32(&ctx, h).unwrap(), one.read_f32(&ctx, h).unwrap());
    assert_eq!(st.crossing_bytes(), 3 * (8 * 2 * 4), "one row block per boundary");
}

#[test]
fn a_root_written_in_place_elsewhere_comes_back_to_its_backend() {
    let mut ctx = Context::new();
    let x = weight(&mut ctx, "x", &[8, 3], 1);
    let w0 = weight(&mut ctx, "a.w0", &[8, 8], 2);
    let w1 = weight(&mut ctx, "b.w1", &[8], 3);
    let w2 = weight(&mut ctx, "a.w2", &[8, 8], 4);
    let h = ctx.mul_mat(w0, x).unwrap(); // backend 0 computes h
    let _ = ctx.add_inplace(h, w1).unwrap(); // backend 1 writes it in place
    let y = ctx.mul_mat(w2, h).unwrap(); // backend 0 reads the written h
    ctx.set_output(y).unwrap();
    let graph = Graph::build(&ctx, &[y]).unwrap();
    let one = CpuBackend::new(1).unwrap().run(&ctx, &graph).unwrap();
    let sb = split();
    let mut st = sb.run(&ctx, &graph).unwrap();
    assert_eq!(st.parts().iter().map(|p| p.0).collect::<Vec<_>>(), [0, 1, 0], "{st:?}");
    for _ in 0..2 {
        assert_eq!(st.read_f32(&ctx, y).unwrap(), one.read_f32(&ctx, y).unwrap());
        assert_eq!(st.crossing_bytes(), 2 * (8 * 3 * 4), "h there and back");
        sb.compute(&ctx, &graph, &mut st).unwrap();
    }
}

/// A CPU backend that says its memory is `device` (a stand-in for a GPU:
/// the same kernels, so a split across it gives the single backend's bits).
struct Tagged(CpuBackend, crate::Device);

impl Backend for Tagged {
    type Storage = crate::CpuStorage;
    type Rules = crate::CpuRules;
    fn rules(&self) -> crate::CpuRules {
        self.0.rules()
    }
    fn describe(&self) -> String {
        format!("{} as {}", self.0.describe(), self.1)
    }
    fn device(&self) -> crate::Device {
        self.1
    }
    fn alloc(&self, ctx: &Context, graph: &Graph, plan: crate::Plan) -> crate::Result<crate::CpuStorage> {
        self.0.alloc(ctx, graph, plan)
    }
    fn alloc_with_capacity(
        &self,
        ctx: &Context,
        graph: &Graph,
        plan: crate::Plan,
        capacity: usize,
    ) -> crate::Result<crate::CpuStorage> {
        self.0.alloc_with_capacity(ctx, graph, plan, capacity)
    }
    fn compute_steps(
        &self,
        ctx: &Context,
        graph: &Graph,
        storage: &mut crate::CpuStorage,
        steps: std::ops::Range<usize>,
    ) -> crate::Result<()> {
        self.0.compute_steps(ctx, graph, storage, steps)
    }
}

#[test]
fn transfer_nodes_place_what_follows_them_and_price_the_crossings() {
    use crate::Device;
    let mut ctx = Context::new();
    let x = weight(&mut ctx, "x", &[16, 3], 1);
    let w = weight(&mut ctx, "w", &[16, 8], 2);
    let xd = ctx.to_device(x, Device::Cuda(0)).unwrap(); // moves to backend 0
    let h = ctx.mul_mat(w, xd).unwrap(); // follows it
    let s = ctx.silu(h).unwrap();
    let back = ctx.to_device(s, Device::Cpu).unwrap(); // back to backend 1
    let y = ctx.scale(back, 2.0).unwrap();
    ctx.set_output(y).unwrap();
    let graph = Graph::build(&ctx, &[y]).unwrap();

    // what the graph asks for, before any backend is chosen
    let asked = graph.transfers(&ctx).unwrap();
    let summary: Vec<_> = asked.iter().map(|t| (t.tensor, t.bytes, t.from, t.to, t.direction())).collect();
    assert_eq!(
        summary,
        [(xd, 16 * 3 * 4, Device::Cpu, Device::Cuda(0), "h2d"), (back, 8 * 3 * 4, Device::Cuda(0), Device::Cpu, "d2h")]
    );
    assert!(asked[0].to_string().starts_with("h2d 192 B cpu→cuda:0"), "{}", asked[0]);
    assert!(graph.to_dot(&ctx, None).unwrap().contains("-> cuda:0, 192 B"));

    // the backends listed CPU first: without the transfers everything would stay on it
    let sb = SplitBackend::new(vec![
        Tagged(CpuBackend::new(1).unwrap(), Device::Cpu),
        Tagged(CpuBackend::new(1).unwrap(), Device::Cuda(0)),
    ])
    .unwrap();
    let st = sb.run(&ctx, &graph).unwrap();
    assert_eq!(st.parts(), [(1, 3), (0, 2)], "{st:?}");
    let one = CpuBackend::new(1).unwrap().run(&ctx, &graph).unwrap();
    assert_eq!(st.read_f32(&ctx, y).unwrap(), one.read_f32(&ctx, y).unwrap());
    // the one crossing a part needs: the silu result, copied to the CPU for
    // the d2h node (x is a leaf every backend reads from the host)
    // two CPU backends have no pinned memory: the crossing went pageable
    let crossed: Vec<_> = st.transfers().iter().map(|t| (t.tensor, t.bytes, t.from, t.to, t.pinned)).collect();
    assert_eq!(crossed, [(s, 8 * 3 * 4, Device::Cuda(0), Device::Cpu, false)]);
    assert_eq!(st.crossing_bytes(), 8 * 3 * 4);

    // a device no backend computes on is refused by name
    let mut ctx = Context::new();
    let x = weight(&mut ctx, "x", &[4], 1);
    let xd = ctx.to_device(x, Device::Cuda(3)).unwrap();
    let graph = Graph::build(&ctx, &[xd]).unwrap();
    let err = sb.run(&ctx, &graph).unwrap_err().to_string();
    assert!(err.contains("cuda:3"), "{err}");
    // a single backend runs a transfer as the copy it is
    let st = CpuBackend::new(1).unwrap().run(&ctx, &graph).unwrap();
    assert_eq!(st.read_f32(&ctx, xd).unwrap(), ctx.data::<f32>(x).unwrap());
}

#[test]
fn a_node_without_a_home_runs_where_fewer_bytes_cross() {
    let mut ctx = Context::new();
    let x = weight(&mut ctx, "x", &[16, 3], 1);
    let wb = weight(&mut ctx, "b.w", &[16, 64], 2);
    let wa = weight(&mut ctx, "a.w", &[16, 8], 3);
    let big = ctx.mul_mat(wb, x).unwrap(); // backend 1, 64 x 3 f32
    let small = ctx.mul_mat(wa, x).unwrap(); // backend 0, 8 x 3
                                             // reads both and has no home: the node before it ran on 0, but 1 holds more of its bytes
    let both = ctx.concat(big, small, 0).unwrap();
    let y = ctx.scale(both, 0.5).unwrap(); // follows it
    ctx.set_output(y).unwrap();
    let graph = Graph::build(&ctx, &[y]).unwrap();
    let st = split().run(&ctx, &graph).unwrap();
    assert_eq!(st.parts(), [(1, 1), (0, 1), (1, 2)], "{st:?}");
    let crossed: Vec<_> = st.transfers().iter().map(|t| (t.tensor, t.bytes)).collect();
    assert_eq!(crossed, [(small, 8 * 3 * 4)], "the small operand crosses, not the big one");
    let one = CpuBackend::new(1).unwrap().run(&ctx, &graph).unwrap();
    assert_eq!(st.read_f32(&ctx, y).unwrap(), one.read_f32(&ctx, y).unwrap());
}
