//! Optimizer steps as in-place graph ops: AdamW's and SGD's trajectories on a
//! small problem equal PyTorch's update formulas, computed step by step in f64
//! in the test, within 1e-6; one graph (forward, backward, step) runs every
//! step with the parameter and moments kept in the storage.

use rgml::grad::optim::{AdamW, Sgd};
use rgml::{Backend, Context, CpuBackend, Graph};

const P0: [f32; 3] = [0.5, -1.2, 2.0];
const C: [f32; 3] = [0.3, -0.7, 1.1];

/// loss = Σ p·c + ½ Σ p², whose gradient is c + p.
fn gradient(p: &[f64]) -> Vec<f64> {
    p.iter().zip(C).map(|(p, c)| p + c as f64).collect()
}

/// `steps` optimizer steps in one graph; the parameter after each.
fn run(steps: usize, adamw: Option<AdamW>, sgd: Sgd) -> Vec<Vec<f32>> {
    let mut ctx = Context::new();
    let p = ctx.new_f32(&[3], &P0).unwrap();
    ctx.set_param(p).unwrap();
    let c = ctx.new_f32(&[3], &C).unwrap();
    let loss = ctx
        .add(ctx.sum(ctx.mul(p, c).unwrap()).unwrap(), ctx.scale(ctx.sum(ctx.sqr(p).unwrap()).unwrap(), 0.5).unwrap())
        .unwrap();
    let g = ctx.backward(loss, &[p]).unwrap().get(p).unwrap();
    let (m, v) = (ctx.new_tensor_1d(rgml::DType::F32, 3).unwrap(), ctx.new_tensor_1d(rgml::DType::F32, 3).unwrap());
    let hyper = ctx.new_tensor_1d(rgml::DType::F32, if adamw.is_some() { 8 } else { 2 }).unwrap();
    ctx.set_input(hyper).unwrap();
    let step = match adamw {
        Some(_) => ctx.opt_step_adamw(p, g, m, v, hyper).unwrap(),
        None => ctx.opt_step_sgd(p, g, hyper).unwrap(),
    };
    let graph = Graph::build(&ctx, &[step]).unwrap();
    let be = CpuBackend::new(2).unwrap();
    let plan = be.plan(&ctx, &graph).unwrap();
    let mut st = be.alloc(&ctx, &graph, plan).unwrap();
    (1..=steps as u64)
        .map(|t| {
            match adamw {
                Some(a) => ctx.set_data(hyper, &a.hyper(t)).unwrap(),
                None => ctx.set_data(hyper, &sgd.hyper()).unwrap(),
            }
            be.compute(&ctx, &graph, &mut st).unwrap();
            st.read_f32(&ctx, step).unwrap()
        })
        .collect()
}

fn assert_close(got: &[Vec<f32>], want: &[Vec<f64>]) {
    for (t, (g, w)) in got.iter().zip(want).enumerate() {
        for (a, b) in g.iter().zip(w) {
            assert!((*a as f64 - b).abs() <= 1e-6, "step {}: {g:?} against {w:?}", t + 1);
        }
    }
}

#[test]
fn adamw_follows_pytorchs_formula_step_by_step() {
    let a = AdamW { lr: 0.05, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.1 };
    let got = run(6, Some(a), Sgd { lr: 0.0, weight_decay: 0.0 });
    // torch.optim.AdamW: p -= lr·wd·p; m = β1 m + (1-β1) g; v = β2 v + (1-β2) g²;
    // p -= lr · (m / (1-β1^t)) / (sqrt(v / (1-β2^t)) + eps)
    let (lr, b1, b2, eps, wd) = (a.lr as f64, a.beta1 as f64, a.beta2 as f64, a.eps as f64, a.weight_decay as f64);
    let mut p: Vec<f64> = P0.iter().map(|&x| x as f64).collect();
    let (mut m, mut v) = (vec![0.0; 3], vec![0.0; 3]);
    let mut want = Vec::new();
    for t in 1..=6 {
        let g = gradient(&p);
        for i in 0..3 {
            p[i] -= lr * wd * p[i];
            m[i] = b1 * m[i] + (1.0 - b1) * g[i];
            v[i] = b2 * v[i] + (1.0 - b2) * g[i] * g[i];
            let (mh, vh) = (m[i] / (1.0 - b1.powi(t)), v[i] / (1.0 - b2.powi(t)));
            p[i] -= lr * mh / (vh.sqrt() + eps);
        }
        want.push(p.clone());
    }
    assert_close(&got, &want);
    assert!(want[5].iter().zip(P0).all(|(a, b)| (a - b as f64).abs() > 0.1), "the parameter moved");
}

#[test]
fn sgd_follows_its_formula_and_adamw_has_pytorchs_defaults() {
    let s = Sgd { lr: 0.1, weight_decay: 0.05 };
    let got = run(5, None, s);
    let mut p: Vec<f64> = P0.iter().map(|&x| x as f64).collect();
    let mut want = Vec::new();
    for _ in 0..5 {
        let g = gradient(&p);
        for i in 0..3 {
            p[i] = p[i] * (1.0 - 0.1 * 0.05) - 0.1 * g[i];
        }
        want.push(p.clone());
    }
    assert_close(&got, &want);
    let d = AdamW::default();
    assert_eq!((d.lr, d.beta1, d.beta2, d.eps, d.weight_decay), (1e-3, 0.9, 0.999, 1e-8, 0.01));
}

/// The fused AdamW ops round as the elementwise ops would: two steps on a
/// parameter whose gradient arrives as a transposed (strided) view equal the
/// update computed here in F32, operation by operation, bit for bit.
#[test]
fn adamw_on_a_strided_gradient_rounds_as_the_elementwise_ops() {
    let p0: Vec<f32> = (0..15).map(|i| (i as f32 * 0.37).sin()).collect();
    let c: Vec<f32> = (0..15).map(|i| (i as f32 * 0.73).cos() * 1e-2).collect(); // [3, 5]
    let mut ctx = Context::new();
    let p = ctx.new_f32(&[5, 3], &p0).unwrap();
    ctx.set_param(p).unwrap();
    let ct = ctx.new_f32(&[3, 5], &c).unwrap();
    let loss = ctx.sum(ctx.mul(ctx.transpose(p).unwrap(), ct).unwrap()).unwrap();
    let g = ctx.backward(loss, &[p]).unwrap().get(p).unwrap();
    assert!(!ctx.layout(g).unwrap().is_contiguous(), "the gradient should be a strided view");
    let (m, v) =
        (ctx.new_tensor(rgml::DType::F32, &[5, 3]).unwrap(), ctx.new_tensor(rgml::DType::F32, &[5, 3]).unwrap());
    let hyper = ctx.new_tensor_1d(rgml::DType::F32, 8).unwrap();
    ctx.set_input(hyper).unwrap();
    let step = ctx.opt_step_adamw(p, g, m, v, hyper).unwrap();
    let graph = Graph::build(&ctx, &[step]).unwrap();
    let be = CpuBackend::new(2).unwrap();
    let mut st = be.alloc(&ctx, &graph, be.plan(&ctx, &graph).unwrap()).unwrap();
    let a = AdamW { lr: 0.01, ..AdamW::default() };
    let (mut pw, mut mw, mut vw) = (p0.clone(), vec![0f32; 15], vec![0f32; 15]);
    for t in 1..=2 {
        let h = a.hyper(t);
        ctx.set_data(hyper, &h).unwrap();
        be.compute(&ctx, &graph, &mut st).unwrap();
        for i in 0..15 {
            let gv = c[(i % 5) * 3 + i / 5]; // ∂p[i0, i1] = c[i1, i0]
            mw[i] = mw[i] * h[0] + gv * h[1];
            vw[i] = vw[i] * h[2] + (gv * gv) * h[3];
            pw[i] = pw[i] * h[4] - (mw[i] * h[5]) / ((vw[i] * h[6]).sqrt() + h[7]);
        }
        let got = st.read_f32(&ctx, step).unwrap();
        assert!(got.iter().zip(&pw).all(|(x, y)| x.to_bits() == y.to_bits()), "step {t}: {got:?} against {pw:?}");
    }
}
