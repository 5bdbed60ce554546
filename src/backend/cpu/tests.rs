//! Edge tests of the raw-memory kernels: odd sizes (tiles and chunks that do
//! not divide), misaligned and out-of-bounds bindings, empty tensors, every
//! conversion pair, and each copy path against a plain index loop.

use super::copy;
use super::mem::{Exec, Strided, StridedMut};
use super::pool::GraphPool;
use crate::{DType, Layout};
use half::{bf16, f16};

fn pool() -> GraphPool {
    GraphPool::new(2).unwrap()
}

#[test]
fn binding_is_checked_against_its_buffer() {
    let buf = [0f32; 16];
    let base = buf.as_ptr().cast::<u8>();
    let l = Layout::contiguous(DType::F32, [4, 4, 1, 1]).unwrap();
    assert!(Strided::new(base, 64, 0, l).is_ok());
    assert!(Strided::new(base, 64, 4, l).is_err(), "one element past the end");
    assert!(Strided::new(base, 64, usize::MAX - 2, l).is_err(), "offset overflow");
    let small = Layout::contiguous(DType::F32, [2, 1, 1, 1]).unwrap();
    assert!(Strided::new(base, 64, 2, small).is_err(), "misaligned f32");
    let h = Layout::contiguous(DType::F16, [2, 1, 1, 1]).unwrap();
    assert!(Strided::new(base, 64, 2, h).is_ok(), "f16 needs 2-byte alignment only");
    let empty = Layout::contiguous(DType::F32, [0, 4, 1, 1]).unwrap();
    assert!(Strided::new(base, 0, 0, empty).is_ok());
}

/// Values of a strided f32 source read element by element, logical order.
fn reference(src: &[f32], ne: [i64; 4], nb: [usize; 4]) -> Vec<f32> {
    let mut out = Vec::new();
    for i3 in 0..ne[3] as usize {
        for i2 in 0..ne[2] as usize {
            for i1 in 0..ne[1] as usize {
                for i0 in 0..ne[0] as usize {
                    out.push(src[(i0 * nb[0] + i1 * nb[1] + i2 * nb[2] + i3 * nb[3]) / 4]);
                }
            }
        }
    }
    out
}

fn run_copy(src: &mut [f32], ne: [i64; 4], nb: [usize; 4], threads: bool) -> Vec<f32> {
    let pool = pool();
    pool.session(|session| {
        let ex = Exec { pool: threads.then_some(session), gemm: None, tiles_always: false };
        let s = Strided::new(src.as_ptr().cast(), src.len() * 4, 0, Layout { dtype: DType::F32, ne, nb, block_dim: 0 })
            .unwrap();
        let mut out = vec![f32::NAN; (ne.iter().product::<i64>()) as usize];
        let d = StridedMut::of_f32(&mut out, ne).unwrap();
        copy::copy(&ex, "test", d, s).unwrap();
        out
    })
}

#[test]
fn transposing_copies_at_odd_sizes() {
    // 2-d transposes whose sides are not multiples of the tile, 3-d permutes
    // whose unit-stride dim is 1, 2 or 3, with 1 and 2 threads
    for &(a, b) in &[(1usize, 1usize), (3, 70), (67, 131), (129, 65), (200, 1)] {
        let mut src: Vec<f32> = (0..a * b).map(|i| i as f32).collect();
        let (ne, nb) = ([b as i64, a as i64, 1, 1], [4 * a, 4, 4 * a * b, 4 * a * b]);
        for threads in [false, true] {
            assert_eq!(run_copy(&mut src, ne, nb, threads), reference(&src, ne, nb), "{a}x{b}");
        }
    }
    let dims = [5usize, 70, 3, 2];
    let n: usize = dims.iter().product();
    let mut src: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let base_nb = [4, 4 * dims[0], 4 * dims[0] * dims[1], 4 * dims[0] * dims[1] * dims[2]];
    for perm in [[1, 0, 2, 3], [2, 0, 1, 3], [3, 1, 2, 0], [1, 2, 3, 0]] {
        let (mut ne, mut nb) = ([0i64; 4], [0usize; 4]);
        for i in 0..4 {
            ne[perm[i]] = dims[i] as i64;
            nb[perm[i]] = base_nb[i];
        }
        assert_eq!(run_copy(&mut src, ne, nb, true), reference(&src, ne, nb), "{perm:?}");
    }
}

#[test]
fn flat_and_row_copies_at_odd_sizes() {
    for n in [0usize, 1, 7, 4097, 70_001] {
        let mut src: Vec<f32> = (0..n).map(|i| i as f32 - 3.0).collect();
        let ne = [n as i64, 1, 1, 1];
        assert_eq!(run_copy(&mut src, ne, [4, 4 * n, 4 * n, 4 * n], true), src);
    }
    // padded rows (row stride 5 floats, 3 used), stride-0 broadcast rows
    let mut src: Vec<f32> = (0..5 * 40).map(|i| i as f32).collect();
    let (ne, nb) = ([3, 40, 1, 1], [4, 20, 800, 800]);
    assert_eq!(run_copy(&mut src, ne, nb, true), reference(&src, ne, nb));
    let (ne, nb) = ([3, 40, 2, 1], [4, 0, 20, 40]);
    assert_eq!(run_copy(&mut src, ne, nb, true), reference(&src, ne, nb));
    // every second element (dim-0 stride 8 bytes)
    let (ne, nb) = ([7, 3, 1, 1], [8, 56, 168, 168]);
    assert_eq!(run_copy(&mut src, ne, nb, false), reference(&src, ne, nb));
}

#[test]
fn every_conversion_pair_rounds_like_half() {
    let vals = [0.0f32, -0.0, 1.0, -2.5, 65504.0, 1e-7, 3.0e38, f32::INFINITY, 0.1, 1.0 + 1.0 / 1024.0 + 1.0 / 4096.0];
    let ex = Exec::ONE;
    for dt in [DType::F32, DType::F16, DType::BF16, DType::I8, DType::I16, DType::I32] {
        for strided in [false, true] {
            let src = vals.to_vec();
            let n = vals.len() as i64;
            let s = Strided::of_f32(&src, [n, 1, 1, 1]).unwrap();
            let mut mid = vec![0u32; vals.len() * 2];
            // strided: every second element slot of the destination
            let esz = dt.type_size();
            let step = if strided { 2 * esz } else { esz };
            let l = Layout {
                dtype: dt,
                ne: [n, 1, 1, 1],
                nb: [step, step * n as usize, step * n as usize, step * n as usize],
                block_dim: 0,
            };
            let d = StridedMut::new(mid.as_mut_ptr().cast(), mid.len() * 4, 0, l).unwrap();
            copy::copy(&ex, "test", d, s).unwrap();
            let back = copy::read_f32(d.as_src()).unwrap();
            for (i, (&v, &b)) in vals.iter().zip(&back).enumerate() {
                let want = match dt {
                    DType::F32 => v,
                    DType::F16 => f16::from_f32(v).to_f32(),
                    DType::BF16 => bf16::from_f32(v).to_f32(),
                    DType::I8 => (v.round() as i8) as f32,
                    DType::I16 => (v.round() as i16) as f32,
                    _ => (v.round() as i32) as f32,
                };
                assert!(b.to_bits() == want.to_bits(), "{dt} strided={strided} [{i}]: {v} -> {b}, want {want}");
            }
        }
    }
}

#[test]
fn f16_transpose_uses_the_two_byte_path() {
    let (a, b) = (37usize, 90usize);
    let vals: Vec<f16> = (0..a * b).map(|i| f16::from_f32(i as f32)).collect();
    let raw: Vec<u16> = vals.iter().map(|v| v.to_bits()).collect();
    let l = Layout {
        dtype: DType::F16,
        ne: [b as i64, a as i64, 1, 1],
        nb: [2 * a, 2, 2 * a * b, 2 * a * b],
        block_dim: 0,
    };
    let s = Strided::new(raw.as_ptr().cast(), raw.len() * 2, 0, l).unwrap();
    let got = copy::read_f32(s).unwrap();
    for i1 in 0..a {
        for i0 in 0..b {
            assert_eq!(got[i1 * b + i0], vals[i0 * a + i1].to_f32());
        }
    }
}

#[test]
fn poison_mode_fills_freed_ranges_with_nan() {
    use crate::{Allocator, Context, CpuBackend, CpuRules, Graph, Place};
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[4, 4], &[0.5; 16]).unwrap();
    let a = ctx.neg(x).unwrap();
    let b = ctx.mul_mat(a, a).unwrap(); // cannot write over a; a is freed after it
    let g = Graph::build(&ctx, &[b]).unwrap();
    for poison in [false, true] {
        let plan = Allocator::new(CpuRules).plan(&ctx, &g).unwrap();
        let offset = match plan.place(a) {
            Some(Place::Buffer { offset }) => offset,
            other => unreachable!("a must be planned in the buffer, got {other:?}"),
        };
        assert_eq!(plan.freed_after(1), &[(offset, 64)]);
        let cpu = CpuBackend::new(1).unwrap().with_poison(poison);
        let mut st = cpu.alloc(&ctx, &g, plan).unwrap();
        cpu.compute(&ctx, &g, &mut st).unwrap();
        let freed = &st.buffer.as_bytes()[offset..offset + 64];
        assert_eq!(freed.iter().all(|&b| b == 0xFF), poison, "poison={poison}");
        assert_eq!(st.read_f32(&ctx, b).unwrap(), vec![1.0; 16]);
    }
}

/// The operands a compute binds are reused by the next ones
/// (`exec::Bindings`) only while their regions stay: new leaf values, a
/// grown buffer, a rebind and node ranges run apart give fresh results.
#[test]
fn reused_bindings_follow_the_storage() {
    use crate::{Allocator, Context, CpuBackend, CpuRules, Graph};
    let mut ctx = Context::new();
    let x = ctx.new_f32(&[8], &[1.0; 8]).unwrap();
    let one = ctx.new_f32(&[8], &[1.0; 8]).unwrap();
    let mut t = x;
    for _ in 0..5 {
        t = ctx.add(t, one).unwrap();
    }
    let g = Graph::build(&ctx, &[t]).unwrap();
    let cpu = CpuBackend::new(2).unwrap();
    let plan = |ctx: &Context| Allocator::new(CpuRules).plan(ctx, &g).unwrap();
    let mut st = cpu.alloc(&ctx, &g, plan(&ctx)).unwrap();
    cpu.compute(&ctx, &g, &mut st).unwrap();
    assert_eq!(st.read_f32(&ctx, t).unwrap(), vec![6.0; 8]);
    ctx.set_data(x, &[2.0f32; 8]).unwrap();
    cpu.compute(&ctx, &g, &mut st).unwrap();
    assert_eq!(st.read_f32(&ctx, t).unwrap(), vec![7.0; 8], "new leaf values");
    st.grow(st.capacity() + 4096).unwrap();
    cpu.compute(&ctx, &g, &mut st).unwrap();
    assert_eq!(st.read_f32(&ctx, t).unwrap(), vec![7.0; 8], "after the buffer moved");
    st.rebind(&ctx, &g, plan(&ctx)).unwrap();
    ctx.set_data(x, &[3.0f32; 8]).unwrap();
    let n = g.nodes().len();
    for steps in [0..2, 2..n, 0..n] {
        cpu.compute_steps(&ctx, &g, &mut st, steps).unwrap();
    }
    assert_eq!(st.read_f32(&ctx, t).unwrap(), vec![8.0; 8], "node ranges after a rebind");
}

#[test]
fn a_region_table_changes_revision_only_when_a_region_changes() {
    use crate::backend::exec::{Region, Regions};
    let mut ctx = crate::Context::new();
    let a = ctx.new_f32(&[1], &[0.0]).unwrap();
    let g = crate::Graph::build(&ctx, &[a]).unwrap();
    let plan = crate::Plan::naive(&ctx, &g, 64).unwrap();
    let leaf = |_, _| Ok(Region { base: 0u64, len: 4, writable: false });
    let mut r: Regions<u64> = crate::backend::exec::regions(&ctx, &g, &plan, 0, leaf, |o| o as u64).unwrap();
    let other: Regions<u64> = crate::backend::exec::regions(&ctx, &g, &plan, 0, leaf, |o| o as u64).unwrap();
    assert_ne!(r.revision(), other.revision(), "every table its own");
    let before = r.revision();
    r.insert(a, Region { base: 0, len: 4, writable: false });
    assert_eq!(r.revision(), before, "the same region again");
    r.insert(a, Region { base: 8, len: 4, writable: false });
    assert_ne!(r.revision(), before, "a moved region");
}

/// Weights are repacked for every tile that packs, except where the CPU streams
/// them faster in place: Zen 4's Q6_K at AVX-512, AMD's Q8_0 and k-quants at
/// AVX2.
#[test]
fn repacking_follows_the_cpu_it_runs_on() {
    use crate::cpu_info::CpuInfo;
    use crate::quant::dot::SimdLevel;
    use crate::quant::tile::tile_kernel_for;
    let cpu = |vendor: &str, family: u32| {
        let text = format!("vendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: 17\nmodel name\t: x\n");
        CpuInfo::parse(&text, None, None, 2, SimdLevel::Avx512)
    };
    let (zen4, xeon, zen5) = (cpu("AuthenticAMD", 25), cpu("GenuineIntel", 6), cpu("AuthenticAMD", 26));
    for level in [SimdLevel::Avx512, SimdLevel::Avx2] {
        for w in [DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K] {
            let Some(t) = tile_kernel_for(w, level) else { continue }; // this CPU lacks the level
            let slow_on_amd_avx2 =
                level == SimdLevel::Avx2 && matches!(w, DType::Q8_0 | DType::Q4_K | DType::Q5_K | DType::Q6_K);
            let slow_on_zen4 = slow_on_amd_avx2 || (level == SimdLevel::Avx512 && w == DType::Q6_K);
            assert_eq!(super::matmul::repack_pays(&t, &xeon), t.packs(), "{w:?} at {level:?} on Intel");
            assert_eq!(
                super::matmul::repack_pays(&t, &zen5),
                t.packs() && !slow_on_amd_avx2,
                "{w:?} at {level:?} on family 26"
            );
            assert_eq!(
                super::matmul::repack_pays(&t, &zen4),
                t.packs() && !slow_on_zen4,
                "{w:?} at {level:?} on Zen 4"
            );
        }
    }
}

/// The streamed (non-temporal) paths of the elementwise kernels and the F32→F16
/// copy, forced on small tensors at odd sizes and offsets: the same values as
/// a plain loop, in place and broadcast included.
#[test]
fn streamed_stores_write_what_plain_stores_write() {
    use super::elementwise;
    use crate::op::{BinaryOp, UnaryOp};
    super::stream::FORCED_IN_TESTS.store(true, std::sync::atomic::Ordering::Relaxed);
    let pool = pool();
    for (n0, n1, off) in [(37i64, 5i64, 1usize), (64, 3, 0), (1000, 7, 3), (5, 2, 2)] {
        let n = (n0 * n1) as usize;
        let xs: Vec<f32> = (0..n + off).map(|i| i as f32 * 0.25 - 7.0).collect();
        let ys: Vec<f32> = (0..n + off).map(|i| (i % 13) as f32 + 0.5).collect();
        let l = Layout::contiguous(DType::F32, [n0, n1, 1, 1]).unwrap();
        let row = Layout::contiguous(DType::F32, [n0, 1, 1, 1]).unwrap();
        let src = |v: &[f32], l: Layout| Strided::new(v[off..].as_ptr().cast(), (v.len() - off) * 4, 0, l).unwrap();
        pool.session(|session| {
            let ex = Exec { pool: Some(session), gemm: None, tiles_always: false };
            // a fresh destination, misaligned by `off` floats
            let mut out = vec![f32::NAN; n + off];
            let d = StridedMut::new(out[off..].as_mut_ptr().cast(), n * 4, 0, l).unwrap();
            elementwise::binary(&ex, BinaryOp::Sub, d, src(&xs, l), src(&ys, l)).unwrap();
            assert!((0..n).all(|i| out[off + i] == xs[off + i] - ys[off + i]), "sub {n0}x{n1}");
            // a broadcast row
            elementwise::binary(&ex, BinaryOp::Mul, d, src(&xs, l), src(&ys, row)).unwrap();
            assert!((0..n).all(|i| out[off + i] == xs[off + i] * ys[off + i % n0 as usize]), "mul row {n0}x{n1}");
            // a unary op
            elementwise::unary(&ex, UnaryOp::Neg, d, src(&xs, l)).unwrap();
            assert!((0..n).all(|i| out[off + i] == -xs[off + i]), "neg {n0}x{n1}");
            // in place: the destination is the first source
            let mut acc = xs.clone();
            let d = StridedMut::new(acc[off..].as_mut_ptr().cast(), n * 4, 0, l).unwrap();
            elementwise::binary(&ex, BinaryOp::Add, d, d.as_src(), src(&ys, l)).unwrap();
            assert!((0..n).all(|i| acc[off + i] == xs[off + i] + ys[off + i]), "add in place {n0}x{n1}");
            // F32 → F16, rows of the destination misaligned by `off` halves
            let mut h = vec![f16::NAN; n + off];
            let hl = Layout::contiguous(DType::F16, [n0, n1, 1, 1]).unwrap();
            let d = StridedMut::new(h[off..].as_mut_ptr().cast(), n * 2, 0, hl).unwrap();
            copy::copy(&ex, "test", d, src(&xs, l)).unwrap();
            assert!((0..n).all(|i| h[off + i].to_bits() == f16::from_f32(xs[off + i]).to_bits()), "f16 {n0}x{n1}");
        });
    }
}
