//! Quantized tensors in graphs: copies that quantize and dequantize, on packed
//! and on transposed/permuted layouts, `get_rows`, and read-only mapped leaves.
//! Expected values come from the row functions of `rgml::quant` applied by hand.

use rgml::{quant, Context, CpuBackend, DType, Error, Graph};

const BLOCK_TYPES: [DType; 12] = DType::QUANTIZED;

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
    for dt in BLOCK_TYPES {
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
    for dt in BLOCK_TYPES {
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
