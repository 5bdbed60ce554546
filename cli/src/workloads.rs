//! The standard benchmark workloads (shared by `benches/` and `rgml bench`):
//! each is a built graph plus the bytes it must move, so a run can be compared
//! with the memory bound.

use rgml::{cost, Context, DType, Graph, Result, TensorId};

/// A graph to time, with the traffic its compute nodes need.
pub struct Workload {
    /// Short id (W1, W2a, …).
    pub name: &'static str,
    /// What it computes.
    pub what: String,
    /// The tensors.
    pub ctx: Context,
    /// The graph to run.
    pub graph: Graph,
    /// Its output.
    pub output: TensorId,
}

impl Workload {
    fn new(name: &'static str, what: String, ctx: Context, output: TensorId) -> Result<Workload> {
        Workload::with_outputs(name, what, ctx, &[output])
    }
    /// A graph computing every one of `outputs` (the last is [`Workload::output`]).
    fn with_outputs(name: &'static str, what: String, ctx: Context, outputs: &[TensorId]) -> Result<Workload> {
        let graph = Graph::build(&ctx, outputs)?;
        let output = *outputs.last().ok_or_else(|| rgml::Error::Invalid("a workload needs an output".into()))?;
        Ok(Workload { name, what, ctx, graph, output })
    }
    /// Bytes the graph's nodes must read and write, each element once.
    pub fn bytes(&self) -> Result<u64> {
        self.graph.nodes().iter().map(|&n| cost::traffic(&self.ctx, n).map(|t| t.total())).sum()
    }
    /// Floating-point operations of the graph's nodes.
    pub fn flops(&self) -> Result<u64> {
        self.graph.nodes().iter().map(|&n| cost::flops(&self.ctx, n)).sum()
    }
    /// Bytes of the weights (first sources) of the graph's `mul_mat` nodes,
    /// each node counted once: what the matrix products must read.
    pub fn weight_bytes(&self) -> Result<u64> {
        let mut sum = 0;
        for &n in self.graph.nodes() {
            let t = self.ctx.tensor(n)?;
            if let Some(w) = t.op().weight() {
                sum += self.ctx.tensor(w)?.layout().nbytes() as u64;
            }
        }
        Ok(sum)
    }
    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.graph.nodes().len()
    }
}

fn filled(ctx: &mut Context, ne: &[i64], seed: u32) -> Result<TensorId> {
    let n: i64 = ne.iter().product();
    let v: Vec<f32> =
        (0..n as u32).map(|i| ((i.wrapping_mul(2_654_435_761) ^ seed) % 1000) as f32 / 500.0 - 1.0).collect();
    ctx.new_f32(ne, &v)
}

/// W1: `cont(transpose(x))` of an `n`×`n` f32.
pub fn transpose_copy(n: i64) -> Result<Workload> {
    let mut ctx = Context::new();
    let x = filled(&mut ctx, &[n, n], 1)?;
    let t = ctx.transpose(x)?;
    let out = ctx.cont(t)?;
    Workload::new("W1", format!("cont(transpose(x)) {n}x{n} f32"), ctx, out)
}

/// W2a: `a + b`, both `n`×`n` f32.
pub fn add(n: i64) -> Result<Workload> {
    let mut ctx = Context::new();
    let a = filled(&mut ctx, &[n, n], 1)?;
    let b = filled(&mut ctx, &[n, n], 2)?;
    let out = ctx.add(a, b)?;
    Workload::new("W2a", format!("add {n}x{n} + {n}x{n} f32"), ctx, out)
}

/// W2b: `a + row`, a broadcast row of `n` over `n`×`n` f32.
pub fn add_row(n: i64) -> Result<Workload> {
    let mut ctx = Context::new();
    let a = filled(&mut ctx, &[n, n], 1)?;
    let b = filled(&mut ctx, &[n, 1], 2)?;
    let out = ctx.add(a, b)?;
    Workload::new("W2b", format!("add {n}x{n} + broadcast row {n} f32"), ctx, out)
}

/// W3: `a *= b` in place, `n`×`n` f32 (b is all ones, so repeated runs stay finite).
pub fn mul_inplace(n: i64) -> Result<Workload> {
    let mut ctx = Context::new();
    let a = filled(&mut ctx, &[n, n], 1)?;
    let b = ctx.new_f32(&[n, n], &vec![1.0; (n * n) as usize])?;
    let out = ctx.mul_inplace(a, b)?;
    Workload::new("W3", format!("mul_inplace {n}x{n} f32"), ctx, out)
}

/// W7: `cpy` of an `n`×`n` f32 into an f16 tensor.
pub fn cpy_f32_f16(n: i64) -> Result<Workload> {
    let mut ctx = Context::new();
    let a = filled(&mut ctx, &[n, n], 1)?;
    let h = ctx.new_tensor_2d(DType::F16, n, n)?;
    let out = ctx.cpy(a, h)?;
    Workload::new("W7", format!("cpy f32->f16 {n}x{n}"), ctx, out)
}

/// W6: a chain of `len` adds on `width`-element f32 tensors (per-node overhead).
pub fn add_chain(len: usize, width: i64) -> Result<Workload> {
    let mut ctx = Context::new();
    let x = filled(&mut ctx, &[width], 1)?;
    let one = ctx.new_f32(&[width], &vec![1.0; width as usize])?;
    let mut t = x;
    for _ in 0..len {
        t = ctx.add(t, one)?;
    }
    Workload::new("W6", format!("chain of {len} adds on {width} f32"), ctx, t)
}

/// W4 (F32 weights) / W5 (block-type weights): `mul_mat` of `k`×`m` weights of
/// type `dtype` with `n` F32 activation rows.
pub fn matmul(dtype: DType, m: i64, k: i64, n: i64) -> Result<Workload> {
    let mut ctx = Context::new();
    let w = weights(&mut ctx, dtype, m, k)?;
    let x = filled(&mut ctx, &[k, n], 4)?;
    let out = ctx.mul_mat(w, x)?;
    let name = if dtype == DType::F32 { "W4" } else { "W5" };
    Workload::new(name, format!("mul_mat {dtype} {m}x{k} weights, N={n}"), ctx, out)
}

/// [`matmul`] with the weights mapped from a GGUF file, as a model's are
/// (what [`rgml::CpuBackend::with_repacked_weights`] repacks): the file is
/// written to the system's temporary directory, mapped, and deleted (the
/// mapping stays valid).
pub fn matmul_mapped(dtype: DType, m: i64, k: i64, n: i64) -> Result<Workload> {
    let mut tmp = Context::new();
    let w = weights(&mut tmp, dtype, m, k)?;
    let bytes = tmp.leaf_bytes(w).ok_or_else(|| rgml::Error::NoData(tmp.label(w)))?;
    let mapped = mapped_file(&["w".to_string()], dtype, [k, m], bytes)?;
    let mut ctx = Context::new();
    let w = rgml::load_gguf(&mut ctx, &mapped)?.get("w")?;
    let x = filled(&mut ctx, &[k, n], 4)?;
    let out = ctx.mul_mat(w, x)?;
    Workload::new("W5", format!("mul_mat {dtype} {m}x{k} weights (mapped), N={n}"), ctx, out)
}

/// The `m` × `k` weights of [`matmul`]: filled f32 values, converted to `dtype`.
fn weights(ctx: &mut Context, dtype: DType, m: i64, k: i64) -> Result<TensorId> {
    let wf = filled(ctx, &[k, m], 3)?;
    Ok(if dtype == DType::F32 { wf } else { converted(ctx, wf, dtype, 1)?[0] })
}

/// `count` new leaves of type `dtype` holding the 2-D f32 tensor `src`
/// converted (quantized) once on the CPU, outside any timed graph.
fn converted(ctx: &mut Context, src: TensorId, dtype: DType, count: usize) -> Result<Vec<TensorId>> {
    let ne = ctx.tensor(src)?.layout().ne;
    let q = ctx.new_tensor_2d(dtype, ne[0], ne[1])?;
    let qc = ctx.cpy(src, q)?;
    let g = Graph::build(ctx, &[qc])?;
    let st = rgml::CpuBackend::new(0)?.run(ctx, &g)?;
    let bytes = st.read_bytes(ctx, q)?;
    (0..count)
        .map(|_| {
            let w = ctx.new_tensor_2d(dtype, ne[0], ne[1])?;
            ctx.set_bytes(w, &bytes)?;
            Ok(w)
        })
        .collect()
}

/// `mul_mat` of `k`×`m` weights with `n` activation rows, both of the float
/// type `dtype` (F32, F16 or BF16): a GEMM with no conversion in the graph.
pub fn matmul_float(dtype: DType, m: i64, k: i64, n: i64) -> Result<Workload> {
    if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16) {
        return Err(rgml::Error::Unsupported { op: "matmul_float workload", dtype });
    }
    let mut ctx = Context::new();
    let wf = filled(&mut ctx, &[k, m], 3)?;
    let xf = filled(&mut ctx, &[k, n], 4)?;
    let (w, x) = if dtype == DType::F32 {
        (wf, xf)
    } else {
        (converted(&mut ctx, wf, dtype, 1)?[0], converted(&mut ctx, xf, dtype, 1)?[0])
    };
    let out = ctx.mul_mat(w, x)?;
    Workload::new("MM", format!("mul_mat {dtype} {m}x{k} weights x {dtype} {k}x{n}"), ctx, out)
}

/// `count` products, each with its own `k`×`m` weights of type `dtype` (same
/// values, distinct tensors) and the same `rows` f32 activation rows (1: a
/// matrix-vector product, a decode step's; a few: a server's batched decode):
/// with enough `count` the weights together exceed the caches, so every
/// product reads its weights from memory, and the per-graph overhead is shared.
pub fn matvecs(dtype: DType, m: i64, k: i64, (count, rows): (usize, i64), mapped: bool) -> Result<Workload> {
    if count == 0 {
        return Err(rgml::Error::Invalid("matvecs workload: count must be at least 1".into()));
    }
    let mut ctx = Context::new();
    let wf = filled(&mut ctx, &[k, m], 3)?;
    let ws = if mapped {
        let bytes = if dtype == DType::F32 {
            ctx.leaf_bytes(wf).ok_or_else(|| rgml::Error::NoData(ctx.label(wf)))?.to_vec()
        } else {
            let q = converted(&mut ctx, wf, dtype, 1)?[0];
            ctx.leaf_bytes(q).ok_or_else(|| rgml::Error::NoData(ctx.label(q)))?.to_vec()
        };
        let names: Vec<String> = (0..count).map(|i| format!("w{i}")).collect();
        let file = mapped_file(&names, dtype, [k, m], &bytes)?;
        let tensors = rgml::load_gguf(&mut ctx, &file)?;
        names.iter().map(|n| tensors.get(n)).collect::<Result<Vec<_>>>()?
    } else if dtype == DType::F32 {
        let mut ws = vec![wf];
        for _ in 1..count {
            ws.push(filled(&mut ctx, &[k, m], 3)?);
        }
        ws
    } else {
        converted(&mut ctx, wf, dtype, count)?
    };
    let x = filled(&mut ctx, &[k, rows], 4)?;
    let outs = ws.iter().map(|&w| ctx.mul_mat(w, x)).collect::<Result<Vec<_>>>()?;
    let how = if mapped { ", mapped" } else { "" };
    let what = format!("{count} x mul_mat {dtype} {m}x{k} weights (distinct{how}), N={rows}");
    Workload::with_outputs("MV", what, ctx, &outs)
}

/// A GGUF file holding `bytes` (a `dtype` tensor of shape `ne`) once under each
/// of `names`, written to the system's temporary directory, mapped, and deleted
/// (the mapping stays valid).
fn mapped_file(names: &[String], dtype: DType, ne: [i64; 2], bytes: &[u8]) -> Result<rgml::gguf::GgufFile> {
    let mut file = rgml::gguf::GgufWriter::new();
    for n in names {
        file.add_tensor(n, dtype, &ne, bytes.to_vec())?;
    }
    let path = std::env::temp_dir().join(format!("rgml-workload-{}-{dtype}-{}.gguf", std::process::id(), names.len()));
    file.write(&path)?;
    let mapped = rgml::gguf::GgufFile::open(&path);
    std::fs::remove_file(&path).ok();
    mapped
}

/// The memory-bound workloads W1, W2a, W2b, W3, W7 at size `n`.
pub fn memory_bound(n: i64) -> Result<Vec<Workload>> {
    Ok(vec![transpose_copy(n)?, add(n)?, add_row(n)?, mul_inplace(n)?, cpy_f32_f16(n)?])
}

/// The sum of `v` on `cpu`'s thread pool, in 256 KiB pieces that idle
/// workers steal (as the kernels' work is split), each summed with 16
/// independent accumulators and a software prefetch so that it runs at
/// memory speed: the read baseline the `mul_mat` benchmarks compare with.
pub fn parallel_sum(cpu: &rgml::CpuBackend, v: &[f32]) -> f32 {
    use rayon::prelude::*;
    cpu.install(|| v.par_chunks(1 << 16).map(sum16).sum())
}

/// Bytes ahead of the sum that [`sum16`] asks for: with the hardware's
/// stream prefetch alone one core reads less than the weight kernels, which
/// prefetch their stream, pull through it (a page ahead read the most).
const READ_AHEAD: usize = 4096;

/// Sum with 16 independent accumulators (vectorized), asking for each cache
/// line [`READ_AHEAD`] bytes before it is summed.
fn sum16(v: &[f32]) -> f32 {
    let mut acc = [0f32; 16];
    let chunks = v.chunks_exact(16);
    let rest: f32 = chunks.remainder().iter().sum();
    for (i, c) in chunks.enumerate() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is a hint; it reads nothing and never faults
        // (the address is formed with `wrapping_add`, past the end or not).
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(v.as_ptr().wrapping_add(16 * i + READ_AHEAD / 4).cast());
        }
        for (a, x) in acc.iter_mut().zip(c) {
            *a += x;
        }
    }
    acc.iter().sum::<f32>() + rest
}
