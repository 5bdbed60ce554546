//! Property tests (proptest) for rgml's ops against independent models written here:
//!
//! Property 1: random chains of metadata ops (transpose, permute, reshape, view_1d..4d,
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

#[path = "../common/splitmix.rs"]
mod splitmix;
use splitmix::SplitMix as Rng;

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

mod cpy;
mod elementwise;
mod graphs;
mod matmul;
mod threads;
mod view_chains;
mod wild_views;

use elementwise::*;
use matmul::*;
use view_chains::*;
