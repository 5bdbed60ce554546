//! `rgml convert`: the fixture checkpoint to a GGUF file that `rgml run` reads; a bad
//! `--outtype` or a broken checkpoint fails cleanly (a non-zero exit, a message, no file).

use std::path::PathBuf;
use std::process::{Command, Output};

fn fixture(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/convert").join(p)
}

fn rgml(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rgml")).args(args).output().unwrap()
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rgml-convert-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn convert_then_run() {
    let d = temp_dir("ok");
    let out = d.join("tiny.gguf");
    let input = fixture("sharded/model.safetensors.index.json");
    let o = rgml(&["convert", input.to_str().unwrap(), out.to_str().unwrap(), "--outtype", "f16"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("20 tensors, 304 tokens (pre-tokenizer smollm), file type 1"), "{stdout}");
    let o = rgml(&["run", out.to_str().unwrap(), "--tokens", "1,100,200", "-n", "2", "--threads", "1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn refusals_exit_non_zero_without_output() {
    let d = temp_dir("bad");
    let out = d.join("x.gguf");
    let input = fixture("single/model.safetensors");
    let o = rgml(&["convert", input.to_str().unwrap(), out.to_str().unwrap(), "--outtype", "q4_k"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown output type \"q4_k\""));
    let missing = d.join("model.safetensors");
    let o = rgml(&["convert", missing.to_str().unwrap(), out.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("model.safetensors"));
    assert!(!out.exists());
    std::fs::remove_dir_all(&d).unwrap();
}
