//! `concat` along every dim and `repeat`, on every layout, bit-exact.

use super::*;

/// concat along every dim, every layout for both operands, F32 with special
/// values (bit-exact), F16 and I32; 1 and 2 threads.
#[test]
fn concat_matches_reference() {
    let mut rng = Rng(5);
    for dim in 0..4 {
        for (ka, kb) in [(Kind::Contig, Kind::Contig), (Kind::Padded, Kind::Transposed), (Kind::Permuted, Kind::Padded)]
        {
            for dtype in [DType::F32, DType::F16, DType::I32] {
                for threads in [1, 2] {
                    let (mut nea, mut neb) = ([5, 3, 4, 2], [5, 3, 4, 2]);
                    nea[dim] = 3;
                    neb[dim] = 2;
                    if threads == 2 {
                        nea = nea.map(|v| v * 5);
                        neb = neb.map(|v| v * 5);
                    }
                    let mut ctx = Context::new();
                    let r = if dtype == DType::I32 { 3.0e6 } else { 10.0 };
                    let a = input(&mut ctx, &mut rng, dtype, nea, ka, r);
                    let b = input(&mut ctx, &mut rng, dtype, neb, kb, r);
                    let c = ctx.concat(a.id, b.id, dim).unwrap();
                    let l = ctx.layout(c).unwrap();
                    let mut ne = nea;
                    ne[dim] += neb[dim];
                    assert_eq!((l.ne, l.dtype, l.is_contiguous()), (ne, dtype, true));
                    let want: Vec<f64> = indices(ne)
                        .map(|i| {
                            if i[dim] < nea[dim] {
                                a.vals[at(nea, i)]
                            } else {
                                let mut j = i;
                                j[dim] -= nea[dim];
                                b.vals[at(neb, j)]
                            }
                        })
                        .collect();
                    let what = format!("concat dim {dim} {ka:?}+{kb:?} {dtype} {threads}t");
                    check(&what, &run(&ctx, c, threads), &want, 0.0, 0.0);
                }
            }
        }
    }
    // bit for bit: NaN payloads, -0, infinities, subnormals survive
    let mut ctx = Context::new();
    let special = [f32::from_bits(0x7fc0_1234), -0.0, f32::INFINITY, f32::from_bits(1), 1.5];
    let a = ctx.new_f32(&[5, 1], &special).unwrap();
    let at_ = ctx.transpose(a).unwrap();
    let c = ctx.concat(at_, at_, 1).unwrap();
    let got = run(&ctx, c, 1);
    let bits: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
    let want: Vec<u32> = special.iter().chain(&special).map(|v| v.to_bits()).collect();
    assert_eq!(bits, want);
}

/// repeat from every layout to shapes tiling each dim, F32/F16/I32, 1 and 2
/// threads; repeat into the same shape is a copy. Exact.
#[test]
fn repeat_matches_reference() {
    let mut rng = Rng(11);
    let cases = [
        ([3, 2, 1, 1], [9, 4, 5, 2]),
        ([1, 3, 2, 1], [7, 3, 4, 3]),
        ([5, 4, 3, 2], [5, 4, 3, 2]),
        ([7, 5, 3, 1], [70, 20, 9, 4]),
    ];
    for (nea, ne) in cases {
        for kind in KINDS {
            for dtype in [DType::F32, DType::F16, DType::I32] {
                for threads in [1, 2] {
                    let mut ctx = Context::new();
                    let a = input(&mut ctx, &mut rng, dtype, nea, kind, 100.0);
                    let b = ctx.new_tensor(DType::F32, &ne).unwrap();
                    let r = ctx.repeat(a.id, b).unwrap();
                    let l = ctx.layout(r).unwrap();
                    assert_eq!((l.ne, l.dtype), (ne, dtype));
                    let want: Vec<f64> =
                        indices(ne).map(|i| a.vals[at(nea, [0, 1, 2, 3].map(|d| i[d] % nea[d]))]).collect();
                    let what = format!("repeat {nea:?}->{ne:?} {kind:?} {dtype} {threads}t");
                    check(&what, &run(&ctx, r, threads), &want, 0.0, 0.0);
                }
            }
        }
    }
}
