//! `diag_mask_inf` and its in-place twin against the definition, exactly.

use super::*;

/// diag_mask_inf on every layout and F16, and the in-place twin writing into
/// its input's storage (through a strided view). Exact.
#[test]
fn diag_mask_inf_matches_reference() {
    let mut rng = Rng(42);
    for (ne, n_past) in [([7, 5, 3, 2], 0), ([11, 6, 2, 1], 3), ([200, 90, 3, 1], 17)] {
        for kind in KINDS {
            for threads in [1, 2] {
                let mut ctx = Context::new();
                let x = input(&mut ctx, &mut rng, DType::F32, ne, kind, 1.0);
                let want: Vec<f64> = indices(ne)
                    .map(|i| if i[0] > n_past + i[1] { f64::NEG_INFINITY } else { x.vals[at(ne, i)] })
                    .collect();
                let d = ctx.diag_mask_inf(x.id, n_past as i32).unwrap();
                check(&format!("diag_mask_inf {ne:?} {kind:?} {threads}t"), &run(&ctx, d, threads), &want, 0.0, 0.0);
                let d = ctx.diag_mask_inf_inplace(x.id, n_past as i32).unwrap();
                let root = ctx.storage_root(x.id).unwrap();
                assert_eq!(ctx.tensor(d).unwrap().view_src(), Some(root));
                let got = run(&ctx, d, threads);
                check(&format!("diag_mask_inf_inplace {ne:?} {kind:?} {threads}t"), &got, &want, 0.0, 0.0);
            }
        }
    }
    // F16, and a chain the planner may run in place (diag_mask over a scale result)
    let mut ctx = Context::new();
    let x = input(&mut ctx, &mut rng, DType::F16, [5, 4, 2, 1], Kind::Transposed, 1.0);
    let d = ctx.diag_mask_inf(x.id, 1).unwrap();
    assert_eq!(ctx.layout(d).unwrap().dtype, DType::F16);
    let want: Vec<f64> = indices([5, 4, 2, 1])
        .map(|i| if i[0] > 1 + i[1] { f64::NEG_INFINITY } else { x.vals[at([5, 4, 2, 1], i)] })
        .collect();
    check("diag_mask_inf f16", &run(&ctx, d, 1), &want, 0.0, 0.0);
    let s = ctx.scale(x.id, 2.0).unwrap();
    let d = ctx.diag_mask_inf(s, 1).unwrap();
    let want2: Vec<f64> = want.iter().map(|v| v * 2.0).collect();
    check("diag_mask_inf after scale", &run(&ctx, d, 2), &want2, 0.0, 0.0);
}
