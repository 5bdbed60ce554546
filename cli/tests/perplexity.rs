//! `rgml perplexity` against llama.cpp's perplexity of the same text, model
//! and chunk size (tests/fixtures/perplexity, provenance in its README): the
//! same token count and chunks, PPL within 1 %. The models come from `.ci/run`
//! (target/models); without them the test says SKIP (a failure with
//! `RGML_REQUIRE_MODELS=1`). A text too short for two chunks is an error.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/perplexity")
}

#[path = "common/models.rs"]
mod models;
use models::model_path as model;

fn rgml_perplexity(model: &Path, text: &Path, ctx: usize) -> (String, String, bool) {
    let out = Command::new(env!("CARGO_BIN_EXE_rgml"))
        .args(["perplexity"])
        .arg(model)
        .arg("-f")
        .arg(text)
        .args(["--ctx", &ctx.to_string(), "--threads", "2"])
        .output()
        .unwrap();
    (String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into(), out.status.success())
}

#[test]
fn perplexity_matches_llama_cpp_within_one_percent() {
    let refs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("llama_cpp.json")).unwrap()).unwrap();
    let ctx = refs["ctx"].as_u64().unwrap() as usize;
    for (file, want) in refs["models"].as_object().unwrap() {
        let Some(path) = model(file) else { continue };
        let (stdout, stderr, ok) = rgml_perplexity(&path, &fixtures().join("design.txt"), ctx);
        assert!(ok, "{file}: {stderr}");
        let line =
            stdout.lines().find(|l| l.starts_with("Final estimate: PPL = ")).unwrap_or_else(|| panic!("{stdout}"));
        let ppl: f64 = line["Final estimate: PPL = ".len()..].split(' ').next().unwrap().parse().unwrap();
        let want_ppl = want["ppl"].as_f64().unwrap();
        let tokens = format!("{} tokens, {} chunks", want["tokens"], want["chunks"]);
        assert!(stderr.contains(&tokens), "{file}: {stderr} (llama.cpp: {tokens})");
        assert!((ppl / want_ppl - 1.0).abs() <= 0.01, "{file}: PPL {ppl} against llama.cpp's {want_ppl}");
        eprintln!("{file}: PPL {ppl} against llama.cpp's {want_ppl}");
    }
}

#[test]
fn a_text_too_short_is_an_error() {
    let Some(path) = model("SmolLM2-135M-Instruct.Q4_1.gguf") else { return };
    let short = std::env::temp_dir().join(format!("rgml-ppl-short-{}.txt", std::process::id()));
    std::fs::write(&short, "Too short for two chunks.").unwrap();
    let (_, stderr, ok) = rgml_perplexity(&path, &short, 128);
    std::fs::remove_file(&short).ok();
    assert!(!ok && stderr.contains("needs at least 256"), "{stderr}");
}
