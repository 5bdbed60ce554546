//! The gated linear units (`swiglu`, `geglu`; split and halved forms) against
//! f64 references, on every layout, and bit for bit against the two ops they
//! fuse (`silu`/`gelu` then `mul`), which the models used before.

use super::*;
use rgml::GluOp;

fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

/// ggml's CPU GELU: the input rounded to f16, the tanh formula in f32 (as
/// ggml evaluates it: for x below about -5, `1 + tanh` cancels to a few f32
/// steps, which f64 would not reproduce), the result rounded to f16; exactly 0
/// from -10 down and `x` from 10 up.
fn gelu_f16(x: f64) -> f64 {
    if x <= -10.0 {
        return 0.0;
    }
    if x >= 10.0 {
        return x;
    }
    let h = f16::from_f64(x).to_f32();
    let y = 0.5 * h * (1.0 + (0.797_884_6f32 * h * (1.0 + 0.044715 * h * h)).tanh());
    f64::from(f16::from_f32(y).to_f32())
}

/// One f16 subnormal step of the GELU (2^-24) times the largest |b| of these
/// tests (6): where GELU's value is tiny, the f32 and f64 formulas may round
/// to neighbouring f16 subnormals.
const GELU_ATOL: f64 = 6.0 / 16_777_216.0;

fn glu_ref(op: GluOp, a: &[f64], b: &[f64]) -> Vec<f64> {
    let f = match op {
        GluOp::Swiglu => silu,
        GluOp::Geglu => gelu_f16,
        // gpt-oss's: the gate clamped above at 7, the value to ±7, sigmoid(1.702 x), value + 1
        GluOp::SwigluOai => {
            return a
                .iter()
                .zip(b)
                .map(|(&x, &g)| {
                    let (x, g) = (x.min(7.0), g.clamp(-7.0, 7.0));
                    x / (1.0 + (-1.702 * x).exp()) * (g + 1.0)
                })
                .collect()
        }
    };
    a.iter().zip(b).map(|(&x, &g)| f(x) * g).collect()
}

/// `glu_split` on every layout of both operands, F32 and F16, 1 and 2
/// threads. Tolerance: swiglu 1e-6 relative (f32 arithmetic); geglu one f16
/// step of the GELU (2^-10 relative, or the subnormal step 2^-24 times |b|
/// near 0), where the f32 tanh may round to the other side of an f16
/// boundary than the f64 one; F16 results one more f16 step.
#[test]
fn glu_split_matches_reference() {
    let mut rng = Rng(0x61_75);
    for ne in [[7, 3, 5, 1], [131, 13, 5, 3]] {
        for (ka, kb) in KINDS.iter().zip(KINDS.iter().rev()) {
            for dtype in [DType::F32, DType::F16] {
                for op in [GluOp::Swiglu, GluOp::Geglu, GluOp::SwigluOai] {
                    let mut ctx = Context::new();
                    let a = input(&mut ctx, &mut rng, dtype, ne, *ka, 12.0);
                    let b = input(&mut ctx, &mut rng, dtype, ne, *kb, 2.0);
                    let r = ctx.glu_split(op, a.id, b.id).unwrap();
                    let l = ctx.layout(r).unwrap();
                    assert_eq!((l.ne, l.dtype, l.is_contiguous()), (ne, dtype, true));
                    let rtol = match (op, dtype) {
                        (GluOp::Swiglu | GluOp::SwigluOai, DType::F32) => 1e-6,
                        (GluOp::Geglu, DType::F32) => 1.0 / 1024.0,
                        _ => 2.0 / 1024.0,
                    };
                    let atol = if op == GluOp::Geglu { GELU_ATOL } else { 1e-7 };
                    for threads in [1, 2] {
                        let got = run(&ctx, r, threads);
                        let what = format!("{} {ne:?} {ka:?}/{kb:?} {dtype} {threads}t", op.name());
                        check(&what, &got, &glu_ref(op, &a.vals, &b.vals), rtol, atol);
                    }
                }
            }
        }
    }
}

/// The fused units compute exactly what `silu`/`gelu` then `mul` compute
/// (the f32 intermediate is exact), including GELU's cut-offs at ±10.
#[test]
fn glu_is_bitwise_the_composition() {
    let mut rng = Rng(0x9e37);
    let ne = [67, 9, 2, 1];
    let n = 67 * 9 * 2;
    let mut va: Vec<f32> = (0..n).map(|_| rng.f(14.0)).collect();
    va[..6].copy_from_slice(&[-10.0, 10.0, -10.5, 10.5, 0.0, -0.0]);
    let vb: Vec<f32> = (0..n).map(|_| rng.f(3.0)).collect();
    let mut ctx = Context::new();
    let a = ctx.new_f32(&ne, &va).unwrap();
    let b = ctx.new_f32(&ne, &vb).unwrap();
    for (op, f) in [(GluOp::Swiglu, UnaryKind::Silu), (GluOp::Geglu, UnaryKind::Gelu)] {
        let fused = ctx.glu_split(op, a, b).unwrap();
        let fa = match f {
            UnaryKind::Silu => ctx.silu(a).unwrap(),
            UnaryKind::Gelu => ctx.gelu(a).unwrap(),
        };
        let composed = ctx.mul(fa, b).unwrap();
        let (x, y) = (run(&ctx, fused, 2), run(&ctx, composed, 2));
        for (i, (p, q)) in x.iter().zip(&y).enumerate() {
            assert!(p.to_bits() == q.to_bits() || (*p == 0.0 && *q == 0.0), "{} [{i}]: {p} vs {q}", op.name());
        }
    }
}

enum UnaryKind {
    Silu,
    Gelu,
}

/// `swiglu(a)`/`geglu(a)` split each row in halves as views (no copy):
/// `f(first) * second`, or `f(second) * first` when swapped.
#[test]
fn glu_of_halves() {
    let mut rng = Rng(0x51);
    let ne = [2 * 19, 5, 3, 1];
    let mut ctx = Context::new();
    let x = input(&mut ctx, &mut rng, DType::F32, ne, Kind::Padded, 6.0);
    let half = |v: &[f64], second: bool| -> Vec<f64> {
        v.chunks(38).flat_map(|row| if second { &row[19..] } else { &row[..19] }).copied().collect()
    };
    let (first, second) = (half(&x.vals, false), half(&x.vals, true));
    for op in [GluOp::Swiglu, GluOp::Geglu] {
        for swapped in [false, true] {
            let r = ctx.glu(op, x.id, swapped).unwrap();
            assert_eq!(ctx.layout(r).unwrap().ne, [19, 5, 3, 1]);
            for &s in ctx.tensor(r).unwrap().src() {
                assert_eq!(ctx.tensor(s).unwrap().op().name(), "view", "the halves are views");
            }
            let want = if swapped { glu_ref(op, &second, &first) } else { glu_ref(op, &first, &second) };
            let (rtol, atol) = if op == GluOp::Swiglu { (1e-6, 1e-7) } else { (1.0 / 1024.0, GELU_ATOL) };
            check(&format!("{} halves swapped={swapped}", op.name()), &run(&ctx, r, 2), &want, rtol, atol);
        }
    }
    let s = ctx.swiglu(x.id).unwrap();
    assert_eq!(ctx.tensor(s).unwrap().op().name(), "swiglu");
    let g = ctx.geglu(x.id).unwrap();
    assert_eq!(ctx.tensor(g).unwrap().op().name(), "geglu");
}

/// Shapes and types that do not fit are errors naming the op.
#[test]
fn glu_errors() {
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[4, 3], &[0.0; 12]).unwrap();
    let b = ctx.new_f32(&[4, 2], &[0.0; 8]).unwrap();
    let h = ctx.new_tensor(DType::F16, &[4, 3]).unwrap();
    let i = ctx.new_tensor(DType::I32, &[4, 3]).unwrap();
    let odd = ctx.new_f32(&[5, 3], &[0.0; 15]).unwrap();
    assert!(matches!(ctx.swiglu_split(a, b), Err(Error::Shape { op: "swiglu", .. })));
    assert!(matches!(ctx.geglu_split(a, h), Err(Error::DTypeMismatch { .. })));
    assert!(matches!(ctx.swiglu_split(i, i), Err(Error::Unsupported { op: "swiglu", .. })));
    assert!(matches!(ctx.geglu(odd), Err(Error::Shape { op: "geglu", .. })));
    assert!(ctx.swiglu(a).is_ok(), "an even ne0 splits");
}
