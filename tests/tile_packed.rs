//! Weights repacked ahead of time (`TileKernel::pack_group` / `run_packed`:
//! every type with an AVX2 or AVX-512 VNNI tile): on
//! every group shape (1..=mr weight rows, k = 1, 3 and 129 (k-quants: 17) blocks, 0..=37 activation rows, unaligned slices, an
//! output stride wider than the group), the repacked kernel gives exactly the
//! bits `TileKernel::run` gives on the rows themselves, and writes nothing
//! else; `run` itself is checked against the scalar dot in `tests/tile.rs`.
//! Also the argument checks, and that kernels without a repacked form say so.

mod common;

use common::Rng;
use rgml::quant::dot::{quantize_activations, vec_dot_type, SimdLevel};
use rgml::quant::quantize_row;
use rgml::quant::tile::{packed_q4_0_block, tile_kernel_for, TileKernel};
use rgml::{DType, Error};

/// The weight types and levels with a repacked kernel.
const PACKING: [(DType, SimdLevel); 17] = [
    (DType::Q4_0, SimdLevel::Avx2),
    (DType::Q4_1, SimdLevel::Avx2),
    (DType::Q5_0, SimdLevel::Avx2),
    (DType::Q8_0, SimdLevel::Avx2),
    (DType::IQ4_NL, SimdLevel::Avx2),
    (DType::Q4_K, SimdLevel::Avx2),
    (DType::Q5_K, SimdLevel::Avx2),
    (DType::Q6_K, SimdLevel::Avx2),
    (DType::Q4_0, SimdLevel::Avx512),
    (DType::Q4_1, SimdLevel::Avx512),
    (DType::Q5_0, SimdLevel::Avx512),
    (DType::Q8_0, SimdLevel::Avx512),
    (DType::IQ4_NL, SimdLevel::Avx512),
    (DType::Q4_K, SimdLevel::Avx512),
    (DType::Q5_K, SimdLevel::Avx512),
    (DType::Q6_K, SimdLevel::Avx512),
    (DType::IQ4_XS, SimdLevel::Avx512),
];

/// The kernels with a repacked form that this CPU runs.
fn packing() -> Vec<TileKernel> {
    PACKING
        .into_iter()
        .filter_map(|(w, l)| {
            let t = tile_kernel_for(w, l);
            if t.is_none() {
                eprintln!("skipped: this CPU lacks {l:?}, where {w} has a repacked kernel");
            }
            t
        })
        .collect()
}

/// `v` copied to start one byte past an aligned address.
fn unaligned(v: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; v.len() + 1];
    b[1..].copy_from_slice(v);
    b
}

/// Weight rows (the kernel's type) and prepared activation rows of `k`
/// values; with `random`, the weights are random bytes (Q4_0: any nibbles,
/// any finite scales; Q4_K: any quants and 6-bit scales, `d` and `dmin` kept).
fn operands(t: &TileKernel, k: usize, m: usize, n: usize, random: bool, rng: &mut Rng) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let w = t.weight_type();
    let wr = (0..m)
        .map(|_| {
            let mut q = vec![0u8; w.row_size(k as i64).unwrap()];
            quantize_row(w, &rng.vec(k, 1.0), &mut q).unwrap();
            if random {
                for (i, b) in q.iter_mut().enumerate() {
                    *b = match (w, i % w.type_size()) {
                        // Q4_0 scales (2 of every 18 bytes) stay finite f16: exponent bits below all-ones
                        (DType::Q4_0, 1) => (rng.next() % 0x78) as u8,
                        (DType::Q4_K, 0..4) => *b,
                        _ => rng.next() as u8,
                    };
                }
            }
            unaligned(&q)
        })
        .collect();
    let ar = (0..n)
        .map(|_| {
            let mut q = vec![0u8; vec_dot_type(w).row_size(k as i64).unwrap()];
            quantize_activations(w, &rng.vec(k, 1.0), &mut q).unwrap();
            let mut p = vec![0u8; t.prepared_row_size(k).unwrap()];
            t.prepare(&q, &mut p).unwrap();
            unaligned(&p)
        })
        .collect();
    (wr, ar)
}

#[test]
fn repacked_groups_give_the_bits_of_the_rows() {
    for t in packing() {
        repacked_group_bits(&t);
    }
}

fn repacked_group_bits(t: &TileKernel) {
    assert!(t.packs());
    let mut rng = Rng(7);
    let (mr, bs) = (t.mr(), t.weight_type().block_size());
    for k in [bs, 3 * bs, 4096 + bs] {
        for m in (1..=mr).filter(|&m| k < 4096 || [1, mr - 1, mr].contains(&m)) {
            for n in [0, 1, 2, 3, 5, 8, 9, 13, 19, 37] {
                let random = rng.next().is_multiple_of(2);
                let (wr, ar) = operands(t, k, m, n, random, &mut rng);
                let w: Vec<&[u8]> = wr.iter().map(|r| &r[1..]).collect();
                let a: Vec<&[u8]> = ar.iter().map(|r| &r[1..]).collect();
                let mut group = unaligned(&vec![0u8; t.packed_group_size(k).unwrap()]);
                t.pack_group(k, &w, &mut group[1..]).unwrap();
                let stride = m + (rng.next() % 3) as usize;
                let (mut want, mut got) = (vec![-1.5f32; n * stride], vec![-1.5f32; n * stride]);
                t.run(k, &w, &a, &mut want, stride).unwrap();
                t.run_packed(k, &group[1..], m, &a, &mut got, stride).unwrap();
                // random scales may be NaN: a NaN's payload is whichever operand's the
                // instruction keeps, an order the compiler chooses, so all NaNs compare as one
                let bits = |v: &[f32]| {
                    v.iter().map(|x| if x.is_nan() { f32::NAN.to_bits() } else { x.to_bits() }).collect::<Vec<_>>()
                };
                assert_eq!(bits(&got), bits(&want), "{t:?} k={k} m={m} n={n} stride={stride} random={random}");
            }
        }
    }
}

#[test]
fn a_run_of_groups_gives_the_bits_of_its_groups() {
    for t in packing() {
        let mut rng = Rng(11);
        let (mr, bs) = (t.mr(), t.weight_type().block_size());
        for k in [bs, 5 * bs] {
            // whole groups, and a partial last one
            for m in [3 * mr, 2 * mr + 5, mr + 1] {
                for n in [1, 2, 5] {
                    let (wr, ar) = operands(&t, k, m, n, rng.next().is_multiple_of(2), &mut rng);
                    let w: Vec<&[u8]> = wr.iter().map(|r| &r[1..]).collect();
                    let a: Vec<&[u8]> = ar.iter().map(|r| &r[1..]).collect();
                    let gs = t.packed_group_size(k).unwrap();
                    let mut run = unaligned(&vec![0u8; gs * m.div_ceil(mr)]);
                    for (rows, g) in w.chunks(mr).zip(run[1..].chunks_exact_mut(gs)) {
                        t.pack_group(k, rows, g).unwrap();
                    }
                    let stride = m + 2;
                    let (mut want, mut got) = (vec![-1.5f32; n * stride], vec![-1.5f32; n * stride]);
                    for (i, (rows, g)) in w.chunks(mr).zip(run[1..].chunks_exact(gs)).enumerate() {
                        t.run_packed(k, g, rows.len(), &a, &mut want[i * mr..], stride).unwrap();
                    }
                    t.run_packed(k, &run[1..], m, &a, &mut got, stride).unwrap();
                    let bits = |v: &[f32]| {
                        v.iter().map(|x| if x.is_nan() { f32::NAN.to_bits() } else { x.to_bits() }).collect::<Vec<_>>()
                    };
                    assert_eq!(bits(&got), bits(&want), "{t:?} k={k} m={m} n={n}");
                    // a run one group short of its rows is refused
                    let short = &run[1..run.len() - gs];
                    assert!(matches!(t.run_packed(k, short, m, &a, &mut got, stride), Err(Error::Shape { .. })));
                }
            }
        }
    }
}

#[test]
fn the_packed_layout_is_the_documented_one() {
    // two rows of two blocks with distinct bytes: scale bytes 100 + 18b + i, quants 18b + i
    let rows: Vec<Vec<u8>> =
        (0..2u8).map(|r| (0..36u8).map(|i| if i % 18 < 2 { 100 + i + 50 * r } else { i + 50 * r }).collect()).collect();
    let w: Vec<&[u8]> = rows.iter().map(Vec::as_slice).collect();
    for t in packing().into_iter().filter(|t| t.weight_type() == DType::Q4_0) {
        let (mr, blk) = (t.mr(), packed_q4_0_block(t.mr()));
        assert_eq!(blk, 18 * mr);
        let mut g = vec![0u8; 2 * blk];
        t.pack_group(64, &w, &mut g).unwrap();
        for b in 0..2 {
            let blk = &g[b * blk..(b + 1) * blk];
            for r in 0..mr {
                let src = &rows[if r < 2 { r } else { 0 }][b * 18..(b + 1) * 18];
                for e in 0..4 {
                    let at = 4 * mr * e + 4 * r;
                    assert_eq!(blk[at..at + 4], src[2 + 4 * e..6 + 4 * e], "{t:?} b={b} r={r} e={e}");
                }
                assert_eq!(blk[16 * mr + 2 * r..16 * mr + 2 * r + 2], src[..2], "{t:?} scale b={b} r={r}");
            }
        }
    }
}

#[test]
fn q4_k_is_packed_by_dwords() {
    for t in packing().into_iter().filter(|t| t.weight_type() == DType::Q4_K) {
        let mr = t.mr();
        // three rows of two super-blocks, every byte distinct modulo 251
        let rows: Vec<Vec<u8>> = (0..3).map(|r| (0..288).map(|i| ((r * 288 + i) % 251) as u8).collect()).collect();
        let w: Vec<&[u8]> = rows.iter().map(Vec::as_slice).collect();
        let mut g = vec![0u8; t.packed_group_size(512).unwrap()];
        t.pack_group(512, &w, &mut g).unwrap();
        for b in 0..2 {
            for r in 0..mr {
                let src = &rows[if r < 3 { r } else { 0 }][b * 144..(b + 1) * 144];
                for v in 0..36 {
                    let at = 144 * mr * b + 4 * (mr * v + r);
                    assert_eq!(g[at..at + 4], src[4 * v..4 * v + 4], "b={b} r={r} v={v}");
                }
            }
        }
    }
}

/// The bytes of a block kept outside its transposed body in a repacked group
/// (the layout `TileKernel::pack_group` documents): (head, tail).
fn split(w: DType) -> (usize, usize) {
    match w {
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 | DType::IQ4_NL => (2, 0),
        DType::Q6_K => (0, 2),
        _ => (0, 0),
    }
}

/// A Q5_0 `qh` (bit `i` for value `i`) as a repacked group keeps it: value
/// `i`'s bit at bit `i / 4` of byte `i % 4`, bit by bit.
fn regrouped_qh(qh: [u8; 4]) -> [u8; 4] {
    let mut out = [0u8; 4];
    for i in 0..32 {
        if qh[i / 8] >> (i % 8) & 1 == 1 {
            out[i % 4] |= 1 << (i / 4);
        }
    }
    out
}

#[test]
fn every_packed_layout_is_the_documented_one() {
    for t in packing() {
        let (w, mr) = (t.weight_type(), t.mr());
        let (wb, (head, tail)) = (w.type_size(), split(w));
        let body = wb - head - tail;
        // three rows of two blocks, every byte distinct modulo 251
        let rows: Vec<Vec<u8>> =
            (0..3).map(|r| (0..2 * wb).map(|i| ((r * 2 * wb + i) % 251) as u8).collect()).collect();
        let w_rows: Vec<&[u8]> = rows.iter().map(Vec::as_slice).collect();
        let k = 2 * w.block_size();
        let mut g = vec![0u8; t.packed_group_size(k).unwrap()];
        t.pack_group(k, &w_rows, &mut g).unwrap();
        for b in 0..2 {
            let blk = &g[b * wb * mr..(b + 1) * wb * mr];
            for r in 0..mr {
                let src = &rows[if r < 3 { r } else { 0 }][b * wb..(b + 1) * wb];
                for v in 0..body / 4 {
                    let at = 4 * (mr * v + r);
                    let mut want: [u8; 4] = src[head + 4 * v..head + 4 * v + 4].try_into().unwrap();
                    if w == DType::Q5_0 && v == 0 {
                        want = regrouped_qh(want);
                    }
                    assert_eq!(blk[at..at + 4], want, "{t:?} b={b} r={r} v={v}");
                }
                let end = &blk[mr * body + (head + tail) * r..mr * body + (head + tail) * (r + 1)];
                assert_eq!(end[..head], src[..head], "{t:?} head b={b} r={r}");
                assert_eq!(end[head..], src[wb - tail..], "{t:?} tail b={b} r={r}");
            }
        }
    }
}

#[test]
fn packing_checks_its_arguments() {
    for (w, l) in [(DType::Q4_0, SimdLevel::Scalar), (DType::Q4_K, SimdLevel::Scalar), (DType::Q6_K, SimdLevel::Scalar)]
    {
        let Some(t) = tile_kernel_for(w, l) else { continue };
        assert!(!t.packs() && t.packed_group_size(32).is_none(), "{t:?}");
        let row = vec![0u8; w.row_size(w.block_size() as i64).unwrap()];
        let r = t.pack_group(w.block_size(), &[&row], &mut [0u8; 288]);
        assert!(matches!(r, Err(Error::Unsupported { .. })), "{t:?}: {r:?}");
        assert!(matches!(t.run_packed(32, &[0u8; 288], 1, &[], &mut [], 1), Err(Error::Unsupported { .. })));
    }
    for t in packing() {
        packing_checks(&t);
    }
}

fn packing_checks(t: &TileKernel) {
    let (mr, w) = (t.mr(), t.weight_type());
    let (bs, wb) = (w.block_size(), w.type_size());
    let (k, size) = (2 * bs, 2 * wb * mr);
    assert_eq!(t.packed_group_size(k), Some(size));
    assert_eq!(t.packed_group_size(bs + 1), None);
    let row = vec![0u8; 2 * wb];
    let act = vec![0u8; t.prepared_row_size(k).unwrap()];
    let (row, act) = (&row[..], &act[..]);
    let mut g = vec![0u8; size];
    let too_many = vec![row; mr + 1];
    let shape = |r: rgml::Result<()>| matches!(r, Err(Error::Shape { .. }));
    assert!(shape(t.pack_group(k - 16, &[row], &mut g)));
    assert!(shape(t.pack_group(k + bs, &[row], &mut g)), "rows shorter than k");
    assert!(shape(t.pack_group(k, &[], &mut g)));
    assert!(shape(t.pack_group(k, &too_many, &mut g)));
    assert!(shape(t.pack_group(k, &[&row[1..]], &mut g)));
    assert!(shape(t.pack_group(k, &[row], &mut g[1..])));
    t.pack_group(k, &[row, row], &mut g).unwrap();
    assert!(shape(t.run_packed(k, &g[1..], 2, &[act], &mut [0.0; 2], 2)));
    assert!(shape(t.run_packed(k, &g, 0, &[act], &mut [0.0; 2], 2)));
    assert!(shape(t.run_packed(k, &g, mr + 1, &[act], &mut vec![0.0; mr + 1], mr + 1)));
    assert!(shape(t.run_packed(k, &g, 2, &[&act[1..]], &mut [0.0; 2], 2)));
    assert!(shape(t.run_packed(k, &g, 2, &[act, act], &mut [0.0; 3], 2)));
    assert!(shape(t.run_packed(k, &g, 2, &[act, act], &mut [0.0; 4], 1)));
    let mut out = [9.0f32; 4];
    t.run_packed(k, &g, 2, &[act, act], &mut out, 2).unwrap();
    assert_eq!(out, [0.0; 4], "zero weights give zeros");
}
