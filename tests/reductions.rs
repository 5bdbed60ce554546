//! `sum` (ggml's `ggml_sum`: every element of a tensor summed into one value)
//! and `mean` (ggml's `ggml_mean`: of each row), against f64 loops in the
//! test, on contiguous, transposed, permuted and broadcast (stride-0) inputs
//! and on F16; the same bits on every thread count; types they do not take
//! are refused.

mod common;

use common::Rng;
use rgml::{Context, CpuBackend, DType, Error, Graph};

/// A test input built in a fresh context.
type Maker<'a> = Box<dyn Fn(&mut Context) -> rgml::TensorId + 'a>;

/// The f64 sum of `v`.
fn f64_sum(v: &[f32]) -> f64 {
    v.iter().map(|&x| x as f64).sum()
}

/// `sum(t)` on `threads` threads, with `t` built by `make` from a fresh context.
fn run_sum(threads: usize, make: &dyn Fn(&mut Context) -> rgml::TensorId) -> (f32, Vec<f32>) {
    let mut ctx = Context::new();
    let t = make(&mut ctx);
    let s = ctx.sum(t).unwrap();
    assert_eq!(ctx.layout(s).unwrap().ne, [1, 1, 1, 1]);
    let c = ctx.cont(t).unwrap();
    let g = Graph::build(&ctx, &[s, c]).unwrap();
    let st = CpuBackend::new(threads).unwrap().run(&ctx, &g).unwrap();
    (st.read_f32(&ctx, s).unwrap()[0], st.read_f32(&ctx, c).unwrap())
}

#[test]
fn sum_matches_an_f64_loop_on_every_layout() {
    let data = Rng(5).vec(7 * 33 * 5 * 3, 2.0);
    let makers: Vec<(&str, Maker<'_>)> = vec![
        ("contiguous", Box::new(|c: &mut Context| c.new_f32(&[7, 33, 5, 3], &data).unwrap())),
        (
            "transposed",
            Box::new(|c: &mut Context| {
                let t = c.new_f32(&[7, 33, 5, 3], &data).unwrap();
                c.transpose(t).unwrap()
            }),
        ),
        (
            "permuted",
            Box::new(|c: &mut Context| {
                let t = c.new_f32(&[7, 33, 5, 3], &data).unwrap();
                c.permute(t, [2, 0, 3, 1]).unwrap()
            }),
        ),
        (
            "broadcast",
            Box::new(|c: &mut Context| {
                let row = c.new_f32(&[7, 1, 1, 1], &data[..7]).unwrap();
                c.expand(row, [7, 33, 5, 3]).unwrap()
            }),
        ),
        (
            "f16",
            Box::new(|c: &mut Context| {
                let t = c.new_f32(&[7, 33, 5, 3], &data).unwrap();
                let h = c.new_tensor_4d(DType::F16, 7, 33, 5, 3).unwrap();
                c.cpy(t, h).unwrap()
            }),
        ),
    ];
    for (what, make) in &makers {
        let (got, values) = run_sum(2, make.as_ref());
        let want = f64_sum(&values);
        // summed in f64, rounded once to the result's type (F16 for the F16 input)
        let rounding = if *what == "f16" { 1.0 / 2048.0 } else { 1e-6 };
        assert!(((got as f64) - want).abs() <= rounding * want.abs().max(1.0), "{what}: {got} against {want}");
        for threads in [1, 3, 4] {
            assert_eq!(run_sum(threads, make.as_ref()).0.to_bits(), got.to_bits(), "{what}: {threads} threads");
        }
    }
}

#[test]
fn sum_of_one_value_and_of_cancelling_values() {
    let (one, _) = run_sum(2, &|c: &mut Context| c.new_f32(&[1], &[-3.5]).unwrap());
    assert_eq!(one, -3.5);
    // 1e8 + 1 - 1e8 in f32 loses the 1; the f64 accumulation keeps it
    let (kept, _) = run_sum(2, &|c: &mut Context| c.new_f32(&[3], &[1e8, 1.0, -1e8]).unwrap());
    assert_eq!(kept, 1.0);
}

#[test]
fn sum_and_mean_refuse_block_types() {
    let mut ctx = Context::new();
    let q = ctx.new_tensor_2d(DType::Q8_0, 32, 2).unwrap();
    assert!(matches!(ctx.sum(q), Err(Error::Unsupported { op: "sum", .. })));
    assert!(matches!(ctx.mean(q), Err(Error::Unsupported { op: "mean", .. })));
}

#[test]
fn mean_of_each_row_matches_an_f64_loop() {
    let data = Rng(9).vec(13 * 6 * 4, 3.0);
    for transposed in [false, true] {
        let mut ctx = Context::new();
        let t = ctx.new_f32(&[13, 6, 4, 1], &data).unwrap();
        let t = if transposed { ctx.transpose(t).unwrap() } else { t };
        let ne = ctx.layout(t).unwrap().ne;
        let m = ctx.mean(t).unwrap();
        assert_eq!(ctx.layout(m).unwrap().ne, [1, ne[1], ne[2], 1]);
        let c = ctx.cont(t).unwrap();
        let g = Graph::build(&ctx, &[m, c]).unwrap();
        let st = CpuBackend::new(2).unwrap().run(&ctx, &g).unwrap();
        let (got, values) = (st.read_f32(&ctx, m).unwrap(), st.read_f32(&ctx, c).unwrap());
        for (row, &g) in values.chunks(ne[0] as usize).zip(&got) {
            let want = f64_sum(row) / ne[0] as f64;
            assert_eq!(g, want as f32, "transposed={transposed}: summed and divided in f64, rounded once");
        }
    }
}
