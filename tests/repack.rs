//! `CpuBackend::with_repacked_weights`: weights mapped from a GGUF file whose
//! type has a repacked tile kernel on this CPU (Q4_0, Q4_1, Q5_0, Q8_0, IQ4_NL,
//! Q4_K, Q5_K at AVX2 and AVX-512; Q6_K and IQ4_XS at AVX-512) are repacked once per
//! storage and give the bits of in-place weights wherever the in-place product
//! runs the tile too (from the kernel's `min_rows`; below it the in-place
//! product runs the dot kernels, and the repacked one agrees to rounding), for
//! one and many activation rows, a row count that leaves a partial group, a
//! batched (broadcast) activation, and across graphs bound to one storage;
//! weights that are not file mappings, or of a type without such a kernel, are
//! not repacked.

mod common;

use common::Rng;
use rgml::gguf::{GgufFile, GgufWriter};
use rgml::quant::tile::tile_kernel;
use rgml::{load_gguf, Backend, Context, CpuBackend, DType, Graph, Plan, CPU_ALIGNMENT};

const K: i64 = 96;
const M: i64 = 40; // whole groups of 16 (8) rows and a partial one

/// A GGUF file holding one M × K matrix of `dtype` (random values, quantized).
fn weights_file(dtype: DType, tag: &str) -> std::path::PathBuf {
    weights_file_k(dtype, K, tag)
}

/// A GGUF file holding one M × `k` matrix of `dtype`.
fn weights_file_k(dtype: DType, k: i64, tag: &str) -> std::path::PathBuf {
    weights_file_mk(dtype, M, k, tag)
}

/// A GGUF file holding one `m` × `k` matrix of `dtype`.
fn weights_file_mk(dtype: DType, m: i64, k: i64, tag: &str) -> std::path::PathBuf {
    let mut rng = Rng(3);
    let vals = rng.vec((m * k) as usize, 1.0);
    let mut bytes = vec![0u8; dtype.row_size(k).unwrap() * m as usize];
    for (row, dst) in vals.chunks(k as usize).zip(bytes.chunks_mut(dtype.row_size(k).unwrap())) {
        rgml::quant::quantize_row(dtype, row, dst).unwrap();
    }
    let path = std::env::temp_dir().join(format!("rgml-repack-{tag}-{}.gguf", std::process::id()));
    let mut w = GgufWriter::new();
    w.add_tensor("w", dtype, &[k, m], bytes).unwrap();
    w.write(&path).unwrap();
    path
}

/// Whether this CPU has a repacked kernel for Q4_0.
fn repacks() -> bool {
    let on = tile_kernel(DType::Q4_0).is_some_and(|t| t.packs());
    if !on {
        eprintln!("note: no repacked Q4_0 kernel on this CPU (AVX-512 VNNI): checking that nothing is repacked");
    }
    on
}

/// The repacked bytes of the M × K Q4_0 matrix: whole groups of the tile
/// kernel's rows (a partial group padded), 0 where nothing repacks.
fn q4_0_packed_bytes() -> usize {
    tile_kernel(DType::Q4_0)
        .and_then(|t| Some(t.packed_group_size(K as usize)? * (M as usize).div_ceil(t.mr())))
        .unwrap_or(0)
}

/// `mul_mat(w, x)` for x of shape `[K, n, batch]`, on `cpu`: the result's
/// bits and the storage's repacked bytes.
fn product(ctx: &mut Context, w: rgml::TensorId, n: i64, batch: i64, cpu: &CpuBackend) -> (Vec<u32>, usize) {
    product_k(ctx, w, K, n, batch, cpu)
}

/// [`product`] for weights of `k` columns.
fn product_k(ctx: &mut Context, w: rgml::TensorId, k: i64, n: i64, batch: i64, cpu: &CpuBackend) -> (Vec<u32>, usize) {
    let mut rng = Rng(n as u64 * 31 + batch as u64);
    let x = ctx.new_tensor_3d(DType::F32, k, n, batch).unwrap();
    ctx.set_data(x, &rng.vec((k * n * batch) as usize, 1.0)).unwrap();
    let y = ctx.mul_mat(w, x).unwrap();
    let g = Graph::build(ctx, &[y]).unwrap();
    let st = cpu.run(ctx, &g).unwrap();
    (st.read_f32(ctx, y).unwrap().iter().map(|v| v.to_bits()).collect(), st.repacked_bytes())
}

#[test]
fn repacked_weights_give_the_same_bits() {
    let path = weights_file(DType::Q4_0, "bits");
    let file = GgufFile::open(&path).unwrap();
    let mut ctx = Context::new();
    let w = load_gguf(&mut ctx, &file).unwrap().get("w").unwrap();
    // in place with the tile at every row count (below its `min_rows` in-place rows
    // take the dot kernels: AMD's Q4_0 at one row), the bits the repacked tile must give
    let plain = CpuBackend::new(2).unwrap().with_row_invariant_products(true);
    let packed = CpuBackend::new(2).unwrap().with_repacked_weights(true);
    let group_bytes = q4_0_packed_bytes();
    let mapped = ctx.leaf_bytes(w).unwrap().to_vec();
    for (n, batch) in [(1, 1), (1, 3), (3, 1), (37, 1), (5, 2)] {
        let (want, none) = product(&mut ctx, w, n, batch, &plain);
        let (got, bytes) = product(&mut ctx, w, n, batch, &packed);
        assert_eq!(none, 0, "repacking is off by default");
        assert_eq!(got, want, "n={n} batch={batch}");
        let expect = if repacks() { group_bytes } else { 0 };
        assert_eq!(bytes, expect, "n={n} batch={batch}: M rows in groups of the kernel's rows");
    }
    // the repacked weight's mapped pages were released, and read back the same
    assert_eq!(ctx.leaf_bytes(w).unwrap(), &mapped[..]);
    std::fs::remove_file(&path).ok();
}

#[test]
fn the_repacked_copy_lives_with_the_storage_across_graphs() {
    let path = weights_file(DType::Q4_0, "rebind");
    let file = GgufFile::open(&path).unwrap();
    let mut ctx = Context::new();
    let w = load_gguf(&mut ctx, &file).unwrap().get("w").unwrap();
    let cpu = CpuBackend::new(2).unwrap().with_repacked_weights(true);
    let plain = CpuBackend::new(1).unwrap().with_row_invariant_products(true);
    let mut st = None;
    for n in [1, 4, 1] {
        let x = ctx.new_tensor_2d(DType::F32, K, n).unwrap();
        ctx.set_data(x, &Rng(n as u64).vec((K * n) as usize, 1.0)).unwrap();
        let y = ctx.mul_mat(w, x).unwrap();
        ctx.set_output(y).unwrap();
        let g = Graph::build(&ctx, &[y]).unwrap();
        let plan = Plan::naive(&ctx, &g, CPU_ALIGNMENT).unwrap();
        let s = match st.as_mut() {
            None => st.insert(cpu.alloc_with_capacity(&ctx, &g, plan, 1 << 16).unwrap()),
            Some(s) => {
                s.rebind(&ctx, &g, plan).unwrap();
                s
            }
        };
        cpu.compute(&ctx, &g, s).unwrap();
        let want = plain.run(&ctx, &g).unwrap().read_f32(&ctx, y).unwrap();
        assert_eq!(s.read_f32(&ctx, y).unwrap(), want, "n={n}");
        if repacks() {
            assert_eq!(s.repacked_bytes(), q4_0_packed_bytes(), "made once, kept across graphs");
        }
    }
    std::fs::remove_file(&path).ok();
}

#[test]
fn only_mapped_weights_of_packing_types_are_repacked() {
    let cpu = CpuBackend::new(2).unwrap().with_repacked_weights(true);
    // the same Q4_0 bytes as an owned leaf: they may change, so they are read in place
    let path = weights_file(DType::Q4_0, "owned");
    let file = GgufFile::open(&path).unwrap();
    let mut ctx = Context::new();
    let mapped = load_gguf(&mut ctx, &file).unwrap().get("w").unwrap();
    let owned = ctx.new_tensor_2d(DType::Q4_0, K, M).unwrap();
    let bytes = ctx.leaf_bytes(mapped).unwrap().to_vec();
    ctx.set_bytes(owned, &bytes).unwrap();
    let (got, packed) = product(&mut ctx, owned, 2, 1, &cpu);
    assert_eq!(packed, 0);
    assert_eq!(got, product(&mut ctx, mapped, 2, 1, &cpu).0, "same values, same bits");
    // a mapped Q5_1 matrix has no repacked kernel
    let path8 = weights_file(DType::Q5_1, "q51");
    let file8 = GgufFile::open(&path8).unwrap();
    let mut ctx8 = Context::new();
    let w8 = load_gguf(&mut ctx8, &file8).unwrap().get("w").unwrap();
    assert_eq!(product(&mut ctx8, w8, 2, 1, &cpu).1, 0);
    std::fs::remove_file(&path).ok();
    std::fs::remove_file(&path8).ok();
}

#[test]
fn repacked_weights_of_every_packing_type_match_in_place_ones() {
    const K5: i64 = 512;
    let types =
        [DType::Q4_1, DType::Q5_0, DType::Q8_0, DType::IQ4_NL, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS];
    // in place with the tile at every row count (below its `min_rows` in-place rows
    // take the dot kernels: AMD's Q4_0 at one row), the bits the repacked tile must give
    let plain = CpuBackend::new(2).unwrap().with_row_invariant_products(true);
    let packed = CpuBackend::new(2).unwrap().with_repacked_weights(true);
    for dt in types {
        let Some(t) = tile_kernel(dt).filter(|_| packed.repacks_type(dt)) else {
            eprintln!("note: {dt} weights are not repacked on this CPU");
            continue;
        };
        let path = weights_file_k(dt, K5, &format!("every-{dt}"));
        let file = GgufFile::open(&path).unwrap();
        let mut ctx = Context::new();
        let w = load_gguf(&mut ctx, &file).unwrap().get("w").unwrap();
        for n in [1, 2, 3, 9] {
            let (want, _) = product_k(&mut ctx, w, K5, n, 1, &plain);
            let (got, bytes) = product_k(&mut ctx, w, K5, n, 1, &packed);
            assert_eq!(bytes, t.packed_group_size(K5 as usize).unwrap() * (M as usize).div_ceil(t.mr()), "{dt}");
            if n as usize >= t.min_rows() {
                assert_eq!(got, want, "{dt} n={n}: the same tile, the same bits");
            } else {
                // the in-place product ran the dot kernel: the same sums, rounded apart
                let f = |v: &[u32]| v.iter().map(|&b| f32::from_bits(b)).collect::<Vec<_>>();
                let (got, want) = (f(&got), f(&want));
                let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
                for (g, w) in got.iter().zip(&want) {
                    assert!((g - w).abs() <= 1e-5 * scale, "{dt} n={n}: {g} against {w}");
                }
            }
        }
        std::fs::remove_file(&path).ok();
    }
}

/// A row of activations gets the same bits from a product alone or among
/// others (1 to 33 rows), in place and repacked, for the weight types a
/// server's decode can batch without changing an answer: Q4_0, Q4_1, Q5_0,
/// Q8_0 and Q4_K, on rows long enough to span several of the tile's chunks
/// (before, a lone Q4_1 row of more than 32 blocks summed its min terms once
/// where a batch summed them per chunk).
#[test]
fn a_row_keeps_its_bits_at_any_row_count() {
    let types =
        [DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL];
    // rows of 128 blocks, and of 20 (Gemma-3-270M's 640: shorter than a tile's chunk)
    let shapes = types.iter().flat_map(|&t| [(t, 4096i64), (t, 640)]).filter(|&(t, k)| k % t.block_size() as i64 == 0);
    for (dtype, k4) in shapes {
        let path = weights_file_k(dtype, k4, &format!("rows-{dtype}-{k4}"));
        let file = GgufFile::open(&path).unwrap();
        // in place, repacked, and in place with the tile at every row count
        for (repack, always) in [(false, false), (true, false), (false, true)] {
            let cpu = CpuBackend::new(2).unwrap().with_repacked_weights(repack).with_row_invariant_products(always);
            // the types the backend vouches for; the others are not held to it
            if !cpu.mul_mat_rows_invariant(dtype) {
                assert!(
                    !always || tile_kernel(dtype).is_none(),
                    "{dtype}: with its tile at every row count a type is row-invariant"
                );
                continue;
            }
            let mut rng = Rng(17);
            let row0 = rng.vec(k4 as usize, 1.0);
            let mut alone: Option<Vec<u32>> = None;
            for n in [1i64, 2, 3, 5, 8, 9, 16, 33] {
                let mut ctx = Context::new();
                let w = load_gguf(&mut ctx, &file).unwrap().get("w").unwrap();
                let mut x = row0.clone();
                x.extend(rng.vec(((n - 1) * k4) as usize, 1.0));
                let xt = ctx.new_tensor_2d(DType::F32, k4, n).unwrap();
                ctx.set_data(xt, &x).unwrap();
                let y = ctx.mul_mat(w, xt).unwrap();
                let g = Graph::build(&ctx, &[y]).unwrap();
                let got: Vec<u32> = cpu.run(&ctx, &g).unwrap().read_f32(&ctx, y).unwrap()[..M as usize]
                    .iter()
                    .map(|v| v.to_bits())
                    .collect();
                match &alone {
                    None => alone = Some(got),
                    Some(a) => {
                        assert_eq!(&got, a, "{dtype} k={k4} repack={repack} always={always}: row 0 among {n} rows")
                    }
                }
            }
        }
        std::fs::remove_file(&path).ok();
    }
}

/// A decode step's product split over the threads (weights large enough that
/// each thread runs its own ranges of repacked groups, one kernel call each,
/// the outputs of several rows through a buffer 256 weight rows at a time)
/// gives the bits of one thread running them all, and of the tile in place.
#[test]
fn a_repacked_row_split_over_threads_keeps_its_bits() {
    // 40 rows of 65536 values, and 600 of 4096: past the work from which a product splits
    for (m, k) in [(M, 65536), (600, 4096)] {
        let path = weights_file_mk(DType::Q4_0, m, k, &format!("threads-{m}"));
        let mut ctx = Context::new();
        let w = load_gguf(&mut ctx, &GgufFile::open(&path).unwrap()).unwrap().get("w").unwrap();
        let plain = CpuBackend::new(2).unwrap().with_row_invariant_products(true);
        for n in [1, 3, 8] {
            let (want, _) = product_k(&mut ctx, w, k, n, 2, &plain);
            for threads in [1, 2, 3] {
                let packed = CpuBackend::new(threads).unwrap().with_repacked_weights(true);
                let (got, _) = product_k(&mut ctx, w, k, n, 2, &packed);
                assert_eq!(got, want, "m={m} n={n}: {threads} threads");
            }
        }
        std::fs::remove_file(&path).ok();
    }
}
