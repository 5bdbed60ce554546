//! In-place hazards refused when the backward graph is built (the seeds'
//! lesson: an in-place op on a value autograd still needs), each with an
//! error naming the op, the tensor and why; and the in-place ops PyTorch
//! allows staying allowed, with correct gradients.

use rgml::{Context, CpuBackend, Error, Graph, TensorId};

/// A context with a parameter `p` (4 values) and a constant `c`.
fn setup() -> (Context, TensorId, TensorId) {
    let mut ctx = Context::new();
    let p = ctx.new_f32(&[4], &[0.5, -1.0, 2.0, 0.25]).unwrap();
    ctx.set_name(p, "p").unwrap();
    ctx.set_param(p).unwrap();
    let c = ctx.new_f32(&[4], &[1.5, 2.0, -0.5, 3.0]).unwrap();
    ctx.set_name(c, "c").unwrap();
    (ctx, p, c)
}

fn hazard(r: rgml::Result<rgml::Gradients>) -> String {
    match r {
        Err(Error::InPlaceHazard(m)) => m,
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("the hazard was allowed"),
    }
}

/// The gradient of `p` after running the graph.
fn grad_of(ctx: &mut Context, loss: TensorId, p: TensorId) -> Vec<f32> {
    let g = ctx.backward(loss, &[p]).unwrap().get(p).unwrap();
    let graph = Graph::build(ctx, &[g]).unwrap();
    CpuBackend::new(2).unwrap().run(ctx, &graph).unwrap().read_f32(ctx, g).unwrap()
}

#[test]
fn an_in_place_write_to_a_parameter_is_refused() {
    let (mut ctx, p, c) = setup();
    let w = ctx.add_inplace(p, c).unwrap();
    ctx.set_name(w, "p += c").unwrap();
    let loss = ctx.sum(ctx.mul(w, c).unwrap()).unwrap();
    let m = hazard(ctx.backward(loss, &[p]));
    assert!(m.contains("add") && m.contains("p += c") && m.contains("parameter"), "{m}");
}

#[test]
fn overwriting_a_value_saved_for_backward_is_refused() {
    // the seeds' scene: y = silu(x); x += 1; then backward
    let (mut ctx, p, c) = setup();
    let x = ctx.mul(p, c).unwrap();
    ctx.set_name(x, "x").unwrap();
    let y = ctx.silu(x).unwrap();
    ctx.set_name(y, "y").unwrap();
    let bumped = ctx.add_inplace(x, c).unwrap();
    ctx.set_name(bumped, "x += c").unwrap();
    let loss = ctx.sum(y).unwrap();
    let m = hazard(ctx.backward(loss, &[p]));
    assert!(m.contains("x += c") && m.contains("overwrites x") && m.contains("silu (y)") && m.contains("saved"), "{m}");

    // an in-place op overwriting a mul's operand
    let (mut ctx, p, c) = setup();
    let x = ctx.add(p, c).unwrap();
    ctx.set_name(x, "x").unwrap();
    let y = ctx.mul(x, p).unwrap();
    ctx.set_name(y, "y").unwrap();
    ctx.scale_inplace(x, 2.0).unwrap();
    let loss = ctx.sum(ctx.mul(y, c).unwrap()).unwrap();
    let m = hazard(ctx.backward(loss, &[p]));
    assert!(m.contains("scale") && m.contains("overwrites x") && m.contains("mul (y)"), "{m}");
}

#[test]
fn an_in_place_op_whose_gradient_needs_what_it_overwrites_is_refused() {
    let (mut ctx, p, c) = setup();
    let x = ctx.mul(p, c).unwrap();
    ctx.set_name(x, "x").unwrap();
    let sq = ctx.sqr_inplace(x).unwrap();
    ctx.set_name(sq, "x²").unwrap();
    let loss = ctx.sum(sq).unwrap();
    let m = hazard(ctx.backward(loss, &[p]));
    assert!(m.contains("sqr (x²) overwrites x") && m.contains("its own gradient"), "{m}");
}

#[test]
fn a_partial_in_place_write_on_the_path_is_refused() {
    let (mut ctx, p, c) = setup();
    let x = ctx.mul(p, c).unwrap();
    ctx.set_name(x, "x").unwrap();
    let half = ctx.view_1d(x, 2, 0).unwrap();
    ctx.scale_inplace(half, 3.0).unwrap();
    let loss = ctx.sum(x).unwrap();
    let m = hazard(ctx.backward(loss, &[p]));
    assert!(m.contains("partial in-place write") && m.contains("reads x"), "{m}");
}

#[test]
fn in_place_ops_on_values_nothing_saves_are_allowed_and_differentiated() {
    // h = p·c; h += c; h *= 0.5; h = exp(h), all in place (exp saves its output, which nothing
    // overwrites after it; PyTorch allows the same and refuses a relu_ after the exp_, as rgml does)
    let (mut ctx, p, c) = setup();
    let h = ctx.mul(p, c).unwrap();
    let h = ctx.add_inplace(h, c).unwrap();
    let h = ctx.scale_inplace(h, 0.5).unwrap();
    let e = ctx.exp_inplace(h).unwrap();
    let loss = ctx.sum(e).unwrap();
    let got = grad_of(&mut ctx, loss, p);
    let (pv, cv) = ([0.5f64, -1.0, 2.0, 0.25], [1.5f64, 2.0, -0.5, 3.0]);
    for i in 0..4 {
        // d/dp exp(0.5 (p c + c)) = 0.5 c exp(0.5 (p c + c))
        let want = 0.5 * cv[i] * (0.5 * (pv[i] * cv[i] + cv[i])).exp();
        assert!((got[i] as f64 - want).abs() <= 1e-5 * want.abs().max(1.0), "{i}: {} against {want}", got[i]);
    }
    // the relu_ after the exp_ is refused
    let (mut ctx, p, c) = setup();
    let e = ctx.exp_inplace(ctx.mul(p, c).unwrap()).unwrap();
    ctx.set_name(e, "e").unwrap();
    let r = ctx.relu_inplace(e).unwrap();
    let loss = ctx.sum(r).unwrap();
    let m = hazard(ctx.backward(loss, &[p]));
    assert!(m.contains("relu") && m.contains("exp (e) saved"), "{m}");
}

#[test]
fn a_parameter_used_twice_gets_the_sum_of_both_gradients() {
    let (mut ctx, p, c) = setup();
    // loss = Σ p·c + Σ p² : dp = c + 2p
    let loss = ctx.add(ctx.sum(ctx.mul(p, c).unwrap()).unwrap(), ctx.sum(ctx.sqr(p).unwrap()).unwrap()).unwrap();
    let got = grad_of(&mut ctx, loss, p);
    let want = [1.5 + 1.0, 2.0 - 2.0, -0.5 + 4.0, 3.0 + 0.5];
    assert_eq!(got, want);
}

#[test]
fn what_has_no_gradient_is_a_clear_error() {
    let (mut ctx, p, _) = setup();
    let m = ctx.reshape(p, &[2, 2]).unwrap();
    let table = ctx.new_tensor(rgml::DType::F32, &[2, 3]).unwrap();
    let rows = ctx.new_tensor(rgml::DType::I32, &[2]).unwrap();
    ctx.set_data(rows, &[2i32, 0]).unwrap();
    let loss = ctx.sum(ctx.set_rows(table, m, rows).unwrap()).unwrap();
    let e = ctx.backward(loss, &[p]).unwrap_err().to_string();
    assert!(e.contains("set_rows") && e.contains("no gradient"), "{e}");
    let (mut ctx, p, _) = setup();
    let not_scalar = ctx.scale(p, 2.0).unwrap();
    assert!(matches!(ctx.backward(not_scalar, &[p]), Err(Error::Invalid(_))));
}
