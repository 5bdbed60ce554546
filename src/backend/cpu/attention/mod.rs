//! `flash_attn_ext` on the CPU: one work item per query row and KV head, the
//! query heads of its group together, so that each key and value row comes
//! from memory once for all of them (and each value row is widened once). Each head's scores over the keys are
//! one row of scratch (never a scores tensor): the query converted to the key
//! type's dot partner (F16 for F16 keys, as ggml), then
//! - F16 or F32 keys on a CPU with AVX-512: sixteen keys at a time against the
//!   query widened back to f32 (`avx512`);
//! - other float keys, or AVX2: blocks of dots of the keys against the group's
//!   widened queries, as `mul_mat` makes them (`dot_blocks`);
//! - block-quantized keys: the key type's dot kernel, one key and head at a time.
//!
//! Keys past the last one the mask leaves to some head are never read (a short
//! context in a padded cache), nor are value rows every head gives weight 0
//! (a causal prompt reads half the cache). The softmax follows `soft_max_ext`
//! (f32 exponentials summed in f64), and the value rows, widened to f32, are
//! summed with their weights in key order.

#[cfg(target_arch = "x86_64")]
mod avx512;

use super::copy::f16_to_f32;
use super::dot_blocks::BlockRun;
use super::elementwise::zip_f32;
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
    let row = |t: DType, w: usize| {
        t.row_size(w as i64)
            .ok_or_else(|| Error::internal(format!("flash_attn_ext: {w} values are not whole {t} blocks")))
    };
    let a = Attention {
        qrow: row(dot::vec_dot_type(kt), n.d)?,
        krow: row(kt, n.d)?,
        vrow: row(vt, n.dv)?,
        kdot: dot::dot_fn(kt)?.raw(),
        keys: Keys::of(kt),
        wide_values: wide_rows(vt),
        mask: match mask {
            Some(m) => Some((m, Scalar::of("flash_attn_ext", m.l.dtype)?)),
            None => None,
        },
        slopes: alibi_slopes(u32::try_from(n.n_head).unwrap_or(u32::MAX), p.max_bias),
        sinks,
        scale: p.scale,
        q,
        k,
        v,
        dst,
        n,
    };
    // one item per KV head, query row and sequence: the query heads that share the
    // KV head read each key and value row once (each value row widened once)
    let (g, n_kv_heads) = (a.n.group, a.n.n_head / a.n.group);
    let units = n_kv_heads * a.n.n_q * a.q.l.ne[3] as usize;
    let failed = FirstError::default();
    ex.for_ranges(units, g * a.n.n_kv * (a.n.d + a.n.dv) * 2, |items| {
        let mut s = Scratch::new(&a);
        for item in items {
            let (kh, i, seq) = (item % n_kv_heads, (item / n_kv_heads) % a.n.n_q, item / (n_kv_heads * a.n.n_q));
            if let Err(e) = a.item(&mut s, Item { kh, i: i as i64, seq: seq as i64 }) {
                failed.keep(Err(e));
                return;
            }
        }
    });
    failed.into_result()
}

/// One attention's operands and what every work item reads of them.
struct Attention {
    n: Dims,
    q: Strided,
    k: Strided,
    v: Strided,
    dst: StridedMut,
    mask: Option<(Strided, Scalar)>,
    slopes: Vec<f32>,
    sinks: Option<Vec<f32>>,
    scale: f32,
    /// Bytes of a query in the key type's dot partner, of a key row, of a value row.
    qrow: usize,
    krow: usize,
    vrow: usize,
    kdot: dot::DotFn,
    keys: Keys,
    /// Whether the value rows are summed by the AVX-512 form ([`wide_rows`]).
    wide_values: bool,
}

/// How the scores are made.
#[derive(Clone, Copy, PartialEq)]
enum Keys {
    /// Sixteen keys at a time against each widened query (`avx512::scores16`):
    /// F16 or F32 keys on a CPU with AVX-512 ([`wide_rows`]).
    Wide,
    /// Blocks of dots of the keys against the widened queries of the group
    /// ([`BlockRun`]): other float keys, or a CPU with AVX2 only.
    Blocks,
    /// The key type's dot kernel, one key and head at a time.
    Dots,
}

impl Keys {
    fn of(kt: DType) -> Keys {
        if wide_rows(kt) {
            Keys::Wide
        } else if matches!(kt, DType::F32 | DType::F16 | DType::BF16) && dot::f32_block::supported() {
            Keys::Blocks
        } else {
            Keys::Dots
        }
    }
}

/// Whether rows of `t` go through the AVX-512 forms (`avx512`): F16 or F32 on
/// a CPU that has them.
fn wide_rows(t: DType) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        matches!(t, DType::F16 | DType::F32) && avx512::supported()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = t;
        false
    }
}

/// A work item: KV head `kh`, query row `i`, sequence `seq`.
#[derive(Clone, Copy)]
struct Item {
    kh: usize,
    i: i64,
    seq: i64,
}

impl Attention {
    /// The outputs of the query heads that share KV head `it.kh`, at query row
    /// `it.i` of sequence `it.seq`.
    fn item(&self, s: &mut Scratch, it: Item) -> Result<()> {
        self.queries(s, it)?;
        let end = self.masks(s, it);
        self.scores(s, it, end)?;
        self.softmax(s, it, end);
        self.values(s, it, end)?;
        let (g, dv) = (self.n.group, self.n.dv);
        for (hh, (head, acc)) in s.heads.iter().zip(s.acc.chunks_exact(dv)).enumerate() {
            // SAFETY: dst row (h, i, seq) is dv packed f32 of this item alone.
            let out = unsafe {
                std::slice::from_raw_parts_mut(self.dst.row((it.kh * g + hh) as i64, it.i, it.seq).cast::<f32>(), dv)
            };
            if head.max == f32::NEG_INFINITY {
                out.fill(0.0);
                continue;
            }
            let inv = (1.0 / head.sum) as f32;
            out.iter_mut().zip(acc).for_each(|(o, &a)| *o = a * inv);
        }
        Ok(())
    }

    /// Each query head's row in the key type's dot partner (and widened back to
    /// f32 for the blocks of dots).
    fn queries(&self, s: &mut Scratch, it: Item) -> Result<()> {
        let d = self.n.d;
        for hh in 0..self.n.group {
            let h = (it.kh * self.n.group + hh) as i64;
            // SAFETY: row (i, h, seq) of q holds d packed f32 (rows_packed, checked
            // when the op was made), inside q's tensor.
            let qv = unsafe { std::slice::from_raw_parts(self.q.row(it.i, h, it.seq).cast::<f32>(), d) };
            let q = &mut s.q[hh * self.qrow..(hh + 1) * self.qrow];
            dot::quantize_activations(self.k.l.dtype, qv, q)?;
            if self.keys != Keys::Dots {
                widen(dot::vec_dot_type(self.k.l.dtype), q, &mut s.qf[hh * d..(hh + 1) * d])?;
            }
        }
        Ok(())
    }

    /// Each head's mask values into its scores (0 without a mask); the number
    /// of keys up to the last one some head does not mask (the rest of a short
    /// context's padded cache is never read).
    fn masks(&self, s: &mut Scratch, it: Item) -> usize {
        let n_kv = self.n.n_kv;
        let Some((m, sm)) = self.mask else {
            s.scores.fill(0.0);
            return n_kv;
        };
        let mut end = 0;
        for hh in 0..self.n.group {
            let (done, rest) = s.scores.split_at_mut(hh * n_kv);
            let scores = &mut rest[..n_kv];
            if hh > 0 && m.l.ne[2] == 1 {
                // one mask row for every head
                scores.copy_from_slice(&done[..n_kv]);
                continue;
            }
            let h = (it.kh * self.n.group + hh) as i64;
            let (row, nb0) = (m.row(it.i, h % m.l.ne[2], it.seq % m.l.ne[3]), m.l.nb[0]);
            if matches!(sm, Scalar::F32) && nb0 == 4 {
                // SAFETY: the mask row has n_kv packed f32 (checked when the op was made).
                scores.copy_from_slice(unsafe { std::slice::from_raw_parts(row.cast::<f32>(), n_kv) });
            } else {
                for (j, sc) in scores.iter_mut().enumerate() {
                    // SAFETY: the mask row has n_kv values (checked when the op was made).
                    *sc = unsafe { sm.load(row.add(j * nb0)) };
                }
            }
            end = end.max(scores.iter().rposition(|&x| x != f32::NEG_INFINITY).map_or(0, |j| j + 1));
        }
        end
    }

    /// Each head's scores over keys `..end`: `scale·q·k + slope·m` where the
    /// mask value `m` (in the scores) is not `-inf`.
    fn scores(&self, s: &mut Scratch, it: Item, end: usize) -> Result<()> {
        let (g, n_kv) = (self.n.group, self.n.n_kv);
        let combine = |x: f32, mv: f32, slope: f32| {
            let x = x * self.scale;
            // soft_max_ext's fused `x + slope·m`; with slope 1 a plain add is the same
            // bits (and no libm call on a CPU built without FMA)
            if slope == 1.0 {
                x + mv
            } else {
                slope.mul_add(mv, x)
            }
        };
        let slope = |hh: usize| self.slopes[it.kh * g + hh];
        let key = |j: usize| self.k.row(j as i64, it.kh as i64, it.seq);
        #[cfg(target_arch = "x86_64")]
        if self.keys == Keys::Wide {
            let (d, half) = (self.n.d, self.k.l.dtype == DType::F16);
            let mut x = [0f32; 16];
            for (hh, scores) in s.scores.chunks_exact_mut(n_kv).enumerate() {
                let q = s.qf[hh * d..].as_ptr();
                for j0 in (0..end).step_by(16) {
                    let n = (end - j0).min(16);
                    // SAFETY: keys j0..j0 + n (< n_kv) are d packed values each, nb[1]
                    // apart inside k; the query d f32; `x` 16; AVX-512 is present (Keys::of).
                    unsafe {
                        let (k0, nb1) = (key(j0), self.k.l.nb[1]);
                        if half {
                            avx512::scores16::<true>(d, q, k0, nb1, n, x.as_mut_ptr())
                        } else {
                            avx512::scores16::<false>(d, q, k0, nb1, n, x.as_mut_ptr())
                        }
                    }
                    for (sc, &x) in scores[j0..j0 + n].iter_mut().zip(&x) {
                        if *sc != f32::NEG_INFINITY {
                            *sc = combine(x, *sc, slope(hh));
                        }
                    }
                }
            }
            return Ok(());
        }
        if self.keys == Keys::Blocks {
            // every key against every head of the group: each key row read once
            let cells = std::cell::Cell::from_mut(&mut s.scores[..]).as_slice_of_cells();
            let qf = s.qf.as_ptr();
            let run = BlockRun { k: self.n.d, wt: self.k.l.dtype, rows: 0..end, n1: g };
            let put = |j: usize, hh: usize, x: f32| {
                let sc = &cells[hh * n_kv + j];
                if sc.get() != f32::NEG_INFINITY {
                    sc.set(combine(x, sc.get(), slope(hh)));
                }
            };
            // SAFETY: key row (j, kh, seq) holds d values of the key type inside k
            // (j < end ≤ n_kv); widened query hh is d f32 of `qf`.
            return unsafe { run.run(dot::f32_block::wide(), key, |hh| qf.add(hh * self.n.d).cast(), put) };
        }
        for (hh, scores) in s.scores.chunks_exact_mut(n_kv).enumerate() {
            let q = &s.q[hh * self.qrow..(hh + 1) * self.qrow];
            for (j, sc) in scores[..end].iter_mut().enumerate() {
                if *sc == f32::NEG_INFINITY {
                    continue;
                }
                if hh == 0 {
                    // the first head fetches the keys for all of its group
                    dot::prefetch(key(j + AHEAD), self.krow);
                }
                // SAFETY: key row (j, kh, seq) is krow packed bytes inside k.
                let kr = unsafe { std::slice::from_raw_parts(key(j), self.krow) };
                *sc = combine((self.kdot)(self.n.d, kr, q), *sc, slope(hh));
            }
        }
        Ok(())
    }

    /// Each head's softmax over keys `..end`: its maximum (and sink) and the sum
    /// of its exponentials (f32 exponentials summed in f64, as `soft_max_ext`),
    /// the scores replaced by their exponentials (all 0 for a head whose every
    /// key is masked).
    fn softmax(&self, s: &mut Scratch, it: Item, end: usize) {
        for (hh, (scores, head)) in s.scores.chunks_exact_mut(self.n.n_kv).zip(&mut s.heads).enumerate() {
            let scores = &mut scores[..end];
            // ggml's MAX(max, v), as soft_max_ext
            let max = scores.iter().fold(f32::NEG_INFINITY, |m, &v| if m > v { m } else { v });
            let sink = self.sinks.as_ref().map(|s| s[it.kh * self.n.group + hh]);
            let max = sink.map_or(max, |s| max.max(s));
            let mut sum = sink.map_or(0f64, |s| f64::from((s - max).exp()));
            for sc in scores.iter_mut() {
                // a masked key adds exp(-inf) = 0: skip its exp
                *sc = if *sc == f32::NEG_INFINITY || max == f32::NEG_INFINITY { 0.0 } else { (*sc - max).exp() };
                sum += f64::from(*sc);
            }
            *head = Head { max, sum };
        }
    }

    /// Each head's sum of value rows `..end` weighted by its exponentials; the
    /// rows every head gives weight 0 are not read.
    fn values(&self, s: &mut Scratch, it: Item, end: usize) -> Result<()> {
        let (n_kv, dv, g) = (self.n.n_kv, self.n.dv, self.n.group);
        s.live.clear();
        s.live.extend((0..end as u32).filter(|&j| (0..g).any(|hh| s.scores[hh * n_kv + j as usize] != 0.0)));
        let row = |j: usize| self.v.row(j as i64, it.kh as i64, it.seq);
        #[cfg(target_arch = "x86_64")]
        if self.wide_values {
            let (v, w) = ((row(0), self.v.l.nb[1]), (s.scores.as_ptr(), n_kv, g));
            // SAFETY: value rows j < end ≤ n_kv are dv packed values, nb[1] apart
            // inside v; the weights are g · n_kv f32, `acc` g · dv; AVX-512 is
            // present (wide_rows).
            unsafe {
                if self.v.l.dtype == DType::F16 {
                    avx512::weighted_sum::<true>(dv, v, &s.live, w, s.acc.as_mut_ptr())
                } else {
                    avx512::weighted_sum::<false>(dv, v, &s.live, w, s.acc.as_mut_ptr())
                }
            }
            return Ok(());
        }
        s.acc.fill(0.0);
        for (n, &j) in s.live.iter().enumerate() {
            let j = j as usize;
            if let Some(&ahead) = s.live.get(n + AHEAD) {
                dot::prefetch(row(ahead as usize), self.vrow);
            }
            // SAFETY: value row (j, kh, seq) is vrow packed bytes inside v.
            widen(self.v.l.dtype, unsafe { std::slice::from_raw_parts(row(j), self.vrow) }, &mut s.v)?;
            for (hh, acc) in s.acc.chunks_exact_mut(dv).enumerate() {
                let e = s.scores[hh * n_kv + j];
                if e != 0.0 {
                    // SAFETY: `acc` and `s.v` hold dv floats each; `acc` is both output and input.
                    unsafe { zip_f32(acc.as_mut_ptr(), acc.as_ptr(), s.v.as_ptr(), dv, |a, x| a + e * x) };
                }
            }
        }
        Ok(())
    }
}

/// One work item's scratch rows.
struct Scratch {
    /// Each query head's query in the key type's dot partner.
    q: Vec<u8>,
    /// The same widened to f32 (for the blocks of dots).
    qf: Vec<f32>,
    /// Each query head's scores over the keys, then its exponentials.
    scores: Vec<f32>,
    /// Each query head's weighted sum of value rows.
    acc: Vec<f32>,
    /// One value row in f32.
    v: Vec<f32>,
    /// Each query head's softmax maximum and sum.
    heads: Vec<Head>,
    /// The keys some head gives a weight other than 0.
    live: Vec<u32>,
}

impl Scratch {
    fn new(a: &Attention) -> Scratch {
        let (g, n) = (a.n.group, &a.n);
        Scratch {
            q: vec![0u8; g * a.qrow],
            qf: vec![0f32; if a.keys == Keys::Dots { 0 } else { g * n.d }],
            scores: vec![0f32; g * n.n_kv],
            acc: vec![0f32; g * n.dv],
            v: vec![0f32; n.dv],
            heads: vec![Head::default(); g],
            live: Vec::with_capacity(n.n_kv),
        }
    }
}

/// A query head's softmax state: its maximum score and the sum of exponentials.
#[derive(Clone, Copy, Default)]
struct Head {
    max: f32,
    sum: f64,
}

/// A value row as f32: F16 (the default cache) by the CPU's widest conversion
/// when the row is aligned, everything else by `dequantize_row`.
fn widen(t: DType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    match bytemuck::try_cast_slice::<u8, half::f16>(src) {
        Ok(h) if t == DType::F16 && h.len() == dst.len() => {
            f16_to_f32(dst, h);
            Ok(())
        }
        _ => quant::dequantize_row(t, src, dst),
    }
}
