//! numpy's `from_dlpack` and `__dlpack__` against rgml's DLPack bridge, through
//! this crate's cdylib loaded by Python (tests/numpy_dlpack.py). Needs
//! `python3` with numpy on PATH: skipped with a note otherwise, a failure when
//! `RGML_REQUIRE_NUMPY` is set (CI sets it).

use std::path::PathBuf;
use std::process::Command;

/// The cdylib cargo built with this test: next to the test executable (in
/// `target/<profile>/deps`) or one folder up.
fn cdylib() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let name = format!("{}rgml_capi{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    let deps = exe.parent().expect("the test executable's folder");
    let candidates = [deps.join(&name), deps.parent().map(|p| p.join(&name)).unwrap_or_default()];
    candidates.iter().find(|p| p.is_file()).cloned().unwrap_or_else(|| {
        panic!("{name} not found in {candidates:?}: cargo builds it with this test (crate-type cdylib)")
    })
}

#[test]
fn numpy_round_trips_through_dlpack() {
    let probe = Command::new("python3").args(["-c", "import numpy; print(numpy.__version__)"]).output();
    let why = match &probe {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(String::from_utf8_lossy(&o.stderr).trim().lines().last().unwrap_or("").to_string()),
        Err(e) => Some(format!("python3: {e}")),
    };
    if let Some(why) = why {
        assert!(std::env::var_os("RGML_REQUIRE_NUMPY").is_none(), "RGML_REQUIRE_NUMPY is set but: {why}");
        println!("SKIP numpy_round_trips_through_dlpack: python3 cannot import numpy (pip install numpy): {why}");
        return;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/numpy_dlpack.py");
    let out = Command::new("python3").arg(&script).arg(cdylib()).output().expect("python3 runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{stdout}");
    assert!(out.status.success(), "numpy_dlpack.py failed ({}):\n{stdout}\n{stderr}", out.status);
    assert!(stdout.contains("DLPack round trips OK"), "{stdout}\n{stderr}");
}
