//! Property tests of the buffer planner (`Allocator`, `Plan`, `Plan::verify`):
//!
//! 1. `planned_graphs_match_the_naive_executor` — 3000 random graphs by default (the acceptance criterion asks for 1000)
//!    (op chains over views, reshapes, permutes, stride-0 broadcasts, in-place
//!    ops, `cpy` into leaves and intermediates, tiled binary ops, `mul_mat`,
//!    several outputs, some of them views; contexts with data leaves and
//!    `no_alloc` contexts whose leaves are set on the backend) are planned with
//!    `Allocator::new(CpuRules)`. Each plan passes `Plan::verify` and an
//!    independent overlap check written here; planning is deterministic (same
//!    graph twice, and the same graph rebuilt in a fresh context); the stats
//!    satisfy `lower_bound <= planned <= naive`; and running the plan on a
//!    poisoning `CpuBackend` (1 or 2 threads) gives every readable tensor
//!    (outputs, their roots' views, leaves written in place, inputs)
//!    bit-identical to `Plan::naive` run without poison, with no NaN anywhere,
//!    while intermediates whose memory was reused refuse `read_f32`.
//! 2. Hand-built graphs where in-place reuse must happen, and where it must not.
//! 3. `reserve` / `alloc_graph` sizing and errors; `verify` refusing a plan of
//!    another graph or of an older revision, or rules it was not made for.
//!
//! Values are kept NaN- and inf-free by an interval bound tracked per storage,
//! so a NaN after a planned run can only come from poison (a use-after-free).
//! Set `PROPTEST_CASES` to run the main property with more (or fewer) cases.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use rgml::{
    f16, Allocator, BinaryOp, Context, CpuBackend, CpuRules, CpuStorage, DType, Error, Graph, NoReuse, Op, Place, Plan,
    ReuseRules, TensorId, UnaryOp, CPU_ALIGNMENT, CUDA_ALIGNMENT,
};

type TR<T = ()> = Result<T, TestCaseError>;

/// An rgml result as a test result (an unexpected error fails the case).
fn ck<T>(r: rgml::Result<T>, what: &str) -> TR<T> {
    r.map_err(|e| TestCaseError::fail(format!("{what}: unexpected error: {e}")))
}

/// One backend per (threads, poison), shared by all cases.
fn backend(threads: usize, poison: bool) -> &'static CpuBackend {
    static POOLS: [OnceLock<CpuBackend>; 6] =
        [OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new()];
    POOLS[threads * 2 + poison as usize]
        .get_or_init(|| CpuBackend::new(threads).expect("thread pool").with_poison(poison))
}

// ---------------------------------------------------------------------------
// deterministic choices inside one generated step

/// splitmix64: each generated step draws its choices from its own seed.
#[derive(Clone, Debug)]
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (0 when `n == 0`).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
    /// Uniform in `lo..=hi`.
    fn between(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as usize) as i64
    }
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> Option<T> {
        if v.is_empty() {
            None
        } else {
            Some(v[self.below(v.len())])
        }
    }
    /// A random permutation of 0..4.
    fn perm(&mut self) -> [usize; 4] {
        let mut p = [0, 1, 2, 3];
        for i in (1..4).rev() {
            p.swap(i, self.below(i + 1));
        }
        p
    }
}

/// The last `n` items of `v`.
fn recent<T>(v: &[T], n: usize) -> &[T] {
    &v[v.len().saturating_sub(n)..]
}

fn numel(ne: [i64; 4]) -> i64 {
    ne.iter().product()
}

/// A random shape: 1 to 4 dims of 1..=6 (fewer dims more often).
fn rand_shape(r: &mut Rng) -> [i64; 4] {
    let nd = [1, 2, 2, 3, 3, 4][r.below(6)];
    let mut ne = [1i64; 4];
    for n in ne.iter_mut().take(nd) {
        *n = r.between(1, 6);
    }
    ne
}

/// A shape that tiles into `ne` (every dim a divisor; mostly 1 or the full size).
fn divisor_shape(r: &mut Rng, ne: [i64; 4]) -> [i64; 4] {
    let mut out = [1i64; 4];
    for i in 0..4 {
        let divs: Vec<i64> = (1..=ne[i]).filter(|d| ne[i] % d == 0).collect();
        out[i] = match r.below(4) {
            0 => 1,
            1 => r.pick(&divs).unwrap_or(1),
            _ => ne[i],
        };
    }
    out
}

/// A random 1- to 4-dim factorisation of `n`.
fn factor_shape(r: &mut Rng, n: i64) -> Vec<i64> {
    let nd = 1 + r.below(4);
    let mut dims = vec![1i64; nd];
    let mut m = n;
    let mut p = 2;
    while m > 1 {
        while m % p == 0 {
            let k = r.below(nd);
            dims[k] *= p;
            m /= p;
        }
        p += 1;
    }
    dims
}

// ---------------------------------------------------------------------------
// value bounds: every storage keeps an interval holding all its values

type Range = (f64, f64);

fn widen((lo, hi): Range, rel: f64) -> Range {
    (lo - lo.abs() * rel, hi + hi.abs() * rel)
}
fn hull(a: Range, b: Range) -> Range {
    (a.0.min(b.0), a.1.max(b.1))
}
fn mag((lo, hi): Range) -> f64 {
    lo.abs().max(hi.abs())
}
fn products(a: Range, b: Range) -> Range {
    let p = [a.0 * b.0, a.0 * b.1, a.1 * b.0, a.1 * b.1];
    (p.iter().copied().fold(f64::INFINITY, f64::min), p.iter().copied().fold(f64::NEG_INFINITY, f64::max))
}
/// True if the interval stays clear of zero (a safe divisor).
fn away_from_zero((lo, hi): Range) -> bool {
    lo >= 0.05 || hi <= -0.05
}
/// The largest magnitude a storage of `dtype` may hold here (F16 must not overflow).
fn limit(dtype: DType) -> f64 {
    if dtype == DType::F32 {
        1e6
    } else {
        6e4
    }
}
fn fits(dtype: DType, r: Range) -> bool {
    mag(r) <= limit(dtype) && r.0.is_finite() && r.1.is_finite()
}

// ---------------------------------------------------------------------------
// the generated case

/// A random graph: context kind, thread count, initial leaves, steps (op code,
/// seed) and output picks. Steps shrink away one by one.
#[derive(Clone, Debug)]
struct Case {
    no_alloc: bool,
    threads: usize,
    seed: u64,
    steps: Vec<(u8, u64)>,
    outs: Vec<u64>,
}

const NOPS: u8 = 16;

fn case_strategy() -> impl Strategy<Value = Case> {
    (any::<bool>(), 1usize..=2, any::<u64>(), vec((0..NOPS, any::<u64>()), 1..=25), vec(any::<u64>(), 1..=4))
        .prop_map(|(no_alloc, threads, seed, steps, outs)| Case { no_alloc, threads, seed, steps, outs })
}

/// Host values of a leaf, in its element type.
#[derive(Clone, Debug)]
enum Vals {
    F32(Vec<f32>),
    F16(Vec<f16>),
}

/// A built case: the context, the graph, and what the test needs to know.
struct Built {
    ctx: Context,
    graph: Graph,
    /// Leaves and their values (set on the backend in a `no_alloc` context).
    leaves: Vec<(TensorId, Vals)>,
    /// Tensors marked with `set_output` before building.
    marked: Vec<TensorId>,
    /// Ops that were refused at build time (skipped), and ops built.
    refused: usize,
    built: usize,
    inplace: usize,
}

#[derive(Clone, Copy, PartialEq)]
enum Sign {
    Any,
    Pos,
    Neg,
}

struct Gen {
    ctx: Context,
    no_alloc: bool,
    pool: Vec<TensorId>,
    computed: Vec<TensorId>,
    leaves: Vec<(TensorId, Vals)>,
    range: HashMap<TensorId, Range>,
    refused: usize,
    built: usize,
    inplace: usize,
}

impl Gen {
    fn root(&self, id: TensorId) -> TensorId {
        self.ctx.storage_root(id).expect("tensor")
    }
    fn ne(&self, id: TensorId) -> [i64; 4] {
        self.ctx.layout(id).expect("tensor").ne
    }
    fn dtype(&self, id: TensorId) -> DType {
        self.ctx.layout(id).expect("tensor").dtype
    }
    fn range_of(&self, id: TensorId) -> Range {
        self.range[&self.root(id)]
    }

    /// A new leaf of shape `ne` with values of sign `sign`.
    fn leaf(&mut self, r: &mut Rng, ne: [i64; 4], dtype: DType, sign: Sign) -> TensorId {
        let n = numel(ne) as usize;
        let raw: Vec<f32> = (0..n)
            .map(|_| {
                let v = r.unit();
                (match sign {
                    Sign::Any => -2.0 + 4.0 * v,
                    Sign::Pos => 0.5 + 1.5 * v,
                    Sign::Neg => -0.5 - 1.5 * v,
                }) as f32
            })
            .collect();
        let id = self.ctx.new_tensor(dtype, &ne).expect("new_tensor");
        let (vals, stored): (Vals, Vec<f64>) = match dtype {
            DType::F16 => {
                let h: Vec<f16> = raw.iter().map(|&v| f16::from_f32(v)).collect();
                let s = h.iter().map(|v| v.to_f64()).collect();
                (Vals::F16(h), s)
            }
            _ => (Vals::F32(raw.clone()), raw.iter().map(|&v| v as f64).collect()),
        };
        if !self.no_alloc {
            match &vals {
                Vals::F32(v) => self.ctx.set_data(id, v).expect("set_data"),
                Vals::F16(v) => self.ctx.set_data(id, v).expect("set_data"),
            }
        }
        let lo = stored.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = stored.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        self.range.insert(id, (lo, hi));
        if r.chance(0.15) {
            self.ctx.set_input(id).expect("set_input");
        }
        self.leaves.push((id, vals));
        self.pool.push(id);
        id
    }
    fn leaf_dtype(r: &mut Rng) -> DType {
        if r.chance(0.12) {
            DType::F16
        } else {
            DType::F32
        }
    }

    /// Records the result of an op: a new root gets `range`; an in-place write
    /// widens its storage's range; a view changes nothing.
    fn took(&mut self, res: rgml::Result<TensorId>, range: Option<Range>) -> Option<TensorId> {
        match res {
            Ok(id) => {
                self.built += 1;
                let t = self.ctx.tensor(id).expect("tensor");
                if let Some(rg) = range {
                    let rg = widen(rg, 1e-2);
                    match t.view_src() {
                        None => {
                            self.range.insert(id, rg);
                        }
                        Some(root) => {
                            self.inplace += 1;
                            let old = self.range[&root];
                            self.range.insert(root, hull(old, rg));
                        }
                    }
                }
                self.pool.push(id);
                self.computed.push(id);
                Some(id)
            }
            Err(_) => {
                self.refused += 1;
                None
            }
        }
    }

    /// A source for a binary op on `a`: a pool tensor that tiles into `a` (and
    /// is a safe divisor for `div`), else a new leaf that does.
    fn tiling_source(&mut self, r: &mut Rng, a: TensorId, div: bool) -> TensorId {
        let ane = self.ne(a);
        if r.chance(0.6) {
            let cands: Vec<TensorId> = self
                .pool
                .iter()
                .copied()
                .filter(|&b| {
                    let bne = self.ne(b);
                    (0..4).all(|i| ane[i] % bne[i] == 0) && (!div || away_from_zero(self.range_of(b)))
                })
                .collect();
            if let Some(b) = r.pick(&cands) {
                return b;
            }
        }
        let ne = divisor_shape(r, ane);
        let sign = if div {
            if r.chance(0.5) {
                Sign::Pos
            } else {
                Sign::Neg
            }
        } else {
            [Sign::Any, Sign::Any, Sign::Pos][r.below(3)]
        };
        let dt = Gen::leaf_dtype(r);
        self.leaf(r, ne, dt, sign)
    }

    /// One generated step.
    fn step(&mut self, code: u8, r: &mut Rng) {
        // mostly one of the newest tensors, so that chains grow deep
        let Some(a) = (if r.chance(0.75) && !self.computed.is_empty() {
            r.pick(recent(&self.computed, 3))
        } else {
            r.pick(&self.pool)
        }) else {
            return;
        };
        let l = self.ctx.layout(a).expect("layout");
        let ar = self.range_of(a);
        match code {
            // a new leaf (of a random shape, or of a pool tensor's shape)
            0 => {
                let ne = if r.chance(0.5) { l.ne } else { rand_shape(r) };
                let dt = Gen::leaf_dtype(r);
                let s = [Sign::Any, Sign::Pos, Sign::Neg][r.below(3)];
                self.leaf(r, ne, dt, s);
            }
            // a sub-window of `a` (its own strides, optional step 2 per dim)
            1 => {
                let mut ne = [1i64; 4];
                let mut nb = l.nb;
                let mut offset = 0usize;
                for i in 0..4 {
                    let start = r.below(l.ne[i] as usize) as i64;
                    let step = if r.chance(0.25) { 2 } else { 1 };
                    let avail = (l.ne[i] - start + step - 1) / step;
                    ne[i] = r.between(1, avail);
                    nb[i] = l.nb[i] * step as usize;
                    offset += start as usize * l.nb[i];
                }
                let res = self.ctx.view_strided(a, ne, nb, offset);
                self.took(res, None);
            }
            // view_1d..4d with free strides and offsets (may overlap itself, may be refused)
            2 => {
                let ts = l.dtype.type_size();
                let root = self.root(a);
                let total = self.ctx.layout(root).expect("layout").nbytes();
                let offs = self.ctx.tensor(a).expect("tensor").view_offs();
                let avail = ((total - offs) / ts) as i64;
                let off_el = r.below(avail as usize) as i64;
                let left = avail - off_el;
                let ne0 = r.between(1, left.min(6));
                let offset = off_el as usize * ts;
                let nb1 = if r.chance(0.5) { ne0 as usize * ts } else { ts * r.between(1, 8) as usize };
                let rows = |stride: usize| ((left - ne0) as usize / (stride / ts).max(1)) as i64 + 1;
                let res = match r.below(4) {
                    0 => self.ctx.view_1d(a, ne0, offset),
                    1 => {
                        let ne1 = r.between(1, rows(nb1).min(6));
                        self.ctx.view_2d(a, ne0, ne1, nb1, offset)
                    }
                    2 => {
                        let ne1 = r.between(1, 3);
                        let nb2 = nb1 * ne1 as usize;
                        let ne2 = r.between(1, rows(nb2).clamp(1, 4));
                        self.ctx.view_3d(a, [ne0, ne1, ne2], nb1, nb2, offset)
                    }
                    _ => {
                        let ne1 = r.between(1, 3);
                        let ne2 = r.between(1, 2);
                        let nb2 = nb1 * ne1 as usize;
                        let nb3 = nb2 * ne2 as usize;
                        self.ctx.view_4d(a, [ne0, ne1, ne2, r.between(1, 2)], [nb1, nb2, nb3], offset)
                    }
                };
                self.took(res, None);
            }
            // reshape (contiguous inputs only; else a strided view_strided of the same shape)
            3 => {
                let dims = factor_shape(r, numel(l.ne));
                let res = self.ctx.reshape(a, &dims);
                self.took(res, None);
            }
            // transpose / permute
            4 => {
                let res = if r.chance(0.4) { self.ctx.transpose(a) } else { self.ctx.permute(a, r.perm()) };
                self.took(res, None);
            }
            // expand the size-1 dims (a read-only stride-0 broadcast)
            5 => {
                let mut ne = l.ne;
                for n in ne.iter_mut() {
                    if *n == 1 && r.chance(0.6) {
                        *n = r.between(1, 4);
                    }
                }
                let res = self.ctx.expand(a, ne);
                self.took(res, None);
            }
            // cont / dup / cont_reshape
            6 => {
                let res = match r.below(3) {
                    0 => self.ctx.cont(a),
                    1 => self.ctx.dup(a),
                    _ => {
                        let dims = factor_shape(r, numel(l.ne));
                        self.ctx.cont_reshape(a, &dims)
                    }
                };
                self.took(res, Some(ar));
            }
            // cpy a into a pool tensor of the same element count (a leaf, an
            // intermediate, a view), or into a new leaf
            7 => {
                let n = numel(l.ne);
                let cands: Vec<TensorId> =
                    self.pool.iter().copied().filter(|&b| numel(self.ne(b)) == n && fits(self.dtype(b), ar)).collect();
                let b = match r.pick(&cands) {
                    Some(b) if r.chance(0.7) => b,
                    _ => {
                        let dims = factor_shape(r, n);
                        let mut ne = [1i64; 4];
                        ne[..dims.len()].copy_from_slice(&dims);
                        let dt = if fits(DType::F16, ar) { Gen::leaf_dtype(r) } else { DType::F32 };
                        self.leaf(r, ne, dt, Sign::Any)
                    }
                };
                let res = self.ctx.cpy(a, b);
                self.took(res, Some(ar));
            }
            // binary ops, in place or not
            8..=10 => {
                // (matched by index, so that new BinaryOp variants elsewhere do not break this file)
                let k = r.below(4);
                let op = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div][k];
                let b = self.tiling_source(r, a, op == BinaryOp::Div);
                let br = self.range_of(b);
                let rg = match k {
                    0 => (ar.0 + br.0, ar.1 + br.1),
                    1 => (ar.0 - br.1, ar.1 - br.0),
                    2 => products(ar, br),
                    _ => {
                        if !away_from_zero(br) {
                            self.refused += 1;
                            return;
                        }
                        products(ar, (1.0 / br.1, 1.0 / br.0))
                    }
                };
                if !fits(l.dtype, widen(rg, 1e-2)) {
                    return;
                }
                let inplace = r.chance(0.5);
                let res = self.ctx.binary(op, a, b, inplace);
                self.took(res, Some(rg));
            }
            // scale
            11 => {
                let s = [0.5f32, -1.5, 2.0, 0.25, -1.0][r.below(5)];
                let rg = products(ar, (s as f64, s as f64));
                if !fits(l.dtype, widen(rg, 1e-2)) {
                    return;
                }
                let res = if r.chance(0.5) { self.ctx.scale_inplace(a, s) } else { self.ctx.scale(a, s) };
                self.took(res, Some(rg));
            }
            // unary ops whose result stays finite
            12 | 13 => {
                // (matched by index, so that new UnaryOp variants elsewhere do not break this file)
                const UNARY: [UnaryOp; 7] = [
                    UnaryOp::Relu,
                    UnaryOp::Gelu,
                    UnaryOp::Silu,
                    UnaryOp::Neg,
                    UnaryOp::Sqr,
                    UnaryOp::Sqrt,
                    UnaryOp::Exp,
                ];
                let k = r.below(UNARY.len());
                let op = UNARY[k];
                let rg = match k {
                    0 => (ar.0.max(0.0), ar.1.max(0.0)),
                    1 | 2 => {
                        if ar.0 >= 0.0 {
                            (0.0, ar.1)
                        } else {
                            (-0.3, ar.1.max(0.0))
                        }
                    }
                    3 => (-ar.1, -ar.0),
                    4 => {
                        let m = mag(ar);
                        if ar.0 >= 0.0 {
                            (ar.0 * ar.0, m * m)
                        } else if ar.1 <= 0.0 {
                            (ar.1 * ar.1, m * m)
                        } else {
                            (0.0, m * m)
                        }
                    }
                    5 => {
                        if ar.0 < 0.0 {
                            return;
                        }
                        (ar.0.sqrt(), ar.1.sqrt())
                    }
                    _ => {
                        if ar.1 > 8.0 {
                            return;
                        }
                        (ar.0.exp(), ar.1.exp())
                    }
                };
                if !fits(l.dtype, widen(rg, 1e-2)) {
                    return;
                }
                let res = self.ctx.unary(op, a, r.chance(0.5));
                self.took(res, Some(rg));
            }
            // sum_rows
            14 => {
                let k = l.ne[0] as f64;
                let rg = (ar.0 * k, ar.1 * k);
                if !fits(l.dtype, widen(rg, 1e-2)) {
                    return;
                }
                let res = self.ctx.sum_rows(a);
                self.took(res, Some(rg));
            }
            // mul_mat: `a` as the activations with a new weight, or as the
            // weight with a pool or new right-hand side
            _ => {
                let k = l.ne[0];
                let (w, x) = if r.chance(0.5) {
                    let ne = [k, r.between(1, 5), divisor_shape(r, l.ne)[2], divisor_shape(r, l.ne)[3]];
                    let dt = Gen::leaf_dtype(r);
                    (self.leaf(r, ne, dt, Sign::Any), a)
                } else {
                    let cands: Vec<TensorId> = self
                        .pool
                        .iter()
                        .copied()
                        .filter(|&b| {
                            let bne = self.ne(b);
                            bne[0] == k && bne[2] % l.ne[2] == 0 && bne[3] % l.ne[3] == 0
                        })
                        .collect();
                    let b = match r.pick(&cands) {
                        Some(b) if r.chance(0.6) => b,
                        _ => {
                            let m2 = if l.ne[2] <= 3 { r.between(1, 2) } else { 1 };
                            let ne = [k, r.between(1, 5), l.ne[2] * m2, l.ne[3]];
                            let dt = Gen::leaf_dtype(r);
                            self.leaf(r, ne, dt, Sign::Any)
                        }
                    };
                    (a, b)
                };
                let rg = products(self.range_of(w), self.range_of(x));
                let rg = (rg.0 * k as f64, rg.1 * k as f64);
                if !fits(DType::F32, widen(rg, 1e-2)) {
                    return;
                }
                let res = self.ctx.mul_mat(w, x);
                self.took(res, Some(rg));
            }
        }
    }
}

/// Builds the case's context and graph. Deterministic: building a case twice
/// gives the same tensors in the same order.
fn build(case: &Case) -> TR<Built> {
    let ctx = if case.no_alloc { Context::new_no_alloc() } else { Context::new() };
    let mut g = Gen {
        ctx,
        no_alloc: case.no_alloc,
        pool: Vec::new(),
        computed: Vec::new(),
        leaves: Vec::new(),
        range: HashMap::new(),
        refused: 0,
        built: 0,
        inplace: 0,
    };
    let mut r = Rng(case.seed);
    for _ in 0..1 + r.below(3) {
        let ne = rand_shape(&mut r);
        let dt = Gen::leaf_dtype(&mut r);
        let s = [Sign::Any, Sign::Any, Sign::Pos][r.below(3)];
        g.leaf(&mut r, ne, dt, s);
    }
    for &(code, seed) in &case.steps {
        g.step(code, &mut Rng(seed));
    }
    // outputs: mostly computed tensors (views included), now and then a leaf;
    // some marked with set_output first, some marked without being built
    let mut outs = Vec::new();
    let mut marked = Vec::new();
    for &o in &case.outs {
        let mut r = Rng(o);
        let from = if g.computed.is_empty() || r.chance(0.08) { &g.pool } else { &g.computed };
        let id = if r.chance(0.6) { r.pick(recent(from, 2)) } else { r.pick(from) }.expect("a tensor");
        match r.below(6) {
            0 => {
                ck(g.ctx.set_output(id), "set_output")?;
                marked.push(id);
                outs.push(id);
            }
            1 if !outs.is_empty() => {
                // marked only: protected if the graph holds it anyway
                ck(g.ctx.set_output(id), "set_output")?;
                marked.push(id);
            }
            _ => outs.push(id),
        }
    }
    // the newest tensor (which depends on most of the chain) is an output unless the case says otherwise
    if outs.is_empty() || (!case.outs[0].is_multiple_of(4) && !g.computed.is_empty()) {
        outs.insert(0, *g.computed.last().unwrap_or(&g.pool[0]));
    }
    let mut graph = Graph::new(&g.ctx);
    for &o in &outs {
        ck(graph.build_forward_expand(&g.ctx, o), "build_forward_expand")?;
    }
    Ok(Built { ctx: g.ctx, graph, leaves: g.leaves, marked, refused: g.refused, built: g.built, inplace: g.inplace })
}

// ---------------------------------------------------------------------------
// checks

/// An overlap check written from the public API only (it shares no code with
/// `Plan::verify`): placed roots are aligned and inside the buffer; two buffer
/// roots live at the same step share no byte unless one handed its block to
/// the other in place at its last use; in-place hand-overs obey the rules;
/// protected roots are retained and never handed over; leaves read in place
/// are never written.
fn independent_check(ctx: &Context, g: &Graph, plan: &Plan, rules: &dyn ReuseRules) -> TR {
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
    // every recorded hand-over follows the rules
    for &n in nodes {
        let Some(p) = plan.reused_source(n) else { continue };
        let t = ctx.tensor(n).expect("tensor");
        prop_assert!(t.view_src().is_none() && !t.op().is_metadata(), "{n} reuses {p} but is a view");
        prop_assert!(!protected.contains(&p), "{n} overwrites protected {p}");
        prop_assert!(!matches!(t.op(), Op::MulMat | Op::SumRows | Op::Cpy), "{} overwrote its source", t.op().name());
        prop_assert_eq!(last_use.get(&p), Some(&pos[&n]), "{} reuses {} before its last use", n, p);
        prop_assert_eq!(plan.place(n), plan.place(p));
        let ok = t.src().iter().enumerate().any(|(slot, &s)| {
            let st = ctx.tensor(s).expect("tensor");
            root(s) == p
                && st.layout() == t.layout()
                && st.view_offs() == 0
                && rules.may_overwrite_source(&t.op(), slot)
        });
        prop_assert!(ok, "{n} reuses {p} without a same-layout source slot the kernel allows");
        // every other source on the same storage reads it the same way
        let same = t.src().iter().filter(|&&s| root(s) == p).all(|&s| {
            let st = ctx.tensor(s).expect("tensor");
            st.layout() == t.layout() && st.view_offs() == 0
        });
        prop_assert!(same, "{n} reuses {p} while another source views it differently");
    }
    Ok(())
}

/// Places, size, reuses and stats of two plans of the same graph built in
/// (possibly) different contexts, compared by tensor index.
fn same_plan(ga: &Graph, a: &Plan, gb: &Graph, b: &Plan) -> TR {
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
fn set_inputs(b: &Built, st: &mut CpuStorage) -> TR {
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
fn execute(b: &Built, plan: Plan, threads: usize, poison: bool) -> TR<CpuStorage> {
    let cpu = backend(threads, poison);
    let mut st = ck(cpu.alloc(&b.ctx, &b.graph, plan), "alloc")?;
    set_inputs(b, &mut st)?;
    ck(cpu.compute(&b.ctx, &b.graph, &mut st), "compute")?;
    Ok(st)
}

/// Compares every readable tensor of `planned` with `naive`, bit for bit, and
/// checks that unreadable ones are refused. Returns (compared, refused).
fn compare(b: &Built, planned: &CpuStorage, naive: &CpuStorage) -> TR<(usize, usize)> {
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
struct Coverage {
    cases: AtomicUsize,
    no_alloc: AtomicUsize,
    two_threads: AtomicUsize,
    nodes: AtomicUsize,
    ops_built: AtomicUsize,
    ops_refused: AtomicUsize,
    inplace: AtomicUsize,
    with_reuse: AtomicUsize,
    reuses: AtomicUsize,
    with_leaf_copy: AtomicUsize,
    with_view_output: AtomicUsize,
    with_refused_read: AtomicUsize,
    with_freed_ranges: AtomicUsize,
    multi_output: AtomicUsize,
    mul_mat: AtomicUsize,
    expand: AtomicUsize,
    f16: AtomicUsize,
    compared: AtomicUsize,
    saved_bytes: AtomicUsize,
}

fn bump(c: &AtomicUsize, n: usize) {
    c.fetch_add(n, Ordering::Relaxed);
}

fn check_case(case: &Case, cov: &Coverage) -> TR {
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
    bump(&cov.mul_mat, has(&|op| op == Op::MulMat) as usize);
    bump(&cov.expand, has(&|op| op == Op::Expand) as usize);
    let f16s = g.nodes().iter().chain(g.leafs()).any(|&n| ctx.layout(n).expect("layout").dtype == DType::F16);
    bump(&cov.f16, f16s as usize);
    bump(&cov.compared, compared);
    bump(&cov.saved_bytes, s.naive - s.planned);
    Ok(())
}

/// The acceptance property: at least 1000 random graphs, planned, verified,
/// and run with poison, agree bit for bit with the unplanned executor.
#[test]
fn planned_graphs_match_the_naive_executor() {
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

// ---------------------------------------------------------------------------
// hand-built graphs

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
                    assert!((out[n * 3 + m] - gelu).abs() < 1e-3, "{} vs {gelu}", out[n * 3 + m]);
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
