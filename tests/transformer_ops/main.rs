//! The transformer ops (`rms_norm`, `norm`, `soft_max_ext`, `diag_mask_inf`,
//! `rope_ext`, `concat`, `repeat`, the gated linear units) against f64 references written here from the
//! op definitions, at odd sizes, on contiguous, padded, transposed and permuted
//! inputs, with 1 and 2 threads (poison mode on, so reads of unwritten memory
//! show up as NaN); and the errors for bad shapes and types.

#[path = "../common/mod.rs"]
mod common;
mod concat_repeat;
mod diag_mask;
mod errors;
mod flash_attn;
mod glu;
mod norms;
mod rope;
mod soft_max;

use common::Rng;
use rgml::{f16, Context, CpuBackend, DType, Error, Graph, RopeParams, TensorId};

/// How an input tensor is laid out in memory.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// A fresh contiguous leaf.
    Contig,
    /// A window into a bigger tensor: rows padded, offset from the start.
    Padded,
    /// The transpose of a leaf of shape `[ne1, ne0, ne2, ne3]` (`nb0 > nb1`).
    Transposed,
    /// A leaf of shape `[ne2, ne0, ne3, ne1]` permuted back (all strides shuffled).
    Permuted,
}

const KINDS: [Kind; 4] = [Kind::Contig, Kind::Padded, Kind::Transposed, Kind::Permuted];

/// A test input: its id and its values in logical order (`ne0` fastest), as
/// stored (rounded to the tensor's type).
struct Input {
    id: TensorId,
    vals: Vec<f64>,
}

/// Flat index of `(i0, i1, i2, i3)` in logical order.
fn at(ne: [i64; 4], i: [i64; 4]) -> usize {
    (i[0] + ne[0] * (i[1] + ne[1] * (i[2] + ne[2] * i[3]))) as usize
}

/// Every index of `ne` in logical order.
fn indices(ne: [i64; 4]) -> impl Iterator<Item = [i64; 4]> {
    let n: i64 = ne.iter().product();
    (0..n).map(move |k| [k % ne[0], k / ne[0] % ne[1], k / (ne[0] * ne[1]) % ne[2], k / (ne[0] * ne[1] * ne[2])])
}

/// Fills a new leaf of `dtype` and shape `ne` with `vals` (rounded to the
/// type); returns the values as stored.
fn leaf(ctx: &mut Context, dtype: DType, ne: [i64; 4], vals: &[f32]) -> (TensorId, Vec<f64>) {
    let id = ctx.new_tensor(dtype, &ne).unwrap();
    let stored: Vec<f64> = match dtype {
        DType::F32 => {
            ctx.set_data(id, vals).unwrap();
            vals.iter().map(|&v| f64::from(v)).collect()
        }
        DType::F16 => {
            let h: Vec<f16> = vals.iter().map(|&v| f16::from_f32(v)).collect();
            ctx.set_data(id, &h).unwrap();
            h.iter().map(|v| f64::from(v.to_f32())).collect()
        }
        DType::BF16 => {
            let h: Vec<rgml::bf16> = vals.iter().map(|&v| rgml::bf16::from_f32(v)).collect();
            ctx.set_data(id, &h).unwrap();
            h.iter().map(|v| f64::from(v.to_f32())).collect()
        }
        DType::I32 => {
            let h: Vec<i32> = vals.iter().map(|&v| v as i32).collect();
            ctx.set_data(id, &h).unwrap();
            h.iter().map(|&v| f64::from(v)).collect()
        }
        d => panic!("test helper: {d} not handled"),
    };
    (id, stored)
}

/// An input of logical shape `ne` laid out as `kind`, random values in `[-r, r)`.
fn input(ctx: &mut Context, rng: &mut Rng, dtype: DType, ne: [i64; 4], kind: Kind, r: f32) -> Input {
    let base_ne = match kind {
        Kind::Contig => ne,
        Kind::Padded => [ne[0] + 3, ne[1] + 1, ne[2], ne[3]],
        Kind::Transposed => [ne[1], ne[0], ne[2], ne[3]],
        Kind::Permuted => [ne[2], ne[0], ne[3], ne[1]],
    };
    let n: i64 = base_ne.iter().product();
    let raw: Vec<f32> = (0..n).map(|_| rng.f(r)).collect();
    let (base, stored) = leaf(ctx, dtype, base_ne, &raw);
    let bl = ctx.layout(base).unwrap();
    let id = match kind {
        Kind::Contig => base,
        Kind::Padded => ctx.view_4d(base, ne, [bl.nb[1], bl.nb[2], bl.nb[3]], bl.nb[1] + 2 * bl.nb[0]).unwrap(),
        Kind::Transposed => ctx.transpose(base).unwrap(),
        Kind::Permuted => ctx.permute(base, [2, 0, 3, 1]).unwrap(),
    };
    let l = ctx.layout(id).unwrap();
    assert_eq!(l.ne, ne);
    // (a permute over size-1 dims may still be contiguous; the others never are)
    if matches!(kind, Kind::Padded | Kind::Transposed) && ne[0] > 1 && ne[1] > 1 {
        assert!(!l.is_contiguous(), "{kind:?} input should not be contiguous: {l:?}");
    }
    let offs = ctx.tensor(id).unwrap().view_offs();
    let ts = dtype.type_size();
    let vals = indices(ne)
        .map(|i| {
            let byte = offs + (0..4).map(|d| i[d] as usize * l.nb[d]).sum::<usize>();
            stored[byte / ts]
        })
        .collect();
    Input { id, vals }
}

/// Runs `out` with `threads` threads (poison mode) and reads it back.
fn run(ctx: &Context, out: TensorId, threads: usize) -> Vec<f32> {
    let g = Graph::build(ctx, &[out]).unwrap();
    let cpu = CpuBackend::new(threads).unwrap().with_poison(true);
    let st = cpu.run(ctx, &g).unwrap();
    st.read_f32(ctx, out).unwrap()
}

/// Asserts `|got - want| <= atol + rtol*|want|` everywhere (infinities must
/// match exactly); returns the largest error seen, for the record.
fn check(what: &str, got: &[f32], want: &[f64], rtol: f64, atol: f64) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut worst = 0f64;
    for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
        let g = f64::from(g);
        if w.is_infinite() || g.is_infinite() {
            assert_eq!(g, w, "{what}: element {k}");
            continue;
        }
        let err = (g - w).abs();
        assert!(err <= atol + rtol * w.abs(), "{what}: element {k}: got {g}, want {w} (err {err:e})");
        worst = worst.max(err);
    }
    worst
}
