//! Block types on CUDA against the CPU, for every block type rgml has:
//! dequantizing reads (`get_rows`, copies to F32/F16/BF16 from plain,
//! strided, transposed and permuted quantized views), quantizing copies into
//! Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q8_1, same-type block moves, `set_rows`
//! into block types, and the clean `Error::Unsupported` for k-quant
//! destinations. Results must agree bit for bit (quantized results are read
//! back dequantized on each side; the device's quantized bytes themselves are
//! compared with the CPU's in `backend::cuda::quant`'s unit tests).
//!
//! Without a device the CUDA half prints `SKIP: …` and the tests pass; with
//! `RGML_REQUIRE_CUDA=1` a missing device is a failure.

#![cfg(feature = "cuda")]

mod common;
use common::{cuda, Rng};
use rgml::{bf16, f16, Context, CpuBackend, DType, Error, Graph, TensorId};

/// The block types the CUDA backend reads: all of them.
fn all() -> Vec<DType> {
    DType::ALL.into_iter().filter(|t| t.is_quantized()).collect()
}
/// The block types CUDA quantizes into.
const WRITABLE: [DType; 6] = [DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q8_1];
/// The block types CUDA reads but does not quantize into.
fn unwritable() -> Vec<DType> {
    all().into_iter().filter(|t| !WRITABLE.contains(t)).collect()
}

/// `n` values uniform in `[-r, r)`, with a zero run, ties and a large value mixed in.
fn mixed(rng: &mut Rng, n: usize, r: f32) -> Vec<f32> {
    (0..n)
        .map(|i| match i % 97 {
            0..=31 if i < 97 => 0.0,
            40 => 1e4,
            50..=53 => (i % 4) as f32 * 0.5 - 1.0,
            _ => rng.f(r),
        })
        .collect()
}

fn f32_leaf(ctx: &mut Context, rng: &mut Rng, ne: &[i64]) -> TensorId {
    let n = ne.iter().product::<i64>() as usize;
    ctx.new_f32(ne, &mixed(rng, n, 3.0)).unwrap()
}

fn f16_leaf(ctx: &mut Context, rng: &mut Rng, ne: &[i64]) -> TensorId {
    let n = ne.iter().product::<i64>() as usize;
    let t = ctx.new_tensor(DType::F16, ne).unwrap();
    ctx.set_data(t, &mixed(rng, n, 3.0).into_iter().map(f16::from_f32).collect::<Vec<_>>()).unwrap();
    t
}

fn bf16_leaf(ctx: &mut Context, rng: &mut Rng, ne: &[i64]) -> TensorId {
    let n = ne.iter().product::<i64>() as usize;
    let t = ctx.new_tensor(DType::BF16, ne).unwrap();
    ctx.set_data(t, &mixed(rng, n, 3.0).into_iter().map(bf16::from_f32).collect::<Vec<_>>()).unwrap();
    t
}

/// A leaf of block type `dt` holding CPU-quantized random values (random
/// blocks for the types without a quantizer).
fn q_leaf(ctx: &mut Context, rng: &mut Rng, dt: DType, ne: &[i64]) -> TensorId {
    let n = ne.iter().product::<i64>() as usize;
    let t = ctx.new_tensor(dt, ne).unwrap();
    let mut bytes = vec![0u8; ctx.layout(t).unwrap().nbytes()];
    if rgml::quant::quantize_row(dt, &mixed(rng, n, 3.0), &mut bytes).is_err() {
        bytes = common::blocks::random_blocks(dt, bytes.len() / dt.type_size(), || rng.next());
    }
    ctx.set_bytes(t, &bytes).unwrap();
    t
}

/// Builds a graph with `build`, runs it on the CPU and (when present) CUDA,
/// and checks that every output's values agree bit for bit (any NaN matches
/// any NaN). Outputs of block types are read back dequantized on each side.
fn check(name: &str, build: impl FnOnce(&mut Context) -> Vec<TensorId>) {
    let mut ctx = Context::new();
    let outs = build(&mut ctx);
    let graph = Graph::build(&ctx, &outs).unwrap();
    let cpu = CpuBackend::new(2).unwrap().run(&ctx, &graph).unwrap();
    let want: Vec<Vec<f32>> = outs.iter().map(|&o| cpu.read_f32(&ctx, o).unwrap()).collect();
    let Some(gpu) = cuda() else { return };
    let st = gpu.run(&ctx, &graph).unwrap_or_else(|e| panic!("{name}: CUDA run failed: {e}"));
    for (k, (&o, w)) in outs.iter().zip(&want).enumerate() {
        let got = st.read_f32(&ctx, o).unwrap_or_else(|e| panic!("{name} output {k}: read_f32: {e}"));
        assert_eq!(got.len(), w.len(), "{name} output {k} ({}): length", ctx.label(o));
        for (i, (&g, &c)) in got.iter().zip(w).enumerate() {
            let ok = (g.is_nan() && c.is_nan()) || g.to_bits() == c.to_bits();
            assert!(ok, "{name} output {k} ({})[{i}]: cuda {g:e} vs cpu {c:e}", ctx.label(o));
        }
    }
    println!("ok: {name} on {gpu:?}");
}

/// The CPU runs the graph; CUDA must refuse it with `Error::Unsupported`.
fn check_unsupported(name: &str, build: impl FnOnce(&mut Context) -> Vec<TensorId>) {
    let mut ctx = Context::new();
    let outs = build(&mut ctx);
    let graph = Graph::build(&ctx, &outs).unwrap();
    CpuBackend::new(2).unwrap().run(&ctx, &graph).unwrap();
    let Some(gpu) = cuda() else { return };
    match gpu.run(&ctx, &graph) {
        Err(Error::Unsupported { .. }) => println!("ok: {name}: Unsupported on CUDA"),
        Err(e) => panic!("{name}: expected Error::Unsupported, got {e}"),
        Ok(_) => panic!("{name}: expected Error::Unsupported, the run succeeded"),
    }
}

#[test]
fn get_rows_of_every_block_type() {
    for (s, dt) in all().into_iter().enumerate() {
        check(&format!("get_rows {dt}"), |ctx| {
            let mut rng = Rng(100 + s as u64);
            let bs = dt.block_size() as i64;
            let table = q_leaf(ctx, &mut rng, dt, &[3 * bs, 7, 3, 1]);
            let idx = ctx.new_tensor(DType::I32, &[5, 3]).unwrap();
            ctx.set_data(idx, &[6i32, 0, 3, 3, 1, 2, 5, 4, 0, 6, 1, 1, 0, 2, 6]).unwrap();
            // rows 1.. of every other matrix row: a strided (non-contiguous) table
            let rs = ctx.layout(table).unwrap().nb[1];
            let strided = ctx.view_4d(table, [3 * bs, 3, 3, 1], [2 * rs, 7 * rs, 21 * rs], rs).unwrap();
            let idx2 = ctx.new_tensor(DType::I32, &[4, 3]).unwrap();
            ctx.set_data(idx2, &[2i32, 0, 1, 2, 1, 1, 0, 0, 2, 2, 2, 1]).unwrap();
            vec![ctx.get_rows(table, idx).unwrap(), ctx.get_rows(strided, idx2).unwrap()]
        });
    }
}

#[test]
fn block_types_to_f32_f16_bf16_plain_and_transposed() {
    for (s, dt) in all().into_iter().enumerate() {
        check(&format!("dequantize {dt}"), |ctx| {
            let mut rng = Rng(200 + s as u64);
            let bs = dt.block_size() as i64;
            let q = q_leaf(ctx, &mut rng, dt, &[3 * bs, 5, 3, 1]);
            let mut outs = Vec::new();
            // plain: whole tensor, and a reshaping copy
            let f = ctx.new_tensor(DType::F32, &[3 * bs, 5, 3, 1]).unwrap();
            outs.push(ctx.cpy(q, f).unwrap());
            let h = ctx.new_tensor(DType::F16, &[bs, 45]).unwrap();
            outs.push(ctx.cpy(q, h).unwrap());
            // transposed (block_dim 1) into F32 and BF16
            let t = ctx.transpose(q).unwrap();
            let ft = ctx.new_tensor(DType::F32, &[5, 3 * bs, 3, 1]).unwrap();
            outs.push(ctx.cpy(t, ft).unwrap());
            let bt = ctx.new_tensor(DType::BF16, &[5 * 3 * bs * 3]).unwrap();
            outs.push(ctx.cpy(t, bt).unwrap());
            // permuted: the block dim moves to 2
            let p = ctx.permute(q, [2, 0, 1, 3]).unwrap();
            let hp = ctx.new_tensor(DType::F16, &[5, 3, 3 * bs, 1]).unwrap();
            outs.push(ctx.cpy(p, hp).unwrap());
            // a strided view: every other row, skipping the first block of each row
            let nb = ctx.layout(q).unwrap().nb;
            let v = ctx.view_4d(q, [2 * bs, 2, 3, 1], [2 * nb[1], nb[2], nb[3]], nb[0]).unwrap();
            let fv = ctx.new_tensor(DType::F32, &[2 * bs, 2, 3, 1]).unwrap();
            outs.push(ctx.cpy(v, fv).unwrap());
            // and the quantized source read back directly
            outs.push(q);
            outs
        });
    }
}

#[test]
fn same_type_block_copies_of_every_block_type() {
    for (s, dt) in all().into_iter().enumerate() {
        check(&format!("block copies {dt}"), |ctx| {
            let mut rng = Rng(300 + s as u64);
            let bs = dt.block_size() as i64;
            let q = q_leaf(ctx, &mut rng, dt, &[3 * bs, 6, 2, 1]);
            let nb = ctx.layout(q).unwrap().nb;
            // cont of a strided view (same shape: blocks move)
            let v = ctx.view_4d(q, [2 * bs, 3, 2, 1], [2 * nb[1], nb[2], nb[3]], nb[0]).unwrap();
            let c = ctx.cont(v).unwrap();
            // reshaping copy with the same row length: blocks move row by row
            let r = ctx.new_tensor(dt, &[3 * bs, 3, 4, 1]).unwrap();
            let cr = ctx.cpy(q, r).unwrap();
            // a transposed copy of a transposed view (same shape, same block dim)
            let sq = q_leaf(ctx, &mut rng, dt, &[bs, 2 * bs, 1, 1]);
            let st = ctx.transpose(sq).unwrap();
            let d = ctx.new_tensor(dt, &[bs, 2 * bs, 1, 1]).unwrap();
            let dt_ = ctx.transpose(d).unwrap();
            let ct = ctx.cpy(st, dt_).unwrap();
            vec![c, cr, ct, d]
        });
    }
}

#[test]
fn quantizing_copies_into_the_writable_types() {
    for (s, dt) in WRITABLE.into_iter().enumerate() {
        check(&format!("quantize {dt}"), |ctx| {
            let mut rng = Rng(400 + s as u64);
            let ne = [96, 5, 3, 1];
            let mut outs = Vec::new();
            // F32, F16, BF16 sources, packed
            let f = f32_leaf(ctx, &mut rng, &ne);
            let h = f16_leaf(ctx, &mut rng, &ne);
            let b = bf16_leaf(ctx, &mut rng, &ne);
            for src in [f, h, b] {
                let q = ctx.new_tensor(dt, &ne).unwrap();
                outs.push(ctx.cpy(src, q).unwrap());
            }
            // a transposed F32 source, and a reshaping copy from a flat F32
            let ft = f32_leaf(ctx, &mut rng, &[5, 96, 3, 1]);
            let ft = ctx.transpose(ft).unwrap();
            let q = ctx.new_tensor(dt, &ne).unwrap();
            outs.push(ctx.cpy(ft, q).unwrap());
            let flat = f32_leaf(ctx, &mut rng, &[96 * 15]);
            let q = ctx.new_tensor(dt, &[32, 45]).unwrap();
            outs.push(ctx.cpy(flat, q).unwrap());
            // into a transposed destination (blocks along dim 1 of the view)
            let qd = ctx.new_tensor(dt, &[64, 7, 1, 1]).unwrap();
            let qt = ctx.transpose(qd).unwrap();
            let src = f32_leaf(ctx, &mut rng, &[7, 64, 1, 1]);
            outs.push(ctx.cpy(src, qt).unwrap());
            outs.push(qd);
            // from another block type (through f32), and cont of a transposed block view
            let other = if dt == DType::Q8_0 { DType::Q6_K } else { DType::Q8_0 };
            let o = q_leaf(ctx, &mut rng, other, &[256, 3, 1, 1]);
            let q = ctx.new_tensor(dt, &[256, 3, 1, 1]).unwrap();
            outs.push(ctx.cpy(o, q).unwrap());
            let sq = q_leaf(ctx, &mut rng, dt, &[64, 32, 1, 1]);
            let t = ctx.transpose(sq).unwrap();
            outs.push(ctx.cont(t).unwrap());
            outs
        });
    }
}

#[test]
fn set_rows_into_block_types() {
    for (s, dt) in all().into_iter().enumerate() {
        check(&format!("set_rows {dt}"), |ctx| {
            let mut rng = Rng(500 + s as u64);
            let bs = dt.block_size() as i64;
            let ne0 = 3 * bs;
            let mut outs = Vec::new();
            let idx = ctx.new_tensor(DType::I32, &[4, 2]).unwrap();
            ctx.set_data(idx, &[8i32, 0, 3, 5, 1, 8, 2, 7]).unwrap();
            if WRITABLE.contains(&dt) {
                // F32 and F16 rows quantized into the cache
                let cache = q_leaf(ctx, &mut rng, dt, &[ne0, 9, 2, 1]);
                let x = f32_leaf(ctx, &mut rng, &[ne0, 4, 2, 1]);
                outs.push(ctx.set_rows(cache, x, idx).unwrap());
                let cache = q_leaf(ctx, &mut rng, dt, &[ne0, 9, 2, 1]);
                let x = f16_leaf(ctx, &mut rng, &[ne0, 4, 2, 1]);
                outs.push(ctx.set_rows(cache, x, idx).unwrap());
            }
            // rows of the same block type: moved byte for byte (k-quants too)
            let cache = q_leaf(ctx, &mut rng, dt, &[ne0, 9, 2, 1]);
            let x = q_leaf(ctx, &mut rng, dt, &[ne0, 4, 2, 1]);
            outs.push(ctx.set_rows(cache, x, idx).unwrap());
            // block-type rows into a plain cache
            let cache = f32_leaf(ctx, &mut rng, &[ne0, 9, 2, 1]);
            outs.push(ctx.set_rows(cache, x, idx).unwrap());
            outs
        });
    }
}

#[test]
fn destinations_cuda_does_not_quantize_into_are_unsupported() {
    for (s, dt) in unwritable().into_iter().enumerate() {
        // the grid i-quants have no quantizer on the CPU either
        let mut row = vec![0u8; dt.type_size()];
        if rgml::quant::quantize_row(dt, &[0.5; 256], &mut row).is_err() {
            continue;
        }
        check_unsupported(&format!("cpy F32 -> {dt}"), |ctx| {
            let mut rng = Rng(600 + s as u64);
            let f = f32_leaf(ctx, &mut rng, &[256, 3]);
            let q = ctx.new_tensor(dt, &[256, 3]).unwrap();
            vec![ctx.cpy(f, q).unwrap()]
        });
        check_unsupported(&format!("set_rows F32 -> {dt}"), |ctx| {
            let mut rng = Rng(700 + s as u64);
            let cache = q_leaf(ctx, &mut rng, dt, &[256, 4]);
            let x = f32_leaf(ctx, &mut rng, &[256, 2]);
            let idx = ctx.new_tensor(DType::I32, &[2]).unwrap();
            ctx.set_data(idx, &[3i32, 1]).unwrap();
            vec![ctx.set_rows(cache, x, idx).unwrap()]
        });
    }
}

#[test]
fn set_rows_into_a_block_type_with_a_bad_index_is_an_error() {
    let mut ctx = Context::new();
    let mut rng = Rng(800);
    let cache = q_leaf(&mut ctx, &mut rng, DType::Q8_0, &[64, 4]);
    let x = f32_leaf(&mut ctx, &mut rng, &[64, 2]);
    let idx = ctx.new_tensor(DType::I32, &[2]).unwrap();
    ctx.set_data(idx, &[1i32, 4]).unwrap();
    let out = ctx.set_rows(cache, x, idx).unwrap();
    let graph = Graph::build(&ctx, &[out]).unwrap();
    assert!(CpuBackend::new(1).unwrap().run(&ctx, &graph).is_err());
    let Some(gpu) = cuda() else { return };
    let e = gpu.run(&ctx, &graph).expect_err("index 4 of 4 rows must fail");
    assert!(e.to_string().contains("index"), "{e}");
}

/// A repeated or out-of-range index fails `set_rows` on both backends, with
/// the same message, and the device writes none of the rows (as the CPU,
/// which checks every index first): plain and block-type destinations, the
/// bad index first or last.
#[test]
fn set_rows_with_a_repeated_or_bad_index_writes_nothing() {
    let cases: [(&[i32], &str); 4] =
        [(&[1, 1, 2], "same place"), (&[0, 3, 0], "same place"), (&[4, 1, 2], "index"), (&[1, 2, -1], "index")];
    for dtype in [DType::F32, DType::Q8_0, DType::Q4_1] {
        for (ids, msg) in cases {
            let mut ctx = Context::new();
            let mut rng = Rng(801);
            let cache = if dtype == DType::F32 {
                f32_leaf(&mut ctx, &mut rng, &[64, 4])
            } else {
                q_leaf(&mut ctx, &mut rng, dtype, &[64, 4])
            };
            let x = f32_leaf(&mut ctx, &mut rng, &[64, 3]);
            let idx = ctx.new_tensor(DType::I32, &[3]).unwrap();
            ctx.set_data(idx, ids).unwrap();
            let out = ctx.set_rows(cache, x, idx).unwrap();
            let graph = Graph::build(&ctx, &[out]).unwrap();
            let e = CpuBackend::new(1).unwrap().run(&ctx, &graph).expect_err("the CPU refuses");
            assert!(e.to_string().contains(msg), "CPU {dtype:?} {ids:?}: {e}");
            let Some(gpu) = cuda() else { return };
            let plan = rgml::Allocator::new(rgml::CudaRules).plan(&ctx, &graph).unwrap();
            let mut st = gpu.alloc(&ctx, &graph, plan).unwrap();
            let before: Vec<u32> = st.read_f32(&ctx, cache).unwrap().iter().map(|v| v.to_bits()).collect();
            let e = gpu.compute(&ctx, &graph, &mut st).expect_err("CUDA refuses");
            assert!(e.to_string().contains(msg), "CUDA {dtype:?} {ids:?}: {e}");
            let after: Vec<u32> = st.read_f32(&ctx, cache).unwrap().iter().map(|v| v.to_bits()).collect();
            let changed = after.iter().zip(&before).filter(|(a, b)| a != b).count();
            assert_eq!(changed, 0, "{dtype:?} {ids:?}: {changed} values were written");
        }
    }
}

/// The types the CUDA kernels do not read (F64, I64, IQ4_NL, IQ4_XS, MXFP4,
/// the i-quants, TQ1_0, TQ2_0): every graph that computes with one is refused
/// before anything runs, with `Error::Unsupported` naming the op and the type,
/// at `alloc` and at `compute`; the CPU computes the same graphs. A graph that
/// only views such a leaf still runs.
#[test]
fn types_without_cuda_kernels_are_refused_up_front() {
    let gpu = cuda();
    // the plain 64-bit types
    let mut ctx = Context::new();
    let d = ctx.new_tensor(DType::F64, &[4]).unwrap();
    ctx.set_bytes(d, &[1.5f64, -2.0, 3.25, 0.0].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    let f = ctx.new_tensor(DType::F32, &[4]).unwrap();
    let c = ctx.cpy(d, f).unwrap();
    let g = Graph::build(&ctx, &[c]).unwrap();
    let st = CpuBackend::new(1).unwrap().run(&ctx, &g).unwrap();
    assert_eq!(st.read_f32(&ctx, c).unwrap(), vec![1.5, -2.0, 3.25, 0.0]);
    if let Some(gpu) = gpu.as_ref() {
        match gpu.run(&ctx, &g) {
            Err(Error::Unsupported { op, dtype }) => assert_eq!((op, dtype), ("cpy", DType::F64)),
            r => panic!("F64 cpy: expected Unsupported, got {:?}", r.map(|_| ())),
        }
    }
}
