//! `mul_mat_id` on the CPU: the tokens grouped by expert, then one `mul_mat`
//! per expert in use over the rows routed to it, so each expert matrix streams
//! once per call whatever the batch, through the same kernels (tiles,
//! repacked weights, dots) as a dense product.

use super::copy;
use super::matmul;
use super::mem::{Exec, FirstError, Strided, StridedMut};
use crate::error::{Error, Result};

/// `dst[:, s, t] = a[:, :, ids[s, t]] · b[:, s mod b.ne1, t]`; `packed`, when
/// given, is `a` repacked expert after expert (`matmul::repack`).
pub(crate) fn mul_mat_id(
    ex: &Exec,
    dst: StridedMut,
    a: Strided,
    b: Strided,
    ids: Strided,
    packed: Option<&[u8]>,
) -> Result<()> {
    let n_expert = a.l.ne[2];
    let routes = routes(&ids, n_expert)?;
    let per_expert = packed.map(|p| p.len() / n_expert.max(1) as usize);
    let in_use: Vec<(usize, &[(i64, i64)])> =
        routes.iter().enumerate().filter(|(_, p)| !p.is_empty()).map(|(e, p)| (e, &p[..])).collect();
    let product = |ex: &Exec, e: usize, picks: &[(i64, i64)]| {
        let expert_packed = per_expert.and_then(|len| packed?.get(e * len..(e + 1) * len));
        expert_product(ex, dst, a.matrix_tensor(e as i64, 0), b, picks, expert_packed)
    };
    // a decode step's few rows per expert: the experts go to the threads whole
    // (one dispatch, each matrix streamed by one thread) rather than one
    // product split over the threads after another
    let few_rows = in_use.iter().all(|(_, p)| p.len() <= SPREAD_MAX_ROWS);
    if few_rows && in_use.len() >= ex.threads() && ex.threads() > 1 {
        let (one, failed) = (ex.on_caller(), FirstError::default());
        let cost = (a.l.ne[0] * a.l.ne[1]) as usize;
        ex.for_ranges(in_use.len(), cost, |range| {
            for &(e, picks) in &in_use[range] {
                failed.keep(product(&one, e, picks));
            }
        });
        return failed.into_result();
    }
    in_use.iter().try_for_each(|&(e, picks)| product(ex, e, picks))
}

/// Rows per expert up to which [`mul_mat_id`] gives each thread whole experts.
const SPREAD_MAX_ROWS: usize = 4;

/// One expert's product: the rows of `b` routed to it (`picks`) gathered as F32,
/// multiplied by its matrix `a` through the dense kernels, and scattered to
/// their places in `dst`.
fn expert_product(
    ex: &Exec,
    dst: StridedMut,
    a: Strided,
    b: Strided,
    picks: &[(i64, i64)],
    packed: Option<&[u8]>,
) -> Result<()> {
    let (k, m, n) = (a.l.ne[0], a.l.ne[1], picks.len() as i64);
    let mut rows = vec![0f32; (k * n) as usize];
    for (j, &(s, t)) in picks.iter().enumerate() {
        let row = StridedMut::of_f32(&mut rows[j * k as usize..(j + 1) * k as usize], [k, 1, 1, 1])?;
        copy::copy(&Exec::ONE, "mul_mat_id", row, b.row_tensor(s % b.l.ne[1] + b.l.ne[1] * t))?;
    }
    let mut out = vec![0f32; (m * n) as usize];
    matmul::mul_mat(ex, StridedMut::of_f32(&mut out, [m, n, 1, 1])?, a, Strided::of_f32(&rows, [k, n, 1, 1])?, packed)?;
    for (j, &(s, t)) in picks.iter().enumerate() {
        let src = Strided::of_f32(&out[j * m as usize..(j + 1) * m as usize], [m, 1, 1, 1])?;
        // each (slot, token) goes to one expert: no two products write one row
        copy::copy(&Exec::ONE, "mul_mat_id", dst.row_tensor(s + dst.l.ne[1] * t), src)?;
    }
    Ok(())
}

/// The `(slot, token)` pairs routed to each expert, in token order, from the
/// I32 `ids` `[n_used, n_tokens]`; an error for an expert outside `0..n_expert`.
fn routes(ids: &Strided, n_expert: i64) -> Result<Vec<Vec<(i64, i64)>>> {
    let mut routes = vec![Vec::new(); n_expert.max(0) as usize];
    for t in 0..ids.l.ne[1] {
        for s in 0..ids.l.ne[0] {
            let at = ids.ptr().wrapping_add(s as usize * ids.l.nb[0] + t as usize * ids.l.nb[1]);
            // SAFETY: (s, t) < (ids.ne0, ids.ne1): an aligned I32 element of the ids tensor.
            let e = i64::from(unsafe { at.cast::<i32>().read() });
            let route = usize::try_from(e)
                .ok()
                .and_then(|e| routes.get_mut(e))
                .ok_or_else(|| Error::Invalid(format!("mul_mat_id: expert {e} is outside the {n_expert} experts")))?;
            route.push((s, t));
        }
    }
    Ok(routes)
}
