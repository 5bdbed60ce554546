//! Running a planned graph on the device: operands bound to device addresses,
//! one kernel launch (or cuBLAS call) per node, all on the backend's stream.

use std::collections::HashMap;

use cudarc::driver::{CudaSlice, DevicePtrMut, DeviceRepr, LaunchConfig, PushKernelArg};

use super::kernels::{self, alibi_params, unary_code, KRope, KTensor, UNARY_SCALE};
use super::storage::{CudaStorage, Region};
use super::{CudaBackend, Device};
use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::layout::Layout;
use crate::tensor::{BinaryOp, Op, RopeParams, TensorId};

// SAFETY: both are #[repr(C)] plain data matching the kernels' `RgT` and
// `RgRope` field for field (sizes checked in kernels.rs's tests).
unsafe impl DeviceRepr for KTensor {}
// SAFETY: as above.
unsafe impl DeviceRepr for KRope {}

/// Threads per block of every kernel (a multiple of 32, at most 1024: the
/// block reductions in the prelude rely on it).
const BLOCK: u32 = 256;

/// A driver error during a run, as an [`Error::Invalid`] naming the step.
pub(crate) fn cuda_err(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| Error::Invalid(format!("CUDA {what}: {e:?}"))
}

/// One operand on the device: the address of its first byte and its layout.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bound {
    pub ptr: u64,
    pub l: Layout,
}

impl Bound {
    /// The tensor at `offs` bytes into a region of `len` bytes at `base`;
    /// errors unless its whole extent lies inside the region.
    pub fn new(base: u64, len: usize, offs: usize, l: Layout) -> Result<Bound> {
        if offs.checked_add(l.nbytes()).is_none_or(|e| e > len) {
            return Err(Error::Mismatch(format!(
                "internal: {}+{} bytes outside a {len}-byte region",
                offs,
                l.nbytes()
            )));
        }
        let ptr = base + offs as u64;
        let align = l.dtype.align() as u64;
        let strides_aligned = l.nb.iter().zip(l.ne).all(|(&nb, ne)| ne <= 1 || (nb as u64).is_multiple_of(align));
        if !l.is_empty() && (!ptr.is_multiple_of(align) || !strides_aligned) {
            return Err(Error::Unsupported { op: "cuda (misaligned view)", dtype: l.dtype });
        }
        Ok(Bound { ptr, l })
    }
    /// The kernel view of any type the kernels know (block types included:
    /// only `get_rows` and the F32 conversion read those).
    fn k(&self, op: &'static str) -> Result<KTensor> {
        KTensor::of(op, &self.l)
    }
    /// The kernel view of any type the kernels know, block types blocked
    /// along any dim (for the kernels that read through `kernels/quant.cuh`).
    pub(crate) fn q(&self, op: &'static str) -> Result<KTensor> {
        KTensor::of_blocked(op, &self.l)
    }
    /// The kernel view of a plain type (F32, F16, BF16, I32), for the kernels
    /// that load elements with `rg_load`.
    pub(crate) fn p(&self, op: &'static str) -> Result<KTensor> {
        if self.l.dtype.block_size() > 1 {
            return Err(Error::Unsupported { op, dtype: self.l.dtype });
        }
        KTensor::of(op, &self.l)
    }
}

/// Launches `$func` of `$module` with `$cfg` and the listed arguments (each
/// bound to a local first so its address outlives the launch call).
macro_rules! launch {
    ($dev:expr, $module:literal, $func:literal, $cfg:expr; $($arg:expr),* $(,)?) => {{
        let cfg: LaunchConfig = $cfg;
        if cfg.grid_dim.0 > 0 {
            let f = $dev.function($module, $func)?;
            $dev.allow_shared(&f, $func, cfg.shared_mem_bytes)?;
            let mut b = $dev.stream.launch_builder(&f);
            $( let a = $arg; b.arg(&a); )*
            // SAFETY: the arguments are, in order, the kernel's parameters
            // (types mirrored from kernels/*.cu), and every pointer addresses an
            // operand whose whole extent was checked to lie in device memory.
            unsafe { b.launch(cfg) }.map_err(cuda_err(concat!("launch ", $func)))?;
        }
    }};
}
pub(crate) use launch;

/// A grid-stride launch over `n` elements.
pub(crate) fn flat(n: i64) -> LaunchConfig {
    let blocks = (n.max(0) as u64).div_ceil(u64::from(BLOCK)).min(1 << 20) as u32;
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: 0 }
}

/// One block per row (`rows` of them).
pub(crate) fn per_row(rows: i64, shared: u32) -> Result<LaunchConfig> {
    let g = u32::try_from(rows).ok().filter(|&g| g <= i32::MAX as u32);
    let g = g.ok_or_else(|| Error::Invalid(format!("CUDA: {rows} rows exceed one grid")))?;
    Ok(LaunchConfig { grid_dim: (g, 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: shared })
}

/// `src` as packed F32 rows in a new device buffer (dequantized/converted;
/// any layout, any of the 12 block types blocked along any dim).
pub(crate) fn to_f32_rows(dev: &Device, src: &Bound) -> Result<(CudaSlice<f32>, Layout)> {
    // SAFETY: `to_f32_into` writes every element before the caller reads any.
    let mut out = unsafe { dev.stream.alloc::<f32>(src.l.nelements().max(1) as usize) }.map_err(cuda_err("alloc"))?;
    let (p, _sync) = out.device_ptr_mut(&dev.stream);
    let l = to_f32_into(dev, p, src)?;
    drop(_sync);
    Ok((out, l))
}

/// `src` as packed F32 rows at `dst` (room for every element of `src`); returns their layout.
pub(crate) fn to_f32_into(dev: &Device, dst: u64, src: &Bound) -> Result<Layout> {
    launch!(dev, "rows", "rg_to_f32", flat(src.l.nelements()); dst, src.ptr, src.q("to_f32")?);
    Layout::contiguous(DType::F32, src.l.ne)
}

/// One compute's nodes and where their operands are: what a run of the
/// nodes (eager or captured) needs.
pub(crate) struct Nodes<'a> {
    pub ctx: &'a Context,
    pub graph: &'a Graph,
    pub regions: &'a HashMap<TensorId, Region>,
    /// The index-error flag of `get_rows`/`set_rows` (0: the graph has none),
    /// followed by each `set_rows`' claims (one int per destination row).
    pub flags: u64,
}

impl CudaBackend {
    /// Runs every node of `graph` in order on the device, then waits for the
    /// stream. Index errors of `get_rows`/`set_rows` are reported after the run.
    /// Data-holding leaves flagged as inputs are uploaded again first (so
    /// `Context::set_data` between computes is seen, as on the CPU); in
    /// poison mode the plan buffer is filled with NaN bytes first and every
    /// range the plan frees after a step is refilled right after it. With
    /// [`CudaBackend::with_graphs`], repeated runs launch a CUDA graph.
    pub fn compute(&self, ctx: &Context, graph: &Graph, storage: &mut CudaStorage) -> Result<()> {
        graph.check_context(ctx)?;
        check_types(ctx, graph)?;
        storage.plan.check_graph(graph)?;
        if !std::sync::Arc::ptr_eq(&storage.dev, &self.dev) {
            return Err(Error::Mismatch("storage was allocated by another CudaBackend".into()));
        }
        let dev = &*self.dev;
        let _stream = dev.exclusive()?;
        let regions = storage.regions(ctx, graph)?;
        storage.refresh_inputs(ctx)?;
        if self.poison {
            storage.poison_all(ctx, graph)?;
        }
        // the index-error flag, then each set_rows' claims: only graphs that
        // have them pay for the buffer, its zeroing and the read-back
        let (mut indexed, mut claims) = (false, 0usize);
        for &id in graph.nodes() {
            let t = ctx.tensor(id)?;
            indexed |= matches!(t.op(), Op::GetRows | Op::SetRows);
            if t.op() == Op::SetRows {
                claims += usize::try_from(t.layout().nrows()).unwrap_or(0);
            }
        }
        let flags = if indexed { storage.zeroed_flags(1 + claims)? } else { 0 };
        let nodes = Nodes { ctx, graph, regions: &regions, flags };
        if self.graphs && !self.poison {
            let key = super::graphs::Key::new(&nodes, self.quant);
            self.run_with_graphs(&mut storage.graphs, &nodes, key)?;
        } else {
            self.run_nodes(&nodes, if self.poison { Some(&mut *storage) } else { None })?;
        }
        dev.stream.synchronize().map_err(cuda_err("synchronize"))?;
        let flag = if indexed { storage.first_flag()? } else { 0 };
        match flag {
            0 => Ok(()),
            f if f & 1 != 0 => {
                Err(Error::Invalid("get_rows/set_rows: an index is outside the rows of its tensor".into()))
            }
            _ => Err(Error::Invalid("set_rows: two rows are written to the same place".into())),
        }
    }

    /// Queues every node's kernels on the stream; `poison`: the storage whose
    /// freed ranges are refilled with NaN after each step.
    pub(crate) fn run_nodes(&self, nodes: &Nodes, mut poison: Option<&mut CudaStorage>) -> Result<()> {
        let dev = &*self.dev;
        let (ctx, regions, err_ptr) = (nodes.ctx, nodes.regions, nodes.flags);
        let mut claims_ptr = err_ptr + 4;
        dev.scratch.release()?;
        for (step, &id) in nodes.graph.nodes().iter().enumerate() {
            let t = ctx.tensor(id)?;
            if t.op().is_metadata() || t.op() == Op::Leaf {
                if let Some(st) = poison.as_deref_mut() {
                    st.poison_ranges(step)?;
                }
                continue;
            }
            let b = |s: TensorId| bind(ctx, regions, s, false);
            let dst = bind(ctx, regions, id, true)?;
            let src = t.src();
            match t.op() {
                Op::Cont | Op::Dup | Op::Cpy => copy(dev, dst, b(src[0])?)?,
                Op::Binary(op) => binary(dev, op, dst, b(src[0])?, b(src[1])?)?,
                Op::Scale(s) => unary(dev, UNARY_SCALE, s, dst, b(src[0])?)?,
                Op::Unary(op) => unary(dev, unary_code(op), 0.0, dst, b(src[0])?)?,
                Op::SumRows => {
                    let a = b(src[0])?;
                    launch!(dev, "reduce", "rg_sum_rows", per_row(a.l.nrows(), 0)?;
                        dst.ptr, dst.p("sum_rows")?, a.ptr, a.p("sum_rows")?);
                }
                Op::RmsNorm { eps } => {
                    let a = b(src[0])?;
                    launch!(dev, "norm", "rg_rms_norm", per_row(a.l.nrows(), 0)?;
                        eps, dst.ptr, dst.p("rms_norm")?, a.ptr, a.p("rms_norm")?);
                }
                Op::Norm { eps } => {
                    let a = b(src[0])?;
                    launch!(dev, "norm", "rg_norm", per_row(a.l.nrows(), 0)?;
                        eps, dst.ptr, dst.p("norm")?, a.ptr, a.p("norm")?);
                }
                Op::SoftMax { scale, max_bias } => {
                    let a = b(src[0])?;
                    let mask = src.get(1).map(|&m| b(m)).transpose()?;
                    let (nhl2, m0, m1) = alibi_params(a.l.ne[2], max_bias);
                    let (mp, mk) = match mask {
                        Some(m) => (m.ptr, m.p("soft_max")?),
                        None => (0u64, a.p("soft_max")?),
                    };
                    launch!(dev, "softmax", "rg_soft_max", per_row(a.l.nrows(), 0)?;
                        scale, nhl2, m0, m1, dst.ptr, dst.p("soft_max")?, a.ptr, a.p("soft_max")?, mp, mk,
                        i32::from(mask.is_some()));
                }
                Op::DiagMaskInf { n_past } => {
                    let a = b(src[0])?;
                    launch!(dev, "softmax", "rg_diag_mask_inf", flat(a.l.nelements());
                        n_past, dst.ptr, dst.p("diag_mask_inf")?, a.ptr, a.p("diag_mask_inf")?, a.l.nelements());
                }
                Op::Rope(p) => {
                    let ff = src.get(2).map(|&f| b(f)).transpose()?;
                    rope(dev, &p, dst, b(src[0])?, b(src[1])?, ff)?
                }
                Op::GetRows => {
                    let (a, idx) = (b(src[0])?, b(src[1])?);
                    check_index(&idx, "get_rows")?;
                    launch!(dev, "rows", "rg_get_rows", per_row(dst.l.nrows(), 0)?;
                        dst.ptr, dst.p("get_rows")?, a.ptr, super::quant::rows_view("get_rows", &a)?, idx.ptr, idx.p("get_rows")?, err_ptr);
                }
                Op::SetRows => {
                    let (x, idx) = (b(src[1])?, b(src[2])?);
                    check_index(&idx, "set_rows")?;
                    let rows = dst.l.nrows();
                    super::quant::set_rows(dev, dst, x, idx, err_ptr, claims_ptr)?;
                    claims_ptr += 4 * rows as u64;
                }
                Op::MulMat => super::matmul::mul_mat(dev, dst, b(src[0])?, b(src[1])?, self.quant)?,
                Op::Concat { dim } => {
                    let (a, x) = (b(src[0])?, b(src[1])?);
                    let size = same_size("concat", &[&dst, &a, &x])?;
                    if dim >= 4 {
                        return Err(Error::Mismatch(format!("internal: concat along dim {dim}")));
                    }
                    let n = dst.l.nelements();
                    launch!(dev, "shape", "rg_concat", flat(n);
                        dim as i32, size, dst.ptr, dst.p("concat")?, a.ptr, a.p("concat")?, x.ptr, x.p("concat")?, n);
                }
                Op::Repeat => {
                    let a = b(src[0])?;
                    let size = same_size("repeat", &[&dst, &a])?;
                    if !dst.l.is_empty() && (0..4).any(|i| a.l.ne[i] == 0 || dst.l.ne[i] % a.l.ne[i] != 0) {
                        return Err(Error::Mismatch(format!("internal: repeat of {:?} into {:?}", a.l.ne, dst.l.ne)));
                    }
                    let n = dst.l.nelements();
                    launch!(dev, "shape", "rg_repeat", flat(n); size, dst.ptr, dst.p("repeat")?, a.ptr, a.p("repeat")?, n);
                }
                Op::Leaf | Op::View | Op::Reshape | Op::Transpose | Op::Permute(_) | Op::Expand => {}
            }
            // the node's kernels are queued: its scratch may serve the next node
            dev.scratch.release()?;
            if let Some(st) = poison.as_deref_mut() {
                st.poison_ranges(step)?;
            }
        }
        Ok(())
    }
}

/// Refuses, before anything is uploaded or launched, a graph in which a node
/// the device computes reads or writes a type the CUDA backend does not handle
/// ([`kernels::handles`]): an [`Error::Unsupported`] naming the op and the type.
/// Leaves and metadata ops (views, reshapes, permutes) of such types pass: no
/// kernel reads them.
pub(crate) fn check_types(ctx: &Context, graph: &Graph) -> Result<()> {
    for &id in graph.nodes() {
        let t = ctx.tensor(id)?;
        if t.op().is_metadata() || t.op() == Op::Leaf {
            continue;
        }
        for s in std::iter::once(id).chain(t.src().iter().copied()) {
            let dtype = ctx.layout(s)?.dtype;
            if !kernels::handles(dtype) {
                return Err(Error::Unsupported { op: t.op().name(), dtype });
            }
        }
    }
    Ok(())
}

/// The element size shared by `ts` (all of one plain type), for the exact copies of concat/repeat.
fn same_size(op: &'static str, ts: &[&Bound]) -> Result<i32> {
    let dtype = ts[0].l.dtype;
    if let Some(t) = ts.iter().find(|t| t.l.dtype != dtype) {
        return Err(Error::DTypeMismatch { what: op.into(), expected: dtype, found: t.l.dtype });
    }
    Ok(dtype.type_size() as i32)
}

fn check_index(idx: &Bound, op: &'static str) -> Result<()> {
    if idx.l.dtype == DType::I32 {
        Ok(())
    } else {
        Err(Error::Unsupported { op, dtype: idx.l.dtype })
    }
}

/// The device bytes of tensor `id` during a compute.
fn bind(ctx: &Context, regions: &HashMap<TensorId, Region>, id: TensorId, write: bool) -> Result<Bound> {
    let t = ctx.tensor(id)?;
    let root = t.view_src().unwrap_or(id);
    let r =
        regions.get(&root).ok_or_else(|| Error::Mismatch(format!("{} has no place in the plan", ctx.label(root))))?;
    if write && !r.writable {
        return Err(Error::Invalid(format!(
            "internal: {} would write the read-only storage of {}",
            ctx.label(id),
            ctx.label(root)
        )));
    }
    Bound::new(r.base, r.len, t.view_offs(), *t.layout())
}

/// `cont`/`dup`/`cpy`: element `i` of `dst` in logical order takes element `i`
/// of `src` (block types through [`super::quant::copy`]).
pub(crate) fn copy(dev: &Device, dst: Bound, src: Bound) -> Result<()> {
    let n = dst.l.nelements();
    if n != src.l.nelements() {
        return Err(Error::Mismatch(format!("internal: copy of {:?} into {:?}", src.l.ne, dst.l.ne)));
    }
    if dst.l.dtype == src.l.dtype && dst.l.is_contiguous() && src.l.is_contiguous() {
        return super::fast::copy_packed(dev, &dst, &src);
    }
    if super::fast::convert_packed(dev, &dst, &src)? {
        return Ok(());
    }
    if dst.l.dtype.is_quantized() || src.l.dtype.is_quantized() {
        return super::quant::copy(dev, dst, src);
    }
    if let Some(k) = super::fast::transpose_dim(&dst.l, &src.l) {
        return super::fast::copy_transposed(dev, &dst, &src, k);
    }
    launch!(dev, "copy", "rg_copy", flat(n); dst.ptr, dst.p("cpy")?, src.ptr, src.p("cpy")?, n);
    Ok(())
}

fn binary(dev: &Device, op: BinaryOp, dst: Bound, a: Bound, b: Bound) -> Result<()> {
    let code = match op {
        BinaryOp::Add => kernels::BINARY_ADD,
        BinaryOp::Sub => kernels::BINARY_SUB,
        BinaryOp::Mul => kernels::BINARY_MUL,
        BinaryOp::Div => kernels::BINARY_DIV,
    };
    if !super::fast::binary(dev, code, &dst, &a, &b)? {
        let (name, n) = (op.name(), dst.l.nelements());
        launch!(dev, "binary", "rg_binary", flat(n);
            code, dst.ptr, dst.k(name)?, a.ptr, a.k(name)?, b.ptr, b.k(name)?, n);
    }
    Ok(())
}

fn unary(dev: &Device, code: i32, param: f32, dst: Bound, a: Bound) -> Result<()> {
    if !super::fast::unary(dev, code, param, &dst, &a)? {
        let n = dst.l.nelements();
        launch!(dev, "unary", "rg_unary", flat(n); code, param, dst.ptr, dst.p("unary")?, a.ptr, a.p("unary")?, n);
    }
    Ok(())
}

fn rope(dev: &Device, p: &RopeParams, dst: Bound, a: Bound, pos: Bound, ff: Option<Bound>) -> Result<()> {
    let n_dims = i64::from(p.n_dims);
    if n_dims < 2 || n_dims % 2 != 0 || n_dims > a.l.ne[0] || pos.l.nelements() != a.l.ne[2] {
        return Err(Error::Mismatch(format!("internal: rope n_dims={} for ne={:?}", p.n_dims, a.l.ne)));
    }
    if pos.l.dtype != DType::I32 || ff.is_some_and(|f| f.l.dtype != DType::F32 || f.l.ne[0] < n_dims / 2) {
        return Err(Error::Mismatch("internal: rope positions or frequency factors do not fit".into()));
    }
    let (fp, fk) = match ff {
        Some(f) => (f.ptr, f.p("rope")?),
        None => (0u64, pos.p("rope")?),
    };
    let shared = (n_dims / 2 * 4) as u32;
    launch!(dev, "rope", "rg_rope", per_row(a.l.nrows(), shared)?;
        KRope::of(p), dst.ptr, dst.p("rope")?, a.ptr, a.p("rope")?, pos.ptr, pos.p("rope")?, fp, fk,
        i32::from(ff.is_some()));
    Ok(())
}
