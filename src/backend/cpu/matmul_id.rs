//! `mul_mat_id` on the CPU: the tokens grouped by expert, then one `mul_mat`
//! per expert in use over the rows routed to it, so each expert matrix streams
//! once per call whatever the batch, through the same kernels (tiles,
//! repacked weights, dots) as a dense product.

use super::copy;
use super::matmul;
use super::mem::{Exec, Strided, StridedMut};
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
    let (k, m, n_expert) = (a.l.ne[0], a.l.ne[1], a.l.ne[2]);
    let routes = routes(&ids, n_expert)?;
    let per_expert = packed.map(|p| p.len() / n_expert.max(1) as usize);
    let (mut rows, mut out) = (Vec::new(), Vec::new());
    for (e, picks) in routes.iter().enumerate().filter(|(_, p)| !p.is_empty()) {
        let n = picks.len() as i64;
        rows.resize((k * n) as usize, 0f32);
        for (j, &(s, t)) in picks.iter().enumerate() {
            let row = StridedMut::of_f32(&mut rows[j * k as usize..(j + 1) * k as usize], [k, 1, 1, 1])?;
            copy::copy(&Exec::ONE, "mul_mat_id", row, b.row_tensor(s % b.l.ne[1] + b.l.ne[1] * t))?;
        }
        out.resize((m * n) as usize, 0f32);
        let expert_packed = per_expert.and_then(|len| packed?.get(e * len..(e + 1) * len));
        matmul::mul_mat(
            ex,
            StridedMut::of_f32(&mut out, [m, n, 1, 1])?,
            a.matrix_tensor(e as i64, 0),
            Strided::of_f32(&rows, [k, n, 1, 1])?,
            expert_packed,
        )?;
        for (j, &(s, t)) in picks.iter().enumerate() {
            let src = Strided::of_f32(&out[j * m as usize..(j + 1) * m as usize], [m, 1, 1, 1])?;
            copy::copy(&Exec::ONE, "mul_mat_id", dst.row_tensor(s + dst.l.ne[1] * t), src)?;
        }
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
