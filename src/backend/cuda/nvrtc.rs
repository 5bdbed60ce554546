//! Run-time compilation of the kernel modules with NVRTC, cached per
//! (module, arch) for the life of the process: PTX for a virtual
//! architecture (`compute_XY`, [`compile`]) and machine code for a real one
//! (`sm_XY`, [`compile_cubin`]). Needs the NVRTC library only, no GPU and no
//! CUDA toolkit headers.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use cudarc::nvrtc::{CompileError, CompileOptions, Ptx};

use super::kernels::module_source;
use super::probe::{require, CudaLib};
use crate::error::{Error, Result};

/// The virtual architecture for a compute capability: `compute_<major><minor>`.
pub fn arch_for(major: i32, minor: i32) -> String {
    format!("compute_{major}{minor}")
}

/// The real architecture for a compute capability: `sm_<major><minor>`.
pub fn sm_for(major: i32, minor: i32) -> String {
    format!("sm_{major}{minor}")
}

/// Compiled modules by (module, arch).
type Cache<T> = Mutex<HashMap<(String, String), T>>;

fn cache() -> &'static Cache<Ptx> {
    static CACHE: OnceLock<Cache<Ptx>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// PTX of kernel module `module` (a `kernels/*.cu` stem) for virtual
/// architecture `arch` (e.g. `"compute_90"`), compiled with NVRTC at the first
/// call and cached. Errors with [`Error::Unavailable`] when NVRTC is not found,
/// and with [`Error::Invalid`] carrying the compiler log when the source does
/// not compile.
pub fn compile(module: &str, arch: &str) -> Result<Ptx> {
    cached(cache(), module, arch, "compute_", |src| {
        let opts = CompileOptions {
            options: vec![format!("--gpu-architecture={arch}"), "--std=c++17".into()],
            name: Some(format!("{module}.cu")),
            ..Default::default()
        };
        cudarc::nvrtc::compile_ptx_with_opts(src, opts).map_err(|e| compile_error(module, arch, e))
    })
}

/// `cache`'s entry for (`module`, `arch`), else `build` of the module's source
/// (after checking that `arch` is `<prefix>XY` and that NVRTC is there), kept.
fn cached<T: Clone>(
    cache: &Cache<T>,
    module: &str,
    arch: &str,
    prefix: &str,
    build: impl FnOnce(String) -> Result<T>,
) -> Result<T> {
    let key = (module.to_string(), arch.to_string());
    if let Some(hit) = cache.lock().map_err(|_| poisoned())?.get(&key) {
        return Ok(hit.clone());
    }
    let src = module_source(module)?;
    let tail = arch.strip_prefix(prefix).unwrap_or("");
    if tail.len() < 2 || !tail.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(Error::Invalid(format!("NVRTC architecture {arch:?} is not of the form {prefix}XY")));
    }
    require(CudaLib::Nvrtc)?;
    let out = build(src)?;
    cache.lock().map_err(|_| poisoned())?.insert(key, out.clone());
    Ok(out)
}

fn poisoned() -> Error {
    Error::internal("the NVRTC cache lock was poisoned")
}

fn compile_error(module: &str, arch: &str, e: CompileError) -> Error {
    let detail = match e {
        CompileError::CompileError { nvrtc, log, .. } => format!("{nvrtc:?}\n{}", log.to_string_lossy()),
        other => format!("{other:?}"),
    };
    Error::Invalid(format!("NVRTC could not compile kernels/{module}.cu for {arch}: {detail}"))
}

fn cubin_cache() -> &'static Cache<Vec<u8>> {
    static CACHE: OnceLock<Cache<Vec<u8>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Machine code (a CUBIN) of kernel module `module` for real architecture
/// `sm` (e.g. `"sm_90"`), compiled with NVRTC at the first call and cached.
/// Loading it needs no PTX JIT in the driver, so it also works where the
/// NVRTC found is newer than the driver's PTX support. Errors as [`compile`].
pub fn compile_cubin(module: &str, sm: &str) -> Result<Vec<u8>> {
    use cudarc::nvrtc::{result, sys};
    cached(cubin_cache(), module, sm, "sm_", |src| {
        let c_src =
            std::ffi::CString::new(src).map_err(|_| Error::internal(format!("kernels/{module}.cu holds a NUL")))?;
        let c_name = std::ffi::CString::new(format!("{module}.cu")).map_err(|_| poisoned())?;
        let prog = result::create_program(&c_src, Some(&c_name))
            .map_err(|e| Error::Invalid(format!("NVRTC create for kernels/{module}.cu: {e:?}")))?;
        let opts = [format!("--gpu-architecture={sm}"), "--std=c++17".to_string()];
        // SAFETY: `prog` was created above and is destroyed once, at the end; the
        // sizes NVRTC reports bound the buffers it writes.
        unsafe {
            let bin = result::compile_program(prog, &opts).and_then(|()| {
                let mut size = 0usize;
                sys::nvrtcGetCUBINSize(prog, &mut size).result()?;
                let mut bin = vec![0u8; size];
                sys::nvrtcGetCUBIN(prog, bin.as_mut_ptr().cast()).result().map(|()| bin)
            });
            let log = result::get_program_log(prog)
                .map(|l| std::ffi::CStr::from_ptr(l.as_ptr()).to_string_lossy().into_owned())
                .unwrap_or_default();
            let _ = result::destroy_program(prog);
            bin.map_err(|e| {
                Error::Invalid(format!("NVRTC could not compile kernels/{module}.cu for {sm}: {e:?}\n{log}"))
            })
        }
    })
}
