//! A CUDA device: its context, its one stream, cuBLAS on that stream, the
//! kernel modules loaded so far, the staging buffers of uploads and the
//! scratch buffer of node temporaries.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr};

use super::launch::driver_err;
use super::nvrtc::{arch_for, compile, compile_cubin, sm_for};
use super::{scratch, upload};
use crate::error::{Error, Result};

/// A CUDA device: its context, its one stream, cuBLAS on that stream (with
/// its own workspace), the kernel modules and functions loaded so far, and
/// the scratch buffer of the node temporaries. Cheap to share: storages keep
/// an `Arc` to it to launch their read-back kernels.
pub(crate) struct Device {
    pub(crate) ordinal: usize,
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) blas: CudaBlas,
    /// cuBLAS's workspace, set once (so that no GEMM allocates, in a graph
    /// capture in particular).
    _blas_workspace: CudaSlice<u8>,
    pub(crate) arch: String,
    sm: String,
    pub(crate) name: String,
    modules: Mutex<HashMap<&'static str, Arc<CudaModule>>>,
    functions: Mutex<HashMap<(&'static str, &'static str), CudaFunction>>,
    pub(crate) staging: upload::Staging,
    pub(crate) scratch: scratch::Scratch,
    /// Held for the whole of a compute: the scratch buffer serves one run at a time.
    run: Mutex<()>,
}

/// cuBLAS's workspace: what NVIDIA recommends for Hopper (32 MiB).
const BLAS_WORKSPACE: usize = 32 << 20;

/// Dynamic shared memory per block any kernel may use without opting in.
const SHARED_DEFAULT: u32 = 48 * 1024;

impl Device {
    /// Opens device `ordinal`. Errors with [`Error::Unavailable`] (never a
    /// panic) when a CUDA library is missing, no device is present, or the
    /// ordinal is out of range.
    pub(crate) fn open(ordinal: usize) -> Result<Device> {
        super::probe::probe()?;
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
        Ok(Device {
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
        })
    }

    /// The stream for one caller at a time (a compute, an upload, a read-back):
    /// the scratch buffer serves one run at a time, and a CUDA graph capture
    /// must not take in another thread's work.
    pub(crate) fn exclusive(&self) -> Result<std::sync::MutexGuard<'_, ()>> {
        self.run.lock().map_err(|_| Error::internal("stream lock poisoned"))
    }

    /// Kernel `func` of `module` (loaded at first use, then kept).
    pub(crate) fn function(&self, module: &'static str, func: &'static str) -> Result<CudaFunction> {
        let lock_err = || Error::internal("function lock poisoned");
        if let Some(f) = self.functions.lock().map_err(|_| lock_err())?.get(&(module, func)) {
            return Ok(f.clone());
        }
        let f = self.load_function(module, func)?;
        self.functions.lock().map_err(|_| lock_err())?.insert((module, func), f.clone());
        Ok(f)
    }

    fn load_function(&self, module: &'static str, func: &str) -> Result<CudaFunction> {
        let m = {
            let mut mods = self.modules.lock().map_err(|_| Error::internal("module lock poisoned"))?;
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

    /// Sets `n` bytes from `offset` of the device buffer `buf` (address,
    /// length) to `byte`, on the stream; a range outside it is ignored.
    pub(crate) fn fill(&self, buf: (u64, usize), offset: usize, n: usize, byte: u8) -> Result<()> {
        if n == 0 || offset.checked_add(n).is_none_or(|e| e > buf.1) {
            return Ok(());
        }
        self.ctx.bind_to_thread().map_err(super::launch::cuda_err("bind context"))?;
        // SAFETY: `buf.0 + offset .. + n` lies inside the device buffer `buf`
        // (checked above), which the caller's storage owns for the call; the
        // memset is ordered on the stream every kernel of the storage runs on,
        // and any byte pattern is valid for a byte buffer.
        unsafe { cudarc::driver::result::memset_d8_async(buf.0 + offset as u64, byte, n, self.stream.cu_stream()) }
            .map_err(super::launch::cuda_err("memset"))
    }
}
