//! Property 7: thread counts.

use super::*;

fn check_threads(ne0: i64, ne1: i64, a_spec: &Spec, seed: u64) -> TR {
    let mut ctx = Context::new();
    let mut r = Rng(seed);
    let ne = [ne0, ne1, 1, 1];
    let n = numel(ne);
    let av: Vec<f64> = (0..n).map(|_| round_to(DType::F32, r.range(-4.0, 4.0))).collect();
    let a = make_input(&mut ctx, DType::F32, ne, &av, a_spec)?;
    let to32 = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<_>>();
    let brow_v: Vec<f64> = (0..ne0).map(|_| round_to(DType::F32, r.range(-4.0, 4.0))).collect();
    let brow = ck(ctx.new_f32(&[ne0], &to32(&brow_v)), "brow")?;
    let bcol_v: Vec<f64> = (0..ne1).map(|_| round_to(DType::F32, r.range(-4.0, 4.0))).collect();
    let bcol = ck(ctx.new_f32(&[1, ne1], &to32(&bcol_v)), "bcol")?;
    let bcol = ck(ctx.expand(bcol, ne), "expand")?;
    let nm = 8;
    let mm_v: Vec<f64> = (0..ne0 * nm).map(|_| round_to(DType::F32, r.range(-1.0, 1.0))).collect();
    let mm_b = ck(ctx.new_f32(&[ne0, nm], &to32(&mm_v)), "mm b")?;
    // an inplace target laid out transposed
    let c_v: Vec<f64> = (0..n).map(|_| round_to(DType::F32, r.range(-4.0, 4.0))).collect();
    let c_leaf = ck(ctx.new_f32(&[ne1, ne0], &to32(&c_v)), "c")?;
    let c_t = ck(ctx.transpose(c_leaf), "transpose c")?;
    let h = ck(ctx.new_tensor(DType::F16, &[ne1, ne0]), "f16 dst")?;
    let h_t = ck(ctx.transpose(h), "transpose h")?;

    let o_add = ck(ctx.add(a.id, brow), "add")?;
    let o_sub = ck(ctx.sub(a.id, bcol), "sub")?;
    let o_gelu = ck(ctx.gelu(a.id), "gelu")?;
    let o_sum = ck(ctx.sum_rows(a.id), "sum_rows")?;
    let o_cont = ck(ctx.cont(a.id), "cont")?;
    let o_cpy = ck(ctx.cpy(a.id, h_t), "cpy")?;
    let o_mm = ck(ctx.mul_mat(a.id, mm_b), "mul_mat")?;
    let o_inpl = ck(ctx.mul_inplace(c_t, a.id), "mul_inplace")?;
    let outs = [o_add, o_sub, o_gelu, o_sum, o_cont, o_cpy, o_mm, o_inpl];
    let names = ["add", "sub", "gelu", "sum_rows", "cont", "cpy", "mul_mat", "mul_inplace"];

    let mut results: Vec<Vec<Vec<f64>>> = Vec::new();
    for threads in 1..=3 {
        let st = run(&ctx, &outs, threads)?;
        let mut v = Vec::new();
        for &o in &outs {
            v.push(read(&st, &ctx, o)?);
        }
        v.push(read(&st, &ctx, c_leaf)?);
        results.push(v);
    }
    for t in 1..results.len() {
        for (i, name) in names.iter().chain(&["c storage"]).enumerate() {
            same_bits(&results[t][i], &results[0][i], &format!("{name}: {} threads vs 1", t + 1))?;
        }
    }
    // and they are right
    let res = &results[0];
    let at = |v: &[f64], i0: usize, i1: usize| v[i0 + ne0 as usize * i1];
    let ew = |f: &dyn Fn(usize, usize) -> f64| -> Vec<f64> {
        (0..n).map(|k| f(k % ne0 as usize, k / ne0 as usize)).collect()
    };
    let tol = |_: usize| 1e-5 * 16.0;
    close(&res[0], &ew(&|i0, i1| at(&av, i0, i1) + brow_v[i0]), tol, "add")?;
    close(&res[1], &ew(&|i0, i1| at(&av, i0, i1) - bcol_v[i1]), tol, "sub")?;
    let gelu = ew(&|i0, i1| unary_ref(UnaryOp::Gelu, at(&av, i0, i1)));
    // f16-rounded: the f32 and f64 results can round one f16 step apart
    close(&res[2], &gelu, |i| tol(i) + 2f64.powi(-10) * gelu[i].abs(), "gelu")?;
    let sums: Vec<f64> = (0..ne1 as usize).map(|i1| (0..ne0 as usize).map(|i0| at(&av, i0, i1)).sum()).collect();
    close(&res[3], &sums, |_| 1e-6 * 4.0 * ne0 as f64, "sum_rows")?;
    same_bits(&res[4], &av, "cont")?;
    same_bits(&res[5], &av.iter().map(|&x| round_to(DType::F16, x)).collect::<Vec<_>>(), "cpy to f16")?;
    let (mm, mag) = mul_mat_ref(ne, &av, [ne0, nm, 1, 1], &mm_v);
    close(&res[6], &mm, |k| 1e-5 * mag[k] + 1e-6, "mul_mat")?;
    // c is [ne1, ne0] in storage; its transpose is what was multiplied
    let prod = ew(&|i0, i1| c_v[i1 + ne1 as usize * i0] * at(&av, i0, i1));
    close(&res[7], &prod, |k| 1e-6 * prod[k].abs(), "mul_inplace")?;
    Ok(())
}

proptest! {
    #![proptest_config(cfg_fixed(4))]

    /// Graphs over >= 40k elements (parallel paths) give bit-identical results with
    /// 1, 2 and 3 threads, and the right ones.
    #[test]
    fn thread_counts_agree(ne0 in 200i64..=260, ne1 in 200i64..=230, a_spec in spec_strategy(), seed in any::<u64>()) {
        check_threads(ne0, ne1, &a_spec, seed)?;
    }
}
