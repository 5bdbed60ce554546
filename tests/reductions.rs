//! `sum` (ggml's `ggml_sum`: every element of a tensor summed into one value)
//! and `mean` (ggml's `ggml_mean`: of each row), against f64 loops in the
//! test, on contiguous, transposed, permuted and broadcast (stride-0) inputs
//! and on F16; the same bits on every thread count; `argmax` (ties and NaNs as
//! ggml) and `count_equal`, the accuracy of a classifier; what they do not
//! take is refused.

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

/// `argmax(t)` and `count_equal(argmax(t), labels)` on 2 threads.
fn argmax_and_count(make: &dyn Fn(&mut Context) -> rgml::TensorId, labels: &[i32]) -> (Vec<f32>, f32) {
    let mut ctx = Context::new();
    let t = make(&mut ctx);
    let am = ctx.argmax(t).unwrap();
    assert_eq!(ctx.layout(am).unwrap().dtype, DType::I32);
    let l = ctx.new_tensor_1d(DType::I32, labels.len() as i64).unwrap();
    ctx.set_bytes(l, bytemuck::cast_slice(labels)).unwrap();
    let n = ctx.count_equal(am, l).unwrap();
    assert_eq!((ctx.layout(n).unwrap().dtype, ctx.layout(n).unwrap().ne), (DType::I64, [1, 1, 1, 1]));
    let g = Graph::build(&ctx, &[am, n]).unwrap();
    let st = CpuBackend::new(2).unwrap().run(&ctx, &g).unwrap();
    (st.read_f32(&ctx, am).unwrap(), st.read_f32(&ctx, n).unwrap()[0])
}

#[test]
fn argmax_takes_the_first_largest_and_count_equal_counts() {
    // rows of 4: a tie (first wins), a NaN after the maximum, a leading NaN, all equal
    let rows = [[1.0, 3.0, 3.0, -1.0], [2.0, 5.0, f32::NAN, 0.0], [f32::NAN, 1.0, 2.0, 9.0], [7.0; 4]];
    let data: Vec<f32> = rows.iter().flatten().copied().collect();
    let make = |c: &mut Context| c.new_f32(&[4, 4], &data).unwrap();
    let (idx, n) = argmax_and_count(&make, &[1, 1, 0, 3]);
    assert_eq!(idx, [1.0, 1.0, 0.0, 0.0]);
    assert_eq!(n, 3.0);
    // a transposed F16 matrix: the loop in the test on the same values
    let vals = Rng(11).vec(9 * 6, 4.0);
    let make_t = |c: &mut Context| {
        let t = c.new_f32(&[9, 6], &vals).unwrap();
        let h = c.new_tensor_2d(DType::F16, 9, 6).unwrap();
        let h = c.cpy(t, h).unwrap();
        c.transpose(h).unwrap()
    };
    let rounded: Vec<f32> = vals.iter().map(|&v| rgml::f16::from_f32(v).to_f32()).collect();
    let want: Vec<i32> = (0..9)
        .map(|i1| {
            let col: Vec<f32> = (0..6).map(|i0| rounded[i0 * 9 + i1]).collect();
            let mut best = 0;
            for (i, &v) in col.iter().enumerate() {
                if v > col[best] {
                    best = i;
                }
            }
            best as i32
        })
        .collect();
    let labels: Vec<i32> = want.iter().enumerate().map(|(i, &w)| if i % 3 == 0 { w + 1 } else { w }).collect();
    let (idx, n) = argmax_and_count(&make_t, &labels);
    assert_eq!(idx, want.iter().map(|&w| w as f32).collect::<Vec<_>>());
    assert_eq!(n, 6.0, "three of nine labels were moved off");
}

#[test]
fn argmax_and_count_equal_refuse_what_ggml_refuses() {
    let mut ctx = Context::new();
    let cube = ctx.new_tensor_3d(DType::F32, 4, 3, 2).unwrap();
    assert!(matches!(ctx.argmax(cube), Err(Error::Shape { .. })));
    let (i, j) = (ctx.new_tensor_1d(DType::I32, 4).unwrap(), ctx.new_tensor_1d(DType::I32, 5).unwrap());
    let f = ctx.new_tensor_1d(DType::F32, 4).unwrap();
    assert!(matches!(ctx.count_equal(i, j), Err(Error::Shape { .. })));
    assert!(matches!(ctx.count_equal(i, f), Err(Error::Unsupported { op: "count_equal", .. })));
}

#[test]
fn cross_entropy_loss_matches_an_f64_loop() {
    let (nc, nr) = (10usize, 7usize);
    let logits = Rng(21).vec(nc * nr, 6.0);
    // targets: a random distribution per row (one row one-hot)
    let mut labels: Vec<f32> = Rng(22).vec(nc * nr, 1.0).iter().map(|v| v.abs() + 0.01).collect();
    for row in labels.chunks_mut(nc) {
        let s: f32 = row.iter().sum();
        row.iter_mut().for_each(|v| *v /= s);
    }
    labels[..nc].iter_mut().enumerate().for_each(|(i, v)| *v = if i == 3 { 1.0 } else { 0.0 });
    let mut want = 0f64;
    for (x, y) in logits.chunks(nc).zip(labels.chunks(nc)) {
        let max = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let lse = max + x.iter().map(|&v| (v as f64 - max).exp()).sum::<f64>().ln();
        want += x.iter().zip(y).map(|(&a, &b)| b as f64 * (a as f64 - lse)).sum::<f64>();
    }
    let want = -want / nr as f64;
    for transposed in [false, true] {
        let mut ctx = Context::new();
        // the transposed case stores the logits column-major and views them back
        let (x, y) = if transposed {
            let cols: Vec<f32> = (0..nc * nr).map(|k| logits[(k % nr) * nc + k / nr]).collect();
            let t = ctx.new_f32(&[nr as i64, nc as i64], &cols).unwrap();
            (ctx.transpose(t).unwrap(), ctx.new_f32(&[nc as i64, nr as i64], &labels).unwrap())
        } else {
            (
                ctx.new_f32(&[nc as i64, nr as i64], &logits).unwrap(),
                ctx.new_f32(&[nc as i64, nr as i64], &labels).unwrap(),
            )
        };
        let loss = ctx.cross_entropy_loss(x, y).unwrap();
        let g = Graph::build(&ctx, &[loss]).unwrap();
        for threads in [1, 2] {
            let got = CpuBackend::new(threads).unwrap().run(&ctx, &g).unwrap().read_f32(&ctx, loss).unwrap()[0];
            assert_eq!(got, want as f32, "transposed={transposed} threads={threads}: f64, rounded once");
        }
    }
    let mut ctx = Context::new();
    let (a, b) = (ctx.new_tensor_2d(DType::F32, 4, 2).unwrap(), ctx.new_tensor_2d(DType::F32, 4, 3).unwrap());
    let h = ctx.new_tensor_2d(DType::F16, 4, 2).unwrap();
    assert!(matches!(ctx.cross_entropy_loss(a, b), Err(Error::Shape { .. })));
    assert!(matches!(ctx.cross_entropy_loss(h, a), Err(Error::Unsupported { op: "cross_entropy_loss", .. })));
}
