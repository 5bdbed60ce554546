//! The generated case.

use super::*;

/// A random graph: context kind, thread count, initial leaves, steps (op code,
/// seed) and output picks. Steps shrink away one by one.
#[derive(Clone, Debug)]
pub(crate) struct Case {
    pub(crate) no_alloc: bool,
    pub(crate) threads: usize,
    pub(crate) seed: u64,
    pub(crate) steps: Vec<(u8, u64)>,
    pub(crate) outs: Vec<u64>,
}

pub(crate) const NOPS: u8 = 16;

pub(crate) fn case_strategy() -> impl Strategy<Value = Case> {
    (any::<bool>(), 1usize..=2, any::<u64>(), vec((0..NOPS, any::<u64>()), 1..=25), vec(any::<u64>(), 1..=4))
        .prop_map(|(no_alloc, threads, seed, steps, outs)| Case { no_alloc, threads, seed, steps, outs })
}

/// Host values of a leaf, in its element type.
#[derive(Clone, Debug)]
pub(crate) enum Vals {
    F32(Vec<f32>),
    F16(Vec<f16>),
}

/// A built case: the context, the graph, and what the test needs to know.
pub(crate) struct Built {
    pub(crate) ctx: Context,
    pub(crate) graph: Graph,
    /// Leaves and their values (set on the backend in a `no_alloc` context).
    pub(crate) leaves: Vec<(TensorId, Vals)>,
    /// Tensors marked with `set_output` before building.
    pub(crate) marked: Vec<TensorId>,
    /// Ops that were refused at build time (skipped), and ops built.
    pub(crate) refused: usize,
    pub(crate) built: usize,
    pub(crate) inplace: usize,
}

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Sign {
    Any,
    Pos,
    Neg,
}

pub(crate) struct Gen {
    pub(crate) ctx: Context,
    pub(crate) no_alloc: bool,
    pub(crate) pool: Vec<TensorId>,
    pub(crate) computed: Vec<TensorId>,
    pub(crate) leaves: Vec<(TensorId, Vals)>,
    pub(crate) range: HashMap<TensorId, Range>,
    pub(crate) refused: usize,
    pub(crate) built: usize,
    pub(crate) inplace: usize,
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
pub(crate) fn build(case: &Case) -> TR<Built> {
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
