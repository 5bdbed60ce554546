//! The mixture-of-experts ops: `mul_mat_id` on every kernel path (dots, tiles,
//! the F32 GEMM, repacked experts) against an f64 reference from the dequantized
//! experts and the activations rounded as ggml rounds them; `argsort` and
//! `top_k` against a sort in the test; bad expert numbers refused.

mod common;

use rgml::quant;
use rgml::{Context, CpuBackend, DType, Graph, TensorId};

use common::{as_partner, Rng};

/// `v` stored as `wt` and read back.
fn rounded(wt: DType, v: &[f32], k: usize) -> Vec<f32> {
    if wt == DType::F32 {
        return v.to_vec();
    }
    let mut out = vec![0f32; v.len()];
    let mut q = vec![0u8; wt.row_size(k as i64).unwrap()];
    for (src, dst) in v.chunks(k).zip(out.chunks_mut(k)) {
        quant::quantize_row(wt, src, &mut q).unwrap();
        quant::dequantize_row(wt, &q, dst).unwrap();
    }
    out
}

/// One `mul_mat_id` of `n_expert` experts `[k, m]` of type `wt`, `n_used` picks
/// per token over `n_tokens` tokens, activations shared by the slots or one row
/// per slot, on `backend`; checked element by element.
#[allow(clippy::too_many_arguments)]
fn check(
    backend: &CpuBackend,
    wt: DType,
    k: usize,
    m: usize,
    n_expert: usize,
    n_used: usize,
    n_tokens: usize,
    shared: bool,
) {
    let mut rng = Rng(k as u64 * 1000 + m as u64 * 10 + n_tokens as u64);
    let wv = rng.vec(k * m * n_expert, 1.0);
    let n_b = if shared { 1 } else { n_used };
    let bv = rng.vec(k * n_b * n_tokens, 1.0);
    // each token's picks: distinct experts, varying with the token
    let ids: Vec<i32> =
        (0..n_tokens).flat_map(|t| (0..n_used).map(move |s| ((t * 7 + s * 3 + t / 2) % n_expert) as i32)).collect();
    let ids: Vec<i32> = ids
        .chunks(n_used)
        .flat_map(|c| {
            let mut seen = Vec::new();
            c.iter()
                .map(|&e| {
                    let mut e = e;
                    while seen.contains(&e) {
                        e = (e + 1) % n_expert as i32;
                    }
                    seen.push(e);
                    e
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let mut ctx = Context::new();
    let wf = ctx.new_f32(&[k as i64, m as i64, n_expert as i64], &wv).unwrap();
    let w = if wt == DType::F32 {
        wf
    } else {
        let q = ctx.new_tensor(wt, &[k as i64, m as i64, n_expert as i64]).unwrap();
        ctx.cpy(wf, q).unwrap()
    };
    let b = ctx.new_f32(&[k as i64, n_b as i64, n_tokens as i64], &bv).unwrap();
    let id = ctx.new_tensor(DType::I32, &[n_used as i64, n_tokens as i64]).unwrap();
    ctx.set_bytes(id, &bytemuck_i32(&ids)).unwrap();
    let out = ctx.mul_mat_id(w, b, id).unwrap();
    assert_eq!(ctx.layout(out).unwrap().ne, [m as i64, n_used as i64, n_tokens as i64, 1]);
    let g = Graph::build(&ctx, &[out]).unwrap();
    let got = backend.run(&ctx, &g).unwrap().read_f32(&ctx, out).unwrap();
    let (aw, bw) = (rounded(wt, &wv, k), as_partner(wt, &bv, k));
    for t in 0..n_tokens {
        for s in 0..n_used {
            let e = ids[t * n_used + s] as usize;
            let brow = &bw[((s % n_b) + n_b * t) * k..][..k];
            for i0 in 0..m {
                let arow = &aw[(e * m + i0) * k..][..k];
                let (sum, mag) = arow.iter().zip(brow).fold((0f64, 0f64), |(s, g), (&x, &y)| {
                    let p = x as f64 * y as f64;
                    (s + p, g + p.abs())
                });
                let v = got[(t * n_used + s) * m + i0] as f64;
                let tol = if matches!(wt, DType::Q4_1 | DType::Q5_1) { 2e-3 } else { 1e-5 };
                assert!(
                    (v - sum).abs() <= tol * mag + 1e-6,
                    "{wt} k={k} m={m} E={n_expert} used={n_used} T={n_tokens} shared={shared} [{i0},{s},{t}]: {v} vs {sum}"
                );
            }
        }
    }
}

fn bytemuck_i32(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn mul_mat_id_matches_an_f64_reference_on_every_path() {
    let cpu = CpuBackend::new(2).unwrap();
    for wt in [DType::F32, DType::F16, DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::Q4_K, DType::Q6_K] {
        let k = if wt.block_size() == 256 { 256 } else { 64 };
        // decode (one token), a few tokens, a prompt (tiles and the GEMM from 32 rows)
        for (n_tokens, shared) in [(1, true), (3, false), (5, true), (40, true), (40, false)] {
            check(&cpu, wt, k, 19, 8, 2, n_tokens, shared);
        }
        check(&cpu, wt, k, 16, 4, 4, 9, false);
    }
}

#[test]
fn repacked_experts_give_the_bits_of_experts_in_place() {
    // a mapped 3-D Q4_0/Q8_0 stack is repacked expert after expert; with the tiles
    // at every row count on both sides, the products are the same bits
    use rgml::gguf::{GgufFile, GgufWriter};
    let (k, m, n_expert) = (96i64, 40i64, 4i64);
    for wt in [DType::Q4_0, DType::Q8_0] {
        let mut rng = Rng(11);
        let vals = rng.vec((k * m * n_expert) as usize, 1.0);
        let rs = wt.row_size(k).unwrap();
        let mut bytes = vec![0u8; rs * (m * n_expert) as usize];
        for (row, dst) in vals.chunks(k as usize).zip(bytes.chunks_mut(rs)) {
            quant::quantize_row(wt, row, dst).unwrap();
        }
        let path = std::env::temp_dir().join(format!("rgml-moe-repack-{wt}-{}.gguf", std::process::id()));
        let mut w = GgufWriter::new();
        w.add_tensor("experts", wt, &[k, m, n_expert], bytes).unwrap();
        w.write(&path).unwrap();
        let file = GgufFile::open(&path).unwrap();
        let mut ctx = Context::new();
        let experts = rgml::load_gguf(&mut ctx, &file).unwrap().get("experts").unwrap();
        let (n_used, n_tokens) = (2i64, 5i64);
        let b = ctx.new_f32(&[k, 1, n_tokens], &rng.vec((k * n_tokens) as usize, 1.0)).unwrap();
        let ids = ctx.new_tensor(DType::I32, &[n_used, n_tokens]).unwrap();
        ctx.set_bytes(ids, &bytemuck_i32(&[3, 0, 1, 3, 2, 1, 0, 2, 3, 1])).unwrap();
        let out = ctx.mul_mat_id(experts, b, ids).unwrap();
        let g = Graph::build(&ctx, &[out]).unwrap();
        let run = |cpu: CpuBackend| {
            let st = cpu.with_row_invariant_products(true).run(&ctx, &g).unwrap();
            let bits: Vec<u32> = st.read_f32(&ctx, out).unwrap().iter().map(|v| v.to_bits()).collect();
            (bits, st.repacked_bytes())
        };
        let (want, none) = run(CpuBackend::new(2).unwrap());
        let (got, packed) = run(CpuBackend::new(2).unwrap().with_repacked_weights(true));
        assert_eq!(none, 0);
        assert_eq!(got, want, "{wt}: repacked experts");
        let expect = rgml::quant::tile::tile_kernel(wt)
            .filter(|t| t.packs() && CpuBackend::new(1).unwrap().with_repacked_weights(true).repacks_type(wt))
            .and_then(|t| Some(t.packed_group_size(k as usize)? * (m as usize).div_ceil(t.mr()) * n_expert as usize))
            .unwrap_or(0);
        eprintln!("{wt}: {packed} bytes of repacked experts");
        assert_eq!(packed, expect, "{wt}: every expert's groups");
        drop(file);
        std::fs::remove_file(&path).ok();
    }
}

/// A graph computing `f(ctx, a)` of an F32 leaf of `ne` holding `v`; its I32 result.
fn run_i32(ne: &[i64], v: &[f32], f: impl Fn(&Context, TensorId) -> rgml::Result<TensorId>) -> (Vec<i32>, [i64; 4]) {
    let mut ctx = Context::new();
    let a = ctx.new_f32(ne, v).unwrap();
    let out = f(&ctx, a).unwrap();
    let g = Graph::build(&ctx, &[out]).unwrap();
    let st = CpuBackend::new(2).unwrap().run(&ctx, &g).unwrap();
    let l = ctx.layout(out).unwrap();
    let bytes = st.read_bytes(&ctx, out).unwrap();
    (bytes.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect(), l.ne)
}

#[test]
fn argsort_orders_each_row_keeping_ties_in_index_order() {
    let mut rng = Rng(7);
    let (ne0, rows) = (37, 6);
    let mut v = rng.vec(ne0 * rows, 4.0);
    // ties and signed zeros
    v[3] = v[5];
    v[10] = 0.0;
    v[11] = -0.0;
    for descending in [false, true] {
        let (got, _) = run_i32(&[ne0 as i64, 3, 2], &v, |c, a| c.argsort(a, descending));
        for r in 0..rows {
            let row = &v[r * ne0..][..ne0];
            let mut want: Vec<i32> = (0..ne0 as i32).collect();
            want.sort_by(|&i, &j| {
                let (x, y) = (row[i as usize], row[j as usize]);
                let o = x.partial_cmp(&y).unwrap();
                if descending {
                    o.reverse()
                } else {
                    o
                }
            });
            assert_eq!(&got[r * ne0..][..ne0], &want[..], "row {r} descending={descending}");
        }
    }
}

#[test]
fn top_k_is_the_largest_k_largest_first() {
    let mut rng = Rng(9);
    let (ne0, rows, k) = (8, 5, 3);
    let v = rng.vec(ne0 * rows, 2.0);
    let (got, ne) = run_i32(&[ne0 as i64, rows as i64], &v, |c, a| c.cont(c.top_k(a, k as i64)?));
    assert_eq!(ne, [k as i64, rows as i64, 1, 1]);
    for r in 0..rows {
        let row = &v[r * ne0..][..ne0];
        let mut idx: Vec<usize> = (0..ne0).collect();
        idx.sort_by(|&i, &j| row[j].partial_cmp(&row[i]).unwrap());
        let want: Vec<i32> = idx[..k].iter().map(|&i| i as i32).collect();
        assert_eq!(&got[r * k..][..k], &want[..]);
    }
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[4, 2], &[0.0; 8]).unwrap();
    assert!(ctx.top_k(a, 0).is_err() && ctx.top_k(a, 5).is_err());
}

#[test]
fn bad_shapes_and_expert_numbers_are_errors() {
    let mut ctx = Context::new();
    let w = ctx.new_f32(&[8, 4, 3], &[0.5; 96]).unwrap();
    let b = ctx.new_f32(&[8, 1, 2], &[1.0; 16]).unwrap();
    let wrong_k = ctx.new_f32(&[6, 1, 2], &[1.0; 12]).unwrap();
    let ids = ctx.new_tensor(DType::I32, &[2, 2]).unwrap();
    let f32_ids = ctx.new_f32(&[2, 2], &[0.0; 4]).unwrap();
    let ids3 = ctx.new_tensor(DType::I32, &[2, 3]).unwrap();
    assert!(ctx.mul_mat_id(w, wrong_k, ids).is_err());
    assert!(ctx.mul_mat_id(w, b, f32_ids).is_err());
    assert!(ctx.mul_mat_id(w, b, ids3).is_err(), "ids for 3 tokens, activations for 2");
    // an expert number past the experts fails when the graph runs, naming the op
    ctx.set_bytes(ids, &bytemuck_i32(&[0, 2, 1, 3])).unwrap();
    let out = ctx.mul_mat_id(w, b, ids).unwrap();
    let g = Graph::build(&ctx, &[out]).unwrap();
    let Err(err) = CpuBackend::new(2).unwrap().run(&ctx, &g) else { panic!("expert 3 of 3 must fail") };
    assert!(err.to_string().contains("mul_mat_id") && err.to_string().contains("expert 3"), "{err}");
}
