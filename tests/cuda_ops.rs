//! Op tests written once and run on every device: each case builds a small
//! graph, runs it on the CPU (always) and on CUDA device 0 when one is
//! present, and compares the CUDA results with the CPU's. Without a device
//! the CUDA half prints `SKIP: …` and the tests pass; with
//! `RGML_REQUIRE_CUDA=1` a missing device is a failure.

use rgml::{bf16, f16, Context, CpuBackend, CudaBackend, DType, Error, Graph, RopeParams, TensorId, UnaryOp};

/// xorshift64*: deterministic test data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in `[-r, r)`.
    fn f(&mut self, r: f32) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * r
    }
    fn vec(&mut self, n: usize, r: f32) -> Vec<f32> {
        (0..n).map(|_| self.f(r)).collect()
    }
}

fn leaf(ctx: &mut Context, rng: &mut Rng, ne: &[i64], r: f32) -> TensorId {
    let n = ne.iter().product::<i64>() as usize;
    ctx.new_f32(ne, &rng.vec(n, r)).unwrap()
}

fn cuda() -> Option<CudaBackend> {
    match CudaBackend::new(0) {
        Ok(b) => Some(b),
        Err(e) => {
            assert!(matches!(e, Error::Unavailable { .. }), "CudaBackend::new must fail with Unavailable: {e}");
            if std::env::var("RGML_REQUIRE_CUDA").is_ok_and(|v| v == "1") {
                panic!("RGML_REQUIRE_CUDA=1 but {e}");
            }
            println!("SKIP: CUDA: {e}");
            None
        }
    }
}

/// Builds a graph with `build`, runs it on the CPU and (when present) CUDA,
/// and checks that CUDA's outputs match the CPU's within `tol` (relative to
/// `1 + |cpu|`; NaN matches NaN, infinities match exactly).
fn check(name: &str, tol: f32, build: impl FnOnce(&mut Context) -> Vec<TensorId>) {
    let mut ctx = Context::new();
    let outs = build(&mut ctx);
    let graph = Graph::build(&ctx, &outs).unwrap();
    let cpu = CpuBackend::new(2).unwrap().run(&ctx, &graph).unwrap();
    let want: Vec<Vec<f32>> = outs.iter().map(|&o| cpu.read_f32(&ctx, o).unwrap()).collect();
    let Some(gpu) = cuda() else { return };
    let st = gpu.run(&ctx, &graph).unwrap_or_else(|e| panic!("{name}: CUDA run failed: {e}"));
    for (k, (&o, w)) in outs.iter().zip(&want).enumerate() {
        let got = st.read_f32(&ctx, o).unwrap();
        assert_eq!(got.len(), w.len(), "{name} output {k}: length");
        for (i, (&g, &c)) in got.iter().zip(w).enumerate() {
            let ok = (g.is_nan() && c.is_nan()) || g == c || (g - c).abs() <= tol * (1.0 + c.abs());
            assert!(ok, "{name} output {k}[{i}]: cuda {g} vs cpu {c}");
        }
    }
    println!("ok: {name} on {gpu:?}");
}

#[test]
fn new_is_unavailable_or_works_never_panics() {
    match CudaBackend::new(0) {
        Ok(b) => println!("CUDA device: {b:?}"),
        Err(e) => {
            let msg = e.to_string();
            assert!(matches!(e, Error::Unavailable { .. }), "{msg}");
            assert!(msg.contains("LD_LIBRARY_PATH") || msg.contains("device"), "{msg}");
            println!("SKIP: {msg}");
        }
    }
    // an ordinal far out of range is an error too, never a panic
    assert!(CudaBackend::new(1 << 20).is_err());
}

#[test]
fn binary_broadcast_and_strided() {
    check("binary", 1e-6, |ctx| {
        let mut rng = Rng(1);
        let a = leaf(ctx, &mut rng, &[7, 5, 3, 2], 2.0);
        let b = leaf(ctx, &mut rng, &[7, 1, 3, 1], 2.0);
        let c = leaf(ctx, &mut rng, &[7, 5, 3, 2], 2.0);
        let at = leaf(ctx, &mut rng, &[5, 7, 3, 2], 2.0);
        let at = ctx.transpose(at).unwrap();
        let b3 = ctx.scale(b, 3.0).unwrap();
        vec![ctx.add(a, b).unwrap(), ctx.sub(a, c).unwrap(), ctx.mul(at, b).unwrap(), ctx.div(a, b3).unwrap()]
    });
}

#[test]
fn unary_and_scale() {
    check("unary", 1e-5, |ctx| {
        let mut rng = Rng(2);
        let a = leaf(ctx, &mut rng, &[33, 4, 3, 1], 3.0);
        let p = ctx.permute(a, [2, 0, 1, 3]).unwrap();
        let mut outs = Vec::new();
        for op in UnaryOp::ALL {
            let x = if op == UnaryOp::Sqrt { ctx.unary(UnaryOp::Sqr, a, false).unwrap() } else { a };
            outs.push(ctx.unary(op, x, false).unwrap());
        }
        outs.push(ctx.unary(UnaryOp::Gelu, p, false).unwrap());
        outs.push(ctx.scale(p, -0.25).unwrap());
        outs
    });
}

#[test]
fn copies_and_conversions() {
    check("copy", 0.0, |ctx| {
        let mut rng = Rng(3);
        let a = leaf(ctx, &mut rng, &[9, 6, 2, 1], 4.0);
        let t = ctx.transpose(a).unwrap();
        let h = ctx.new_tensor(DType::F16, &[6, 9, 2, 1]).unwrap();
        let bf = ctx.new_tensor(DType::BF16, &[108]).unwrap();
        let f = ctx.new_tensor(DType::F32, &[108]).unwrap();
        let to_h = ctx.cpy(t, h).unwrap();
        let to_bf = ctx.cpy(to_h, bf).unwrap();
        let back = ctx.cpy(to_bf, f).unwrap();
        vec![ctx.cont(t).unwrap(), to_h, back]
    });
    let _ = (f16::ONE, bf16::ONE);
}

#[test]
fn reductions_and_norms() {
    check("norms", 1e-5, |ctx| {
        let mut rng = Rng(4);
        let a = leaf(ctx, &mut rng, &[300, 5, 2, 1], 1.0);
        let t = leaf(ctx, &mut rng, &[5, 40, 2, 1], 1.0);
        let t = ctx.transpose(t).unwrap();
        vec![
            ctx.sum_rows(a).unwrap(),
            ctx.sum_rows(t).unwrap(),
            ctx.rms_norm(a, 1e-6).unwrap(),
            ctx.rms_norm(t, 1e-5).unwrap(),
            ctx.norm(a, 1e-5).unwrap(),
        ]
    });
}

#[test]
fn softmax_mask_alibi_and_diag_mask() {
    check("soft_max", 1e-5, |ctx| {
        let mut rng = Rng(5);
        let a = leaf(ctx, &mut rng, &[37, 4, 6, 1], 3.0);
        let mask = leaf(ctx, &mut rng, &[37, 4, 1, 1], 1.0);
        let masked = ctx.diag_mask_inf(a, 2).unwrap();
        vec![
            ctx.soft_max_ext(a, None, 1.0, 0.0).unwrap(),
            ctx.soft_max_ext(a, Some(mask), 0.5, 0.0).unwrap(),
            ctx.soft_max_ext(a, Some(mask), 0.25, 8.0).unwrap(),
            masked,
            ctx.soft_max_ext(masked, None, 1.0, 0.0).unwrap(),
        ]
    });
}

#[test]
fn rope_normal_neox_yarn() {
    check("rope", 2e-4, |ctx| {
        let mut rng = Rng(6);
        let a = leaf(ctx, &mut rng, &[64, 3, 5, 1], 1.0);
        let pos = ctx.new_tensor(DType::I32, &[5]).unwrap();
        ctx.set_data(pos, &[0i32, 1, 7, 100, 2047]).unwrap();
        let ff = ctx.new_f32(&[24], &(0..24).map(|i| 1.0 + i as f32 * 0.1).collect::<Vec<_>>()).unwrap();
        vec![
            ctx.rope(a, pos, 64, RopeParams::NORMAL).unwrap(),
            ctx.rope(a, pos, 48, RopeParams::NEOX).unwrap(),
            ctx.rope_ext(a, pos, Some(ff), 48, RopeParams::NEOX, 4096, 10000.0, 0.25, 1.0, 1.0, 32.0, 1.0).unwrap(),
            ctx.rope_ext(a, pos, None, 64, RopeParams::NORMAL, 2048, 500000.0, 0.5, 0.5, 0.9, 32.0, 1.0).unwrap(),
        ]
    });
}

#[test]
fn get_rows_plain_and_quantized_set_rows() {
    check("rows", 1e-6, |ctx| {
        let mut rng = Rng(7);
        let table = leaf(ctx, &mut rng, &[64, 10, 1, 1], 2.0);
        let idx = ctx.new_tensor(DType::I32, &[4]).unwrap();
        ctx.set_data(idx, &[3i32, 0, 9, 3]).unwrap();
        let mut outs = vec![ctx.get_rows(table, idx).unwrap()];
        for dt in [DType::F16, DType::Q4_0, DType::Q8_0] {
            let vals = rng.vec(64 * 10, 2.0);
            let q = ctx.new_tensor(dt, &[64, 10]).unwrap();
            let mut bytes = vec![0u8; ctx.layout(q).unwrap().nbytes()];
            rgml::quant::quantize_row(dt, &vals, &mut bytes).unwrap();
            ctx.set_bytes(q, &bytes).unwrap();
            outs.push(ctx.get_rows(q, idx).unwrap());
        }
        let dst = leaf(ctx, &mut rng, &[64, 10, 1, 1], 1.0);
        let src = leaf(ctx, &mut rng, &[64, 3, 1, 1], 1.0);
        let at = ctx.new_tensor(DType::I32, &[3]).unwrap();
        ctx.set_data(at, &[8i32, 1, 4]).unwrap();
        outs.push(ctx.set_rows(dst, src, at).unwrap());
        outs
    });
}

#[test]
fn mul_mat_f32_f16_broadcast_and_transposed() {
    check("mul_mat", 1e-4, |ctx| {
        let mut rng = Rng(8);
        let a = leaf(ctx, &mut rng, &[40, 12, 2, 1], 1.0);
        let b = leaf(ctx, &mut rng, &[40, 7, 6, 2], 1.0);
        let bt = leaf(ctx, &mut rng, &[7, 40, 2, 1], 1.0);
        let bt = ctx.transpose(bt).unwrap();
        let h = ctx.new_tensor(DType::F16, &[40, 12, 2, 1]).unwrap();
        let hv: Vec<f16> = rng.vec(40 * 24, 1.0).into_iter().map(f16::from_f32).collect();
        ctx.set_data(h, &hv).unwrap();
        vec![ctx.mul_mat(a, b).unwrap(), ctx.mul_mat(a, bt).unwrap(), ctx.mul_mat(h, b).unwrap()]
    });
}

/// Q8_0 weights: the CPU rounds the activations through Q8_0 like ggml; the
/// CUDA path does not yet (it multiplies dequantized weights with f32
/// activations), so the two agree only to Q8_0's activation rounding: each
/// activation moves by up to amax/254, ≈0.02 on these 64-term dot products.
#[test]
fn mul_mat_q8_0_within_activation_rounding() {
    check("mul_mat q8_0", 5e-2, |ctx| {
        let mut rng = Rng(18);
        let q = ctx.new_tensor(DType::Q8_0, &[64, 9]).unwrap();
        let mut qb = vec![0u8; ctx.layout(q).unwrap().nbytes()];
        rgml::quant::quantize_row(DType::Q8_0, &rng.vec(64 * 9, 1.0), &mut qb).unwrap();
        ctx.set_bytes(q, &qb).unwrap();
        let x = leaf(ctx, &mut rng, &[64, 5, 1, 1], 1.0);
        vec![ctx.mul_mat(q, x).unwrap()]
    });
}

#[test]
fn concat_and_repeat() {
    check("shape", 0.0, |ctx| {
        let mut rng = Rng(9);
        let a = leaf(ctx, &mut rng, &[5, 4, 3, 1], 1.0);
        let b = leaf(ctx, &mut rng, &[5, 2, 3, 1], 1.0);
        let c = leaf(ctx, &mut rng, &[4, 5, 3, 1], 1.0);
        let ct = ctx.transpose(c).unwrap();
        let r = leaf(ctx, &mut rng, &[5, 1, 3, 1], 1.0);
        let like = ctx.new_tensor(DType::F32, &[10, 4, 3, 2]).unwrap();
        vec![
            ctx.concat(a, b, 1).unwrap(),
            ctx.concat(a, ct, 0).unwrap(),
            ctx.concat(a, a, 3).unwrap(),
            ctx.repeat(r, like).unwrap(),
        ]
    });
}
