//! `--backend cpu|cuda` on `rgml eval` and `rgml run`: the CPU always works;
//! CUDA works where a device is present and otherwise fails cleanly (a
//! non-zero exit, the missing library or device named, no panic).

use std::path::PathBuf;
use std::process::{Command, Output};

use rgml::CudaBackend;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

fn rgml(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rgml")).args(args).output().unwrap()
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// The error `--backend cuda` must report here, or None where CUDA works.
fn cuda_error() -> Option<String> {
    match CudaBackend::new(0) {
        Ok(b) => {
            println!("CUDA present: {b:?}");
            None
        }
        Err(e) => Some(e.to_string()),
    }
}

fn tokens() -> String {
    let s = std::fs::read_to_string(root().join("tiny_llama/tokens.json")).unwrap();
    s.trim().trim_start_matches('[').trim_end_matches(']').replace(' ', "")
}

#[test]
fn eval_on_the_cpu_by_name() {
    let cases = root().join("graph_cases_dev.jsonl");
    let o = rgml(&["eval", cases.to_str().unwrap(), "--backend", "cpu", "--threads", "2"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert_eq!(out.lines().last(), Some("80 passed, 0 failed"));
}

#[test]
fn eval_on_cuda_runs_or_fails_cleanly() {
    let cases = root().join("graph_cases_dev.jsonl");
    let o = rgml(&["eval", cases.to_str().unwrap(), "--backend", "cuda"]);
    let (out, err) = text(&o);
    assert!(!err.contains("panicked"), "{err}");
    match cuda_error() {
        Some(e) => {
            println!("SKIP (no CUDA): {e}");
            assert_eq!(o.status.code(), Some(2), "{out}{err}");
            assert!(err.contains(&e), "stderr must carry the Unavailable error {e:?}: {err}");
            assert!(err.contains("not available"), "{err}");
        }
        None => {
            // every case runs through the CUDA backend; one it cannot run fails with its message
            print!("{out}");
            let last = out.lines().last().unwrap_or_default();
            let (p, f) = last.split_once(" passed, ").unwrap_or_else(|| panic!("no summary: {out}{err}"));
            let (p, f): (usize, usize) = (p.parse().unwrap(), f.trim_end_matches(" failed").parse().unwrap());
            assert_eq!(p + f, 80, "{out}");
            assert_eq!(o.status.code(), Some(if f == 0 { 0 } else { 1 }));
            assert_eq!(f, 0, "CUDA failed graph cases:\n{out}");
        }
    }
}

#[test]
fn run_llama_on_each_backend() {
    let model = root().join("tiny_llama/tiny_llama_f32.gguf");
    let want: Vec<f32> = std::fs::read(root().join("tiny_llama/logits_f32_llamacpp.f32"))
        .unwrap()
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let toks = tokens();
    for backend in ["cpu", "cuda"] {
        let logits = std::env::temp_dir().join(format!("rgml-cli-logits-{backend}-{}.f32", std::process::id()));
        let o = rgml(&[
            "run",
            model.to_str().unwrap(),
            "--tokens",
            &toks,
            "--backend",
            backend,
            "--threads",
            "2",
            "--kv-type",
            "f32",
            "--logits",
            logits.to_str().unwrap(),
        ]);
        let (out, err) = text(&o);
        assert!(!err.contains("panicked"), "{err}");
        if backend == "cuda" {
            if let Some(e) = cuda_error() {
                println!("SKIP (no CUDA): {e}");
                assert_eq!(o.status.code(), Some(2), "{out}{err}");
                assert!(err.contains(&e), "{err}");
                assert!(!logits.exists());
                continue;
            }
        }
        assert!(o.status.success(), "{backend}: {out}{err}");
        let got: Vec<f32> =
            std::fs::read(&logits).unwrap().chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        std::fs::remove_file(&logits).ok();
        assert_eq!(got.len(), want.len());
        let d = got.iter().zip(&want).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(d <= 1e-4, "{backend}: max abs diff {d}");
    }
}

#[test]
fn n_gpu_layers_needs_cuda_and_a_model() {
    let model = root().join("tiny_llama/tiny_llama_f32.gguf");
    let toks = tokens();
    let o = rgml(&["run", model.to_str().unwrap(), "--tokens", &toks, "--backend", "cpu", "--n-gpu-layers", "1"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}{err}");
    assert!(err.contains("--n-gpu-layers needs --backend cuda"), "{err}");
    let cases = root().join("graph_cases_dev.jsonl");
    let o = rgml(&["eval", cases.to_str().unwrap(), "--backend", "cuda", "--n-gpu-layers", "1"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}{err}");
    assert!(err.contains("--n-gpu-layers applies to a model"), "{err}");
    // on CUDA (or its absence): a split run of one layer, or the clean error of no device
    let o = rgml(&["run", model.to_str().unwrap(), "--tokens", &toks, "--backend", "cuda", "--n-gpu-layers", "1"]);
    let (out, err) = text(&o);
    assert!(!err.contains("panicked"), "{err}");
    match cuda_error() {
        Some(e) => assert!(o.status.code() == Some(2) && err.contains(&e), "{out}{err}"),
        None => assert!(o.status.success() && err.contains("split: cuda"), "{out}{err}"),
    }
}
