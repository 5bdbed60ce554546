//! Finding the CUDA libraries before cudarc touches them: cudarc loads them
//! on first use and panics when one is missing, so every entry point of the
//! CUDA executor asks here first and turns a missing library into
//! [`Error::Unavailable`].
//!
//! Libraries are found by the dynamic loader's search (`LD_LIBRARY_PATH`,
//! the system paths). Directories named in `RGML_CUDA_LIB_DIR` or
//! `RGML_NVRTC_LIB_DIR` (`:`-separated; e.g. a pip wheel's
//! `site-packages/nvidia/cu13/lib`) are tried first: a library found there is
//! loaded by its full path, and cudarc's later load by name then finds that
//! same already-loaded library.

use std::sync::OnceLock;

use crate::error::{Error, Result};

/// Environment variables naming extra directories to load CUDA libraries from.
pub const LIB_DIR_VARS: [&str; 2] = ["RGML_CUDA_LIB_DIR", "RGML_NVRTC_LIB_DIR"];

/// A CUDA library the executor needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CudaLib {
    /// The driver API (`libcuda.so`, installed with the GPU driver).
    Driver,
    /// The run-time compiler (`libnvrtc.so`).
    Nvrtc,
    /// cuBLAS (`libcublas.so`, with `libcublasLt.so`).
    Cublas,
}

impl CudaLib {
    /// File stems tried from the extra directories, in load order.
    fn stems(self) -> &'static [&'static str] {
        match self {
            CudaLib::Driver => &["cuda"],
            CudaLib::Nvrtc => &["nvrtc-builtins", "nvrtc"],
            CudaLib::Cublas => &["cublasLt", "cublas"],
        }
    }
    /// The library's file name, for messages.
    pub fn file_name(self) -> &'static str {
        match self {
            CudaLib::Driver => "libcuda.so (the NVIDIA driver)",
            CudaLib::Nvrtc => "libnvrtc.so (NVRTC)",
            CudaLib::Cublas => "libcublas.so (cuBLAS)",
        }
    }
    fn present_by_name(self) -> bool {
        // SAFETY: the probes only try `dlopen` on cudarc's candidate names and
        // drop what they opened; they call no function of the library.
        unsafe {
            match self {
                CudaLib::Driver => cudarc::driver::sys::is_culib_present(),
                CudaLib::Nvrtc => cudarc::nvrtc::sys::is_culib_present(),
                CudaLib::Cublas => cudarc::cublas::sys::is_culib_present(),
            }
        }
    }
}

/// Ok if `lib` can be loaded (probed once per process), else
/// [`Error::Unavailable`] naming the library and how to make it found.
pub fn require(lib: CudaLib) -> Result<()> {
    static FOUND: [OnceLock<bool>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let slot = match lib {
        CudaLib::Driver => 0,
        CudaLib::Nvrtc => 1,
        CudaLib::Cublas => 2,
    };
    let found = *FOUND[slot].get_or_init(|| {
        preload_from_dirs(lib);
        lib.present_by_name()
    });
    if found {
        Ok(())
    } else {
        Err(Error::Unavailable {
            what: lib.file_name().to_string(),
            why: format!(
                "the library was not found; add its directory to LD_LIBRARY_PATH (or to {} / {}){}",
                LIB_DIR_VARS[0],
                LIB_DIR_VARS[1],
                if lib == CudaLib::Driver { " — is an NVIDIA driver installed?" } else { "" }
            ),
        })
    }
}

/// The extra directories from [`LIB_DIR_VARS`].
fn extra_dirs() -> Vec<std::path::PathBuf> {
    LIB_DIR_VARS
        .iter()
        .filter_map(std::env::var_os)
        .flat_map(|v| std::env::split_paths(&v).collect::<Vec<_>>())
        .filter(|p| !p.as_os_str().is_empty())
        .collect()
}

/// True for `lib<stem>.so` and `lib<stem>.so.<version>`.
fn matches_stem(file: &str, stem: &str) -> bool {
    let Some(rest) = file.strip_prefix("lib").and_then(|r| r.strip_prefix(stem)) else { return false };
    rest == ".so"
        || rest.strip_prefix(".so.").is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// Loads `lib` by full path from the first extra directory that holds it.
fn preload_from_dirs(lib: CudaLib) {
    for dir in extra_dirs() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut files: Vec<std::path::PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        let mut loaded = false;
        for stem in lib.stems() {
            // the longest matching name first: libnvrtc.so.13 before libnvrtc.so
            if let Some(p) = files
                .iter()
                .filter(|p| p.file_name().and_then(|f| f.to_str()).is_some_and(|f| matches_stem(f, stem)))
                .max_by_key(|p| p.as_os_str().len())
            {
                loaded |= dl::open_global(p);
            }
        }
        if loaded {
            return;
        }
    }
}

#[cfg(target_os = "linux")]
mod dl {
    use std::ffi::{c_char, c_int, c_void, CString};
    use std::os::unix::ffi::OsStrExt;

    const RTLD_NOW: c_int = 2;
    const RTLD_GLOBAL: c_int = 0x100;

    extern "C" {
        fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    }

    /// `dlopen(path, RTLD_NOW | RTLD_GLOBAL)`, never closed; true on success.
    pub(super) fn open_global(path: &std::path::Path) -> bool {
        let Ok(c) = CString::new(path.as_os_str().as_bytes()) else { return false };
        // SAFETY: `c` is a valid NUL-terminated path; the handle is kept open for
        // the life of the process (the library's initialisers run once, as they
        // would when cudarc loads it by name).
        let h = unsafe { dlopen(c.as_ptr(), RTLD_NOW | RTLD_GLOBAL) };
        !h.is_null()
    }
}

#[cfg(not(target_os = "linux"))]
mod dl {
    /// Loading by path is only done on Linux; elsewhere the loader's search decides.
    pub(super) fn open_global(_: &std::path::Path) -> bool {
        false
    }
}

/// Ok if the driver, NVRTC and cuBLAS libraries can all be loaded; else
/// [`Error::Unavailable`] naming the first one missing and `LD_LIBRARY_PATH`.
/// Calls nothing in the libraries (safe on machines without CUDA).
pub fn probe() -> Result<()> {
    require(CudaLib::Driver)?;
    require(CudaLib::Nvrtc)?;
    require(CudaLib::Cublas)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_match_versioned_names_only() {
        assert!(matches_stem("libnvrtc.so.13", "nvrtc"));
        assert!(matches_stem("libnvrtc.so", "nvrtc"));
        assert!(matches_stem("libnvrtc.so.13.0.88", "nvrtc"));
        assert!(!matches_stem("libnvrtc-builtins.so.13.0", "nvrtc"));
        assert!(!matches_stem("libnvrtc.alt.so.13", "nvrtc"));
        assert!(matches_stem("libcublasLt.so.13", "cublasLt"));
        assert!(!matches_stem("libcublasLt.so.13", "cublas"));
    }

    #[test]
    fn require_answers_without_panicking() {
        for lib in [CudaLib::Driver, CudaLib::Nvrtc, CudaLib::Cublas] {
            match require(lib) {
                Ok(()) => println!("{lib:?}: found"),
                Err(e) => {
                    let msg = e.to_string();
                    assert!(msg.contains("LD_LIBRARY_PATH"), "{msg}");
                    assert!(matches!(e, Error::Unavailable { .. }));
                    println!("{lib:?}: {msg}");
                }
            }
        }
    }
}
