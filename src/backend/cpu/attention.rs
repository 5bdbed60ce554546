//! `flash_attn_ext` on the CPU: one work item per query row and KV head (the
//! query heads of its group together, so each value row is widened once). Its scores
//! over the keys are one row of scratch (never a scores tensor), made by the dot
//! kernel of the key type against the query converted to its dot partner, as
//! `mul_mat` makes them; masked keys are skipped, so a causal prompt reads half
//! the cache. The softmax follows `soft_max_ext` (f32 exponentials summed in
//! f64), and the value rows, widened to f32, are summed with their weights.

use super::mem::{Exec, FirstError, Scalar, Strided, StridedMut};
use super::softmax::{alibi_slopes, head_sinks};
use crate::backend::exec::{Extra, SoftMax};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::quant::{self, dot};

/// The shapes of one attention, from its operands.
struct Dims {
    d: usize,
    dv: usize,
    n_q: usize,
    n_head: usize,
    n_kv: usize,
    group: usize,
}

impl Dims {
    fn of(dst: &StridedMut, q: &Strided, k: &Strided, v: &Strided) -> Result<Dims> {
        let (qn, kn, vn) = (q.l.ne, k.l.ne, v.l.ne);
        let ok = qn[0] == kn[0]
            && kn[1..] == vn[1..]
            && kn[2] > 0
            && qn[2] % kn[2] == 0
            && dst.l.ne == [vn[0], qn[2], qn[1], qn[3]]
            && dst.packed_rows();
        if !ok {
            return Err(Error::internal(format!("flash_attn_ext of q {qn:?}, k {kn:?}, v {vn:?} into {:?}", dst.l.ne)));
        }
        let u = |x: i64| x as usize;
        Ok(Dims { d: u(qn[0]), dv: u(vn[0]), n_q: u(qn[1]), n_head: u(qn[2]), n_kv: u(kn[1]), group: u(qn[2] / kn[2]) })
    }
}

/// Key and value rows asked for this many positions ahead: a cached row is a
/// few lines a whole position apart, a stride the hardware follows poorly.
const AHEAD: usize = 16;

/// `dst[:, h, i, s] = softmax(scale·q·kᵀ + slope·mask)·v` for every query row `i`,
/// head `h` and sequence `s` (see [`crate::Context::flash_attn_ext`]); head `h`'s
/// sink, if given, joins the maximum and the sum of its softmax.
pub(crate) fn flash_attn(
    ex: &Exec,
    p: SoftMax,
    dst: StridedMut,
    qkv: [Strided; 3],
    extra: Extra<Strided>,
) -> Result<()> {
    let ([q, k, v], mask) = (qkv, extra.mask);
    let n = Dims::of(&dst, &q, &k, &v)?;
    let sinks = head_sinks(extra.sinks, n.n_head as i64)?;
    if dst.l.is_empty() {
        return Ok(());
    }
    let (kt, vt) = (k.l.dtype, v.l.dtype);
    let kdot = dot::dot_fn(kt)?.raw();
    let row = |t: DType, w: usize| {
        t.row_size(w as i64)
            .ok_or_else(|| Error::internal(format!("flash_attn_ext: {w} values are not whole {t} blocks")))
    };
    let (qrow, krow, vrow) = (row(dot::vec_dot_type(kt), n.d)?, row(kt, n.d)?, row(vt, n.dv)?);
    let sm = mask.map(|m| Scalar::of("flash_attn_ext", m.l.dtype)).transpose()?;
    let slopes = alibi_slopes(u32::try_from(n.n_head).unwrap_or(u32::MAX), p.max_bias);
    // one item per KV head, query row and sequence: the query heads that share the
    // KV head read each value row once (widened once), each in its own sums
    let (g, n_kv_heads) = (n.group, n.n_head / n.group);
    let units = n_kv_heads * n.n_q * q.l.ne[3] as usize;
    let failed = FirstError::default();
    ex.for_ranges(units, g * n.n_kv * (n.d + n.dv) * 2, |items| {
        let mut s = Scratch {
            q: vec![0u8; qrow],
            scores: vec![0f32; g * n.n_kv],
            acc: vec![0f32; g * n.dv],
            v: vec![0f32; n.dv],
            heads: vec![Head::default(); g],
        };
        for item in items {
            let (kh, i, seq) = (item % n_kv_heads, (item / n_kv_heads) % n.n_q, item / (n_kv_heads * n.n_q));
            let (qi, sq) = (i as i64, seq as i64);
            for (hh, scores) in s.scores.chunks_exact_mut(n.n_kv).enumerate() {
                let h = kh * g + hh;
                // SAFETY: row (i, h, seq) of q holds d packed f32 (rows_packed, checked
                // when the op was made), inside q's tensor.
                let qv = unsafe { std::slice::from_raw_parts(q.row(qi, h as i64, sq).cast::<f32>(), n.d) };
                if let Err(e) = dot::quantize_activations(kt, qv, &mut s.q) {
                    failed.keep(Err(e));
                    return;
                }
                let m = mask.zip(sm).map(|(m, sm)| (m.row(qi, h as i64 % m.l.ne[2], sq % m.l.ne[3]), m.l.nb[0], sm));
                let slope = slopes[h];
                let mut max = f32::NEG_INFINITY;
                for (j, sc) in scores.iter_mut().enumerate() {
                    // SAFETY: the mask row has n_kv values (checked when the op was made).
                    let mv = m.map_or(0.0, |(row, nb0, sm)| unsafe { sm.load(row.add(j * nb0)) });
                    if mv == f32::NEG_INFINITY {
                        *sc = f32::NEG_INFINITY;
                        continue;
                    }
                    if hh == 0 {
                        // the first head fetches the keys for all of its group
                        dot::prefetch(k.row((j + AHEAD) as i64, kh as i64, sq), krow);
                    }
                    // SAFETY: key row (j, kh, seq) is krow packed bytes inside k.
                    let kr = unsafe { std::slice::from_raw_parts(k.row(j as i64, kh as i64, sq), krow) };
                    let x = kdot(n.d, kr, &s.q) * p.scale;
                    // soft_max_ext's fused `x + slope·m`; with slope 1 a plain add is the same
                    // bits (and no libm call on a CPU built without FMA)
                    *sc = if slope == 1.0 { x + mv } else { slope.mul_add(mv, x) };
                    // ggml's MAX(max, v), as soft_max_ext
                    max = if max > *sc { max } else { *sc };
                }
                let sink = sinks.as_ref().map(|s| s[h]);
                let max = sink.map_or(max, |s| max.max(s));
                let sum = sink.map_or(0f64, |s| f64::from((s - max).exp()));
                s.heads[hh] = Head { max, sum };
            }
            s.acc.fill(0.0);
            for j in 0..n.n_kv {
                dot::prefetch(v.row((j + AHEAD) as i64, kh as i64, sq), vrow);
                let mut widened = false;
                for (hh, head) in s.heads.iter_mut().enumerate() {
                    let sc = s.scores[hh * n.n_kv + j];
                    // a masked key adds exp(-inf) = 0: skip its exp (most of a short
                    // context's padded cache); a head whose every key is masked has none
                    if sc == f32::NEG_INFINITY || head.max == f32::NEG_INFINITY {
                        continue;
                    }
                    let e = (sc - head.max).exp();
                    head.sum += f64::from(e);
                    if e == 0.0 {
                        continue;
                    }
                    if !widened {
                        // SAFETY: value row (j, kh, seq) is vrow packed bytes inside v.
                        let vr = unsafe { std::slice::from_raw_parts(v.row(j as i64, kh as i64, sq), vrow) };
                        if let Err(err) = widen(vt, vr, &mut s.v) {
                            failed.keep(Err(err));
                            return;
                        }
                        widened = true;
                    }
                    let acc = &mut s.acc[hh * n.dv..(hh + 1) * n.dv];
                    acc.iter_mut().zip(&s.v).for_each(|(a, &x)| *a += e * x);
                }
            }
            for (hh, (head, acc)) in s.heads.iter().zip(s.acc.chunks_exact(n.dv)).enumerate() {
                // SAFETY: dst row (h, i, seq) is dv packed f32 of this item alone.
                let out = unsafe {
                    std::slice::from_raw_parts_mut(dst.row((kh * g + hh) as i64, qi, sq).cast::<f32>(), n.dv)
                };
                if head.max == f32::NEG_INFINITY {
                    out.fill(0.0);
                    continue;
                }
                let inv = (1.0 / head.sum) as f32;
                out.iter_mut().zip(acc).for_each(|(o, &a)| *o = a * inv);
            }
        }
    });
    failed.into_result()
}

/// One work item's scratch rows.
struct Scratch {
    /// One query in the key type's dot partner.
    q: Vec<u8>,
    /// Each query head's scores over the keys.
    scores: Vec<f32>,
    /// Each query head's weighted sum of value rows.
    acc: Vec<f32>,
    /// One value row in f32.
    v: Vec<f32>,
    /// Each query head's softmax maximum and sum.
    heads: Vec<Head>,
}

/// A query head's softmax state: its maximum score and the sum of exponentials.
#[derive(Clone, Copy, Default)]
struct Head {
    max: f32,
    sum: f64,
}

/// A value row as f32: F16 (the default cache) by the CPU's conversion
/// instruction when the row is aligned, everything else by `dequantize_row`.
fn widen(t: DType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    use half::slice::HalfFloatSliceExt;
    match bytemuck::try_cast_slice::<u8, half::f16>(src) {
        Ok(h) if t == DType::F16 && h.len() == dst.len() => {
            h.convert_to_f32_slice(dst);
            Ok(())
        }
        _ => quant::dequantize_row(t, src, dst),
    }
}
