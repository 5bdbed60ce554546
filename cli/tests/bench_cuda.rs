//! `rgml bench --backend cuda` without a GPU: a clear error and a non-zero
//! status, never a panic; and the GPU-machine scripts at least parse.

use std::process::Command;

fn rgml(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rgml")).args(args).output().unwrap()
}

#[test]
fn bench_on_cuda_without_a_device_is_a_clear_error() {
    if let Ok(b) = rgml::CudaBackend::new(0) {
        println!("SKIP: CUDA is present ({b:?}); `rgml bench --backend cuda` would run the full benchmark");
        return;
    }
    let want = rgml::CudaBackend::new(0).unwrap_err().to_string();
    for args in [&["bench", "--backend", "cuda"][..], &["bench", "--backend", "cuda", "--json", "--device", "0"]] {
        let out = rgml(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(&want), "{args:?}: {stderr}");
        assert!(stderr.contains("not available"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    }
}

#[test]
fn bench_rejects_bad_options_before_running() {
    for (args, msg) in [
        (&["bench", "--device", "1"][..], "need --backend cuda"),
        (&["bench", "--mm", "64"], "need --backend cuda"),
        (&["bench", "--matvec", "256"], "need --backend cuda"),
        (&["bench", "--backend", "cuda", "--matvec", "100"], "multiples of 32"),
        (&["bench", "--backend", "cuda", "--mm", "0"], "out of range"),
        (&["bench", "--n", "0"], "out of range"),
        (&["bench", "--backend", "cuda", "--n=-5"], "out of range"),
        (&["bench", "--backend", "tpu"], "invalid value"),
    ] {
        let out = rgml(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr.contains(msg), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

fn script(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts").join(name)
}

#[test]
fn gpu_check_script_parses() {
    match Command::new("bash").arg("-n").arg(script("gpu-check.sh")).output() {
        Ok(out) => assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => println!("SKIP: no bash: {e}"),
    }
}

#[test]
fn python_scripts_parse() {
    for name in ["torch_bench.py", "bench_table.py"] {
        let code = "import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])";
        match Command::new("python3").arg("-c").arg(code).arg(script(name)).output() {
            Ok(out) => assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr)),
            Err(e) => println!("SKIP: no python3: {e}"),
        }
    }
}
