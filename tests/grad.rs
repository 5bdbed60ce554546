//! Backward graphs (`Context::backward`): every differentiable op's gradient
//! against f64 central finite differences of an independent f64 version of
//! the same loss written in the test (odd shapes, broadcast, transposed,
//! permuted and partial-view inputs), within 1e-3 relative; one and two
//! threads give the same bits.

mod common;

use common::Rng;
use rgml::{Context, CpuBackend, Graph, TensorId};

/// An f64 tensor in ggml's order (`ne[0]` fastest).
#[derive(Clone)]
struct T {
    ne: [usize; 4],
    v: Vec<f64>,
}

impl T {
    fn at(&self, i: [usize; 4]) -> f64 {
        let ne = self.ne;
        self.v[i[0] + ne[0] * (i[1] + ne[1] * (i[2] + ne[2] * i[3]))]
    }
    fn map(&self, f: impl Fn(f64) -> f64) -> T {
        T { ne: self.ne, v: self.v.iter().map(|&x| f(x)).collect() }
    }
    /// `Σ self ⊙ w` (one shape).
    fn dot(&self, w: &T) -> f64 {
        assert_eq!(self.ne, w.ne);
        self.v.iter().zip(&w.v).map(|(a, b)| a * b).sum()
    }
    /// Every index in ggml's order.
    fn indices(ne: [usize; 4]) -> Vec<[usize; 4]> {
        let mut out = Vec::new();
        for i3 in 0..ne[3] {
            for i2 in 0..ne[2] {
                for i1 in 0..ne[1] {
                    for i0 in 0..ne[0] {
                        out.push([i0, i1, i2, i3]);
                    }
                }
            }
        }
        out
    }
    fn from_fn(ne: [usize; 4], f: impl Fn([usize; 4]) -> f64) -> T {
        T { ne, v: T::indices(ne).into_iter().map(f).collect() }
    }
    /// ggml's tiling broadcast: `self op other[i % other.ne]`.
    fn zip(&self, other: &T, f: impl Fn(f64, f64) -> f64) -> T {
        let o = other.ne;
        T::from_fn(self.ne, |i| f(self.at(i), other.at([i[0] % o[0], i[1] % o[1], i[2] % o[2], i[3] % o[3]])))
    }
    /// ggml's `mul_mat`: `out[m, n, i2, i3] = Σ_k a[k, m, i2 / r2, i3 / r3] · b[k, n, i2, i3]`.
    fn mul_mat(a: &T, b: &T) -> T {
        let (r2, r3) = (b.ne[2] / a.ne[2], b.ne[3] / a.ne[3]);
        T::from_fn([a.ne[1], b.ne[1], b.ne[2], b.ne[3]], |[m, n, i2, i3]| {
            (0..a.ne[0]).map(|k| a.at([k, m, i2 / r2, i3 / r3]) * b.at([k, n, i2, i3])).sum()
        })
    }
    /// A function of each row (dim 0), same shape out.
    fn rows(&self, f: impl Fn(&[f64]) -> Vec<f64>) -> T {
        let mut v = Vec::with_capacity(self.v.len());
        for row in self.v.chunks(self.ne[0]) {
            v.extend(f(row));
        }
        T { ne: self.ne, v }
    }
    fn sum(&self) -> f64 {
        self.v.iter().sum()
    }
}

fn softmax(row: &[f64], scale: f64) -> Vec<f64> {
    let m = row.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x * scale));
    let e: Vec<f64> = row.iter().map(|&x| (x * scale - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.into_iter().map(|x| x / s).collect()
}
fn rms_norm(row: &[f64], eps: f64) -> Vec<f64> {
    let r = (row.iter().map(|x| x * x).sum::<f64>() / row.len() as f64 + eps).sqrt();
    row.iter().map(|x| x / r).collect()
}
fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}
fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + (0.797_884_560_802_865_4 * (x + 0.044_715 * x * x * x)).tanh())
}

/// A parameter: shape and the range of its uniform values (`lo` added, so a
/// positive range for `sqrt` and divisors).
struct P {
    ne: [usize; 4],
    r: f32,
    lo: f32,
}
const fn p(ne: [usize; 4]) -> P {
    P { ne, r: 1.0, lo: 0.0 }
}

/// One loss: its rgml graph over the parameter leaves, and the same loss in f64.
struct Case {
    name: &'static str,
    params: Vec<P>,
    graph: fn(&mut Context, &[TensorId]) -> TensorId,
    f64_loss: fn(&[T]) -> f64,
}

fn values(params: &[P], seed: u64) -> Vec<T> {
    let mut rng = Rng(seed);
    params
        .iter()
        .map(|p| {
            let n = p.ne.iter().product();
            T { ne: p.ne, v: (0..n).map(|_| (rng.f(p.r) + p.lo) as f64).collect() }
        })
        .collect()
}

/// rgml's gradients of every parameter on `threads` threads.
fn rgml_grads(case: &Case, vals: &[T], threads: usize) -> Vec<Vec<f32>> {
    let mut ctx = Context::new();
    let ids: Vec<TensorId> = vals
        .iter()
        .map(|t| {
            let ne: Vec<i64> = t.ne.iter().map(|&n| n as i64).collect();
            let v: Vec<f32> = t.v.iter().map(|&x| x as f32).collect();
            let id = ctx.new_f32(&ne, &v).unwrap();
            ctx.set_param(id).unwrap();
            id
        })
        .collect();
    let loss = (case.graph)(&mut ctx, &ids);
    let grads = ctx.backward(loss, &ids).unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let outs: Vec<TensorId> =
        ids.iter().map(|&p| grads.get(p).unwrap_or_else(|| panic!("{}: no gradient", case.name))).collect();
    let g = Graph::build(&ctx, &outs).unwrap();
    let st = CpuBackend::new(threads).unwrap().run(&ctx, &g).unwrap();
    outs.iter().map(|&o| st.read_f32(&ctx, o).unwrap()).collect()
}

/// Central differences of the f64 loss.
fn finite_differences(case: &Case, vals: &[T]) -> Vec<Vec<f64>> {
    let mut vals = vals.to_vec();
    (0..vals.len())
        .map(|k| {
            (0..vals[k].v.len())
                .map(|i| {
                    let x = vals[k].v[i];
                    let h = 1e-6 * x.abs().max(1.0);
                    vals[k].v[i] = x + h;
                    let up = (case.f64_loss)(&vals);
                    vals[k].v[i] = x - h;
                    let down = (case.f64_loss)(&vals);
                    vals[k].v[i] = x;
                    (up - down) / (2.0 * h)
                })
                .collect()
        })
        .collect()
}

fn check(case: &Case) {
    let vals = values(&case.params, 7);
    let got = rgml_grads(case, &vals, 2);
    let want = finite_differences(case, &vals);
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        let scale = w.iter().fold(0f64, |m, x| m.max(x.abs()));
        for (i, (&a, &b)) in g.iter().zip(w).enumerate() {
            let tol = 1e-3 * (b.abs() + 1e-2 * scale) + 1e-6;
            assert!((a as f64 - b).abs() <= tol, "{}: param {k} element {i}: {a} against {b}", case.name);
        }
    }
    let one = rgml_grads(case, &vals, 1);
    for (a, b) in one.iter().zip(&got) {
        assert!(a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()), "{}: 1 and 2 threads differ", case.name);
    }
}

/// `Σ a ⊙ w` in the graph.
fn dot(ctx: &Context, a: TensorId, w: TensorId) -> TensorId {
    ctx.sum(ctx.mul(a, w).unwrap()).unwrap()
}

fn add_all(ctx: &Context, terms: &[TensorId]) -> TensorId {
    terms[1..].iter().fold(terms[0], |s, &t| ctx.add(s, t).unwrap())
}

#[test]
fn elementwise_ops_with_broadcasting() {
    check(&Case {
        name: "add/sub/mul/div/scale with tiled operands",
        params: vec![p([5, 3, 2, 1]), p([5, 1, 1, 1]), p([5, 3, 2, 1]), P { ne: [1, 3, 1, 1], r: 0.5, lo: 1.5 }],
        graph: |c, p| {
            let h = c.mul(c.add(p[0], p[1]).unwrap(), p[2]).unwrap();
            let h = c.div(c.sub(h, c.scale(p[0], 0.5).unwrap()).unwrap(), p[3]).unwrap();
            c.sum(h).unwrap()
        },
        f64_loss: |v| {
            let h = v[0].zip(&v[1], |a, b| a + b).zip(&v[2], |a, b| a * b);
            let h = h.zip(&v[0].map(|x| 0.5 * x), |a, b| a - b).zip(&v[3], |a, b| a / b);
            h.sum()
        },
    });
}

#[test]
fn unary_ops() {
    check(&Case {
        name: "relu, gelu, silu, neg, sqr, sqrt, exp",
        params: vec![p([7, 3, 1, 1]), P { ne: [7, 3, 1, 1], r: 0.5, lo: 1.0 }, p([7, 3, 1, 1])],
        graph: |c, p| {
            let (x, q, w) = (p[0], p[1], p[2]);
            let terms = [
                dot(c, c.relu(x).unwrap(), w),
                dot(c, c.gelu(x).unwrap(), w),
                dot(c, c.silu(x).unwrap(), w),
                dot(c, c.neg(x).unwrap(), w),
                dot(c, c.sqr(x).unwrap(), w),
                dot(c, c.sqrt(q).unwrap(), w),
                dot(c, c.exp(x).unwrap(), w),
            ];
            add_all(c, &terms)
        },
        f64_loss: |v| {
            let (x, q, w) = (&v[0], &v[1], &v[2]);
            let fs: [fn(f64) -> f64; 5] = [|x| x.max(0.0), gelu, silu, |x| -x, |x| x * x];
            fs.iter().map(|f| x.map(f).dot(w)).sum::<f64>() + q.map(f64::sqrt).dot(w) + x.map(f64::exp).dot(w)
        },
    });
}

#[test]
fn mul_mat_with_batch_broadcast_and_a_transposed_operand() {
    check(&Case {
        name: "mul_mat, weights broadcast over the batch",
        params: vec![p([7, 5, 1, 2]), p([7, 3, 2, 2]), p([5, 3, 2, 2])],
        graph: |c, p| dot(c, c.mul_mat(p[0], p[1]).unwrap(), p[2]),
        f64_loss: |v| T::mul_mat(&v[0], &v[1]).dot(&v[2]),
    });
    check(&Case {
        name: "mul_mat of a transposed parameter",
        params: vec![p([7, 5, 1, 1]), p([3, 7, 1, 1]), p([5, 3, 1, 1])],
        graph: |c, p| dot(c, c.mul_mat(p[0], c.cont(c.transpose(p[1]).unwrap()).unwrap()).unwrap(), p[2]),
        f64_loss: |v| {
            let bt = T::from_fn([7, 3, 1, 1], |[k, n, _, _]| v[1].at([n, k, 0, 0]));
            T::mul_mat(&v[0], &bt).dot(&v[2])
        },
    });
}

#[test]
fn reductions_softmax_and_norms() {
    check(&Case {
        name: "soft_max_ext (scale), mean, sum_rows",
        params: vec![p([6, 4, 1, 1]), p([6, 4, 1, 1]), p([1, 4, 1, 1])],
        graph: |c, p| {
            let s = dot(c, c.soft_max_ext(p[0], None, 0.7, 0.0).unwrap(), p[1]);
            let m = dot(c, c.mean(p[0]).unwrap(), p[2]);
            let r = dot(c, c.sum_rows(c.sqr(p[1]).unwrap()).unwrap(), p[2]);
            add_all(c, &[s, m, r])
        },
        f64_loss: |v| {
            let s = v[0].rows(|r| softmax(r, 0.7)).dot(&v[1]);
            let mean =
                T::from_fn([1, 4, 1, 1], |[_, i1, _, _]| (0..6).map(|i| v[0].at([i, i1, 0, 0])).sum::<f64>() / 6.0);
            let rows = T::from_fn([1, 4, 1, 1], |[_, i1, _, _]| (0..6).map(|i| v[1].at([i, i1, 0, 0]).powi(2)).sum());
            s + mean.dot(&v[2]) + rows.dot(&v[2])
        },
    });
    check(&Case {
        name: "rms_norm with and without a weight",
        params: vec![p([9, 4, 1, 1]), p([9, 1, 1, 1]), p([9, 4, 1, 1])],
        graph: |c, p| {
            let a = dot(c, c.rms_norm_mul(p[0], p[1], 1e-5).unwrap(), p[2]);
            let b = dot(c, c.rms_norm(p[2], 1e-5).unwrap(), p[0]);
            c.add(a, b).unwrap()
        },
        f64_loss: |v| {
            let a = v[0].rows(|r| rms_norm(r, 1e-5)).zip(&v[1], |a, b| a * b).dot(&v[2]);
            a + v[2].rows(|r| rms_norm(r, 1e-5)).dot(&v[0])
        },
    });
    check(&Case {
        name: "norm (centred), on a transposed input",
        params: vec![p([7, 5, 1, 1]), p([5, 7, 1, 1])],
        graph: |c, p| dot(c, c.norm(c.transpose(p[0]).unwrap(), 1e-5).unwrap(), p[1]),
        f64_loss: |v| {
            let t = T::from_fn([5, 7, 1, 1], |[i0, i1, _, _]| v[0].at([i1, i0, 0, 0]));
            t.rows(|r| {
                let mean = r.iter().sum::<f64>() / r.len() as f64;
                let var = r.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / r.len() as f64;
                r.iter().map(|x| (x - mean) / (var + 1e-5).sqrt()).collect()
            })
            .dot(&v[1])
        },
    });
}

#[test]
fn a_causal_mask_before_softmax() {
    check(&Case {
        name: "diag_mask_inf (n_past 1), then soft_max",
        params: vec![p([5, 4, 2, 1]), p([5, 4, 2, 1])],
        graph: |c, p| dot(c, c.soft_max(c.diag_mask_inf(p[0], 1).unwrap()).unwrap(), p[1]),
        f64_loss: |v| {
            // column i0 of row i1 is kept while i0 <= 1 + i1
            let masked =
                T::from_fn(
                    [5, 4, 2, 1],
                    |i| if i[0] as i64 > 1 + i[1] as i64 { f64::NEG_INFINITY } else { v[0].at(i) },
                );
            masked.rows(|r| softmax(r, 1.0)).dot(&v[1])
        },
    });
}

/// Five one-hot rows of four classes (row n: class (3n) % 4), one with two halves.
const ONE_HOT: [f32; 20] = [1., 0., 0., 0., 0., 0., 0., 1., 0., 0., 1., 0., 0., 1., 0., 0., 0.5, 0., 0., 0.5];

#[test]
fn a_classifier_loss_and_get_rows() {
    check(&Case {
        name: "cross_entropy_loss of a linear layer",
        params: vec![p([6, 4, 1, 1]), p([4, 1, 1, 1]), p([6, 5, 1, 1])],
        graph: |c, p| {
            let logits = c.add(c.mul_mat(p[0], p[2]).unwrap(), p[1]).unwrap();
            let labels = c.new_f32(&[4, 5], &ONE_HOT).unwrap();
            c.cross_entropy_loss(logits, labels).unwrap()
        },
        f64_loss: |v| {
            let logits = T::mul_mat(&v[0], &v[2]).zip(&v[1], |a, b| a + b);
            let mut loss = 0.0;
            for (row, labels) in logits.v.chunks(4).zip(ONE_HOT.chunks(4)) {
                let lsm = softmax(row, 1.0).into_iter().map(f64::ln);
                loss -= lsm.zip(labels).map(|(l, &t)| l * t as f64).sum::<f64>();
            }
            loss / 5.0
        },
    });
}

#[test]
fn get_rows_with_a_repeated_index() {
    check(&Case {
        name: "get_rows (rows 2 and 0 picked twice)",
        params: vec![p([4, 6, 1, 1]), p([4, 6, 1, 1])],
        graph: |c, p| {
            let idx = c.new_tensor_1d(rgml::DType::I32, 6).unwrap();
            c.set_data(idx, &[2i32, 0, 2, 5, 1, 0]).unwrap();
            dot(c, c.get_rows(p[0], idx).unwrap(), p[1])
        },
        f64_loss: |v| {
            let rows = [2, 0, 2, 5, 1, 0];
            T::from_fn([4, 6, 1, 1], |[i0, i1, _, _]| v[0].at([i0, rows[i1], 0, 0])).dot(&v[1])
        },
    });
}

#[test]
fn views_and_shape_ops() {
    check(&Case {
        name: "transpose, reshape, permute, partial view, swiglu halves, concat, repeat, expand",
        params: vec![p([6, 4, 1, 1]), p([6, 4, 1, 1]), p([6, 1, 1, 1]), p([6, 4, 1, 1])],
        graph: |c, p| {
            let (x, y, b, w) = (p[0], p[1], p[2], p[3]);
            let nb1 = c.layout(x).unwrap().nb[1];
            let t = c.cont(c.transpose(x).unwrap()).unwrap(); // [4, 6]
            let r = c.permute(c.reshape(t, &[4, 3, 2]).unwrap(), [1, 0, 2, 3]).unwrap(); // [3, 4, 2]
            let wr = c.reshape(w, &[3, 4, 2]).unwrap();
            let v = c.view_2d(x, 3, 4, nb1, 8).unwrap(); // elements 2..5 of each row
            let terms = [
                dot(c, c.cont(r).unwrap(), wr),
                dot(c, v, c.view_2d(w, 3, 4, nb1, 0).unwrap()),
                dot(c, c.swiglu(y).unwrap(), c.view_2d(w, 3, 4, nb1, 12).unwrap()),
                c.sum(c.mul(c.concat(x, y, 1).unwrap(), c.concat(w, w, 1).unwrap()).unwrap()).unwrap(),
                dot(c, c.repeat(b, x).unwrap(), w),
                dot(c, c.expand(b, [6, 4, 1, 1]).unwrap(), y),
            ];
            add_all(c, &terms)
        },
        f64_loss: |v| {
            let (x, y, b, w) = (&v[0], &v[1], &v[2], &v[3]);
            // cont(transpose(x)) [4, 6] reshaped [4, 3, 2], permuted to [3, 4, 2]: r[j, i, k] = t[i + 4(j + 3k)]
            let t = T::from_fn([4, 6, 1, 1], |[i0, i1, _, _]| x.at([i1, i0, 0, 0]));
            let r = T::from_fn([3, 4, 2, 1], |[j, i, k, _]| t.v[i + 4 * (j + 3 * k)]);
            let wr = T { ne: [3, 4, 2, 1], v: w.v.clone() };
            let view = T::from_fn([3, 4, 1, 1], |[i0, i1, _, _]| x.at([i0 + 2, i1, 0, 0]));
            let w0 = T::from_fn([3, 4, 1, 1], |[i0, i1, _, _]| w.at([i0, i1, 0, 0]));
            let sw = T::from_fn([3, 4, 1, 1], |[i0, i1, _, _]| silu(y.at([i0, i1, 0, 0])) * y.at([i0 + 3, i1, 0, 0]));
            let w3 = T::from_fn([3, 4, 1, 1], |[i0, i1, _, _]| w.at([i0 + 3, i1, 0, 0]));
            let cat = x.dot(w) + y.dot(w);
            let rep = x.map(|_| 0.0).zip(b, |_, b| b);
            r.dot(&wr) + view.dot(&w0) + sw.dot(&w3) + cat + rep.dot(w) + rep.dot(y)
        },
    });
}

const POSITIONS: [i32; 4] = [0, 3, 7, 11];

/// ggml's rope of `x` (`[8, 3, 4]`: head dim 8, 3 heads, 4 tokens) in f64, the
/// first `n_dims` values of each row rotated, pairs adjacent or NeoX's halves.
fn rope_f64(x: &T, n_dims: usize, neox: bool) -> T {
    let mut y = x.clone();
    for (t, &pos) in POSITIONS.iter().enumerate().take(x.ne[2]) {
        for h in 0..x.ne[1] {
            for k in 0..n_dims / 2 {
                let theta = pos as f64 * 10000f64.powf(-2.0 * k as f64 / n_dims as f64);
                let (j0, j1) = if neox { (k, k + n_dims / 2) } else { (2 * k, 2 * k + 1) };
                let (x0, x1) = (x.at([j0, h, t, 0]), x.at([j1, h, t, 0]));
                let base = x.ne[0] * (h + x.ne[1] * t);
                y.v[base + j0] = x0 * theta.cos() - x1 * theta.sin();
                y.v[base + j1] = x0 * theta.sin() + x1 * theta.cos();
            }
        }
    }
    y
}

#[test]
fn rope_normal_and_neox() {
    check(&Case {
        name: "rope (normal and NeoX, 6 of 8 values rotated)",
        params: vec![p([8, 3, 4, 1]), p([8, 3, 4, 1])],
        graph: |c, p| {
            let pos = c.new_tensor_1d(rgml::DType::I32, 4).unwrap();
            c.set_data(pos, &POSITIONS).unwrap();
            let terms: Vec<TensorId> = [rgml::RopeParams::NORMAL, rgml::RopeParams::NEOX]
                .into_iter()
                .map(|mode| dot(c, c.rope_with(p[0], pos, None, rgml::RopeParams::new(6, mode)).unwrap(), p[1]))
                .collect();
            add_all(c, &terms)
        },
        f64_loss: |v| rope_f64(&v[0], 6, false).dot(&v[1]) + rope_f64(&v[0], 6, true).dot(&v[1]),
    });
}

#[test]
fn a_copy_into_another_shape() {
    check(&Case {
        name: "cont_reshape of a permuted tensor",
        params: vec![p([3, 4, 2, 1]), p([6, 4, 1, 1])],
        graph: |c, p| {
            // the permuted [3, 2, 4] copied in logical order into rows of 6
            let r = c.cont_reshape(c.permute(p[0], [0, 2, 1, 3]).unwrap(), &[6, 4]).unwrap();
            dot(c, c.mul(r, r).unwrap(), p[1])
        },
        f64_loss: |v| {
            let y = T::from_fn([3, 2, 4, 1], |[i0, i1, i2, _]| v[0].at([i0, i2, i1, 0]));
            y.v.iter().zip(&v[1].v).map(|(a, w)| a * a * w).sum()
        },
    });
}

/// The gradient of `x` through a product with a frozen Q8_0 weight (dequantized
/// for the transposed product) against f64 sums over the weight's dequantized values.
#[test]
fn through_a_frozen_quantized_weight() {
    let (k, m, n) = (64usize, 5usize, 3usize);
    let mut rng = Rng(11);
    let w: Vec<f32> = (0..k * m).map(|_| rng.f(1.0)).collect();
    let x: Vec<f32> = (0..k * n).map(|_| rng.f(1.0)).collect();
    let t: Vec<f32> = (0..m * n).map(|_| rng.f(1.0)).collect();
    let mut ctx = Context::new();
    let wf = ctx.new_f32(&[k as i64, m as i64], &w).unwrap();
    let xp = ctx.new_f32(&[k as i64, n as i64], &x).unwrap();
    ctx.set_param(xp).unwrap();
    let tt = ctx.new_f32(&[m as i64, n as i64], &t).unwrap();
    let wq = ctx.cast(wf, rgml::DType::Q8_0).unwrap();
    let loss = dot(&ctx, ctx.mul_mat(wq, xp).unwrap(), tt);
    let g = ctx.backward(loss, &[xp]).unwrap().get(xp).unwrap();
    let graph = Graph::build(&ctx, &[g]).unwrap();
    let got = CpuBackend::new(2).unwrap().run(&ctx, &graph).unwrap().read_f32(&ctx, g).unwrap();
    // the weight's Q8_0 values, row by row
    let mut deq = vec![0f32; k * m];
    for (src, dst) in w.chunks(k).zip(deq.chunks_mut(k)) {
        let mut q = vec![0u8; rgml::DType::Q8_0.row_size(k as i64).unwrap()];
        rgml::quant::quantize_chunk(rgml::DType::Q8_0, src, &mut q).unwrap();
        rgml::quant::dequantize_row(rgml::DType::Q8_0, &q, dst).unwrap();
    }
    for (kk, nn) in (0..k).flat_map(|kk| (0..n).map(move |nn| (kk, nn))) {
        let want: f64 = (0..m).map(|mm| deq[mm * k + kk] as f64 * t[nn * m + mm] as f64).sum();
        let a = got[nn * k + kk] as f64;
        assert!((a - want).abs() <= 1e-5 * want.abs().max(1.0), "∂x[{kk}, {nn}]: {a} against {want}");
    }
}
