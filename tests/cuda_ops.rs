//! Op tests written once and run on every device: each case builds a small
//! graph, runs it on the CPU (always) and on CUDA device 0 when one is
//! present, and compares the CUDA results with the CPU's. Without a device
//! the CUDA half prints `SKIP: …` and the tests pass; with
//! `RGML_REQUIRE_CUDA=1` a missing device is a failure.

#![cfg(feature = "cuda")]

mod common;
#[path = "cuda_ops/moe.rs"]
mod moe;
#[path = "common/on_cuda.rs"]
mod on_cuda;
use common::{cuda, leaf, Rng};
use on_cuda::check_on_cuda as check;
use rgml::{
    bf16, f16, Backend, BackendStorage, Context, CpuBackend, CudaBackend, DType, Error, GluOp, Graph, RopeParams,
    UnaryOp,
};

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

/// GELU is rounded to f16 on both (ggml's CPU table): a last-bit difference of the
/// devices' tanhf can put the two one f16 step (2^-10 relative) apart.
const GELU_TOL: f32 = 1.0 / 1024.0;

#[test]
fn unary_and_scale() {
    check("unary", 1e-5, |ctx| {
        let mut rng = Rng(2);
        let a = leaf(ctx, &mut rng, &[33, 4, 3, 1], 3.0);
        let p = ctx.permute(a, [2, 0, 1, 3]).unwrap();
        let mut outs = Vec::new();
        for op in UnaryOp::ALL.into_iter().filter(|&op| op != UnaryOp::Gelu) {
            let x = if op == UnaryOp::Sqrt { ctx.unary(UnaryOp::Sqr, a, false).unwrap() } else { a };
            outs.push(ctx.unary(op, x, false).unwrap());
        }
        outs.push(ctx.scale(p, -0.25).unwrap());
        outs
    });
    check("gelu", GELU_TOL, |ctx| {
        let mut rng = Rng(2);
        let a = leaf(ctx, &mut rng, &[33, 4, 3, 1], 3.0);
        let p = ctx.permute(a, [2, 0, 1, 3]).unwrap();
        vec![ctx.unary(UnaryOp::Gelu, a, false).unwrap(), ctx.unary(UnaryOp::Gelu, p, false).unwrap()]
    });
}

/// The gated linear units: split operands (one transposed), the halves of
/// one tensor, F16 operands; geglu within one f16 step of GELU.
#[test]
fn glu_split_halves_and_types() {
    check("swiglu", 1e-5, |ctx| {
        let mut rng = Rng(21);
        let a = leaf(ctx, &mut rng, &[33, 6, 2, 1], 8.0);
        let bt = leaf(ctx, &mut rng, &[6, 33, 2, 1], 2.0);
        let bt = ctx.transpose(bt).unwrap();
        let h = leaf(ctx, &mut rng, &[2 * 17, 5, 3, 1], 8.0);
        let (a16, b16) =
            (ctx.new_tensor(DType::F16, &[33, 6, 2, 1]).unwrap(), ctx.new_tensor(DType::F16, &[33, 6, 2, 1]).unwrap());
        let (ca, cb) = (ctx.cpy(a, a16).unwrap(), ctx.cpy(bt, b16).unwrap());
        vec![
            ctx.swiglu_split(a, bt).unwrap(),
            ctx.swiglu(h).unwrap(),
            ctx.glu(GluOp::Swiglu, h, true).unwrap(),
            ctx.swiglu_split(ca, cb).unwrap(),
            // gpt-oss's clamped form: gates past 7 and values past ±7 in range (a is ±8, bt ±2·4)
            ctx.glu_split(GluOp::SwigluOai, a, ctx.scale(bt, 4.0).unwrap()).unwrap(),
        ]
    });
    check("geglu", GELU_TOL, |ctx| {
        let mut rng = Rng(22);
        let mut v = rng.vec(33 * 6, 12.0);
        v[..4].copy_from_slice(&[-10.0, 10.0, -10.5, 10.5]);
        let a = ctx.new_f32(&[33, 6], &v).unwrap();
        let b = leaf(ctx, &mut rng, &[33, 6], 2.0);
        let h = leaf(ctx, &mut rng, &[2 * 17, 5, 3, 1], 8.0);
        vec![ctx.geglu_split(a, b).unwrap(), ctx.geglu(h).unwrap()]
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
        // a weight row, and one per row of the transposed input, broadcast
        let w = leaf(ctx, &mut rng, &[300, 1, 1, 1], 2.0);
        let wt = leaf(ctx, &mut rng, &[40, 5, 1, 1], 2.0);
        // matrices for argmax: one plain, one transposed
        let m = leaf(ctx, &mut rng, &[37, 6, 1, 1], 1.0);
        let m7 = leaf(ctx, &mut rng, &[7, 29, 1, 1], 1.0);
        let mt = ctx.transpose(m7).unwrap();
        vec![
            ctx.sum_rows(a).unwrap(),
            ctx.sum_rows(t).unwrap(),
            ctx.sum(a).unwrap(),
            ctx.sum(t).unwrap(),
            ctx.mean(a).unwrap(),
            ctx.mean(t).unwrap(),
            ctx.argmax(m).unwrap(),
            ctx.argmax(mt).unwrap(),
            {
                // argmax of a transposed matrix and of its packed copy: the same
                let packed = ctx.cont(mt).unwrap();
                let (x, y) = (ctx.argmax(mt).unwrap(), ctx.argmax(packed).unwrap());
                ctx.count_equal(x, y).unwrap()
            },
            {
                let labels = ctx.scale(ctx.exp(m).unwrap(), 0.05).unwrap();
                ctx.cross_entropy_loss(m, labels).unwrap()
            },
            ctx.rms_norm(a, 1e-6).unwrap(),
            ctx.rms_norm(t, 1e-5).unwrap(),
            ctx.rms_norm_mul(a, w, 1e-6).unwrap(),
            ctx.rms_norm_mul(t, wt, 1e-5).unwrap(),
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
        // rows starting 4 bytes in: pairs not 8-byte aligned (element loads, not float2)
        let odd = ctx.view_3d(a, [62, 3, 5], 64 * 4, 3 * 64 * 4, 4).unwrap();
        vec![
            ctx.rope(a, pos, 64, RopeParams::NORMAL).unwrap(),
            ctx.rope(odd, pos, 60, RopeParams::NORMAL).unwrap(),
            ctx.rope(a, pos, 48, RopeParams::NEOX).unwrap(),
            ctx.rope_ext(a, pos, Some(ff), 48, RopeParams::NEOX, 4096, 10000.0, 0.25, 1.0, 1.0, 32.0, 1.0).unwrap(),
            ctx.rope_ext(a, pos, None, 64, RopeParams::NORMAL, 2048, 500000.0, 0.5, 0.5, 0.9, 32.0, 1.0).unwrap(),
        ]
    });
}

/// Rope keeps its angles in dynamic shared memory (n_dims/2 floats): past
/// 48 KiB (n_dims 24576) the kernel opts in to more; past the device's
/// limit (227 KiB on an H100/H200) CUDA refuses with a clear error.
#[test]
fn rope_past_48_kib_of_angles() {
    check("rope wide", 2e-4, |ctx| {
        let mut rng = Rng(61);
        let a = leaf(ctx, &mut rng, &[24_600, 1, 2, 1], 1.0);
        let pos = ctx.new_tensor(DType::I32, &[2]).unwrap();
        ctx.set_data(pos, &[3i32, 40]).unwrap();
        vec![ctx.rope(a, pos, 24_600, RopeParams::NEOX).unwrap()]
    });
    let Some(gpu) = cuda() else { return };
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[116_400, 1, 1, 1], &vec![0.5; 116_400]).unwrap();
    let pos = ctx.new_tensor(DType::I32, &[1]).unwrap();
    ctx.set_data(pos, &[1i32]).unwrap();
    let r = ctx.rope(a, pos, 116_400, RopeParams::NORMAL).unwrap();
    let graph = Graph::build(&ctx, &[r]).unwrap();
    assert!(CpuBackend::new(1).unwrap().run(&ctx, &graph).is_ok());
    let e = gpu.run(&ctx, &graph).expect_err("232800 bytes of angles do not fit");
    assert!(e.to_string().contains("shared memory"), "{e}");
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

// ---- fast paths (src/backend/cuda/fast.rs) and their edges ----
//
// Copies and conversions must match the CPU bit for bit (tolerance 0; NaN
// matches any NaN since read_f32 goes through f32). The binary ops are one
// IEEE f32 operation per element on both devices, so they are compared
// exactly too; unary ops with transcendental functions get 1e-5.

/// Values that probe f16/bf16 rounding: ties to even, overflow to infinity,
/// subnormals, signed zeros, NaNs (quiet and signalling patterns), infinities.
fn special_values() -> Vec<f32> {
    let b = f32::from_bits;
    let mut v = vec![
        1.0 + 1.0 / 2048.0, // f16 tie between 1 and 1+2^-10: to even (1)
        1.0 + 3.0 / 2048.0, // f16 tie: to even (1+2^-9)
        -(1.0 + 1.0 / 2048.0),
        1.0 + 1.0 / 256.0, // bf16 tie: to even (1)
        1.0 + 3.0 / 256.0, // bf16 tie: to even (1+2^-6)
        65504.0,           // f16 max
        65519.0,           // below the f16 overflow tie: 65504
        65520.0,           // the f16 overflow tie: inf
        -1.0e6,            // f16 overflow: -inf
        f32::MAX,          // bf16 rounds to inf
        b(0x7f7f_7fff),    // bf16: just below the tie, stays finite
        5.960_464_5e-8,    // 2^-24: f16's smallest subnormal
        2.980_232_2e-8,    // 2^-25: f16 tie with 0, to even (0)
        4.470_348_4e-8,    // 1.5·2^-25 ... rounds up to 2^-24
        1.0e-40,           // f32 subnormal
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        b(0x7f80_0001), // signalling NaN pattern
        b(0xffc0_1234), // negative quiet NaN with payload
        b(0x7fff_ffff),
        0.1,
        -2.5,
        1234.567,
    ];
    let mut rng = Rng(77);
    v.extend(rng.vec(1000, 70000.0));
    v
}

#[test]
fn packed_copies_vectors_heads_and_tails() {
    check("packed copies", 0.0, |ctx| {
        let mut rng = Rng(20);
        let mut outs = Vec::new();
        let buf = leaf(ctx, &mut rng, &[1100, 1, 1, 1], 3.0);
        // n not a multiple of 4/16; src 0, 4, 8, 12 bytes off 16 (into aligned dst): widths 16, 4, 8, 4
        for (n, off) in [(1, 0), (3, 0), (4, 0), (17, 0), (1031, 0), (1029, 4), (1030, 8), (1027, 12), (5, 12)] {
            let v = ctx.view_1d(buf, n, off).unwrap();
            outs.push(ctx.dup(v).unwrap());
        }
        // dst and src both 4 bytes off: a 12-byte head, then 16-byte vectors; and dst off, src not
        let dbuf = ctx.new_tensor(DType::F32, &[1100]).unwrap();
        let dv = ctx.view_1d(dbuf, 1000, 4).unwrap();
        let sv = ctx.view_1d(buf, 1000, 4).unwrap();
        outs.push(ctx.cpy(sv, dv).unwrap());
        let dbuf2 = ctx.new_tensor(DType::F32, &[1100]).unwrap();
        let dv2 = ctx.view_1d(dbuf2, 1001, 8).unwrap();
        let sv2 = ctx.view_1d(buf, 1001, 0).unwrap();
        outs.push(ctx.cpy(sv2, dv2).unwrap());
        // 2-byte elements 2 and 6 bytes off: 2-byte vectors, or a head
        let h = ctx.new_tensor(DType::F16, &[600]).unwrap();
        let hv: Vec<f16> = rng.vec(600, 2.0).into_iter().map(f16::from_f32).collect();
        ctx.set_data(h, &hv).unwrap();
        for (n, off) in [(599, 2), (333, 6), (7, 14)] {
            let v = ctx.view_1d(h, n, off).unwrap();
            outs.push(ctx.dup(v).unwrap());
        }
        let hd = ctx.new_tensor(DType::F16, &[600]).unwrap();
        let hdv = ctx.view_1d(hd, 590, 2).unwrap();
        let hsv = ctx.view_1d(h, 590, 2).unwrap();
        outs.push(ctx.cpy(hsv, hdv).unwrap());
        // a packed 4D tensor
        let a = leaf(ctx, &mut rng, &[5, 3, 7, 2], 1.0);
        outs.push(ctx.cont(a).unwrap());
        outs
    });
}

#[test]
fn packed_conversions_round_like_the_cpu() {
    check("packed conversions", 0.0, |ctx| {
        let vals = special_values();
        let n = vals.len() as i64;
        let src = ctx.new_f32(&[n], &vals).unwrap();
        let mut outs = Vec::new();
        for dt in [DType::F16, DType::BF16] {
            // src 0/4/8/12 bytes off 16, dst 0/2/4/6 bytes off 8; lengths not multiples of 4
            for (m, soff, doff) in [(n, 0, 0), (n - 1, 4, 0), (n - 3, 4, 6), (n - 2, 8, 4), (n - 5, 12, 2), (3, 0, 2)] {
                let s = ctx.view_1d(src, m, soff).unwrap();
                let d = ctx.new_tensor(dt, &[n + 8]).unwrap();
                let d = ctx.view_1d(d, m, doff).unwrap();
                let to = ctx.cpy(s, d).unwrap();
                outs.push(to);
                // and back to f32, at an offset too
                let f = ctx.new_tensor(DType::F32, &[n + 8]).unwrap();
                let f = ctx.view_1d(f, m, (soff + 4) % 16).unwrap();
                outs.push(ctx.cpy(to, f).unwrap());
            }
        }
        // a 2D packed conversion
        let s2 = ctx.view_2d(src, 13, (n / 13) - 1, 13 * 4, 0).unwrap();
        let d2 = ctx.new_tensor(DType::BF16, &[13, (n / 13) - 1]).unwrap();
        outs.push(ctx.cpy(s2, d2).unwrap());
        outs
    });
}

#[test]
fn transposing_copies_tile_edges_and_types() {
    check("transposing copies", 0.0, |ctx| {
        let mut rng = Rng(21);
        let mut outs = Vec::new();
        // non-square, not multiples of 32; exact multiples; one tile; thin
        for ne in [[37, 45], [64, 32], [32, 32], [1, 70], [70, 2], [33, 1000]] {
            let x = leaf(ctx, &mut rng, &[ne[0], ne[1], 1, 1], 10.0);
            let t = ctx.transpose(x).unwrap();
            outs.push(ctx.cont(t).unwrap());
        }
        // 3D/4D: the unit-stride dim at 2 and 3, the others on grid z
        let x = leaf(ctx, &mut rng, &[5, 33, 7, 2], 10.0);
        for axes in [[2, 0, 1, 3], [3, 0, 1, 2], [1, 0, 2, 3], [2, 1, 0, 3]] {
            let p = ctx.permute(x, axes).unwrap();
            outs.push(ctx.cont(p).unwrap());
        }
        // with conversion: f32 -> f16/bf16 (special values), f16 -> f32, i32 -> i32
        let vals = special_values();
        let sp = ctx.new_f32(&[26, 39], &vals[..26 * 39]).unwrap();
        let spt = ctx.transpose(sp).unwrap();
        for dt in [DType::F16, DType::BF16, DType::F32] {
            let d = ctx.new_tensor(dt, &[39, 26]).unwrap();
            outs.push(ctx.cpy(spt, d).unwrap());
        }
        let h = ctx.new_tensor(DType::F16, &[40, 35, 3]).unwrap();
        let hv: Vec<f16> = rng.vec(40 * 35 * 3, 100.0).into_iter().map(f16::from_f32).collect();
        ctx.set_data(h, &hv).unwrap();
        let ht = ctx.permute(h, [1, 0, 2, 3]).unwrap();
        outs.push(ctx.cont(ht).unwrap());
        let f = ctx.new_tensor(DType::F32, &[35, 40, 3]).unwrap();
        outs.push(ctx.cpy(ht, f).unwrap());
        let iv = ctx.new_tensor(DType::I32, &[9, 40]).unwrap();
        ctx.set_data(iv, &(0..360).map(|i| i * 1_000_003 - 7).collect::<Vec<i32>>()).unwrap();
        let it = ctx.transpose(iv).unwrap();
        outs.push(ctx.cont(it).unwrap());
        // a transposed view that starts 4 bytes into its buffer
        let buf = leaf(ctx, &mut rng, &[40 * 30 + 1], 5.0);
        let v = ctx.view_2d(buf, 40, 30, 40 * 4, 4).unwrap();
        let vt = ctx.transpose(v).unwrap();
        outs.push(ctx.cont(vt).unwrap());
        outs
    });
}

#[test]
fn binary_rows_broadcast_and_vectors() {
    check("binary rows", 0.0, |ctx| {
        let mut rng = Rng(22);
        let mut outs = Vec::new();
        for ne0 in [1, 7, 64, 1027, 4100] {
            let a = leaf(ctx, &mut rng, &[ne0, 6, 3, 2], 4.0);
            let row = leaf(ctx, &mut rng, &[ne0, 1, 1, 1], 4.0);
            let col = leaf(ctx, &mut rng, &[1, 6, 1, 1], 4.0);
            let tiled = leaf(ctx, &mut rng, &[ne0, 3, 1, 2], 4.0);
            let same = leaf(ctx, &mut rng, &[ne0, 6, 3, 2], 4.0);
            outs.push(ctx.add(a, row).unwrap());
            outs.push(ctx.div(a, col).unwrap());
            outs.push(ctx.mul(a, tiled).unwrap());
            outs.push(ctx.sub(a, same).unwrap());
        }
        // rows 4 bytes off 16 (scalar row path), and strided rows of a (row stride 260 bytes)
        let buf = leaf(ctx, &mut rng, &[65 * 9 + 1], 4.0);
        let row = leaf(ctx, &mut rng, &[64, 1, 1, 1], 4.0);
        let off = ctx.view_2d(buf, 64, 9, 64 * 4, 4).unwrap();
        outs.push(ctx.add(off, row).unwrap());
        let strided = ctx.view_2d(buf, 64, 9, 65 * 4, 0).unwrap();
        outs.push(ctx.mul(strided, row).unwrap());
        // packed same shape, misaligned: the scalar packed path
        let v1 = ctx.view_1d(buf, 401, 4).unwrap();
        let v2 = ctx.view_1d(buf, 401, 12).unwrap();
        outs.push(ctx.add(v1, v2).unwrap());
        outs
    });
}

#[test]
fn binary_in_place_packed_and_rows() {
    for (name, ne0, off) in [("aligned", 1024, 0), ("odd", 1027, 0), ("misaligned", 1024, 4)] {
        check(&format!("binary in place {name}"), 0.0, |ctx| {
            let mut rng = Rng(23);
            let n = ne0 * 5 + 4;
            let a = leaf(ctx, &mut rng, &[n], 3.0);
            let a2 = leaf(ctx, &mut rng, &[n], 3.0);
            let b = leaf(ctx, &mut rng, &[ne0, 5, 1, 1], 3.0);
            let row = leaf(ctx, &mut rng, &[ne0, 1, 1, 1], 3.0);
            let va = ctx.view_2d(a, ne0, 5, ne0 as usize * 4, off).unwrap();
            let va2 = ctx.view_2d(a2, ne0, 5, ne0 as usize * 4, off).unwrap();
            let m = ctx.mul_inplace(va, b).unwrap();
            let r = ctx.add_inplace(va2, row).unwrap();
            let s = ctx.scale_inplace(m, 0.5).unwrap();
            vec![s, r]
        });
    }
}

#[test]
fn unary_packed_vectors_and_tails() {
    check("unary packed", 1e-5, |ctx| {
        let mut rng = Rng(24);
        let mut outs = Vec::new();
        let buf = leaf(ctx, &mut rng, &[1040], 3.0);
        for (n, off) in [(1024, 0), (1030, 0), (3, 0), (1029, 4), (1021, 8)] {
            let v = ctx.view_1d(buf, n, off).unwrap();
            outs.push(ctx.unary(UnaryOp::Silu, v, false).unwrap());
            outs.push(ctx.unary(UnaryOp::Neg, v, false).unwrap());
            outs.push(ctx.scale(v, 1.75).unwrap());
        }
        let c = leaf(ctx, &mut rng, &[1031], 3.0);
        let s = ctx.unary(UnaryOp::Silu, c, true).unwrap();
        outs.push(ctx.unary(UnaryOp::Sqr, s, true).unwrap());
        outs
    });
    check("gelu packed", GELU_TOL, |ctx| {
        let mut rng = Rng(24);
        let buf = leaf(ctx, &mut rng, &[1040], 3.0);
        [(1024, 0), (1030, 0), (3, 0), (1029, 4), (1021, 8)]
            .into_iter()
            .map(|(n, off)| {
                let v = ctx.view_1d(buf, n, off).unwrap();
                ctx.unary(UnaryOp::Gelu, v, false).unwrap()
            })
            .collect()
    });
}

/// Leaves of 16 MiB and more go to the device through two pinned 8 MiB
/// staging buffers taken in turn: just under that (one plain copy), exactly
/// two buffers' worth, and three with a tail come back bit for bit, and a
/// graph computes on them.
#[test]
fn large_leaves_upload_through_pinned_staging() {
    let Some(gpu) = cuda() else { return };
    let mib = 1 << 20;
    for bytes in [16 * mib - 4, 16 * mib, 24 * mib + 4 * 1001] {
        let n = bytes / 4;
        let vals: Vec<f32> =
            (0..n).map(|i| f32::from_bits(0x3f80_0000 ^ (i as u32).wrapping_mul(2_654_435_761) >> 9)).collect();
        let mut ctx = Context::new();
        let x = ctx.new_f32(&[n as i64], &vals).unwrap();
        let y = ctx.scale(x, 2.0).unwrap();
        let g = Graph::build(&ctx, &[y]).unwrap();
        let st = gpu.run(&ctx, &g).unwrap();
        let back = st.read_f32(&ctx, x).unwrap();
        let same = back.iter().zip(&vals).all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same && back.len() == n, "{bytes} bytes did not come back");
        let doubled = st.read_f32(&ctx, y).unwrap();
        assert!(doubled.iter().zip(&vals).all(|(d, v)| *d == 2.0 * v), "{bytes} bytes: scale");
    }
}

#[test]
fn gradient_ops_and_a_backward_graph() {
    use rgml::TensorId;
    check("gradient ops", 1e-5, |ctx| {
        let mut rng = Rng(11);
        let x = leaf(ctx, &mut rng, &[37, 5, 2, 1], 2.0);
        let g = leaf(ctx, &mut rng, &[37, 5, 2, 1], 1.0);
        let xt = leaf(ctx, &mut rng, &[5, 37, 2, 1], 2.0);
        let xt = ctx.transpose(xt).unwrap();
        let idx = ctx.new_tensor_1d(DType::I32, 5).unwrap();
        ctx.set_data(idx, &[3i32, 0, 3, 6, 1]).unwrap();
        let g2 = leaf(ctx, &mut rng, &[37, 5, 1, 1], 1.0);
        let nb1 = ctx.layout(g2).unwrap().nb[1];
        let half = ctx.view_2d(g2, 18, 5, nb1, 8).unwrap();
        let mut outs: Vec<TensorId> = UnaryOp::ALL
            .iter()
            .filter(|&&op| op != UnaryOp::Sqrt)
            .map(|&op| ctx.unary_back(op, x, g).unwrap())
            .collect();
        let pos = ctx.sqr(x).unwrap();
        outs.extend([
            ctx.unary_back(UnaryOp::Sqrt, pos, g).unwrap(),
            ctx.unary_back(UnaryOp::Silu, xt, g).unwrap(),
            ctx.repeat_back(g, [37, 1, 2, 1]).unwrap(),
            ctx.repeat_back(xt, [1, 5, 1, 1]).unwrap(),
            ctx.get_rows_back(g2, idx, 7).unwrap(),
            ctx.rms_norm_back(x, g, 1e-5).unwrap(),
            ctx.rms_norm_back(xt, g, 1e-6).unwrap(),
            ctx.view_back(half, [37, 5, 1, 1], [4, nb1, 0, 0], 8).unwrap(),
        ]);
        // rope's gradient, normal and NeoX, with frequency factors
        let pos = ctx.new_tensor_1d(DType::I32, 2).unwrap();
        ctx.set_data(pos, &[5i32, 17]).unwrap();
        let ff = leaf(ctx, &mut rng, &[18, 1, 1, 1], 0.5);
        let one_and_a_half = ctx.new_f32(&[1], &[1.5]).unwrap();
        let ff = ctx.add(ff, one_and_a_half).unwrap();
        for mode in [RopeParams::NORMAL, RopeParams::NEOX] {
            let p = RopeParams::new(36, mode);
            outs.push(ctx.rope_back(x, pos, None, p).unwrap());
            outs.push(ctx.rope_back(xt, pos, Some(ff), p).unwrap());
        }
        outs
    });
    // a whole backward graph: an MLP's cross-entropy gradients and an AdamW step
    check("backward graph", 1e-5, |ctx| {
        let mut rng = Rng(12);
        let w1 = leaf(ctx, &mut rng, &[16, 12, 1, 1], 0.5);
        let w2 = leaf(ctx, &mut rng, &[12, 4, 1, 1], 0.5);
        let x = leaf(ctx, &mut rng, &[16, 9, 1, 1], 1.0);
        let labels = leaf(ctx, &mut rng, &[4, 9, 1, 1], 3.0);
        let labels = ctx.soft_max(labels).unwrap();
        let h = ctx.relu(ctx.mul_mat(w1, x).unwrap()).unwrap();
        let loss = ctx.cross_entropy_loss(ctx.mul_mat(w2, h).unwrap(), labels).unwrap();
        let grads = ctx.backward(loss, &[w1, w2]).unwrap();
        let (g1, g2) = (grads.get(w1).unwrap(), grads.get(w2).unwrap());
        let (m, v) = (ctx.new_tensor_2d(DType::F32, 16, 12).unwrap(), ctx.new_tensor_2d(DType::F32, 16, 12).unwrap());
        let hyper = ctx.new_f32(&[8], &rgml::grad::optim::AdamW::default().hyper(1)).unwrap();
        let step = ctx.opt_step_adamw(w1, g1, m, v, hyper).unwrap();
        vec![loss, g2, step]
    });
}

/// `to_device` in a split of CUDA and the CPU: the product follows its input
/// to the device and the scale comes back, the bits of the CPU's run, and the
/// one crossing a part needs is priced with its devices.
#[test]
fn transfers_move_work_between_cuda_and_the_cpu() {
    let Some(gpu) = cuda() else { return };
    let mut ctx = Context::new();
    let mut rng = Rng(9);
    let x = leaf(&mut ctx, &mut rng, &[32, 4], 1.0);
    let w = leaf(&mut ctx, &mut rng, &[32, 16], 1.0);
    let on_gpu = ctx.to_device(x, rgml::Device::Cuda(0)).unwrap();
    let h = ctx.mul_mat(w, on_gpu).unwrap();
    let back = ctx.to_device(h, rgml::Device::Cpu).unwrap();
    let y = ctx.scale(back, 0.5).unwrap();
    ctx.set_output(y).unwrap();
    let g = Graph::build(&ctx, &[y]).unwrap();
    let want = CpuBackend::new(1).unwrap().run(&ctx, &g).unwrap().read_f32(&ctx, y).unwrap();
    let sb = rgml::SplitBackend::new(vec![rgml::AnyBackend::cpu(1).unwrap(), rgml::AnyBackend::Cuda(gpu)]).unwrap();
    let st = sb.run(&ctx, &g).unwrap();
    assert_eq!(st.parts(), [(1, 2), (0, 2)]);
    let got = st.read_f32(&ctx, y).unwrap();
    let diff = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(diff <= 1e-5, "max abs diff {diff}");
    // staged through the CUDA backend's pinned memory
    let crossed: Vec<_> = st.transfers().iter().map(|t| (t.tensor, t.bytes, t.direction(), t.pinned)).collect();
    assert_eq!(crossed, [(h, 16 * 4 * 4, "d2h", true)]);
}
