//! `rgml finetune` on SmolLM2-135M (from `.ci/run`; SKIP without it): LoRA
//! adapters trained for an epoch on tests/fixtures/perplexity/design.txt lower
//! `rgml perplexity` on that text below llama.cpp's figure for the original model
//! (the fixture), and the output file is a model rgml runs. Bad settings fail.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "common/models.rs"]
mod models;
use models::model_path as model;

fn text() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/perplexity/design.txt")
}

fn rgml(args: &[&str]) -> (String, String, bool) {
    let out = Command::new(env!("CARGO_BIN_EXE_rgml")).args(args).output().unwrap();
    (String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into(), out.status.success())
}

#[test]
fn lora_finetuning_lowers_the_perplexity_of_its_text() {
    let Some(path) = model("SmolLM2-135M-Instruct.Q4_1.gguf") else { return };
    let refs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(text().with_file_name("llama_cpp.json")).unwrap()).unwrap();
    let before = refs["models"]["SmolLM2-135M-Instruct.Q4_1.gguf"]["ppl"].as_f64().unwrap();
    let out = std::env::temp_dir().join(format!("rgml-finetune-cli-{}.gguf", std::process::id()));
    let (p, t, o) = (path.to_str().unwrap(), text(), out.to_str().unwrap().to_string());
    let args = ["finetune", p, "-f", t.to_str().unwrap(), "-o", &o, "--ctx", "64", "--lora", "4", "--threads", "2"];
    let (stdout, stderr, ok) = rgml(&args);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("epoch 1/1: loss ") && stdout.contains("tokens/s trained"), "{stdout}");
    assert!(stderr.contains("LoRA rank 4"), "{stderr}");
    let (stdout, stderr, ok) = rgml(&["perplexity", &o, "-f", t.to_str().unwrap(), "--ctx", "128", "--threads", "2"]);
    std::fs::remove_file(&out).ok();
    assert!(ok, "{stderr}");
    let line = stdout.lines().find(|l| l.starts_with("Final estimate: PPL = ")).unwrap();
    let after: f64 = line["Final estimate: PPL = ".len()..].split(' ').next().unwrap().parse().unwrap();
    eprintln!("PPL {before} (llama.cpp, the original) -> {after} (rgml, fine-tuned)");
    assert!(after < 0.9 * before, "PPL {before} -> {after}");
}

#[test]
fn bad_settings_fail() {
    let Some(path) = model("SmolLM2-135M-Instruct.Q4_1.gguf") else { return };
    let (p, t) = (path.to_str().unwrap(), text());
    let t = t.to_str().unwrap();
    for (extra, why) in [
        (&["--epochs", "0"][..], "epochs"),
        (&["--ctx", "1"][..], "windows of 1 tokens"),
        (&["--ctx", "100000"][..], "training context"),
        (&["--lora", "0"][..], "LoRA rank 0"),
    ] {
        let mut args = vec!["finetune", p, "-f", t, "-o", "/tmp/rgml-never-written.gguf"];
        args.extend_from_slice(extra);
        let (_, stderr, ok) = rgml(&args);
        assert!(!ok && stderr.contains(why), "{extra:?}: {stderr}");
    }
    let (_, stderr, ok) = rgml(&["finetune", p, "-f", "/nonexistent.txt", "-o", "/tmp/x.gguf"]);
    assert!(!ok && stderr.contains("nonexistent.txt"), "{stderr}");
    let (_, stderr, ok) = rgml(&["finetune", p, "-f", t, "-o", "/nonexistent-dir/x.gguf"]);
    assert!(!ok && stderr.contains("/nonexistent-dir does not exist"), "{stderr}");
}
