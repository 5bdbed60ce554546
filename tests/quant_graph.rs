//! Quantized tensors in graphs: copies that quantize and dequantize, on packed
//! and on transposed/permuted layouts, `get_rows`, and read-only mapped leaves;
//! every block type (the i-quants from random valid blocks, as they have no
//! quantizer) read by `get_rows` and copied to F32/F16/BF16 from packed,
//! transposed and permuted layouts. Expected values come from the row
//! functions of `rgml::quant` applied by hand.

mod common;

use rgml::{bf16, f16, quant, Context, CpuBackend, DType, Error, Graph};

/// The block types with a quantizer.
fn block_types() -> impl Iterator<Item = DType> {
    DType::QUANTIZED.into_iter().filter(|&d| quant::has_quantizer(d))
}

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32).map(|i| ((i.wrapping_mul(2_654_435_761) ^ seed) % 2001) as f32 / 1000.0 - 1.0).collect()
}

/// Quantizes then dequantizes `v` row by row (rows of `ne0`), by hand.
fn round_trip(dt: DType, v: &[f32], ne0: usize) -> Vec<f32> {
    let mut out = vec![0f32; v.len()];
    let mut q = vec![0u8; dt.row_size(ne0 as i64).unwrap()];
    for (src, dst) in v.chunks(ne0).zip(out.chunks_mut(ne0)) {
        quant::quantize_row(dt, src, &mut q).unwrap();
        quant::dequantize_row(dt, &q, dst).unwrap();
    }
    out
}

fn run(ctx: &Context, outs: &[rgml::TensorId]) -> rgml::CpuStorage {
    let g = Graph::build(ctx, outs).unwrap();
    CpuBackend::new(2).unwrap().with_poison(true).run(ctx, &g).unwrap()
}

#[test]
fn cpy_quantizes_and_dequantizes_like_the_row_functions() {
    for dt in block_types() {
        let (ne0, ne1) = (2 * dt.block_size() as i64, 3);
        let v = values((ne0 * ne1) as usize, 7);
        let mut ctx = Context::new();
        let x = ctx.new_f32(&[ne0, ne1], &v).unwrap();
        let q = ctx.new_tensor_2d(dt, ne0, ne1).unwrap();
        let qw = ctx.cpy(x, q).unwrap();
        let back = ctx.new_tensor_2d(DType::F32, ne0, ne1).unwrap();
        let b = ctx.cpy(qw, back).unwrap();
        let c = ctx.cont(qw).unwrap(); // a quantized copy of the quantized tensor
        let st = run(&ctx, &[b, c]);
        let want = round_trip(dt, &v, ne0 as usize);
        let got = st.read_f32(&ctx, b).unwrap();
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.to_bits(), w.to_bits(), "{dt} [{i}]");
        }
        assert_eq!(st.read_f32(&ctx, c).unwrap(), want, "{dt}: cont of a quantized tensor");
    }
}

#[test]
fn cont_of_a_transposed_quantized_tensor_is_the_transpose() {
    // ggml corrupts memory here (llama.cpp #27053); rgml dequantizes by block,
    // transposes, and requantizes the new rows
    for dt in block_types() {
        let bs = dt.block_size() as i64;
        let (k, m) = (bs, 2 * bs); // a: [k, m] -> transposed [m, k]
        let v = values((k * m) as usize, 3);
        let mut ctx = Context::new();
        let x = ctx.new_f32(&[k, m], &v).unwrap();
        let q = ctx.new_tensor_2d(dt, k, m).unwrap();
        let qw = ctx.cpy(x, q).unwrap();
        let qt = ctx.transpose(qw).unwrap();
        let c = ctx.cont(qt).unwrap(); // Q [m, k]
        let f = ctx.new_tensor_2d(DType::F32, m, k).unwrap();
        let cf = ctx.cpy(c, f).unwrap();
        let direct = ctx.new_tensor_2d(DType::F32, m, k).unwrap();
        let tf = ctx.cpy(qt, direct).unwrap(); // dequantize straight from the transposed view
        let st = run(&ctx, &[cf, tf]);
        let deq = round_trip(dt, &v, k as usize); // a's values as stored
        let mut t = vec![0f32; deq.len()];
        for i1 in 0..k as usize {
            for i0 in 0..m as usize {
                t[i1 * m as usize + i0] = deq[i0 * k as usize + i1];
            }
        }
        assert_eq!(st.read_f32(&ctx, tf).unwrap(), t, "{dt}: dequantized transpose");
        assert_eq!(st.read_f32(&ctx, cf).unwrap(), round_trip(dt, &t, m as usize), "{dt}: requantized transpose");
    }
}

#[test]
fn permuted_and_strided_quantized_copies() {
    let dt = DType::Q8_0;
    let v = values(32 * 3 * 4, 11);
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[32, 3, 4], &v).unwrap();
    let q = ctx.new_tensor_3d(dt, 32, 3, 4).unwrap();
    let qw = ctx.cpy(x, q).unwrap();
    let p = ctx.permute(qw, [0, 2, 1, 3]).unwrap(); // [32, 4, 3], blocks still along dim 0
    let pf = ctx.cont(p).unwrap();
    let f = ctx.new_tensor_3d(DType::F32, 32, 4, 3).unwrap();
    let out = ctx.cpy(pf, f).unwrap();
    // into a strided f32 destination: every other row of a bigger tensor
    let big = ctx.new_tensor_2d(DType::F32, 32, 24).unwrap();
    let rows = ctx.view_2d(big, 32, 12, 2 * 32 * 4, 0).unwrap();
    let w = ctx.cpy(qw, rows).unwrap();
    let st = run(&ctx, &[out, w]);
    let deq = round_trip(dt, &v, 32);
    let mut want = Vec::new();
    for i2 in 0..3 {
        for i1 in 0..4 {
            want.extend_from_slice(&deq[(i1 * 3 + i2) * 32..][..32]);
        }
    }
    assert_eq!(st.read_f32(&ctx, out).unwrap(), want);
    let all = st.read_f32(&ctx, big).unwrap();
    for r in 0..12 {
        assert_eq!(&all[2 * r * 32..][..32], &deq[r * 32..][..32]);
        assert!(all[(2 * r + 1) * 32..][..32].iter().all(|&x| x == 0.0));
    }
}

#[test]
fn get_rows_from_quantized_and_float_tables() {
    for dt in [DType::F32, DType::F16, DType::Q4_0, DType::Q6_K] {
        let ne0 = dt.block_size().max(8) as i64;
        let v = values((ne0 * 5) as usize, 5);
        let mut ctx = Context::new();
        let x = ctx.new_f32(&[ne0, 5], &v).unwrap();
        let table = ctx.new_tensor_2d(dt, ne0, 5).unwrap();
        let t = ctx.cpy(x, table).unwrap();
        let idx = ctx.new_tensor_1d(DType::I32, 4).unwrap();
        ctx.set_data(idx, &[4i32, 0, 4, 2]).unwrap();
        let rows = ctx.get_rows(t, idx).unwrap();
        assert_eq!(ctx.layout(rows).unwrap().ne, [ne0, 4, 1, 1]);
        let st = run(&ctx, &[rows]);
        let stored = if dt.is_quantized() {
            round_trip(dt, &v, ne0 as usize)
        } else if dt == DType::F16 {
            v.iter().map(|&x| rgml::f16::from_f32(x).to_f32()).collect()
        } else {
            v.clone()
        };
        let want: Vec<f32> =
            [4, 0, 4, 2].iter().flat_map(|&r| stored[r * ne0 as usize..][..ne0 as usize].to_vec()).collect();
        assert_eq!(st.read_f32(&ctx, rows).unwrap(), want, "{dt}");
    }
}

#[test]
fn get_rows_rejects_bad_indices_at_run_time() {
    let mut ctx = Context::new();
    let table = ctx.new_f32(&[2, 3], &[0.; 6]).unwrap();
    let idx = ctx.new_tensor_1d(DType::I32, 2).unwrap();
    ctx.set_data(idx, &[1i32, 3]).unwrap();
    let rows = ctx.get_rows(table, idx).unwrap();
    let g = Graph::build(&ctx, &[rows]).unwrap();
    let e = CpuBackend::new(1).unwrap().run(&ctx, &g).map(|_| ());
    assert!(matches!(&e, Err(Error::Invalid(m)) if m.contains("index 3")), "{e:?}");
    let f = ctx.new_tensor_1d(DType::F32, 2).unwrap();
    assert!(matches!(ctx.get_rows(table, f), Err(Error::DTypeMismatch { .. })));
}

#[test]
fn mapped_leaves_are_read_in_place_and_read_only() {
    let path = std::env::temp_dir().join(format!("rgml-map-{}.bin", std::process::id()));
    let v: Vec<f32> = (0..9).map(|i| i as f32).collect();
    let mut bytes = vec![0u8; 4];
    bytes.extend_from_slice(bytemuck::cast_slice(&v));
    std::fs::write(&path, &bytes).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    // SAFETY: the test owns the file and does not modify it while mapped.
    let map = std::sync::Arc::new(unsafe { memmap2::Mmap::map(&file) }.unwrap());
    std::fs::remove_file(&path).ok();
    let mut ctx = Context::new();
    let aligned = ctx.new_tensor_mapped(DType::F32, &[2, 2], map.clone(), 4).unwrap();
    assert!(ctx.is_mapped(aligned), "an aligned range is used in place");
    let misaligned = ctx.new_tensor_mapped(DType::F32, &[2], map.clone(), 6).unwrap();
    let want: Vec<f32> = bytes[6..14].chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    assert_eq!(ctx.data::<f32>(misaligned).unwrap(), &want[..], "a misaligned range is copied");
    assert!(!ctx.is_mapped(misaligned));
    assert!(matches!(ctx.new_tensor_mapped(DType::F32, &[9], map.clone(), 8), Err(Error::Invalid(_))));
    assert!(matches!(ctx.set_data(aligned, &[0f32; 4]), Err(Error::ReadOnly(_))));
    assert!(matches!(ctx.scale_inplace(aligned, 2.0), Err(Error::ReadOnly(_))));
    let view = ctx.view_1d(aligned, 2, 0).unwrap();
    let other = ctx.new_f32(&[2], &[1., 1.]).unwrap();
    assert!(matches!(ctx.cpy(other, view), Err(Error::ReadOnly(_))));
    let s = ctx.scale(aligned, 2.0).unwrap();
    let st = run(&ctx, &[s]);
    assert_eq!(st.read_f32(&ctx, s).unwrap(), vec![0., 2., 4., 6.]);
}

/// Every block type, from random valid blocks: `get_rows`, and copies to
/// F32/F16/BF16 of the packed tensor, its transpose and a permutation (blocks
/// along dim 0, rows reordered), against `dequantize_row` by hand.
#[test]
fn every_block_type_reads_into_float_types_on_any_layout() {
    let mut rng = common::Rng(0x5eed);
    for dt in DType::QUANTIZED {
        let (k, m) = (2 * dt.block_size(), 6usize);
        let bytes = common::blocks::random_blocks(dt, 2 * m, || rng.next());
        let mut deq = vec![0f32; k * m];
        for (src, dst) in bytes.chunks(dt.row_size(k as i64).unwrap()).zip(deq.chunks_mut(k)) {
            quant::dequantize_row(dt, src, dst).unwrap();
        }
        let mut ctx = Context::new();
        let w = ctx.new_tensor_2d(dt, k as i64, m as i64).unwrap();
        ctx.set_bytes(w, &bytes).unwrap();
        let idx = ctx.new_tensor_1d(DType::I32, 4).unwrap();
        ctx.set_data(idx, &[5i32, 0, 5, 2]).unwrap();
        let rows = ctx.get_rows(w, idx).unwrap();
        let mut outs = vec![rows];
        for ft in [DType::F32, DType::F16, DType::BF16] {
            let packed = ctx.new_tensor_2d(ft, k as i64, m as i64).unwrap();
            outs.push(ctx.cpy(w, packed).unwrap());
            let t = ctx.transpose(w).unwrap();
            let tt = ctx.new_tensor_2d(ft, m as i64, k as i64).unwrap();
            outs.push(ctx.cpy(t, tt).unwrap());
            let w3 = ctx.reshape_3d(w, k as i64, 2, 3).unwrap();
            let p = ctx.permute(w3, [0, 2, 1, 3]).unwrap(); // [k, 3, 2]
            let pt = ctx.new_tensor_3d(ft, k as i64, 3, 2).unwrap();
            outs.push(ctx.cpy(p, pt).unwrap());
        }
        let st = run(&ctx, &outs);
        let row = |r: usize| &deq[r * k..(r + 1) * k];
        let want_rows: Vec<f32> = [5, 0, 5, 2].iter().flat_map(|&r| row(r).to_vec()).collect();
        assert_eq!(bits(&st.read_f32(&ctx, rows).unwrap()), bits(&want_rows), "{dt} get_rows");
        for (f, ft) in [DType::F32, DType::F16, DType::BF16].into_iter().enumerate() {
            let round = |v: f32| match ft {
                DType::F16 => f16::from_f32(v).to_f32(),
                DType::BF16 => bf16::from_f32(v).to_f32(),
                _ => v,
            };
            let packed: Vec<f32> = deq.iter().map(|&v| round(v)).collect();
            let mut transposed = vec![0f32; k * m];
            for i1 in 0..k {
                for i0 in 0..m {
                    transposed[i1 * m + i0] = round(deq[i0 * k + i1]);
                }
            }
            // permuted [k, 3, 2]: element (i0, i1, i2) is row i2 + 2·i1 of w
            let mut permuted = Vec::with_capacity(k * m);
            for i2 in 0..2 {
                for i1 in 0..3 {
                    permuted.extend(row(i2 + 2 * i1).iter().map(|&v| round(v)));
                }
            }
            for (o, want, what) in [(1, &packed, "packed"), (2, &transposed, "transposed"), (3, &permuted, "permuted")]
            {
                let got = st.read_f32(&ctx, outs[3 * f + o]).unwrap();
                assert_eq!(bits(&got), bits(want), "{dt} -> {ft} {what}");
            }
        }
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Converting into an i-quant (no quantizer) is refused when the graph is
/// built: `cpy` and `set_rows`; same-type copies of them are byte moves.
#[test]
fn no_conversion_into_types_without_a_quantizer() {
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[256, 2], &values(512, 1)).unwrap();
    let q = ctx.new_tensor_2d(DType::IQ2_XXS, 256, 2).unwrap();
    assert!(matches!(ctx.cpy(x, q), Err(Error::Unsupported { op: "cpy", dtype: DType::IQ2_XXS })));
    let idx = ctx.new_tensor_1d(DType::I32, 2).unwrap();
    let r = ctx.set_rows(q, x, idx);
    assert!(matches!(r, Err(Error::Unsupported { op: "set_rows", dtype: DType::IQ2_XXS })), "{r:?}");
    let q2 = ctx.new_tensor_2d(DType::IQ2_XXS, 256, 2).unwrap();
    let mut rng = common::Rng(3);
    let bytes = common::blocks::random_blocks(DType::IQ2_XXS, 2, || rng.next());
    ctx.set_bytes(q, &bytes).unwrap();
    let c = ctx.cpy(q, q2).unwrap();
    let d = ctx.cont(q).unwrap();
    let st = run(&ctx, &[c, d]);
    for t in [c, d] {
        assert_eq!(st.read_bytes(&ctx, t).unwrap(), bytes);
    }
}

/// F64 and I64 tensors (GGUF stores them) convert through f32 like the other plain types.
#[test]
fn f64_and_i64_copies() {
    let mut ctx = Context::new();
    let v = [1.5f64, -2.0, 1e-50, 3.0e40, 0.1, -7.0];
    let d = ctx.new_tensor_1d(DType::F64, 6).unwrap();
    ctx.set_bytes(d, &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    let i = ctx.new_tensor_1d(DType::I64, 3).unwrap();
    ctx.set_bytes(i, &[5i64, -(1 << 40), 7].iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    let (f, g) = (ctx.new_tensor_1d(DType::F32, 6).unwrap(), ctx.new_tensor_1d(DType::F32, 3).unwrap());
    let (df, ig) = (ctx.cpy(d, f).unwrap(), ctx.cpy(i, g).unwrap());
    let x = ctx.new_f32(&[3], &[0.25, -1e30, 3.5]).unwrap();
    let back = ctx.new_tensor_1d(DType::F64, 3).unwrap();
    let xb = ctx.cpy(x, back).unwrap();
    let st = run(&ctx, &[df, ig, xb]);
    let want: Vec<f32> = v.iter().map(|&x| x as f32).collect();
    assert_eq!(st.read_f32(&ctx, df).unwrap(), want, "f64 rounded to f32");
    assert_eq!(st.read_f32(&ctx, ig).unwrap(), vec![5.0, -(2f32.powi(40)), 7.0]);
    let bytes = st.read_bytes(&ctx, xb).unwrap();
    let got: Vec<f64> = bytes.chunks(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(got, vec![0.25, f64::from(-1e30f32), 3.5], "f32 widened exactly");
    let mut y = [0f32; 6];
    quant::dequantize_row(DType::F64, ctx.leaf_bytes(d).unwrap(), &mut y).unwrap();
    assert_eq!(y.to_vec(), want);
}
