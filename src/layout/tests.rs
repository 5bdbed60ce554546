//! Unit-test matrix for the layout predicates: size-1 dims, stride 0, offsets
//! and block types, against the definitions in DESIGN.md / ggml.

use super::*;

fn l(dtype: DType, ne: [i64; 4], nb: [usize; 4]) -> Layout {
    Layout { dtype, ne, nb, block_dim: 0 }
}
fn c(dtype: DType, ne: [i64; 4]) -> Layout {
    Layout::contiguous(dtype, ne).unwrap()
}

#[test]
fn fresh_strides() {
    assert_eq!(c(DType::F32, [3, 4, 5, 6]).nb, [4, 12, 48, 240]);
    assert_eq!(c(DType::F16, [3, 1, 2, 1]).nb, [2, 6, 6, 12]);
    // Q4_0: 64 values per row = 2 blocks of 18 bytes
    assert_eq!(c(DType::Q4_0, [64, 3, 1, 1]).nb, [18, 36, 108, 108]);
    assert_eq!(c(DType::Q6_K, [512, 2, 1, 1]).nb, [210, 420, 840, 840]);
    assert!(Layout::contiguous(DType::Q4_0, [48, 1, 1, 1]).is_err());
    assert!(Layout::contiguous(DType::F32, [-1, 1, 1, 1]).is_err());
    assert!(Layout::contiguous(DType::F32, [1 << 40, 1 << 40, 1 << 40, 1]).is_err());
}

#[test]
fn counts_and_sizes() {
    let a = c(DType::F32, [3, 4, 5, 6]);
    assert_eq!((a.nelements(), a.nrows(), a.row_size(), a.nbytes()), (360, 120, 12, 1440));
    let q = c(DType::Q8_0, [96, 2, 1, 1]);
    assert_eq!((q.nelements(), q.nrows(), q.row_size(), q.nbytes()), (192, 2, 102, 204));
    // empty
    let e = c(DType::F32, [0, 4, 1, 1]);
    assert_eq!((e.nelements(), e.nbytes(), e.is_empty()), (0, 0, true));
    // strided: nbytes is the extent, type_size + Σ (ne-1)·nb
    let s = l(DType::F32, [2, 3, 1, 1], [8, 40, 120, 120]);
    assert_eq!(s.nbytes(), 4 + 8 + 80);
    // stride 0 adds nothing
    let z = l(DType::F32, [4, 5, 1, 1], [4, 0, 0, 0]);
    assert_eq!(z.nbytes(), 16);
    // block type: ne0·nb0/block + Σ_{i≥1}
    let qs = l(DType::Q4_0, [64, 2, 1, 1], [18, 100, 200, 200]);
    assert_eq!(qs.nbytes(), 36 + 100);
}

#[test]
fn contiguity_matrix() {
    let cases: &[(Layout, bool, bool, bool, bool)] = &[
        // layout, contiguous, contiguous_rows, transposed, permuted
        (c(DType::F32, [3, 4, 5, 6]), true, true, false, false),
        // transposed 2-d
        (l(DType::F32, [4, 3, 1, 1], [12, 4, 48, 48]), false, false, true, true),
        // row padding
        (l(DType::F32, [3, 4, 1, 1], [4, 16, 64, 64]), false, true, false, false),
        // size-1 dims may have any stride
        (l(DType::F32, [3, 1, 2, 1], [4, 999, 12, 7]), true, true, false, true),
        // a single element with odd strides is contiguous (and, by ggml's nb0 > nb1, transposed)
        (l(DType::F32, [1, 1, 1, 1], [4, 0, 0, 0]), true, true, true, true),
        // stride 0 broadcast along dim 1
        (l(DType::F32, [3, 4, 1, 1], [4, 0, 0, 0]), false, true, true, true),
        // Q4_0 packed blocks
        (c(DType::Q4_0, [64, 3, 1, 1]), true, true, false, false),
        // Q4_0 with a padded row
        (l(DType::Q4_0, [64, 3, 1, 1], [18, 40, 120, 120]), false, true, false, false),
        // one block per row: nb0 is free (ggml's exemption)
        (l(DType::Q4_0, [32, 3, 1, 1], [99, 18, 54, 54]), true, true, true, true),
        // permuted dims 1,2 of a 3-d tensor
        (l(DType::F32, [2, 3, 4, 1], [4, 32, 8, 96]), false, true, false, true),
        // empty: nb1 = 0 < nb0, so ggml calls it transposed
        (c(DType::F32, [0, 3, 1, 1]), true, true, true, true),
    ];
    for (i, (lay, cont, rows, tr, perm)) in cases.iter().enumerate() {
        assert_eq!(lay.is_contiguous(), *cont, "case {i}: is_contiguous {lay:?}");
        assert_eq!(lay.is_contiguous_rows(), *rows, "case {i}: is_contiguous_rows {lay:?}");
        assert_eq!(lay.is_transposed(), *tr, "case {i}: is_transposed {lay:?}");
        assert_eq!(lay.is_permuted(), *perm, "case {i}: is_permuted {lay:?}");
    }
    // contiguous_1: dim 1 may be strided
    let p = l(DType::F32, [3, 4, 2, 1], [4, 16, 64, 128]);
    assert!(!p.is_contiguous() && p.is_contiguous_1());
}

#[test]
fn shape_stride_repeat() {
    let a = c(DType::F32, [4, 6, 2, 1]);
    let b = c(DType::F32, [2, 3, 1, 1]);
    let t = l(DType::F32, [4, 6, 2, 1], [24, 4, 96, 192]);
    assert!(a.same_shape(&t) && !a.same_stride(&t));
    assert!(b.can_repeat(&a));
    assert!(!a.can_repeat(&b));
    assert!(!c(DType::F32, [3, 1, 1, 1]).can_repeat(&a));
    // empty repeats only into empty
    assert!(c(DType::F32, [0, 1, 1, 1]).can_repeat(&c(DType::F32, [0, 2, 1, 1])));
    assert!(!c(DType::F32, [0, 1, 1, 1]).can_repeat(&a));
    assert!(b.can_repeat(&c(DType::F32, [0, 3, 1, 1])));
}

#[test]
fn self_overlap() {
    assert!(!c(DType::F32, [5, 7, 3, 2]).self_overlaps());
    // stride 0 on a dim of size > 1
    assert!(l(DType::F32, [4, 3, 1, 1], [4, 0, 0, 0]).self_overlaps());
    // stride 0 on a size-1 dim is harmless
    assert!(!l(DType::F32, [4, 1, 1, 1], [4, 0, 0, 0]).self_overlaps());
    // rows of 4 floats 8 bytes apart overlap
    assert!(l(DType::F32, [4, 3, 1, 1], [4, 8, 24, 24]).self_overlaps());
    // transposed is fine
    assert!(!l(DType::F32, [4, 3, 1, 1], [12, 4, 48, 48]).self_overlaps());
    // interleaved but disjoint: {0,8,16} + {0,12} bytes
    assert!(!l(DType::F32, [3, 2, 1, 1], [8, 12, 24, 24]).self_overlaps());
    // interleaved and colliding: {0,8,16} + {0,8}
    assert!(l(DType::F32, [3, 2, 1, 1], [8, 8, 16, 16]).self_overlaps());
    // blocks: a Q8_0 row of 2 blocks with stride 34 between rows: disjoint
    assert!(!l(DType::Q8_0, [64, 2, 1, 1], [34, 68, 136, 136]).self_overlaps());
    assert!(l(DType::Q8_0, [64, 2, 1, 1], [34, 34, 68, 68]).self_overlaps());
    assert!(!c(DType::F32, [0, 3, 1, 1]).self_overlaps());
}

#[test]
fn pairwise_overlap() {
    let row = c(DType::F32, [4, 1, 1, 1]);
    assert_eq!(row.overlap(0, &row, 0), Overlap::Same);
    assert_eq!(row.overlap(0, &row, 16), Overlap::None);
    assert_eq!(row.overlap(0, &row, 4), Overlap::Partial);
    // even and odd columns interleave without sharing bytes
    let even = l(DType::F32, [2, 2, 1, 1], [8, 16, 32, 32]);
    assert_eq!(even.overlap(0, &even, 4), Overlap::None);
    // same bytes, different shape
    let flat = c(DType::F32, [8, 1, 1, 1]);
    let sq = c(DType::F32, [4, 2, 1, 1]);
    assert_eq!(flat.overlap(0, &sq, 0), Overlap::Partial);
    // strides of size-1 dims address nothing: still the same places
    let odd = l(DType::F32, [4, 1, 3, 1], [4, 7, 16, 999]);
    let packed = c(DType::F32, [4, 1, 3, 1]);
    assert!(odd.same_places(&packed) && packed.same_places(&odd));
    assert_eq!(odd.overlap(0, &packed, 0), Overlap::Same);
    assert!(!odd.same_places(&c(DType::F32, [4, 3, 1, 1])));
    assert!(!packed.same_places(&l(DType::F16, [4, 1, 3, 1], [2, 8, 8, 24])));
    // a block type's blocks must run along the same dim
    let q = c(DType::Q4_0, [32, 32, 1, 1]);
    let mut qt = q;
    qt.block_dim = 1;
    assert!(q.same_places(&q) && !q.same_places(&qt));
}

#[test]
fn row_and_unit_indices() {
    // a permuted F32 view: dims 1 and 2 swapped
    let p = l(DType::F32, [3, 5, 4, 2], [4, 48, 12, 240]);
    let mut r = 0;
    for i3 in 0..2 {
        for i2 in 0..4 {
            for i1 in 0..5 {
                assert_eq!(p.row_index(r), [i1, i2, i3]);
                assert_eq!(p.row_offset(r), p.offset_of([0, i1, i2, i3]));
                r += 1;
            }
        }
    }
    // a Q4_0 tensor blocked along dim 1 (transposed rows of blocks): unit k
    // walks dim 0 fastest, and dim 1 counts blocks of 32 values
    let q = Layout { dtype: DType::Q4_0, ne: [3, 64, 2, 1], nb: [36, 18, 108, 216], block_dim: 1 };
    assert_eq!(q.unit_counts(), [3, 2, 2, 1]);
    let starts: Vec<usize> = (0..12).map(|k| q.unit_offset(q.unit_index(k))).collect();
    assert_eq!(starts, [0, 36, 72, 18, 54, 90, 108, 144, 180, 126, 162, 198]);
    assert_eq!(q.unit_offset(q.unit_index(4)), q.offset_of([1, 32, 0, 0]));
}
