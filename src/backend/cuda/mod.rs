//! The CUDA executor (cudarc, libraries loaded at run time).
//!
//! What exists: library probing that turns a missing
//! driver, NVRTC or cuBLAS into [`Error::Unavailable`] before cudarc can panic
//! ([`probe()`](fn@probe)); the kernel sources (`kernels/*.cu`) with their argument
//! structs ([`kernels`]); NVRTC compilation cached per (module, arch)
//! ([`compile`]); [`CudaBackend`], which opens a device and its stream, binds a
//! [`Plan`](crate::Plan) to device memory ([`CudaBackend::alloc`]: one plan
//! buffer, leaves uploaded once, those of 16 MiB and more through two pinned
//! staging buffers) and runs graphs node by node
//! ([`CudaBackend::compute`]), or as a captured CUDA graph on repeated runs
//! ([`CudaBackend::with_graphs`], `graphs.rs`), node temporaries in one
//! reused scratch buffer (`scratch.rs`); `mul_mat` for every weight type the CPU takes:
//! cuBLAS SGEMM for F32 weights, `cublasGemmStridedBatchedEx` with F16/BF16
//! inputs and F32 accumulation for F16/BF16 weights, and for Q4_0 … Q6_K the
//! activations quantized on the device to the CPU's dot partner bytes and
//! dotted with the weight blocks by `kernels/mmvq.cu` (the CPU's arithmetic;
//! generic and staged kernels for every batch size, no tensor-core int8 GEMM
//! yet).
//!
//! Block types (`kernels/quant.cuh`, host side in `quant.rs`): all 12 of them
//! (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K … Q6_K, Q8_K) are dequantized on
//! the device bit-identically to the CPU, by `get_rows`, by `cont`/`dup`/`cpy`
//! into F32/F16/BF16 from any strided layout (transposed and permuted
//! quantized views included), and by [`CudaStorage::read_f32`]. Same-type
//! block copies move blocks byte for byte (k-quants too), as does `set_rows`
//! of same-type rows. Copies and `set_rows` from F32/F16/BF16 (or another
//! block type) quantize into Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q8_1 with the
//! CPU's reference quantizers, byte-identically. Quantizing into a k-quant is
//! [`Error::Unsupported`]: the CPU uses ggml's search quantizers for those, and
//! ggml's CUDA backend does not quantize to k-quants either.
//!
//! The types added after these kernels (F64, I64, IQ4_NL, IQ4_XS, MXFP4, the
//! i-quants IQ1_S … IQ3_S, TQ1_0, TQ2_0) have no CUDA kernels yet: a graph in
//! which any computed node reads or writes one is refused by
//! [`CudaBackend::alloc`] and [`CudaBackend::compute`] before anything is
//! uploaded or launched, with [`Error::Unsupported`] naming the op and the type
//! ([`kernels::handles`]). Such leaves may still be viewed or read back as bytes.
//!
//! Kernels are CUDA C compiled with NVRTC for the device's compute capability
//! at first use; they need no CUDA toolkit headers (a small prelude does the
//! f16/bf16 conversions). Strided kernels take `ne`/`nb` by value
//! ([`kernels::KTensor`]) and use 64-bit index math.

mod exec;
mod fast;
mod graphs;
pub mod kernels;
mod matmul;
mod nvrtc;
pub mod probe;
mod quant;
mod scratch;
mod storage;
mod upload;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr};

use crate::error::{Error, Result};
use crate::plan::{ReuseRules, CUDA_ALIGNMENT};
use crate::tensor::Op;

pub use graphs::GraphStats;
pub use nvrtc::{arch_for, compile, compile_cubin, modules, sm_for};
pub use probe::CudaLib;
pub use storage::CudaStorage;

/// What the CUDA kernels allow the planner: 256-byte alignment, and the same
/// in-place reuse as the CPU kernels (each elementwise thread reads its
/// element before writing it).
#[derive(Clone, Copy, Debug, Default)]
pub struct CudaRules;

impl ReuseRules for CudaRules {
    fn alignment(&self) -> usize {
        CUDA_ALIGNMENT
    }
    fn may_overwrite_source(&self, op: &Op, slot: usize) -> bool {
        match op {
            Op::Binary(_) => slot <= 1,
            Op::Scale(_) | Op::Unary(_) | Op::Cont | Op::Dup => slot == 0,
            Op::DiagMaskInf { .. } => slot == 0,
            _ => false,
        }
    }
}

/// A CUDA device: its context, its one stream, cuBLAS on that stream (with
/// its own workspace), the kernel modules and functions loaded so far, and
/// the scratch buffer of the node temporaries. Cheap to share: storages keep
/// an `Arc` to it to launch their read-back kernels.
pub(crate) struct Device {
    ordinal: usize,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    /// cuBLAS's workspace, set once (so that no GEMM allocates, in a graph
    /// capture in particular).
    _blas_workspace: CudaSlice<u8>,
    arch: String,
    sm: String,
    name: String,
    modules: Mutex<HashMap<&'static str, Arc<CudaModule>>>,
    functions: Mutex<HashMap<(&'static str, &'static str), CudaFunction>>,
    staging: upload::Staging,
    scratch: scratch::Scratch,
    /// Held for the whole of a compute: the scratch buffer serves one run at a time.
    run: Mutex<()>,
}

/// cuBLAS's workspace: what NVIDIA recommends for Hopper (32 MiB).
const BLAS_WORKSPACE: usize = 32 << 20;

/// Dynamic shared memory per block any kernel may use without opting in.
const SHARED_DEFAULT: u32 = 48 * 1024;

/// Runs graphs on one CUDA device (see the module docs for what is wired).
/// Clones share the device (its context, stream and loaded kernels).
#[derive(Clone)]
pub struct CudaBackend {
    dev: Arc<Device>,
    poison: bool,
    quant: matmul::QuantPath,
    graphs: bool,
}

/// The smallest batch of activation rows that block-type weights meet
/// through F16 and cuBLAS by default ([`CudaBackend::with_dequant_gemm`]).
pub const DEQUANT_GEMM_FROM: usize = 32;

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaBackend(#{} {}, {})", self.dev.ordinal, self.dev.name, self.dev.arch)
    }
}

/// Ok if the driver, NVRTC and cuBLAS libraries can all be loaded; else
/// [`Error::Unavailable`] naming the first one missing and `LD_LIBRARY_PATH`.
/// Calls nothing in the libraries (safe on machines without CUDA).
pub fn probe() -> Result<()> {
    probe::require(CudaLib::Driver)?;
    probe::require(CudaLib::Nvrtc)?;
    probe::require(CudaLib::Cublas)
}

pub(crate) fn driver_err(what: &str) -> impl Fn(cudarc::driver::DriverError) -> Error + '_ {
    move |e| Error::Unavailable { what: "CUDA device".into(), why: format!("{what}: {e:?}") }
}

impl CudaBackend {
    /// Opens device `ordinal`. Errors with [`Error::Unavailable`] (never a
    /// panic) when a CUDA library is missing, no device is present, or the
    /// ordinal is out of range.
    pub fn new(ordinal: usize) -> Result<CudaBackend> {
        probe()?;
        let count = CudaContext::device_count().map_err(driver_err("cuDeviceGetCount"))?;
        if ordinal >= usize::try_from(count).unwrap_or(0) {
            return Err(Error::Unavailable {
                what: format!("CUDA device {ordinal}"),
                why: format!("{count} CUDA device(s) present"),
            });
        }
        let ctx = CudaContext::new(ordinal).map_err(driver_err("cuCtxCreate"))?;
        // Every operation of this backend is ordered on its one stream, so
        // cudarc's per-buffer events (which order uses across streams) are
        // not needed; without them nothing waits on an event recorded outside
        // a graph capture, which the driver rejects.
        // SAFETY: called before this context object allocates anything, and
        // all of the backend's work is on one stream.
        unsafe { ctx.disable_event_tracking() };
        let (major, minor) = ctx.compute_capability().map_err(driver_err("compute capability"))?;
        let name = ctx.name().unwrap_or_else(|_| "?".into());
        // a stream of our own: the legacy default stream cannot be captured
        let stream = ctx.new_stream().map_err(driver_err("cuStreamCreate"))?;
        let blas = CudaBlas::new(stream.clone())
            .map_err(|e| Error::Unavailable { what: "cuBLAS".into(), why: format!("cublasCreate: {e:?}") })?;
        // SAFETY: cuBLAS's scratch space; nothing reads bytes it did not write.
        let workspace =
            unsafe { stream.alloc::<u8>(BLAS_WORKSPACE) }.map_err(driver_err("cuMemAlloc (cuBLAS workspace)"))?;
        let ws_ptr = workspace.device_ptr(&stream).0;
        // SAFETY: the handle is live; the workspace is device memory of that
        // size kept alive by the Device as long as the handle (fields drop
        // after their owner is gone, and the handle is only used through it).
        let status = unsafe {
            cudarc::cublas::sys::cublasSetWorkspace_v2(*blas.handle(), ws_ptr as *mut std::ffi::c_void, BLAS_WORKSPACE)
        };
        if status != cudarc::cublas::sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            return Err(Error::Unavailable { what: "cuBLAS".into(), why: format!("cublasSetWorkspace: {status:?}") });
        }
        let dev = Device {
            ordinal,
            ctx,
            stream,
            blas,
            _blas_workspace: workspace,
            arch: arch_for(major, minor),
            sm: sm_for(major, minor),
            name,
            modules: Mutex::new(HashMap::new()),
            functions: Mutex::new(HashMap::new()),
            staging: upload::Staging::default(),
            scratch: scratch::Scratch::default(),
            run: Mutex::new(()),
        };
        // A/B switches for a GPU run: RGML_CUDA_MMVQ=generic (the generic dot
        // kernels), RGML_CUDA_QGEMM=off or a batch size (the dequantized GEMM),
        // RGML_CUDA_GRAPHS=1 (CUDA graphs)
        let staged = std::env::var("RGML_CUDA_MMVQ").map_or(true, |v| v != "generic");
        let dequant_from = match std::env::var("RGML_CUDA_QGEMM") {
            Ok(v) if v == "off" => None,
            Ok(v) => Some(v.parse::<i64>().ok().filter(|&n| n > 0).ok_or_else(|| {
                Error::Invalid(format!("RGML_CUDA_QGEMM={v}: expected `off` or a batch size of at least 1"))
            })?),
            Err(_) => Some(DEQUANT_GEMM_FROM as i64),
        };
        let graphs = std::env::var("RGML_CUDA_GRAPHS").is_ok_and(|v| v == "1");
        let quant = matmul::QuantPath { staged, dequant_from };
        Ok(CudaBackend { dev: Arc::new(dev), poison: false, quant, graphs })
    }
    /// Poison mode (a debug aid, as [`CpuBackend::with_poison`](crate::CpuBackend::with_poison)):
    /// before a run the plan buffer (inputs placed in it excepted) is filled
    /// with NaN bytes (0xFF), and every range the plan frees is refilled right
    /// after its last use, so a planner bug shows as NaN.
    pub fn with_poison(mut self, poison: bool) -> CudaBackend {
        self.poison = poison;
        self
    }
    /// True in poison mode.
    pub fn poison(&self) -> bool {
        self.poison
    }
    /// Whether quantized `mul_mat` may use the staged dot kernels where the
    /// rows are aligned for them (on by default; off with
    /// `RGML_CUDA_MMVQ=generic` in the environment). Both kernels compute the
    /// same sums in the same order: this changes speed, not results.
    pub fn with_staged_mmvq(mut self, staged: bool) -> CudaBackend {
        self.quant.staged = staged;
        self
    }
    /// From how many activation rows on a `mul_mat` with block-type weights
    /// dequantizes them to F16 and runs a cuBLAS GEMM (tensor cores) instead
    /// of the dot kernels: [`DEQUANT_GEMM_FROM`] by default (or
    /// `RGML_CUDA_QGEMM=N`); `None` (`RGML_CUDA_QGEMM=off`): never. The dot
    /// kernels compute the CPU's function; the GEMM agrees with it to F16
    /// rounding of the activations and weights. Only 2-D weights into a
    /// packed destination take the GEMM.
    pub fn with_dequant_gemm(mut self, from: Option<usize>) -> CudaBackend {
        self.quant.dequant_from = from.map(|n| n.max(1) as i64);
        self
    }
    /// Whether [`compute`](CudaBackend::compute) may replay CUDA graphs (off
    /// by default; on with `RGML_CUDA_GRAPHS=1` in the environment): the
    /// second time a storage computes the same graph at the same device
    /// addresses, the run is captured as a CUDA graph, and later runs launch
    /// that graph (one launch instead of one per node). Not in poison mode.
    /// Results are the same bits; see [`CudaStorage::graph_stats`].
    pub fn with_graphs(mut self, graphs: bool) -> CudaBackend {
        self.graphs = graphs;
        self
    }
    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.dev.ordinal
    }
    /// The device's name.
    pub fn name(&self) -> &str {
        &self.dev.name
    }
    /// The NVRTC architecture kernels are compiled for (`compute_XY`).
    pub fn arch(&self) -> &str {
        &self.dev.arch
    }
    /// The cudarc context. Its event tracking is off (the backend orders all
    /// of its work on one stream): slices made from it do not synchronize
    /// across streams by themselves.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.dev.ctx
    }
    /// The one stream every operation of this backend is ordered on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.dev.stream
    }
    /// Kernel `func` of module `module`, compiling and loading the module at first use.
    pub fn function(&self, module: &'static str, func: &'static str) -> Result<CudaFunction> {
        self.dev.function(module, func)
    }
}

impl Device {
    /// The stream for one caller at a time (a compute, an upload, a read-back):
    /// the scratch buffer serves one run at a time, and a CUDA graph capture
    /// must not take in another thread's work.
    pub(crate) fn exclusive(&self) -> Result<std::sync::MutexGuard<'_, ()>> {
        self.run.lock().map_err(|_| Error::Invalid("internal: stream lock poisoned".into()))
    }

    /// Kernel `func` of `module` (loaded at first use, then kept).
    pub(crate) fn function(&self, module: &'static str, func: &'static str) -> Result<CudaFunction> {
        let lock_err = || Error::Invalid("internal: function lock poisoned".into());
        if let Some(f) = self.functions.lock().map_err(|_| lock_err())?.get(&(module, func)) {
            return Ok(f.clone());
        }
        let f = self.load_function(module, func)?;
        self.functions.lock().map_err(|_| lock_err())?.insert((module, func), f.clone());
        Ok(f)
    }

    fn load_function(&self, module: &'static str, func: &str) -> Result<CudaFunction> {
        let m = {
            let mut mods = self.modules.lock().map_err(|_| Error::Invalid("internal: module lock poisoned".into()))?;
            match mods.get(module) {
                Some(m) => m.clone(),
                None => {
                    let m = self.load_module(module)?;
                    mods.insert(module, m.clone());
                    m
                }
            }
        };
        m.load_function(func).map_err(driver_err("cuModuleGetFunction"))
    }

    /// Module `module` on the device: its machine code for the device's own
    /// architecture (no PTX JIT, so an NVRTC newer than the driver is fine),
    /// or, where NVRTC cannot build or the driver cannot load that, its PTX.
    fn load_module(&self, module: &'static str) -> Result<Arc<CudaModule>> {
        let cubin = compile_cubin(module, &self.sm).and_then(|bin| {
            self.ctx.load_module(cudarc::nvrtc::Ptx::from_binary(bin)).map_err(driver_err("cuModuleLoadData (CUBIN)"))
        });
        match cubin {
            Ok(m) => Ok(m),
            Err(e) => {
                let ptx = compile(module, &self.arch)?;
                self.ctx.load_module(ptx).map_err(|e2| {
                    Error::Invalid(format!(
                        "CUDA kernels/{module}.cu loads neither as {} machine code ({e}) nor as {} PTX ({e2:?})",
                        self.sm, self.arch
                    ))
                })
            }
        }
    }

    /// Lets `f` (kernel `func`) take `bytes` of dynamic shared memory per
    /// block: up to 48 KiB every function may; past that the function must
    /// opt in, up to the device's per-block limit less its static shared
    /// memory. Past the limit it is an error naming the kernel, not a failed
    /// launch.
    pub(crate) fn allow_shared(&self, f: &CudaFunction, func: &str, bytes: u32) -> Result<()> {
        use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
        if bytes <= SHARED_DEFAULT {
            return Ok(());
        }
        let optin = self
            .ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(driver_err("cuDeviceGetAttribute"))?;
        let fixed = f.shared_size_bytes().map_err(driver_err("cuFuncGetAttribute"))?;
        let limit = u32::try_from(optin.saturating_sub(fixed)).unwrap_or(0);
        if bytes > limit {
            return Err(Error::Invalid(format!(
                "CUDA {func}: needs {bytes} bytes of shared memory per block; the device allows {limit}"
            )));
        }
        f.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes as i32)
            .map_err(driver_err("cuFuncSetAttribute"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_errors_or_opens_without_panicking() {
        match CudaBackend::new(0) {
            Ok(b) => println!("CUDA present: {b:?}"),
            Err(e) => {
                assert!(matches!(e, Error::Unavailable { .. }), "{e}");
                println!("SKIP: {e}");
            }
        }
    }

    #[test]
    fn backend_and_storage_move_between_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<CudaBackend>();
        send_sync::<CudaStorage>();
    }

    #[test]
    fn plans_for_cuda_are_256_byte_aligned() {
        use crate::{Allocator, Context, Graph, Place};
        let mut ctx = Context::new();
        let a = ctx.new_f32(&[3, 5], &[1.0; 15]).unwrap();
        let b = ctx.new_f32(&[3], &[2.0; 3]).unwrap();
        let c = ctx.add(a, b).unwrap();
        let d = ctx.sum_rows(c).unwrap();
        let e = ctx.scale(d, 0.5).unwrap();
        let graph = Graph::build(&ctx, &[e]).unwrap();
        let plan = Allocator::new(CudaRules).plan(&ctx, &graph).unwrap();
        assert_eq!(plan.alignment(), CUDA_ALIGNMENT);
        for (_, place) in plan.places() {
            if let Place::Buffer { offset } = place {
                assert_eq!(offset % CUDA_ALIGNMENT, 0);
            }
        }
    }

    #[test]
    fn alibi_and_rope_parameters() {
        assert_eq!(kernels::alibi_params(8, 0.0), (0, 1.0, 1.0));
        let (n, m0, m1) = kernels::alibi_params(12, 8.0);
        assert_eq!(n, 8);
        assert_eq!(m0, 2.0f32.powf(-1.0));
        assert_eq!(m1, 2.0f32.powf(-0.5));
        let p = kernels::KRope::of(&crate::RopeParams::new(64, crate::RopeParams::NEOX));
        assert_eq!(p.neox, 1);
        assert_eq!(p.theta_scale, 10000f32.powf(-2.0 / 64.0));
        assert!(p.corr0 >= 0.0 && p.corr1 <= 63.0);
    }

    #[test]
    fn bad_arch_and_module_are_errors() {
        assert!(compile("binary", "sm_90").is_err());
        assert!(compile("no_such_module", "compute_90").is_err());
    }
}
