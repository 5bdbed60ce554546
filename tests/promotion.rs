//! Type promotion (`Context::promote`): `DType::promote` against PyTorch's
//! `torch.promote_types` table for every pair of rgml's types, written out
//! below; the binary ops built with promotion on give that type for every
//! pair in both operand orders (integer and F64 results refused, since the
//! kernels compute in f32) and the values of an f32 reference rounded to it;
//! with promotion off, ggml's rule (the first operand's type); and
//! `Graph::lint` finds the order-dependent mixed op.

use rgml::quant::{dequantize_row, has_quantizer, quantize_row};
use rgml::{BinaryOp, Context, CpuBackend, DType, Error, Graph, TensorId};

/// The plain types in the order of [`TORCH`]'s rows and columns.
const PLAIN: [DType; 8] =
    [DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8, DType::I16, DType::I32, DType::I64];

/// `torch.promote_types(PLAIN[i], PLAIN[j])`, as PyTorch answers it
/// (float32, float16, bfloat16, float64, int8, int16, int32, int64), checked
/// with torch 2.15.0.
const TORCH: [[DType; 8]; 8] = {
    use DType::*;
    [
        [F32, F32, F32, F64, F32, F32, F32, F32],
        [F32, F16, F32, F64, F16, F16, F16, F16],
        [F32, F32, BF16, F64, BF16, BF16, BF16, BF16],
        [F64, F64, F64, F64, F64, F64, F64, F64],
        [F32, F16, BF16, F64, I8, I16, I32, I64],
        [F32, F16, BF16, F64, I16, I16, I32, I64],
        [F32, F16, BF16, F64, I32, I32, I32, I64],
        [F32, F16, BF16, F64, I64, I64, I64, I64],
    ]
};

/// PyTorch's answer for any two of rgml's types: a quantized type takes part
/// as the F32 it computes as.
fn torch_promote(a: DType, b: DType) -> DType {
    let plain = |d: DType| if d.is_quantized() { DType::F32 } else { d };
    let idx = |d: DType| PLAIN.iter().position(|&p| p == plain(d)).unwrap();
    TORCH[idx(a)][idx(b)]
}

#[test]
fn promote_is_torch_promote_types_for_every_pair() {
    for a in DType::ALL {
        for b in DType::ALL {
            assert_eq!(a.promote(b), torch_promote(a, b), "promote({a}, {b})");
            assert_eq!(a.holds(b), a.promote(b) == a, "{a}.holds({b})");
        }
    }
    // the seeds' examples: long + float32 → float32, float32 + float64 → float64, int8 + int32 → int32
    assert_eq!(DType::I64.promote(DType::F32), DType::F32);
    assert_eq!(DType::F32.promote(DType::F64), DType::F64);
    assert_eq!(DType::I8.promote(DType::I32), DType::I32);
    assert_eq!(DType::F16.promote(DType::BF16), DType::F32);
}

/// Rows of [`N`] values (a whole block of every type), two of them in `a`.
const N: usize = 256;

/// A leaf of `dtype` with shape `[N, rows]` and the values it holds (as f32),
/// small integers for integer types, exactly representable ones for floats,
/// a quantized round trip for block types (zero bytes for types without a
/// quantizer, which read as zeros). `nonzero` keeps every value away from 0.
fn leaf(ctx: &mut Context, dtype: DType, rows: usize, seed: usize, nonzero: bool) -> (TensorId, Vec<f32>) {
    let n = N * rows;
    let raw: Vec<f32> = (0..n)
        .map(|i| {
            let k = ((i * 7 + seed * 13) % 17) as f32 - 8.0;
            let k = if nonzero && k == 0.0 { 5.0 } else { k };
            if dtype.category() == rgml::dtype::promote::Category::Int {
                k
            } else {
                k * 0.375
            }
        })
        .collect();
    let id = ctx.new_tensor(dtype, &[N as i64, rows as i64]).unwrap();
    let values = match dtype {
        DType::F32 => {
            ctx.set_data(id, &raw).unwrap();
            raw
        }
        DType::F16 => {
            ctx.set_data(id, &raw.iter().map(|&v| rgml::f16::from_f32(v)).collect::<Vec<_>>()).unwrap();
            raw
        }
        DType::BF16 => {
            ctx.set_data(id, &raw.iter().map(|&v| rgml::bf16::from_f32(v)).collect::<Vec<_>>()).unwrap();
            raw
        }
        DType::F64 => bytes_of(ctx, id, raw.iter().flat_map(|&v| (v as f64).to_le_bytes()).collect(), raw),
        DType::I8 => bytes_of(ctx, id, raw.iter().flat_map(|&v| (v as i8).to_le_bytes()).collect(), raw),
        DType::I16 => bytes_of(ctx, id, raw.iter().flat_map(|&v| (v as i16).to_le_bytes()).collect(), raw),
        DType::I32 => bytes_of(ctx, id, raw.iter().flat_map(|&v| (v as i32).to_le_bytes()).collect(), raw),
        DType::I64 => bytes_of(ctx, id, raw.iter().flat_map(|&v| (v as i64).to_le_bytes()).collect(), raw),
        q => {
            let mut bytes = vec![0u8; q.row_size(n as i64).unwrap()];
            if has_quantizer(q) {
                quantize_row(q, &raw, &mut bytes).unwrap();
            }
            ctx.set_bytes(id, &bytes).unwrap();
            let mut back = vec![0f32; n];
            dequantize_row(q, &bytes, &mut back).unwrap();
            back
        }
    };
    (id, values)
}

fn bytes_of(ctx: &mut Context, id: TensorId, bytes: Vec<u8>, values: Vec<f32>) -> Vec<f32> {
    ctx.set_bytes(id, &bytes).unwrap();
    values
}

/// `v` rounded to `dtype` (F32, F16 or BF16), as f32.
fn round_to(dtype: DType, v: f32) -> f32 {
    match dtype {
        DType::F32 => v,
        DType::F16 => rgml::f16::from_f32(v).to_f32(),
        DType::BF16 => rgml::bf16::from_f32(v).to_f32(),
        d => panic!("no rounding to {d}"),
    }
}

fn apply(op: BinaryOp, x: f32, y: f32) -> f32 {
    match op {
        BinaryOp::Add => x + y,
        BinaryOp::Sub => x - y,
        BinaryOp::Mul => x * y,
        BinaryOp::Div => x / y,
    }
}

/// Builds `a op b` (`a` of `ta`, `[N, 2]`; `b` of `tb`, `[N, 1]`, tiled) with
/// promotion `promote`, in place or not; runs it and checks its type and
/// values, or returns the build error.
fn check(op: BinaryOp, ta: DType, tb: DType, promote: bool, inplace: bool, cpu: &CpuBackend) -> Result<DType, Error> {
    let mut ctx = Context::new();
    ctx.promote(promote);
    let (a, va) = leaf(&mut ctx, ta, 2, 1, false);
    let (b, vb) = leaf(&mut ctx, tb, 1, 2, true);
    let c = ctx.binary(op, a, b, inplace)?;
    let dtype = ctx.layout(c).unwrap().dtype;
    let g = Graph::build(&ctx, &[c]).unwrap();
    let got = cpu.run(&ctx, &g).unwrap().read_f32(&ctx, c).unwrap();
    for (i, &g) in got.iter().enumerate() {
        let want = round_to(dtype, apply(op, va[i], vb[i % N]));
        assert_eq!(
            g.to_bits(),
            want.to_bits(),
            "{ta} {} {tb} (promote {promote}, inplace {inplace}) at {i}: {g} vs {want}",
            op.name()
        );
    }
    Ok(dtype)
}

#[test]
fn promoted_binary_ops_take_the_promoted_type_for_every_pair_both_orders() {
    let cpu = CpuBackend::new(1).unwrap();
    for ta in DType::ALL {
        for tb in DType::ALL {
            let want = torch_promote(ta, tb);
            // both orders of every pair are visited by the two loops
            for op in [BinaryOp::Add, BinaryOp::Mul, BinaryOp::Sub, BinaryOp::Div] {
                let got = check(op, ta, tb, true, false, &cpu);
                if want.is_float() {
                    assert_eq!(got.unwrap(), want, "{ta} {} {tb}", op.name());
                } else {
                    assert!(
                        matches!(got, Err(Error::Unsupported { dtype, .. }) if dtype == want),
                        "{ta} {} {tb}: {got:?}",
                        op.name()
                    );
                }
            }
        }
    }
}

#[test]
fn without_promotion_the_first_operand_decides_as_in_ggml() {
    let cpu = CpuBackend::new(1).unwrap();
    for ta in DType::ALL {
        for tb in DType::ALL {
            let got = check(BinaryOp::Add, ta, tb, false, false, &cpu);
            if ta.is_float() && tb.is_float() {
                assert_eq!(got.unwrap(), ta, "{ta} + {tb}");
            } else {
                assert!(matches!(got, Err(Error::Unsupported { .. })), "{ta} + {tb}: {got:?}");
            }
        }
    }
}

#[test]
fn in_place_ops_keep_the_destination_type_and_round_into_it() {
    let cpu = CpuBackend::new(1).unwrap();
    for ta in DType::ALL {
        for tb in DType::ALL {
            let got = check(BinaryOp::Add, ta, tb, true, true, &cpu);
            let want = ta.promote(tb);
            if ta.is_float() && want.is_float() {
                assert_eq!(got.unwrap(), ta, "{ta} += {tb}");
            } else {
                assert!(matches!(got, Err(Error::Unsupported { .. })), "{ta} += {tb}: {got:?}");
            }
        }
    }
}

#[test]
fn scale_and_unary_ops_compute_non_floats_as_f32_under_promotion() {
    let cpu = CpuBackend::new(1).unwrap();
    for t in [DType::I8, DType::I32, DType::I64, DType::Q4_0, DType::Q6_K] {
        let mut ctx = Context::new();
        let plain = ctx.new_tensor(t, &[N as i64]).unwrap();
        assert!(ctx.scale(plain, 2.0).is_err(), "{t} without promotion");
        ctx.promote(true);
        let (a, va) = leaf(&mut ctx, t, 1, 3, false);
        // a scalar never raises the type: the result is F32 from the cast, not from 2.5
        let s = ctx.scale(a, 2.5).unwrap();
        let n = ctx.neg(a).unwrap();
        assert_eq!((ctx.layout(s).unwrap().dtype, ctx.layout(n).unwrap().dtype), (DType::F32, DType::F32), "{t}");
        let g = Graph::build(&ctx, &[s, n]).unwrap();
        let st = cpu.run(&ctx, &g).unwrap();
        let want_s: Vec<f32> = va.iter().map(|v| v * 2.5).collect();
        let want_n: Vec<f32> = va.iter().map(|v| -v).collect();
        assert_eq!(st.read_f32(&ctx, s).unwrap(), want_s, "{t}");
        assert_eq!(st.read_f32(&ctx, n).unwrap(), want_n, "{t}");
    }
    // a float keeps its type: F16 * 2.5 is F16 (PyTorch: a Python float does not widen a float16 tensor)
    let mut ctx = Context::new();
    ctx.promote(true);
    let h = ctx.new_tensor(DType::F16, &[4]).unwrap();
    assert_eq!(ctx.layout(ctx.scale(h, 2.5).unwrap()).unwrap().dtype, DType::F16);
}

#[test]
fn lint_finds_the_mixed_op_that_depends_on_operand_order() {
    let mut ctx = Context::new();
    let h = ctx.new_tensor(DType::F16, &[8]).unwrap();
    let f = ctx.new_tensor(DType::F32, &[8]).unwrap();
    let bf = ctx.new_tensor(DType::BF16, &[8]).unwrap();
    let hf = ctx.add(h, f).unwrap(); // F16: rounds f
    ctx.set_name(hf, "h_plus_f").unwrap();
    let fh = ctx.add(f, h).unwrap(); // F32: holds h
    let hb = ctx.mul(h, bf).unwrap(); // F16: rounds bf
    let bh = ctx.mul(bf, h).unwrap(); // BF16: rounds h
    let same = ctx.add(f, f).unwrap();
    let g = Graph::build(&ctx, &[hf, fh, hb, bh, same]).unwrap();
    let found: Vec<(TensorId, TensorId, DType, DType)> =
        g.lint(&ctx).unwrap().iter().map(|w| (w.node, w.operand, w.operand_type, w.result)).collect();
    assert_eq!(
        found,
        vec![(hf, f, DType::F32, DType::F16), (hb, bf, DType::BF16, DType::F16), (bh, h, DType::F16, DType::BF16),]
    );
    let text = g.lint(&ctx).unwrap()[0].to_string();
    assert!(text.contains("h_plus_f") && text.contains("f32") && text.contains("promote"), "{text}");

    // built with promotion, the same sums have nothing to report (the casts are explicit nodes)
    let mut ctx = Context::new();
    ctx.promote(true);
    let h = ctx.new_tensor(DType::F16, &[8]).unwrap();
    let f = ctx.new_tensor(DType::F32, &[8]).unwrap();
    let bf = ctx.new_tensor(DType::BF16, &[8]).unwrap();
    let hf = ctx.add(h, f).unwrap();
    let hb = ctx.mul(h, bf).unwrap();
    assert_eq!((ctx.layout(hf).unwrap().dtype, ctx.layout(hb).unwrap().dtype), (DType::F32, DType::F32));
    let g = Graph::build(&ctx, &[hf, hb]).unwrap();
    assert_eq!(g.lint(&ctx).unwrap(), vec![]);
}
