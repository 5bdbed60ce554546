//! Property tests (proptest) for rgml's ops against independent models written here:
//!
//! 1. random chains of metadata ops (transpose, permute, reshape, view_1d..4d,
//!    view_strided, expand) then `cont`/`dup`, against a (ne, element strides,
//!    element offset) model over the leaf's values; ne/nb/offset/contiguity checked
//!    after every op;
//! 2. views that leave their storage are `Error::InvalidView` (never a panic), and
//!    wild view arguments are accepted exactly when an overflow-free model says so;
//! 3. elementwise ops (tiling broadcast, scale, unary, sum_rows) on strided F32/F16/BF16
//!    inputs against an f64 reference;
//! 4. `*_inplace` twins: same values as the out-of-place op, eager program-order
//!    semantics, writes land exactly on the view's elements;
//! 5. `mul_mat` on random shapes, broadcasts and layouts;
//! 6. `cpy` between F32/F16/BF16 into reshaped, strided destinations (bit-exact);
//! 7. large graphs give bit-identical results with 1, 2 and 3 threads;
//! 8. random graphs of views, inplace and out-of-place ops over computed
//!    intermediates (planner reuse, poison mode) against an eager model and a
//!    naive plan.
//!
//! Set `PROPTEST_CASES` to run every property (except the large thread-count one)
//! with more or fewer cases.

use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rgml::{
    bf16, f16, BinaryOp, Context, CpuBackend, CpuStorage, DType, Error, Graph, Plan, TensorId, UnaryOp, CPU_ALIGNMENT,
};

type TR<T = ()> = Result<T, TestCaseError>;

/// `cases`, unless `PROPTEST_CASES` says otherwise; no regression files are written.
fn cfg(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(cases);
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

/// Exactly `cases`, whatever `PROPTEST_CASES` says (for the expensive properties).
fn cfg_fixed(cases: u32) -> ProptestConfig {
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

/// An rgml result as a test result (an unexpected error fails the case).
fn ck<T>(r: rgml::Result<T>, what: &str) -> TR<T> {
    r.map_err(|e| TestCaseError::fail(format!("{what}: unexpected error: {e}")))
}

/// One backend per thread count, shared by all cases.
fn backend(threads: usize) -> &'static CpuBackend {
    static POOLS: [OnceLock<CpuBackend>; 4] = [OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new()];
    POOLS[threads].get_or_init(|| CpuBackend::new(threads).expect("thread pool"))
}

/// Backends in poison mode: freed and unwritten plan memory reads as NaN.
fn poisoned(threads: usize) -> &'static CpuBackend {
    static POOLS: [OnceLock<CpuBackend>; 4] = [OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new()];
    POOLS[threads].get_or_init(|| CpuBackend::new(threads).expect("thread pool").with_poison(true))
}

fn run(ctx: &Context, outs: &[TensorId], threads: usize) -> TR<CpuStorage> {
    let g = ck(Graph::build(ctx, outs), "Graph::build")?;
    ck(backend(threads).run(ctx, &g), "run")
}

fn read(st: &CpuStorage, ctx: &Context, id: TensorId) -> TR<Vec<f64>> {
    Ok(ck(st.read_f32(ctx, id), "read_f32")?.into_iter().map(f64::from).collect())
}

// ---------------------------------------------------------------------------
// small deterministic generator for values and for choices that depend on state

/// splitmix64: values and state-dependent choices come from a proptest-drawn seed.
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
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    /// A random permutation of 0..4.
    fn perm(&mut self) -> [usize; 4] {
        let mut p = [0, 1, 2, 3];
        for i in (1..4).rev() {
            p.swap(i, self.below(i + 1));
        }
        p
    }
    /// A value with a random binary exponent in 2^-26..2^18 (F16 subnormals to beyond F16's range).
    fn wide(&mut self) -> f64 {
        let e = self.below(44) as i32 - 26;
        let s = if self.chance(0.5) { -1.0 } else { 1.0 };
        ((s * (1.0 + self.unit()) * 2f64.powi(e)) as f32) as f64
    }
}

// ---------------------------------------------------------------------------
// shapes and types

const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

fn numel(ne: [i64; 4]) -> usize {
    ne.iter().map(|&n| n as usize).product()
}

/// Index of the element with linear (logical, ne[0] fastest) position `k`.
fn unravel(mut k: usize, ne: [i64; 4]) -> [usize; 4] {
    let mut ix = [0; 4];
    for i in 0..4 {
        let n = ne[i] as usize;
        ix[i] = k % n;
        k /= n;
    }
    ix
}

fn ravel(ix: [usize; 4], ne: [i64; 4]) -> usize {
    ix[0] + ne[0] as usize * (ix[1] + ne[1] as usize * (ix[2] + ne[2] as usize * ix[3]))
}

/// Element strides of a fresh tensor of shape `ne`.
fn packed_strides(ne: [i64; 4]) -> [usize; 4] {
    let n = ne.map(|x| x as usize);
    [1, n[0], n[0] * n[1], n[0] * n[1] * n[2]]
}

/// ggml's `ggml_is_contiguous` for a plain type, written out: skipping dims of
/// size 1, each stride is the packed size of the dims below it (dim 0: the type size).
fn packed_in_order(ne: [i64; 4], nb: [usize; 4], ts: usize) -> bool {
    let mut want = ts;
    for i in 0..4 {
        if ne[i] != 1 {
            if nb[i] != want {
                return false;
            }
            want *= ne[i] as usize;
        }
    }
    true
}

/// `x` rounded to `d` (through f32, as rgml stores values).
fn round_to(d: DType, x: f64) -> f64 {
    let x = x as f32;
    match d {
        DType::F32 => x as f64,
        DType::F16 => f16::from_f32(x).to_f64(),
        DType::BF16 => bf16::from_f32(x).to_f64(),
        DType::I8 => (x.round().clamp(-128.0, 127.0)) as f64,
        _ => unreachable!("{d}"),
    }
}

/// Sets a leaf of type `d` to `v` (values already representable in `d`).
fn set_values(ctx: &mut Context, id: TensorId, d: DType, v: &[f64]) -> TR {
    let r = match d {
        DType::F32 => ctx.set_data(id, &v.iter().map(|&x| x as f32).collect::<Vec<_>>()),
        DType::F16 => ctx.set_data(id, &v.iter().map(|&x| f16::from_f64(x)).collect::<Vec<_>>()),
        DType::BF16 => ctx.set_data(id, &v.iter().map(|&x| bf16::from_f64(x)).collect::<Vec<_>>()),
        DType::I8 => ctx.set_data(id, &v.iter().map(|&x| x as i8).collect::<Vec<_>>()),
        _ => unreachable!("{d}"),
    };
    ck(r, "set_data")
}

/// Storage values around the elements of a view: far from every real input.
fn sentinel(i: usize) -> f64 {
    -(1000.0 + 7.0 * i as f64)
}

/// Bit-exact comparison of two f32-valued vectors.
fn same_bits(got: &[f64], want: &[f64], what: &str) -> TR {
    prop_assert_eq!(got.len(), want.len(), "{}: length", what);
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        prop_assert!(
            (*g as f32).to_bits() == (*w as f32).to_bits(),
            "{}: element {} is {:e}, expected {:e}\n got {:?}\nwant {:?}",
            what,
            k,
            g,
            w,
            got,
            want
        );
    }
    Ok(())
}

/// `|got - want| <= tol(k)` for every element (NaN fails).
fn close(got: &[f64], want: &[f64], tol: impl Fn(usize) -> f64, what: &str) -> TR {
    prop_assert_eq!(got.len(), want.len(), "{}: length", what);
    for k in 0..got.len() {
        let (g, w, t) = (got[k], want[k], tol(k));
        prop_assert!((g - w).abs() <= t, "{}: element {} is {:e}, expected {:e} (tolerance {:e})", what, k, g, w, t);
    }
    Ok(())
}

/// Relative rounding of storing into `d` (the tolerance side).
fn out_rel(d: DType) -> f64 {
    match d {
        DType::F32 => 0.0,
        DType::F16 => 2f64.powi(-10),
        DType::BF16 => 2f64.powi(-7),
        _ => unreachable!(),
    }
}

fn perm_from_index(mut k: usize) -> [usize; 4] {
    let mut left = vec![0, 1, 2, 3];
    let mut out = [0; 4];
    for (i, o) in out.iter_mut().enumerate() {
        let f = [6, 2, 1, 1][i];
        *o = left.remove(k / f % left.len());
        k %= f;
    }
    out
}

fn divisors(n: i64) -> Vec<i64> {
    (1..=n.max(1)).filter(|d| n % d == 0).collect()
}

/// A random shape of exactly `n > 0` elements.
fn factorize(n: usize, r: &mut Rng) -> [i64; 4] {
    let mut ne = [1i64; 4];
    let mut rem = n as i64;
    for d in ne.iter_mut().take(3) {
        let ds = divisors(rem);
        *d = ds[r.below(ds.len())];
        rem /= *d;
    }
    ne[3] = rem;
    let p = r.perm();
    let mut out = [1i64; 4];
    for i in 0..4 {
        out[p[i]] = ne[i];
    }
    out
}

// ---------------------------------------------------------------------------
// strided inputs with a known layout

/// How an input of a given logical shape is laid out in its storage: a plain leaf,
/// or a view (element stride `st0`, padding between rows/planes/blocks, an offset,
/// spare elements at the end) of a 1-d leaf, permuted by `axes` (ggml convention).
#[derive(Clone, Debug)]
struct Spec {
    leaf: bool,
    axes: [usize; 4],
    st0: usize,
    pad: [usize; 3],
    offset: usize,
    tail: usize,
}

fn axes_strategy() -> impl Strategy<Value = [usize; 4]> {
    prop_oneof![2 => Just([0, 1, 2, 3]), 2 => Just([1, 0, 2, 3]), 1 => Just([0, 1, 3, 2]), 3 => (0usize..24).prop_map(perm_from_index)]
}

prop_compose! {
    fn spec_strategy()(leaf in prop::bool::weighted(0.2), axes in axes_strategy(), st0 in 1usize..=2,
                       pad in prop::array::uniform3(0usize..=2), offset in 0usize..=3, tail in 0usize..=2) -> Spec {
        Spec { leaf, axes, st0, pad, offset, tail }
    }
}

/// An input tensor and where its elements are.
struct Input {
    id: TensorId,
    root: TensorId,
    /// The root's values, in storage order.
    storage: Vec<f64>,
    /// Storage index of each logical element.
    pos: Vec<usize>,
}

/// A tensor of type `dt`, logical shape `ne` and logical values `vals`, laid out as `spec` says.
fn make_input(ctx: &mut Context, dt: DType, ne: [i64; 4], vals: &[f64], spec: &Spec) -> TR<Input> {
    let n = numel(ne);
    assert_eq!(vals.len(), n);
    if spec.leaf {
        let id = ck(ctx.new_tensor(dt, &ne), "new_tensor")?;
        set_values(ctx, id, dt, vals)?;
        return Ok(Input { id, root: id, storage: vals.to_vec(), pos: (0..n).collect() });
    }
    let ts = dt.type_size();
    let axes = spec.axes;
    // the view before the permutation: permute(v, axes).ne[axes[i]] = v.ne[i]
    let vne: [i64; 4] = std::array::from_fn(|i| ne[axes[i]]);
    let mut s = [spec.st0, 0, 0, 0];
    for i in 1..4 {
        s[i] = vne[i - 1] as usize * s[i - 1] + spec.pad[i - 1];
    }
    let span = if n == 0 { 0 } else { 1 + (0..4).map(|i| (vne[i] as usize - 1) * s[i]).sum::<usize>() };
    let size = spec.offset + span + spec.tail;
    let mut storage: Vec<f64> = (0..size).map(|i| round_to(dt, sentinel(i))).collect();
    let mut pos = vec![0; n];
    for (k, p) in pos.iter_mut().enumerate() {
        let ix = unravel(k, ne);
        *p = spec.offset + (0..4).map(|i| ix[axes[i]] * s[i]).sum::<usize>();
        storage[*p] = vals[k];
    }
    let root = ck(ctx.new_tensor(dt, &[size as i64]), "new_tensor")?;
    set_values(ctx, root, dt, &storage)?;
    let v = if spec.st0 == 1 {
        ctx.view_4d(root, vne, [s[1] * ts, s[2] * ts, s[3] * ts], spec.offset * ts)
    } else {
        ctx.view_strided(root, vne, s.map(|x| x * ts), spec.offset * ts)
    };
    let v = ck(v, "view")?;
    let id = match axes {
        [0, 1, 2, 3] => v,
        [1, 0, 2, 3] => ck(ctx.transpose(v), "transpose")?,
        _ => ck(ctx.permute(v, axes), "permute")?,
    };
    let l = ck(ctx.layout(id), "layout")?;
    prop_assert_eq!(l.ne, ne, "make_input: shape after permute {:?}", axes);
    let want_nb: [usize; 4] = std::array::from_fn(|i| s[(0..4).find(|&j| axes[j] == i).unwrap()] * ts);
    prop_assert_eq!(l.nb, want_nb, "make_input: strides after permute {:?}", axes);
    Ok(Input { id, root, storage, pos })
}

// ---------------------------------------------------------------------------
// 1. random view chains

/// A tensor as the test sees it: shape, element strides, element offset into the leaf.
#[derive(Clone, Debug, PartialEq)]
struct Model {
    ne: [i64; 4],
    st: [usize; 4],
    off: usize,
}

impl Model {
    fn nb(&self) -> [usize; 4] {
        self.st.map(|s| s * 4)
    }
    fn read(&self, data: &[f64]) -> Vec<f64> {
        (0..numel(self.ne))
            .map(|k| {
                let ix = unravel(k, self.ne);
                data[self.off + (0..4).map(|i| ix[i] * self.st[i]).sum::<usize>()]
            })
            .collect()
    }
}

/// rgml's header of `id` equals the model.
fn check_meta(ctx: &Context, id: TensorId, leaf: TensorId, m: &Model, what: &str) -> TR {
    let t = ck(ctx.tensor(id), "tensor")?;
    let l = *t.layout();
    prop_assert_eq!(l.dtype, DType::F32, "{}", what);
    prop_assert_eq!(l.ne, m.ne, "{}: ne", what);
    prop_assert_eq!(l.nb, m.nb(), "{}: nb (ne={:?})", what, m.ne);
    prop_assert_eq!(t.view_offs(), if id == leaf { 0 } else { m.off * 4 }, "{}: view offset", what);
    prop_assert_eq!(ck(ctx.storage_root(id), "storage_root")?, leaf, "{}: storage root", what);
    prop_assert_eq!(
        l.is_contiguous(),
        packed_in_order(m.ne, m.nb(), 4),
        "{}: is_contiguous for ne={:?} nb={:?}",
        what,
        m.ne,
        m.nb()
    );
    Ok(())
}

/// One metadata op chosen by `kind` (its arguments drawn from `r`) applied to
/// `cur` (modelled by `m`): the new tensor and model, or `None` when the op was
/// (correctly) refused.
fn chain_step(
    ctx: &mut Context,
    cur: TensorId,
    m: &Model,
    nstore: usize,
    kind: u8,
    r: &mut Rng,
) -> TR<Option<(TensorId, Model, String)>> {
    let mut out = m.clone();
    match kind {
        0 => {
            out.ne.swap(0, 1);
            out.st.swap(0, 1);
            Ok(Some((ck(ctx.transpose(cur), "transpose")?, out, "transpose".into())))
        }
        1 => {
            let axes = r.perm();
            for (i, &ax) in axes.iter().enumerate() {
                out.ne[ax] = m.ne[i];
                out.st[ax] = m.st[i];
            }
            Ok(Some((ck(ctx.permute(cur, axes), "permute")?, out, format!("permute {axes:?}"))))
        }
        2 => {
            let n = numel(m.ne);
            let nd = 1 + r.below(4);
            let mut ne = [1i64; 4];
            if n == 0 {
                for d in ne.iter_mut().take(nd) {
                    *d = 1 + r.below(3) as i64;
                }
                ne[r.below(nd)] = 0;
            } else {
                let mut rem = n as i64;
                for d in ne.iter_mut().take(nd - 1) {
                    let ds = divisors(rem);
                    *d = ds[r.below(ds.len())];
                    rem /= *d;
                }
                ne[nd - 1] = rem;
            }
            let res = ctx.reshape(cur, &ne[..nd]);
            if !packed_in_order(m.ne, m.nb(), 4) {
                prop_assert!(
                    matches!(res, Err(Error::NotContiguous { .. })),
                    "reshape of non-contiguous ne={:?} nb={:?} must be NotContiguous, got {:?}",
                    m.ne,
                    m.nb(),
                    res
                );
                return Ok(None);
            }
            out.ne = ne;
            out.st = packed_strides(ne);
            Ok(Some((ck(res, "reshape")?, out, format!("reshape {:?}", &ne[..nd]))))
        }
        3 => {
            let vk = r.below(5); // view_1d, _2d, _3d, _4d, _strided
            let avail = nstore - m.off;
            if avail == 0 {
                out.ne = [0, 1, 1, 1];
                out.st = [1, 0, 0, 0];
                return Ok(Some((ck(ctx.view_1d(cur, 0, 0), "view_1d")?, out, "view_1d empty".into())));
            }
            let o = r.below(avail);
            let mut budget = avail - o - 1; // elements reachable past the first
            let dims = [1, 2, 3, 4, 4][vk];
            let mut ne = [1i64; 4];
            let mut st = [1usize, 0, 0, 0];
            let mut span = 1usize;
            for i in 0..dims {
                if i > 0 || vk == 4 {
                    st[i] = if r.chance(0.5) { span + r.below(2) } else { r.below((budget + 2).min(10)) };
                }
                let maxn = budget.checked_div(st[i]).map_or(4, |q| (q + 1).min(5)); // stride 0: any size
                ne[i] = 1 + r.below(maxn) as i64;
                budget -= (ne[i] as usize - 1) * st[i];
                span += (ne[i] as usize - 1) * st[i];
            }
            if r.chance(0.08) {
                ne[r.below(dims)] = 0;
            }
            let ob = o * 4;
            let nb = st.map(|s| s * 4);
            let (res, st) = match vk {
                0 => (ctx.view_1d(cur, ne[0], ob), [1, ne[0] as usize, ne[0] as usize, ne[0] as usize]),
                1 => {
                    let s2 = st[1] * ne[1] as usize;
                    (ctx.view_2d(cur, ne[0], ne[1], nb[1], ob), [1, st[1], s2, s2])
                }
                2 => (
                    ctx.view_3d(cur, [ne[0], ne[1], ne[2]], nb[1], nb[2], ob),
                    [1, st[1], st[2], st[2] * ne[2] as usize],
                ),
                3 => (ctx.view_4d(cur, ne, [nb[1], nb[2], nb[3]], ob), st),
                _ => (ctx.view_strided(cur, ne, nb, ob), st),
            };
            out.ne = ne;
            out.st = st;
            out.off = m.off + o;
            let what = format!("view kind {vk} ne={ne:?} st={st:?} offset {o} (elements) over {nstore}");
            Ok(Some((ck(res, &what)?, out, what)))
        }
        _ => {
            let mut ne = m.ne;
            for (i, n) in ne.iter_mut().enumerate() {
                if *n == 1 {
                    *n = r.below(5) as i64;
                    if *n != 1 {
                        out.ne[i] = *n;
                        out.st[i] = 0;
                    }
                }
            }
            // a dim of size > 1 does not broadcast
            if let Some(i) = (0..4).find(|&i| m.ne[i] > 1) {
                let mut bad = m.ne;
                bad[i] += 1;
                let res = ctx.expand(cur, bad);
                prop_assert!(matches!(res, Err(Error::Shape { .. })), "expand {:?} to {:?}: {:?}", m.ne, bad, res);
            }
            Ok(Some((ck(ctx.expand(cur, ne), "expand")?, out, format!("expand to {ne:?}"))))
        }
    }
}

fn leaf_shape() -> impl Strategy<Value = Vec<i64>> {
    (1usize..=4, prop::array::uniform4(1i64..=6), prop::option::weighted(0.12, 0usize..4)).prop_map(|(nd, ne, z)| {
        let mut v = ne[..nd].to_vec();
        if let Some(z) = z {
            v[z % nd] = 0;
        }
        v
    })
}

fn check_view_chain(shape: &[i64], steps: &[(u8, u64)], seed: u64, use_dup: bool, threads: usize) -> TR {
    let mut ctx = Context::new();
    let mut ne = [1i64; 4];
    ne[..shape.len()].copy_from_slice(shape);
    let n = numel(ne);
    let mut rng = Rng(seed);
    let data: Vec<f64> = (0..n).map(|_| round_to(DType::F32, rng.range(-100.0, 100.0))).collect();
    let leaf = ck(ctx.new_f32(shape, &data.iter().map(|&x| x as f32).collect::<Vec<_>>()), "new_f32")?;
    let mut m = Model { ne, st: packed_strides(ne), off: 0 };
    check_meta(&ctx, leaf, leaf, &m, "leaf")?;
    let mut cur = leaf;
    let mut trail = vec![(leaf, m.clone(), "leaf".to_string())];
    for &(kind, s) in steps {
        let mut r = Rng(s);
        if let Some((id, nm, what)) = chain_step(&mut ctx, cur, &m, n, kind, &mut r)? {
            let what = format!("step {} ({what})", trail.len());
            check_meta(&ctx, id, leaf, &nm, &what)?;
            trail.push((id, nm.clone(), what));
            cur = id;
            m = nm;
        }
    }
    let out = ck(if use_dup { ctx.dup(cur) } else { ctx.cont(cur) }, "cont/dup")?;
    let lo = ck(ctx.layout(out), "layout")?;
    prop_assert_eq!(lo.ne, m.ne);
    prop_assert_eq!(lo.nb, packed_strides(m.ne).map(|s| s * 4));
    prop_assert!(ck(ctx.tensor(out), "tensor")?.view_src().is_none(), "cont makes a new tensor");
    let st = run(&ctx, &[out], threads)?;
    let want = m.read(&data);
    same_bits(&read(&st, &ctx, out)?, &want, &format!("cont of chain {trail:?}"))?;
    for (id, tm, what) in &trail {
        same_bits(&read(&st, &ctx, *id)?, &tm.read(&data), &format!("read_f32 of {what}"))?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(cfg(256))]

    /// Chains of metadata ops, then `cont`/`dup`: headers, contiguity and values match the model.
    #[test]
    fn view_chains_match_the_model(
        shape in leaf_shape(),
        steps in prop::collection::vec((0u8..5, any::<u64>()), 1..=5),
        seed in any::<u64>(),
        use_dup in any::<bool>(),
        threads in 1usize..=2,
    ) {
        check_view_chain(&shape, &steps, seed, use_dup, threads)?;
    }
}

// ---------------------------------------------------------------------------
// 2. out-of-bounds and wild views

const VIEW_TYPES: [DType; 3] = [DType::F32, DType::F16, DType::I8];

/// The layout (ne, nb in bytes) a view call of `kind` (1d, 2d, 3d, 4d, strided) makes,
/// or `None` when computing its implied strides overflows.
fn view_layout(kind: usize, ts: usize, ne: [i64; 4], nb: [usize; 4]) -> Option<([i64; 4], [usize; 4])> {
    let mul = |s: usize, n: i64| usize::try_from(n).ok().and_then(|n| s.checked_mul(n));
    Some(match kind {
        0 => {
            let row = mul(ts, ne[0])?;
            ([ne[0], 1, 1, 1], [ts, row, row, row])
        }
        1 => {
            let s2 = mul(nb[1], ne[1])?;
            ([ne[0], ne[1], 1, 1], [ts, nb[1], s2, s2])
        }
        2 => ([ne[0], ne[1], ne[2], 1], [ts, nb[1], nb[2], mul(nb[2], ne[2])?]),
        3 => (ne, [ts, nb[1], nb[2], nb[3]]),
        _ => (ne, nb),
    })
}

fn call_view(
    ctx: &mut Context,
    a: TensorId,
    kind: usize,
    ne: [i64; 4],
    nb: [usize; 4],
    off: usize,
) -> rgml::Result<TensorId> {
    match kind {
        0 => ctx.view_1d(a, ne[0], off),
        1 => ctx.view_2d(a, ne[0], ne[1], nb[1], off),
        2 => ctx.view_3d(a, [ne[0], ne[1], ne[2]], nb[1], nb[2], off),
        3 => ctx.view_4d(a, ne, [nb[1], nb[2], nb[3]], off),
        _ => ctx.view_strided(a, ne, nb, off),
    }
}

/// Last byte + 1 of a layout at `off`, in u128 (no overflow possible for i64/usize inputs
/// except in the sum, which is checked): `None` when it overflows u128.
fn extent_end(ts: usize, ne: [i64; 4], nb: [usize; 4], off: u128) -> Option<u128> {
    if ne.contains(&0) {
        return Some(off);
    }
    let mut e = off.checked_add(ts as u128)?;
    for i in 0..4 {
        e = e.checked_add((ne[i] as u128 - 1).checked_mul(nb[i] as u128)?)?;
    }
    Some(e)
}

/// A leaf of `dt` holding small integers (exact in every type), and its values.
fn int_leaf(ctx: &mut Context, dt: DType, shape: &[i64]) -> TR<(TensorId, Vec<f64>)> {
    let leaf = ck(ctx.new_tensor(dt, shape), "new_tensor")?;
    let n: i64 = shape.iter().product();
    let vals: Vec<f64> = (0..n).map(|i| (i % 200 - 100) as f64).collect();
    set_values(ctx, leaf, dt, &vals)?;
    Ok((leaf, vals))
}

fn nonempty_shape() -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(1i64..=6, 1..=4)
}

fn wild_ne() -> impl Strategy<Value = i64> {
    prop_oneof![8 => 0i64..=6, 1 => Just(-1i64), 1 => Just(i64::MAX), 1 => any::<i64>(), 1 => (1i64 << 30)..(1i64 << 34)]
}

fn wild_nb() -> impl Strategy<Value = usize> {
    prop_oneof![8 => 0usize..=40, 1 => Just(usize::MAX), 1 => any::<usize>(), 1 => (1usize << 40)..(1usize << 62)]
}

proptest! {
    #![proptest_config(cfg(256))]

    /// A view whose strided extent passes the end of its storage by >= 1 byte is
    /// `InvalidView`; the same view moved back to end exactly at the storage's end is
    /// accepted and reads the right values.
    #[test]
    fn out_of_bounds_views_are_errors(
        dt in prop::sample::select(VIEW_TYPES.to_vec()),
        shape in nonempty_shape(),
        pre in 0usize..4,
        kind in 0usize..5,
        ne in prop::array::uniform4(1i64..=6),
        st in prop::array::uniform4(0usize..=8),
        off in 0usize..16,
        excess in 1usize..=3,
    ) {
        let mut ctx = Context::new();
        let ts = dt.type_size();
        let (leaf, vals) = int_leaf(&mut ctx, dt, &shape)?;
        let n = vals.len();
        let storage = n * ts;
        // maybe through a view that starts `pre` elements in: offsets add up
        let (cur, pre_b) = if pre > 0 && pre < n {
            (ck(ctx.view_1d(leaf, (n - pre) as i64, pre * ts), "view_1d")?, pre * ts)
        } else {
            (leaf, 0)
        };
        let (lne, lnb) = view_layout(kind, ts, ne, st.map(|s| s * ts)).unwrap();
        let end0 = extent_end(ts, lne, lnb, pre_b as u128).unwrap() as usize;
        // the smallest aligned offset >= off*ts that ends `excess` elements past the storage
        let off_b = (off * ts).max((storage + excess * ts).saturating_sub(end0));
        let end = end0 + off_b;
        prop_assert!(end > storage);
        let res = call_view(&mut ctx, cur, kind, ne, st.map(|s| s * ts), off_b);
        prop_assert!(
            matches!(res, Err(Error::InvalidView { .. })),
            "kind {} ne={:?} nb={:?} offset {}+{} ends at byte {} of {}: {:?}", kind, lne, lnb, pre_b, off_b, end, storage, res
        );
        // the same view ending exactly at the storage's end
        let over = end - storage;
        if off_b >= over {
            let fit = off_b - over;
            let v = ck(call_view(&mut ctx, cur, kind, ne, st.map(|s| s * ts), fit), "exactly fitting view")?;
            let l = ck(ctx.layout(v), "layout")?;
            prop_assert_eq!((l.ne, l.nb), (lne, lnb));
            prop_assert_eq!(ck(ctx.tensor(v), "tensor")?.view_offs(), pre_b + fit);
            let m = Model { ne: lne, st: lnb.map(|b| b / ts), off: (pre_b + fit) / ts };
            let st = run(&ctx, &[v], 1)?;
            same_bits(&read(&st, &ctx, v)?, &m.read(&vals), "exactly fitting view")?;
        }
    }

    /// Any view arguments (negative, huge, misaligned, overflowing): accepted exactly
    /// when the dims are >= 0 with an i64 element count, offset and strides are
    /// aligned, and the extent (computed without overflow) fits; else `InvalidView`.
    #[test]
    fn wild_views_are_checked_without_panics(
        dt in prop::sample::select(VIEW_TYPES.to_vec()),
        shape in nonempty_shape(),
        pre in 0usize..3,
        kind in 0usize..5,
        ne in prop::array::uniform4(wild_ne()),
        nb in prop::array::uniform4(wild_nb()),
        off in wild_nb(),
    ) {
        let mut ctx = Context::new();
        let ts = dt.type_size();
        let (leaf, _) = int_leaf(&mut ctx, dt, &shape)?;
        let n = numel({ let mut a = [1; 4]; a[..shape.len()].copy_from_slice(&shape); a });
        let storage = n * ts;
        let (cur, pre_b) = if pre > 0 && pre < n {
            (ck(ctx.view_1d(leaf, (n - pre) as i64, pre * ts), "view_1d")?, pre * ts)
        } else {
            (leaf, 0)
        };
        let res = call_view(&mut ctx, cur, kind, ne, nb, off);
        let expect = view_layout(kind, ts, ne, nb).filter(|(lne, lnb)| {
            let abs = pre_b as u128 + off as u128;
            lne.iter().all(|&x| x >= 0)
                && lne.iter().try_fold(1i64, |acc, &x| acc.checked_mul(x)).is_some()
                && abs.is_multiple_of(dt.align() as u128)
                && (0..4).all(|i| lne[i] <= 1 || lnb[i] % dt.align() == 0)
                && extent_end(ts, *lne, *lnb, abs).is_some_and(|e| e <= storage as u128)
        });
        match (expect, res) {
            (Some((lne, lnb)), Ok(v)) => {
                let l = ck(ctx.layout(v), "layout")?;
                prop_assert_eq!((l.ne, l.nb), (lne, lnb));
                prop_assert_eq!(ck(ctx.tensor(v), "tensor")?.view_offs(), pre_b + off);
            }
            (None, Err(Error::InvalidView { .. })) => {}
            (e, r) => prop_assert!(false, "kind {} ne={:?} nb={:?} offset {}+{} over {} bytes: expected {:?}, got {:?}", kind, ne, nb, pre_b, off, storage, e, r),
        }
    }
}

// ---------------------------------------------------------------------------
// 3 & 4. elementwise ops, out of place and in place

#[derive(Clone, Copy, Debug)]
enum EwOp {
    Bin(BinaryOp),
    Scale(f32),
    Unary(UnaryOp),
    SumRows,
}

fn ew_op() -> impl Strategy<Value = EwOp> {
    prop_oneof![
        4 => prop::sample::select(vec![BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div]).prop_map(EwOp::Bin),
        1 => (-4.0f32..4.0).prop_map(EwOp::Scale),
        4 => prop::sample::select(UnaryOp::ALL.to_vec()).prop_map(EwOp::Unary),
        1 => Just(EwOp::SumRows),
    ]
}

#[derive(Clone, Debug)]
struct EwCase {
    op: EwOp,
    a_dt: DType,
    b_dt: DType,
    ne: [i64; 4],
    /// b's shape: `bdiv[i]` picks a divisor of `ne[i]`
    bdiv: [usize; 4],
    /// dims of b made by `expand` from size 1
    bexp: [bool; 4],
    /// b is a itself
    self_b: bool,
    a_spec: Spec,
    b_spec: Spec,
    seed: u64,
    threads: usize,
}

prop_compose! {
    fn ew_case(zero_dims: bool)(
        op in ew_op(),
        a_dt in prop::sample::select(FLOATS.to_vec()),
        b_dt in prop::sample::select(FLOATS.to_vec()),
        ne in prop::array::uniform4((0i64..25).prop_map(move |x| if zero_dims && x == 0 { 0 } else { 1 + x % 5 })),
        bdiv in prop::array::uniform4(0usize..6),
        bexp in prop::array::uniform4(prop::bool::weighted(0.3)),
        self_b in prop::bool::weighted(0.1),
        a_spec in spec_strategy(),
        b_spec in spec_strategy(),
        seed in any::<u64>(),
        threads in 1usize..=2,
    ) -> EwCase {
        EwCase { op, a_dt, b_dt, ne, bdiv, bexp, self_b, a_spec, b_spec, seed, threads }
    }
}

fn unary_ref(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Relu => x.max(0.0),
        UnaryOp::Gelu => 0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh()),
        UnaryOp::Silu => x / (1.0 + (-x).exp()),
        UnaryOp::Neg => -x,
        UnaryOp::Sqr => x * x,
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Exp => x.exp(),
    }
}

fn binary_ref(op: BinaryOp, x: f64, y: f64) -> f64 {
    match op {
        BinaryOp::Add => x + y,
        BinaryOp::Sub => x - y,
        BinaryOp::Mul => x * y,
        BinaryOp::Div => x / y,
    }
}

/// The named op (not the generic dispatcher), out of place or in place.
fn apply(ctx: &mut Context, op: EwOp, a: TensorId, b: TensorId, inplace: bool) -> rgml::Result<TensorId> {
    use BinaryOp as B;
    use UnaryOp as U;
    match (op, inplace) {
        (EwOp::Bin(B::Add), false) => ctx.add(a, b),
        (EwOp::Bin(B::Add), true) => ctx.add_inplace(a, b),
        (EwOp::Bin(B::Sub), false) => ctx.sub(a, b),
        (EwOp::Bin(B::Sub), true) => ctx.sub_inplace(a, b),
        (EwOp::Bin(B::Mul), false) => ctx.mul(a, b),
        (EwOp::Bin(B::Mul), true) => ctx.mul_inplace(a, b),
        (EwOp::Bin(B::Div), false) => ctx.div(a, b),
        (EwOp::Bin(B::Div), true) => ctx.div_inplace(a, b),
        (EwOp::Scale(s), false) => ctx.scale(a, s),
        (EwOp::Scale(s), true) => ctx.scale_inplace(a, s),
        (EwOp::Unary(u), false) => match u {
            U::Relu => ctx.relu(a),
            U::Gelu => ctx.gelu(a),
            U::Silu => ctx.silu(a),
            U::Neg => ctx.neg(a),
            U::Sqr => ctx.sqr(a),
            U::Sqrt => ctx.sqrt(a),
            U::Exp => ctx.exp(a),
        },
        (EwOp::Unary(u), true) => match u {
            U::Relu => ctx.relu_inplace(a),
            U::Gelu => ctx.gelu_inplace(a),
            U::Silu => ctx.silu_inplace(a),
            U::Neg => ctx.neg_inplace(a),
            U::Sqr => ctx.sqr_inplace(a),
            U::Sqrt => ctx.sqrt_inplace(a),
            U::Exp => ctx.exp_inplace(a),
        },
        (EwOp::SumRows, _) => ctx.sum_rows(a),
    }
}

/// A value for input `a` of `op` (sqrt: positive; div: |x| >= 0.25 so that b = a works).
fn a_value(op: EwOp, r: &mut Rng) -> f64 {
    match op {
        EwOp::Unary(UnaryOp::Sqrt) => r.range(0.01, 50.0),
        EwOp::Unary(UnaryOp::Exp) => r.range(-8.0, 8.0),
        EwOp::Unary(_) => r.range(-6.0, 6.0),
        EwOp::Bin(BinaryOp::Div) => nonsmall(r),
        _ => r.range(-10.0, 10.0),
    }
}

/// `±[0.25, 4]`.
fn nonsmall(r: &mut Rng) -> f64 {
    let m = r.range(0.25, 4.0);
    if r.chance(0.5) {
        -m
    } else {
        m
    }
}

/// Relative and absolute tolerance of computing `op` in f32. The correctly rounded
/// ops (IEEE +, -, *, /, sqrt, and the exact ones) are within half an f32 ulp of the
/// f64 result; allow 2 ulp. exp/gelu/silu: 1e-5 relative, and 1e-6 absolute for the
/// cancellation in gelu's `1 + tanh` at negative inputs.
fn op_tol(op: EwOp) -> (f64, f64) {
    match op {
        EwOp::Unary(UnaryOp::Exp | UnaryOp::Gelu | UnaryOp::Silu) => (1e-5, 1e-6),
        EwOp::SumRows => (1e-6, 1e-6),
        _ => (2f64.powi(-22), 0.0),
    }
}

/// Absolute rounding of storing a tiny value into `d` (half the F16 subnormal spacing).
fn out_abs(d: DType) -> f64 {
    if d == DType::F16 {
        2f64.powi(-25)
    } else {
        0.0
    }
}

/// Builds `op` on the inputs `case` describes; with `inplace`, also the inplace twin
/// and readers of `a` built before and after it, and checks everything.
fn check_elementwise(c: &EwCase, inplace: bool) -> TR {
    let mut ctx = Context::new();
    let mut r = Rng(c.seed);
    let ne = c.ne;
    let n = numel(ne);
    let avals: Vec<f64> = (0..n).map(|_| round_to(c.a_dt, a_value(c.op, &mut r))).collect();
    let a = make_input(&mut ctx, c.a_dt, ne, &avals, &c.a_spec)?;

    // b: a tiling of a (a divisor of each dim), laid out by its spec, some dims expanded from 1
    let mut b_in: Option<Input> = None;
    let (b, bne, bvals) = match c.op {
        EwOp::Bin(_) if c.self_b => (a.id, ne, avals.clone()),
        EwOp::Bin(op) => {
            let bne: [i64; 4] = std::array::from_fn(|i| {
                if ne[i] == 0 {
                    1 + (c.bdiv[i] % 3) as i64
                } else {
                    let ds = divisors(ne[i]);
                    ds[c.bdiv[i] % ds.len()]
                }
            });
            let bl: [i64; 4] = std::array::from_fn(|i| if c.bexp[i] { 1 } else { bne[i] });
            let blvals: Vec<f64> = (0..numel(bl))
                .map(|_| round_to(c.b_dt, if op == BinaryOp::Div { nonsmall(&mut r) } else { r.range(-10.0, 10.0) }))
                .collect();
            let bi = make_input(&mut ctx, c.b_dt, bl, &blvals, &c.b_spec)?;
            let b = if bl != bne { ck(ctx.expand(bi.id, bne), "expand b")? } else { bi.id };
            let bvals: Vec<f64> = (0..numel(bne))
                .map(|k| {
                    let ix = unravel(k, bne);
                    blvals[ravel(std::array::from_fn(|i| if bl[i] == 1 { 0 } else { ix[i] }), bl)]
                })
                .collect();
            b_in = Some(bi);
            (b, bne, bvals)
        }
        _ => (a.id, ne, avals.clone()),
    };

    // the f64 reference
    let rne = if matches!(c.op, EwOp::SumRows) { [1, ne[1], ne[2], ne[3]] } else { ne };
    let mut want = vec![0f64; numel(rne)];
    let mut scale = vec![0f64; numel(rne)]; // magnitude the rounding errors scale with
    for (k, (w, s)) in want.iter_mut().zip(scale.iter_mut()).enumerate() {
        let ix = unravel(k, rne);
        match c.op {
            EwOp::Bin(op) => {
                let y = bvals[ravel(std::array::from_fn(|i| ix[i] % bne[i] as usize), bne)];
                *w = binary_ref(op, avals[k], y);
                *s = w.abs();
            }
            EwOp::Scale(f) => {
                *w = avals[k] * f as f64;
                *s = w.abs();
            }
            EwOp::Unary(u) => {
                *w = unary_ref(u, avals[k]);
                *s = w.abs();
            }
            EwOp::SumRows => {
                for i0 in 0..ne[0] as usize {
                    let x = avals[ravel([i0, ix[1], ix[2], ix[3]], ne)];
                    *w += x;
                    *s += x.abs();
                }
            }
        }
    }
    let (op_rel, op_abs) = op_tol(c.op);
    let (rel, abs) = (op_rel.max(out_rel(c.a_dt)), op_abs + out_abs(c.a_dt));
    let tol = |k: usize| {
        if matches!(c.op, EwOp::SumRows) {
            op_rel * scale[k] + out_rel(c.a_dt) * want[k].abs() + abs
        } else {
            rel * scale[k] + abs
        }
    };

    let before = if inplace { Some(ck(ctx.cont(a.id), "cont before")?) } else { None };
    let out = ck(apply(&mut ctx, c.op, a.id, b, false), "op")?;
    let lo = ck(ctx.layout(out), "layout")?;
    prop_assert_eq!(lo.ne, rne);
    prop_assert_eq!(lo.dtype, c.a_dt, "result has a's type");
    prop_assert!(lo.is_contiguous());
    let mut outs = vec![out];
    let mut w_after = None;
    if inplace {
        let w = ck(apply(&mut ctx, c.op, a.id, b, true), "inplace op")?;
        prop_assert_eq!(ck(ctx.storage_root(w), "root")?, a.root, "inplace result is a view of a's storage");
        prop_assert_eq!(ck(ctx.layout(w), "layout")?, ck(ctx.layout(a.id), "layout")?);
        let after = ck(ctx.cont(a.id), "cont after")?;
        outs.extend([before.unwrap(), w, after]);
        w_after = Some((w, after));
    }
    let st = run(&ctx, &outs, c.threads)?;
    let got = read(&st, &ctx, out)?;
    close(&got, &want, tol, &format!("{:?} {:?}", c.op, c))?;
    if let Some((w, after)) = w_after {
        same_bits(&read(&st, &ctx, w)?, &got, "inplace result vs out-of-place")?;
        same_bits(&read(&st, &ctx, after)?, &got, "reader built after the inplace write")?;
        same_bits(&read(&st, &ctx, before.unwrap())?, &avals, "reader built before the inplace write")?;
        let mut store = a.storage.clone();
        for (k, &p) in a.pos.iter().enumerate() {
            store[p] = got[k];
        }
        same_bits(&read(&st, &ctx, a.root)?, &store, "a's storage after the inplace write")?;
    }
    if let Some(bi) = b_in {
        same_bits(&read(&st, &ctx, bi.root)?, &bi.storage, "b's storage is untouched")?;
    }
    if !inplace && a.root != a.id {
        same_bits(&read(&st, &ctx, a.root)?, &a.storage, "a's storage is untouched")?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(cfg(256))]

    /// Elementwise ops on strided/permuted/expanded F32/F16/BF16 inputs match the f64 reference.
    #[test]
    fn elementwise_matches_reference(c in ew_case(true)) {
        check_elementwise(&c, false)?;
    }
}

proptest! {
    #![proptest_config(cfg(160))]

    /// `*_inplace` equals the out-of-place op, writes exactly a's elements, and readers
    /// built before/after the write see the old/new values.
    #[test]
    fn inplace_matches_out_of_place(c in ew_case(false).prop_filter("sum_rows has no inplace twin", |c| !matches!(c.op, EwOp::SumRows))) {
        check_elementwise(&c, true)?;
    }

    /// `scale_inplace` through any in-bounds strided view of a leaf: refused with
    /// `OverlappingWrite` exactly when two elements share bytes; otherwise it scales
    /// exactly those elements.
    #[test]
    fn inplace_through_arbitrary_views(n in 1usize..=40, seed in any::<u64>()) {
        let mut ctx = Context::new();
        let mut r = Rng(seed);
        let data: Vec<f64> = (0..n).map(|i| (i as f64) - 20.0).collect();
        let leaf = ck(ctx.new_f32(&[n as i64], &data.iter().map(|&x| x as f32).collect::<Vec<_>>()), "new_f32")?;
        let m = Model { ne: [n as i64, 1, 1, 1], st: [1, 1, 1, 1], off: 0 };
        let Some((v, vm, what)) = chain_step(&mut ctx, leaf, &m, n, 3, &mut r)? else { unreachable!() };
        let cells: Vec<usize> = (0..numel(vm.ne))
            .map(|k| { let ix = unravel(k, vm.ne); vm.off + (0..4).map(|i| ix[i] * vm.st[i]).sum::<usize>() })
            .collect();
        let mut sorted = cells.clone();
        sorted.sort_unstable();
        let overlaps = sorted.windows(2).any(|w| w[0] == w[1]);
        let res = ctx.scale_inplace(v, 2.0);
        if overlaps {
            prop_assert!(matches!(res, Err(Error::OverlappingWrite { .. })), "{}: {:?}", what, res);
        } else {
            let w = ck(res, &what)?;
            let st = run(&ctx, &[w], 1)?;
            let mut want = data.clone();
            for &p in &cells {
                want[p] *= 2.0;
            }
            same_bits(&read(&st, &ctx, leaf)?, &want, &what)?;
        }
    }
}

// ---------------------------------------------------------------------------
// 5. mul_mat

#[derive(Clone, Debug)]
struct MmCase {
    k: i64,
    m: i64,
    n: i64,
    a23: [i64; 2],
    r23: [i64; 2],
    a_dt: DType,
    b_dt: DType,
    a_spec: Spec,
    b_spec: Spec,
    a_cont: bool,
    b_cont: bool,
    seed: u64,
}

prop_compose! {
    fn mm_case()(
        k in prop_oneof![30 => 1i64..=40, 1 => Just(0i64)],
        m in prop_oneof![30 => 1i64..=9, 1 => Just(0i64)],
        n in prop_oneof![30 => 1i64..=9, 1 => Just(0i64)],
        a23 in prop::array::uniform2(1i64..=3), r23 in prop::array::uniform2(1i64..=3),
        a_dt in prop::sample::select(FLOATS.to_vec()), b_dt in prop::sample::select(FLOATS.to_vec()),
        a_spec in spec_strategy(), b_spec in spec_strategy(),
        a_cont in prop::bool::weighted(0.2), b_cont in prop::bool::weighted(0.2),
        seed in any::<u64>(),
    ) -> MmCase {
        MmCase { k, m, n, a23, r23, a_dt, b_dt, a_spec, b_spec, a_cont, b_cont, seed }
    }
}

/// f64 reference of ggml's mul_mat and the error scale Σ|a||b| of each output.
fn mul_mat_ref(ane: [i64; 4], a: &[f64], bne: [i64; 4], b: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let (r2, r3) = ((bne[2] / ane[2]) as usize, (bne[3] / ane[3]) as usize);
    let one = [ane[1], bne[1], bne[2], bne[3]];
    let mut out = vec![0.0; numel(one)];
    let mut mag = vec![0.0; numel(one)];
    for (idx, (o, g)) in out.iter_mut().zip(mag.iter_mut()).enumerate() {
        let [i0, i1, i2, i3] = unravel(idx, one);
        for kk in 0..ane[0] as usize {
            let x = a[ravel([kk, i0, i2 / r2, i3 / r3], ane)];
            let y = b[ravel([kk, i1, i2, i3], bne)];
            *o += x * y;
            *g += (x * y).abs();
        }
    }
    (out, mag)
}

fn check_mul_mat(c: &MmCase) -> TR {
    let mut ctx = Context::new();
    let mut r = Rng(c.seed);
    let ane = [c.k, c.m, c.a23[0], c.a23[1]];
    let bne = [c.k, c.n, c.a23[0] * c.r23[0], c.a23[1] * c.r23[1]];
    let av: Vec<f64> = (0..numel(ane)).map(|_| round_to(c.a_dt, r.range(-2.0, 2.0))).collect();
    let bv: Vec<f64> = (0..numel(bne)).map(|_| round_to(c.b_dt, r.range(-2.0, 2.0))).collect();
    let ai = make_input(&mut ctx, c.a_dt, ane, &av, &c.a_spec)?;
    let bi = make_input(&mut ctx, c.b_dt, bne, &bv, &c.b_spec)?;
    let a = if c.a_cont { ck(ctx.cont(ai.id), "cont a")? } else { ai.id };
    let b = if c.b_cont { ck(ctx.cont(bi.id), "cont b")? } else { bi.id };
    let out = ck(ctx.mul_mat(a, b), "mul_mat")?;
    let lo = ck(ctx.layout(out), "layout")?;
    prop_assert_eq!(lo.ne, [c.m, c.n, bne[2], bne[3]]);
    prop_assert_eq!(lo.dtype, DType::F32);
    // shape errors: K mismatch, batch dims that a does not divide
    let bad_k = ck(ctx.new_tensor(DType::F32, &[c.k + 1, c.n, bne[2], bne[3]]), "new_tensor")?;
    prop_assert!(matches!(ctx.mul_mat(a, bad_k), Err(Error::Shape { .. })), "mul_mat with a different K");
    if c.a23[0] > 1 {
        let bad_b2 = ck(ctx.new_tensor(DType::F32, &[c.k, c.n, bne[2] + 1, bne[3]]), "new_tensor")?;
        prop_assert!(matches!(ctx.mul_mat(a, bad_b2), Err(Error::Shape { .. })), "mul_mat with b.ne2 % a.ne2 != 0");
    }
    let st = run(&ctx, &[out], 1)?;
    // like ggml, b is first rounded to a's dot partner (its own type for floats)
    let b_dot: Vec<f64> = bv.iter().map(|&x| round_to(c.a_dt, x)).collect();
    let (want, mag) = mul_mat_ref(ane, &av, bne, &b_dot);
    close(&read(&st, &ctx, out)?, &want, |k| 1e-5 * mag[k] + 1e-6, &format!("mul_mat {c:?}"))?;
    same_bits(&read(&st, &ctx, ai.root)?, &ai.storage, "a is untouched")?;
    same_bits(&read(&st, &ctx, bi.root)?, &bi.storage, "b is untouched")?;
    Ok(())
}

proptest! {
    #![proptest_config(cfg(160))]

    /// mul_mat on random shapes, batch broadcasts, types and layouts matches the f64 reference.
    #[test]
    fn mul_mat_matches_reference(c in mm_case()) {
        check_mul_mat(&c)?;
    }
}

// ---------------------------------------------------------------------------
// 6. cpy

#[derive(Clone, Debug)]
struct CpyCase {
    src_dt: DType,
    dst_dt: DType,
    ne: [i64; 4],
    src_spec: Spec,
    dst_spec: Spec,
    seed: u64,
}

prop_compose! {
    fn cpy_case()(
        src_dt in prop::sample::select(FLOATS.to_vec()), dst_dt in prop::sample::select(FLOATS.to_vec()),
        ne in prop::array::uniform4(1i64..=5), src_spec in spec_strategy(), dst_spec in spec_strategy(),
        seed in any::<u64>(),
    ) -> CpyCase {
        CpyCase { src_dt, dst_dt, ne, src_spec, dst_spec, seed }
    }
}

fn check_cpy(c: &CpyCase) -> TR {
    let mut ctx = Context::new();
    let mut r = Rng(c.seed);
    let n = numel(c.ne);
    let sv: Vec<f64> = (0..n).map(|_| round_to(c.src_dt, r.wide())).collect();
    let si = make_input(&mut ctx, c.src_dt, c.ne, &sv, &c.src_spec)?;
    let dne = factorize(n, &mut r);
    let old: Vec<f64> = (0..n).map(|k| round_to(c.dst_dt, 3.0 + k as f64)).collect();
    let di = make_input(&mut ctx, c.dst_dt, dne, &old, &c.dst_spec)?;
    let bad = ck(ctx.new_tensor(c.dst_dt, &[n as i64 + 1]), "new_tensor")?;
    prop_assert!(matches!(ctx.cpy(si.id, bad), Err(Error::Shape { .. })), "cpy with different element counts");
    let before = ck(ctx.cont(di.id), "cont before")?;
    let w = ck(ctx.cpy(si.id, di.id), "cpy")?;
    prop_assert_eq!(ck(ctx.layout(w), "layout")?, ck(ctx.layout(di.id), "layout")?);
    prop_assert_eq!(ck(ctx.storage_root(w), "root")?, di.root);
    // cont_reshape: the same logical order, no conversion, a fresh contiguous tensor
    let cr = ck(ctx.cont_reshape(si.id, &dne), "cont_reshape")?;
    let lcr = ck(ctx.layout(cr), "layout")?;
    prop_assert_eq!((lcr.ne, lcr.dtype), (dne, c.src_dt));
    prop_assert!(lcr.is_contiguous());
    let st = run(&ctx, &[before, w, cr], 1)?;
    same_bits(&read(&st, &ctx, cr)?, &sv, "cont_reshape")?;
    // values cross in logical order, rounded to the destination type (nearest even)
    let want: Vec<f64> = sv.iter().map(|&x| round_to(c.dst_dt, x)).collect();
    let what = format!("cpy {c:?} into ne={dne:?}");
    same_bits(&read(&st, &ctx, w)?, &want, &what)?;
    same_bits(&read(&st, &ctx, di.id)?, &want, &what)?;
    same_bits(&read(&st, &ctx, before)?, &old, "reader built before the cpy")?;
    let mut store = di.storage.clone();
    for (k, &p) in di.pos.iter().enumerate() {
        store[p] = want[k];
    }
    same_bits(&read(&st, &ctx, di.root)?, &store, "destination storage after cpy")?;
    same_bits(&read(&st, &ctx, si.root)?, &si.storage, "source storage is untouched")?;
    Ok(())
}

proptest! {
    #![proptest_config(cfg(256))]

    /// cpy between F32/F16/BF16, any source layout, into a differently shaped strided
    /// destination: bit-exact round-to-nearest-even conversion in logical order.
    #[test]
    fn cpy_converts_in_logical_order(c in cpy_case()) {
        check_cpy(&c)?;
    }
}

// ---------------------------------------------------------------------------
// 7. thread counts

fn check_threads(ne0: i64, ne1: i64, a_spec: &Spec, seed: u64) -> TR {
    let mut ctx = Context::new();
    let mut r = Rng(seed);
    let ne = [ne0, ne1, 1, 1];
    let n = numel(ne);
    let av: Vec<f64> = (0..n).map(|_| round_to(DType::F32, r.range(-4.0, 4.0))).collect();
    let a = make_input(&mut ctx, DType::F32, ne, &av, a_spec)?;
    let to32 = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<_>>();
    let brow_v: Vec<f64> = (0..ne0).map(|_| round_to(DType::F32, r.range(-4.0, 4.0))).collect();
    let brow = ck(ctx.new_f32(&[ne0], &to32(&brow_v)), "brow")?;
    let bcol_v: Vec<f64> = (0..ne1).map(|_| round_to(DType::F32, r.range(-4.0, 4.0))).collect();
    let bcol = ck(ctx.new_f32(&[1, ne1], &to32(&bcol_v)), "bcol")?;
    let bcol = ck(ctx.expand(bcol, ne), "expand")?;
    let nm = 8;
    let mm_v: Vec<f64> = (0..ne0 * nm).map(|_| round_to(DType::F32, r.range(-1.0, 1.0))).collect();
    let mm_b = ck(ctx.new_f32(&[ne0, nm], &to32(&mm_v)), "mm b")?;
    // an inplace target laid out transposed
    let c_v: Vec<f64> = (0..n).map(|_| round_to(DType::F32, r.range(-4.0, 4.0))).collect();
    let c_leaf = ck(ctx.new_f32(&[ne1, ne0], &to32(&c_v)), "c")?;
    let c_t = ck(ctx.transpose(c_leaf), "transpose c")?;
    let h = ck(ctx.new_tensor(DType::F16, &[ne1, ne0]), "f16 dst")?;
    let h_t = ck(ctx.transpose(h), "transpose h")?;

    let o_add = ck(ctx.add(a.id, brow), "add")?;
    let o_sub = ck(ctx.sub(a.id, bcol), "sub")?;
    let o_gelu = ck(ctx.gelu(a.id), "gelu")?;
    let o_sum = ck(ctx.sum_rows(a.id), "sum_rows")?;
    let o_cont = ck(ctx.cont(a.id), "cont")?;
    let o_cpy = ck(ctx.cpy(a.id, h_t), "cpy")?;
    let o_mm = ck(ctx.mul_mat(a.id, mm_b), "mul_mat")?;
    let o_inpl = ck(ctx.mul_inplace(c_t, a.id), "mul_inplace")?;
    let outs = [o_add, o_sub, o_gelu, o_sum, o_cont, o_cpy, o_mm, o_inpl];
    let names = ["add", "sub", "gelu", "sum_rows", "cont", "cpy", "mul_mat", "mul_inplace"];

    let mut results: Vec<Vec<Vec<f64>>> = Vec::new();
    for threads in 1..=3 {
        let st = run(&ctx, &outs, threads)?;
        let mut v = Vec::new();
        for &o in &outs {
            v.push(read(&st, &ctx, o)?);
        }
        v.push(read(&st, &ctx, c_leaf)?);
        results.push(v);
    }
    for t in 1..results.len() {
        for (i, name) in names.iter().chain(&["c storage"]).enumerate() {
            same_bits(&results[t][i], &results[0][i], &format!("{name}: {} threads vs 1", t + 1))?;
        }
    }
    // and they are right
    let res = &results[0];
    let at = |v: &[f64], i0: usize, i1: usize| v[i0 + ne0 as usize * i1];
    let ew = |f: &dyn Fn(usize, usize) -> f64| -> Vec<f64> {
        (0..n).map(|k| f(k % ne0 as usize, k / ne0 as usize)).collect()
    };
    let tol = |_: usize| 1e-5 * 16.0;
    close(&res[0], &ew(&|i0, i1| at(&av, i0, i1) + brow_v[i0]), tol, "add")?;
    close(&res[1], &ew(&|i0, i1| at(&av, i0, i1) - bcol_v[i1]), tol, "sub")?;
    close(&res[2], &ew(&|i0, i1| unary_ref(UnaryOp::Gelu, at(&av, i0, i1))), tol, "gelu")?;
    let sums: Vec<f64> = (0..ne1 as usize).map(|i1| (0..ne0 as usize).map(|i0| at(&av, i0, i1)).sum()).collect();
    close(&res[3], &sums, |_| 1e-6 * 4.0 * ne0 as f64, "sum_rows")?;
    same_bits(&res[4], &av, "cont")?;
    same_bits(&res[5], &av.iter().map(|&x| round_to(DType::F16, x)).collect::<Vec<_>>(), "cpy to f16")?;
    let (mm, mag) = mul_mat_ref(ne, &av, [ne0, nm, 1, 1], &mm_v);
    close(&res[6], &mm, |k| 1e-5 * mag[k] + 1e-6, "mul_mat")?;
    // c is [ne1, ne0] in storage; its transpose is what was multiplied
    let prod = ew(&|i0, i1| c_v[i1 + ne1 as usize * i0] * at(&av, i0, i1));
    close(&res[7], &prod, |k| 1e-6 * prod[k].abs(), "mul_inplace")?;
    Ok(())
}

proptest! {
    #![proptest_config(cfg_fixed(4))]

    /// Graphs over >= 40k elements (parallel paths) give bit-identical results with
    /// 1, 2 and 3 threads, and the right ones.
    #[test]
    fn thread_counts_agree(ne0 in 200i64..=260, ne1 in 200i64..=230, a_spec in spec_strategy(), seed in any::<u64>()) {
        check_threads(ne0, ne1, &a_spec, seed)?;
    }
}

// ---------------------------------------------------------------------------
// 8. random graphs over computed intermediates (planner reuse, eager semantics)

/// A storage root of the random graph: its values and a bound on their rounding error.
struct Store {
    val: Vec<f64>,
    err: Vec<f64>,
}

/// A tensor of the random graph: a layout (in elements) over one of the stores.
#[derive(Clone, Debug)]
struct Entry {
    id: TensorId,
    store: usize,
    m: Model,
}

/// Storage index of each logical element of `m`.
fn positions(m: &Model) -> Vec<usize> {
    (0..numel(m.ne))
        .map(|k| {
            let ix = unravel(k, m.ne);
            m.off + (0..4).map(|i| ix[i] * m.st[i]).sum::<usize>()
        })
        .collect()
}

/// True if two elements of `m` are the same storage element (a write would race).
fn self_overlapping(m: &Model) -> bool {
    let mut p = positions(m);
    p.sort_unstable();
    p.windows(2).any(|w| w[0] == w[1])
}

/// rgml's rule for a write into `dst` reading `src`: fine in another storage, in the
/// same storage when disjoint or exactly the same layout; else `OverlappingWrite`.
fn write_conflict(dst: &Entry, src: &Entry) -> bool {
    if dst.store != src.store || (dst.m.ne == src.m.ne && dst.m.st == src.m.st && dst.m.off == src.m.off) {
        return false;
    }
    let d: std::collections::HashSet<usize> = positions(&dst.m).into_iter().collect();
    positions(&src.m).iter().any(|p| d.contains(p))
}

/// Values and error bounds of an entry, in logical order.
fn entry_values(stores: &[Store], e: &Entry) -> (Vec<f64>, Vec<f64>) {
    let s = &stores[e.store];
    positions(&e.m).into_iter().map(|p| (s.val[p], s.err[p])).unzip()
}

const EPS: f64 = 1e-7; // >= one f32 rounding (2^-24)

fn graph_unary(op: EwOp, x: f64, e: f64) -> (f64, f64) {
    match op {
        EwOp::Scale(s) => (x * s as f64, e * (s as f64).abs() + EPS * (x * s as f64).abs()),
        EwOp::Unary(u) => {
            let y = unary_ref(u, x);
            match u {
                UnaryOp::Neg | UnaryOp::Relu => (y, e),
                // Lipschitz constants of gelu and silu are below 1.2
                _ => (y, 1.2 * e + 1e-6 * y.abs() + 2e-7),
            }
        }
        _ => unreachable!(),
    }
}

fn graph_binary(op: BinaryOp, x: f64, ex: f64, y: f64, ey: f64) -> (f64, f64) {
    let r = binary_ref(op, x, y);
    let e = match op {
        BinaryOp::Add | BinaryOp::Sub => ex + ey,
        BinaryOp::Mul => x.abs() * ey + y.abs() * ex + ex * ey,
        BinaryOp::Div => unreachable!(),
    };
    (r, e + EPS * r.abs())
}

/// Builds a random graph of `nsteps` ops over a few leaves: views (reusing the
/// chain generator), out-of-place and inplace unary/scale/binary ops, cpy, cont and
/// mul_mat(x, x), modelled eagerly; then checks a few outputs after one run.
fn check_random_graph(seed: u64, nsteps: usize, threads: usize) -> TR {
    let mut r = Rng(seed);
    let mut ctx = Context::new();
    let ne: [i64; 4] = std::array::from_fn(|_| 1 + r.below(3) as i64);
    let tile: [i64; 4] = std::array::from_fn(|i| if r.chance(0.5) { 1 } else { ne[i] });
    let mut stores: Vec<Store> = Vec::new();
    let mut pool: Vec<Entry> = Vec::new();
    let mut log: Vec<String> = Vec::new();
    for shape in [ne, ne, tile] {
        let v: Vec<f64> = (0..numel(shape)).map(|_| round_to(DType::F32, r.range(-2.0, 2.0))).collect();
        let id = ck(ctx.new_f32(&shape, &v.iter().map(|&x| x as f32).collect::<Vec<_>>()), "leaf")?;
        pool.push(Entry { id, store: stores.len(), m: Model { ne: shape, st: packed_strides(shape), off: 0 } });
        stores.push(Store { val: v, err: vec![0.0; numel(shape)] });
        log.push(format!("#{} = leaf {shape:?}", pool.len() - 1));
    }
    let uops = [
        EwOp::Unary(UnaryOp::Neg),
        EwOp::Unary(UnaryOp::Relu),
        EwOp::Unary(UnaryOp::Gelu),
        EwOp::Unary(UnaryOp::Silu),
        EwOp::Scale(0.75),
        EwOp::Scale(-1.25),
    ];
    // a new computed root holding `vals`
    fn push_root(stores: &mut Vec<Store>, pool: &mut Vec<Entry>, id: TensorId, ne: [i64; 4], v: (Vec<f64>, Vec<f64>)) {
        pool.push(Entry { id, store: stores.len(), m: Model { ne, st: packed_strides(ne), off: 0 } });
        stores.push(Store { val: v.0, err: v.1 });
    }
    for _ in 0..nsteps {
        let live: Vec<usize> = (0..pool.len()).filter(|&i| numel(pool[i].m.ne) > 0).collect();
        // mostly the newest tensor: chains of intermediates that die young, so the planner reuses blocks
        let e = pool[if r.chance(0.6) { live[live.len() - 1] } else { live[r.below(live.len())] }].clone();
        let (ev, ee) = entry_values(&stores, &e);
        let big = ev.iter().fold(0f64, |a, &x| a.max(x.abs())) > 1e3;
        let kind = r.below(8);
        let what = format!("#{} = kind {kind} of #{}", pool.len(), pool.iter().position(|p| p.id == e.id).unwrap());
        match kind {
            0 => {
                let n = stores[e.store].val.len();
                let vk = r.below(5) as u8;
                if let Some((id, m, w)) = chain_step(&mut ctx, e.id, &e.m, n, vk, &mut r)? {
                    log.push(format!("{what}: {w}"));
                    pool.push(Entry { id, store: e.store, m });
                }
            }
            1 | 3 => {
                let op = uops[r.below(uops.len())];
                let inplace = kind == 3;
                let res = apply(&mut ctx, op, e.id, e.id, inplace);
                log.push(format!("{what}: {op:?} inplace={inplace}"));
                let new: (Vec<f64>, Vec<f64>) = ev.iter().zip(&ee).map(|(&x, &er)| graph_unary(op, x, er)).unzip();
                if !inplace {
                    push_root(&mut stores, &mut pool, ck(res, &what)?, e.m.ne, new);
                } else if self_overlapping(&e.m) {
                    prop_assert!(matches!(res, Err(Error::OverlappingWrite { .. })), "{}: {:?}", what, res);
                } else {
                    let id = ck(res, &what)?;
                    for (k, p) in positions(&e.m).into_iter().enumerate() {
                        stores[e.store].val[p] = new.0[k];
                        stores[e.store].err[p] = new.1[k];
                    }
                    pool.push(Entry { id, store: e.store, m: e.m.clone() });
                }
            }
            2 | 4 => {
                let tiles: Vec<&Entry> =
                    pool.iter().filter(|b| numel(b.m.ne) > 0 && (0..4).all(|i| e.m.ne[i] % b.m.ne[i] == 0)).collect();
                // often another view of the same storage: aliasing for the planner and the overlap checks
                let same: Vec<&Entry> = tiles.iter().copied().filter(|b| b.store == e.store).collect();
                let from = if !same.is_empty() && r.chance(0.4) { same } else { tiles };
                let mut b = from[r.below(from.len())].clone();
                // or e with two of its equal dims swapped: same shape, same bytes, another order
                let pairs: Vec<(usize, usize)> = (0..4)
                    .flat_map(|i| (i + 1..4).map(move |j| (i, j)))
                    .filter(|&(i, j)| e.m.ne[i] == e.m.ne[j] && e.m.ne[i] > 1)
                    .collect();
                if !pairs.is_empty() && r.chance(0.3) {
                    let (i, j) = pairs[r.below(pairs.len())];
                    let mut axes = [0, 1, 2, 3];
                    axes.swap(i, j);
                    let id = ck(ctx.permute(e.id, axes), "permute")?;
                    let mut m = e.m.clone();
                    m.st.swap(i, j);
                    log.push(format!(
                        "#{} = permute {axes:?} of #{}",
                        pool.len(),
                        pool.iter().position(|p| p.id == e.id).unwrap()
                    ));
                    b = Entry { id, store: e.store, m };
                    pool.push(b.clone());
                }
                let (bv, be) = entry_values(&stores, &b);
                let bbig = bv.iter().fold(0f64, |a, &x| a.max(x.abs())) > 1e3;
                let op = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul][r.below(if big || bbig { 2 } else { 3 })];
                let inplace = kind == 4;
                let res = apply(&mut ctx, EwOp::Bin(op), e.id, b.id, inplace);
                let bi = pool.iter().position(|p| p.id == b.id).unwrap();
                log.push(format!("{what}: {op:?} with #{bi} inplace={inplace}"));
                let new: (Vec<f64>, Vec<f64>) = (0..ev.len())
                    .map(|k| {
                        let ix = unravel(k, e.m.ne);
                        let j = ravel(std::array::from_fn(|i| ix[i] % b.m.ne[i] as usize), b.m.ne);
                        graph_binary(op, ev[k], ee[k], bv[j], be[j])
                    })
                    .unzip();
                if !inplace {
                    push_root(&mut stores, &mut pool, ck(res, &what)?, e.m.ne, new);
                } else if self_overlapping(&e.m) || write_conflict(&e, &b) {
                    prop_assert!(matches!(res, Err(Error::OverlappingWrite { .. })), "{}: {:?}", what, res);
                } else {
                    let id = ck(res, &what)?;
                    for (k, p) in positions(&e.m).into_iter().enumerate() {
                        stores[e.store].val[p] = new.0[k];
                        stores[e.store].err[p] = new.1[k];
                    }
                    pool.push(Entry { id, store: e.store, m: e.m.clone() });
                }
            }
            5 => {
                // cpy e into an entry with as many elements (possibly another shape)
                let dsts: Vec<&Entry> = pool.iter().filter(|d| numel(d.m.ne) == ev.len()).collect();
                let d = dsts[r.below(dsts.len())].clone();
                let res = ctx.cpy(e.id, d.id);
                let di = pool.iter().position(|p| p.id == d.id).unwrap();
                log.push(format!("{what}: cpy into #{di}"));
                if self_overlapping(&d.m) || write_conflict(&d, &e) {
                    prop_assert!(matches!(res, Err(Error::OverlappingWrite { .. })), "{}: {:?}", what, res);
                } else {
                    let id = ck(res, &what)?;
                    for (k, p) in positions(&d.m).into_iter().enumerate() {
                        stores[d.store].val[p] = ev[k];
                        stores[d.store].err[p] = ee[k];
                    }
                    pool.push(Entry { id, store: d.store, m: d.m.clone() });
                }
            }
            6 => {
                let id = ck(ctx.cont(e.id), &what)?;
                log.push(format!("{what}: cont"));
                push_root(&mut stores, &mut pool, id, e.m.ne, (ev, ee));
            }
            _ => {
                if big {
                    continue;
                }
                let id = ck(ctx.mul_mat(e.id, e.id), &what)?;
                log.push(format!("{what}: mul_mat with itself"));
                let [k, m, n2, n3] = e.m.ne.map(|x| x as usize);
                let one = [m as i64, m as i64, n2 as i64, n3 as i64];
                let at = |i0: usize, i1: usize, i2: usize, i3: usize| ravel([i0, i1, i2, i3], e.m.ne);
                let out: (Vec<f64>, Vec<f64>) = (0..numel(one))
                    .map(|idx| {
                        let [i0, i1, i2, i3] = unravel(idx, one);
                        let (mut s, mut er, mut mag) = (0.0, 0.0, 0.0);
                        for kk in 0..k {
                            let (x, y) = (at(kk, i0, i2, i3), at(kk, i1, i2, i3));
                            s += ev[x] * ev[y];
                            mag += (ev[x] * ev[y]).abs();
                            er += ev[x].abs() * ee[y] + ev[y].abs() * ee[x] + ee[x] * ee[y];
                        }
                        (s, er + 1e-6 * mag)
                    })
                    .unzip();
                push_root(&mut stores, &mut pool, id, one, out);
            }
        }
    }
    // outputs: the last tensor and up to two others
    let mut outs = vec![pool.len() - 1];
    for _ in 0..r.below(3) {
        outs.push(r.below(pool.len()));
    }
    outs.sort_unstable();
    outs.dedup();
    let ids: Vec<TensorId> = outs.iter().map(|&i| pool[i].id).collect();
    let g = ck(Graph::build(&ctx, &ids), "Graph::build")?;
    // planned (liveness, reuse) in poison mode, and a naive plan where nothing is reused
    let st = ck(poisoned(threads).run(&ctx, &g), "run")?;
    let naive_plan = ck(Plan::naive(&ctx, &g, CPU_ALIGNMENT), "Plan::naive")?;
    let mut naive = ck(backend(threads).alloc(&ctx, &g, naive_plan), "alloc")?;
    ck(backend(threads).compute(&ctx, &g, &mut naive), "compute")?;
    for &i in &outs {
        let (want, err) = entry_values(&stores, &pool[i]);
        let got = read(&st, &ctx, pool[i].id)?;
        let what = format!("output #{i} of\n{}", log.join("\n"));
        close(&got, &want, |k| 4.0 * err[k] + 1e-6, &what)?;
        same_bits(&got, &read(&naive, &ctx, pool[i].id)?, &format!("planned vs naive plan: {what}"))?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(cfg(1000))]

    /// Random graphs mixing views, out-of-place and inplace ops, cpy, cont and mul_mat
    /// over computed intermediates (so the planner frees and reuses their blocks):
    /// outputs hold the eagerly modelled values.
    #[test]
    fn random_graphs_match_eager_model(seed in any::<u64>(), nsteps in 1usize..=12, threads in 1usize..=2) {
        check_random_graph(seed, nsteps, threads)?;
    }
}
