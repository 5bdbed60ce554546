//! Every `kernels/*.cu` module compiles with NVRTC to PTX for `compute_90`
//! and to machine code (a CUBIN) for `sm_90`, whose kernels are the PTX's
//! entry points, and the PTX has the shapes the host code relies on (no GPU
//! needed, only the NVRTC library). NVRTC is found through `LD_LIBRARY_PATH`,
//! `RGML_NVRTC_LIB_DIR` / `RGML_CUDA_LIB_DIR`, or the pip wheel
//! `nvidia-cuda-nvrtc` (its `nvidia/cu13/lib`) under the usual Python
//! site-packages directories. Without NVRTC the tests print `SKIP: …` and
//! pass; with `RGML_REQUIRE_NVRTC=1` they fail instead.

use std::path::{Path, PathBuf};

use super::kernels;
use super::nvrtc::{compile, compile_cubin};
use super::probe::{require, CudaLib};
use crate::error::Error;

/// The `.entry` names of a PTX module.
fn ptx_entries(ptx: &str) -> Vec<&str> {
    ptx.split(".entry ")
        .skip(1)
        .map(|r| r.split(|c: char| c == '(' || c.is_whitespace()).next().unwrap_or(""))
        .collect()
}

/// `nvidia/cu13/lib` and `nvidia/cuda_nvrtc/lib` under the site-packages of
/// the Pythons on this machine (a best-effort search; set the variable to be sure).
fn wheel_dirs() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Ok(out) = std::process::Command::new("python3")
        .args([
            "-c",
            "import site,sys; print('\\n'.join(site.getsitepackages()+[site.getusersitepackages()]+sys.path))",
        ])
        .output()
    {
        roots.extend(String::from_utf8_lossy(&out.stdout).lines().map(PathBuf::from));
    }
    let mut dirs = Vec::new();
    for r in roots {
        for sub in ["nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib", "nvidia/cu12/lib"] {
            let d = r.join(sub);
            if has_nvrtc(&d) && !dirs.contains(&d) {
                dirs.push(d);
            }
        }
    }
    dirs
}

fn has_nvrtc(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .is_ok_and(|it| it.filter_map(|e| e.ok()).any(|e| e.file_name().to_string_lossy().starts_with("libnvrtc.so")))
}

#[test]
fn every_kernel_compiles_for_compute_90_and_sm_90() {
    if std::env::var_os("RGML_NVRTC_LIB_DIR").is_none() {
        let dirs = wheel_dirs();
        if !dirs.is_empty() {
            // before the first probe (probes are cached per process)
            std::env::set_var("RGML_NVRTC_LIB_DIR", std::env::join_paths(&dirs).unwrap());
        }
    }
    if let Err(e) = require(CudaLib::Nvrtc) {
        assert!(matches!(e, Error::Unavailable { .. }));
        if std::env::var("RGML_REQUIRE_NVRTC").is_ok_and(|v| v == "1") {
            panic!("RGML_REQUIRE_NVRTC=1 but {e}");
        }
        println!("SKIP: NVRTC not found, kernels not compiled: {e}");
        return;
    }
    let mut failed = Vec::new();
    let mut n = 0;
    for module in kernels::MODULES.iter().map(|(n, _)| *n) {
        n += 1;
        match compile(module, "compute_90") {
            Ok(ptx) => {
                let src = ptx.to_src();
                assert!(src.contains(".target sm_90"), "{module}: PTX for another target");
                assert!(src.contains(".entry rg_"), "{module}: no kernel entry points");
                let entries: Vec<&str> = ptx_entries(&src);
                match compile_cubin(module, "sm_90") {
                    Ok(bin) => {
                        assert_eq!(&bin[..4], b"\x7fELF", "{module}: not an ELF image");
                        for e in &entries {
                            let name = format!("{e}\0");
                            assert!(
                                bin.windows(name.len()).any(|w| w == name.as_bytes()),
                                "{module}: {e} not in the CUBIN"
                            );
                        }
                        println!(
                            "ok: kernels/{module}.cu ({} bytes of PTX, {} of sm_90 code, {} kernels)",
                            src.len(),
                            bin.len(),
                            entries.len()
                        );
                    }
                    Err(e) => failed.push(format!("{e}")),
                }
            }
            Err(e) => failed.push(format!("{e}")),
        }
    }
    assert!(compile_cubin("binary", "compute_90").is_err(), "a virtual architecture is not a CUBIN target");
    assert!(failed.is_empty(), "{} of {n} kernel modules failed:\n{}", failed.len(), failed.join("\n\n"));
    // cached: the second call returns the same PTX
    let a = compile("binary", "compute_90").unwrap().to_src();
    assert_eq!(a, compile("binary", "compute_90").unwrap().to_src());
}

/// The dot kernels' parameter struct is 104 bytes in the PTX too, and the
/// `mul_mat_id` tiles' (`RgMoe`) 80 (no GPU needed, only NVRTC; skipped
/// without it).
#[test]
fn mmvq_parameter_size_in_ptx() {
    match compile("mmvq", "compute_90") {
        Ok(ptx) => {
            let src = ptx.to_src();
            for name in ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"] {
                let want = format!(".param .align 8 .b8 rg_mmvq_{name}_param_3[104]");
                assert!(src.contains(&want), "missing {want}");
                for id in [format!("rg_mmvq_id_{name}"), format!("rg_mmvq_id_{name}_staged_n1")] {
                    for want in [format!("{id}_param_3[104]"), format!("{id}_param_4[80]")] {
                        assert!(src.contains(&format!(".param .align 8 .b8 {want}")), "missing {want}");
                    }
                }
            }
            assert!(!src.contains(".local"), "a dot kernel spills to local memory");
        }
        Err(e) => println!("SKIP: NVRTC: {e}"),
    }
    if let Ok(ptx) = compile("moe", "compute_90") {
        assert!(ptx.to_src().contains(".param .align 8 .b8 rg_moe_mv_param_5[80]"));
    }
}

/// Each weight type's module (`mmvq_<type>`) holds its three dot kernels and
/// no other type's, and `mmvq_id_<type>` its three `mul_mat_id` kernels, so a
/// model compiles only the types and ops it has.
#[test]
fn each_weight_type_has_a_module_of_its_own() {
    for (module, _, _) in kernels::VARIANTS {
        let ptx = match compile(module, "compute_90") {
            Ok(ptx) => ptx.to_src(),
            Err(e) => return println!("SKIP: NVRTC: {e}"),
        };
        let mut entries: Vec<&str> = ptx_entries(&ptx);
        entries.sort_unstable();
        let t = module.trim_start_matches("mmvq_");
        let want = [format!("rg_mmvq_{t}"), format!("rg_mmvq_{t}_staged"), format!("rg_mmvq_{t}_staged_n1")];
        assert_eq!(entries, want, "{module}");
    }
}
