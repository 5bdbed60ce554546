//! Run-time compilation of the kernel modules with NVRTC, cached per
//! (module, arch) for the life of the process. Needs the NVRTC library only,
//! no GPU and no CUDA toolkit headers.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use cudarc::nvrtc::{CompileError, CompileOptions, Ptx};

use super::kernels::{module_source, MODULES};
use super::probe::{require, CudaLib};
use crate::error::{Error, Result};

/// The virtual architecture for a compute capability: `compute_<major><minor>`.
pub fn arch_for(major: i32, minor: i32) -> String {
    format!("compute_{major}{minor}")
}

/// Names of every kernel module (the `kernels/*.cu` stems).
pub fn modules() -> impl Iterator<Item = &'static str> {
    MODULES.iter().map(|(n, _)| *n)
}

fn cache() -> &'static Mutex<HashMap<(String, String), Ptx>> {
    static CACHE: OnceLock<Mutex<HashMap<(String, String), Ptx>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// PTX of kernel module `module` (a `kernels/*.cu` stem) for virtual
/// architecture `arch` (e.g. `"compute_90"`), compiled with NVRTC at the first
/// call and cached. Errors with [`Error::Unavailable`] when NVRTC is not found,
/// and with [`Error::Invalid`] carrying the compiler log when the source does
/// not compile.
pub fn compile(module: &str, arch: &str) -> Result<Ptx> {
    let key = (module.to_string(), arch.to_string());
    if let Some(ptx) = cache().lock().map_err(|_| poisoned())?.get(&key) {
        return Ok(ptx.clone());
    }
    let src = module_source(module)?;
    if !arch.starts_with("compute_") || !arch[8..].chars().all(|c| c.is_ascii_alphanumeric()) || arch.len() < 10 {
        return Err(Error::Invalid(format!("NVRTC architecture {arch:?} is not of the form compute_XY")));
    }
    require(CudaLib::Nvrtc)?;
    let opts = CompileOptions {
        options: vec![format!("--gpu-architecture={arch}"), "--std=c++17".into()],
        name: Some(format!("{module}.cu")),
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(src, opts).map_err(|e| compile_error(module, arch, e))?;
    cache().lock().map_err(|_| poisoned())?.insert(key, ptx.clone());
    Ok(ptx)
}

fn poisoned() -> Error {
    Error::Invalid("internal: the NVRTC cache lock was poisoned".into())
}

fn compile_error(module: &str, arch: &str, e: CompileError) -> Error {
    let detail = match e {
        CompileError::CompileError { nvrtc, log, .. } => format!("{nvrtc:?}\n{}", log.to_string_lossy()),
        other => format!("{other:?}"),
    };
    Error::Invalid(format!("NVRTC could not compile kernels/{module}.cu for {arch}: {detail}"))
}
