//! `rgml embed` on the embedding fixtures (tests/fixtures/embed): one JSON array per
//! input line, llama.cpp's vectors raw and normalized, every pooling, and clean errors
//! for bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn fixture(f: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures").join(f).to_string_lossy().into_owned()
}

fn rgml(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rgml")).args(args).output().unwrap()
}

/// Standard output of a command that must succeed.
fn ok(o: &Output) -> String {
    let (out, err) = (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "exit {:?}\nstdout: {out}\nstderr: {err}", o.status);
    out
}

/// The error message of a command that must fail with exit status 2.
fn fails(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(o.stdout.is_empty(), "nothing printed before the error");
    err
}

fn tmp(name: &str, bytes: &[u8]) -> PathBuf {
    let p = std::env::temp_dir().join(format!("rgml-embed-cli-{}-{name}", std::process::id()));
    std::fs::write(&p, bytes).unwrap();
    p
}

fn refs() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("embed/embeddings.json")).unwrap()).unwrap()
}

fn vector(v: &Value) -> Vec<f32> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()
}

fn max_abs(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()))
}

#[test]
fn every_line_of_a_file_is_embedded_as_llama_cpp_does() {
    let r = refs();
    let prompts: Vec<&str> = r["prompts"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    let file = tmp("prompts.txt", format!("{}\n", prompts.join("\n")).as_bytes());
    for (model, pooling) in [("bert_f32.gguf", "mean"), ("nomic_q8_0.gguf", "cls"), ("nomic_f32.gguf", "last")] {
        let path = fixture(&format!("embed/{model}"));
        for (normalize, kind) in [(false, "raw"), (true, "normalized")] {
            let mut args =
                vec!["embed", &path, "--file", file.to_str().unwrap(), "--pooling", pooling, "--threads", "2"];
            if normalize {
                args.push("--normalize");
            }
            let out = ok(&rgml(&args));
            let lines: Vec<&str> = out.lines().collect();
            assert_eq!(lines.len(), prompts.len(), "one line per input");
            for (i, line) in lines.iter().enumerate() {
                let got = vector(&serde_json::from_str(line).unwrap());
                let want = vector(&r["files"][model]["pooled"][pooling][kind][i]);
                let d = max_abs(&got, &want);
                assert!(d <= 1e-4, "{model} {pooling} {kind} line {i}: {d} from llama.cpp's");
            }
        }
    }
    std::fs::remove_file(file).ok();
}

#[test]
fn the_files_pooling_by_default_and_every_token_with_none() {
    let r = refs();
    let path = fixture("embed/bert_f32.gguf");
    // bert_f32 says cls; prompt 1 is "Hello, world!"
    let out = ok(&rgml(&["embed", &path, "--prompt", "Hello, world!"]));
    let d = max_abs(
        &vector(&serde_json::from_str(out.trim()).unwrap()),
        &vector(&r["files"]["bert_f32.gguf"]["pooled"]["cls"]["raw"][1]),
    );
    assert!(d <= 1e-4, "default pooling: {d}");
    // two lines of a prompt, every token's vector
    let out = ok(&rgml(&["embed", &path, "--prompt", "Hello, world!\nthe cat", "--pooling", "none"]));
    let rows: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 2);
    let first = rows[0].as_array().unwrap();
    assert_eq!(first.len(), 6, "[CLS] hello , world ! [SEP]");
    for (t, row) in first.iter().enumerate() {
        let d = max_abs(&vector(row), &vector(&r["files"]["bert_f32.gguf"]["none"][1][t]));
        assert!(d <= 1e-4, "token {t}: {d}");
    }
    assert_eq!(rows[1].as_array().unwrap().len(), 4);
    // a decoder pools its final norm
    let out = ok(&rgml(&["embed", &fixture("arch/qwen3_f32.gguf"), "--prompt", "one two", "--pooling", "last"]));
    assert_eq!(vector(&serde_json::from_str(out.trim()).unwrap()).len(), 64);
}

#[test]
fn bad_input_is_a_clean_error() {
    let bert = fixture("embed/bert_f32.gguf");
    let long = "the ".repeat(70);
    let empty_line = tmp("empty-line.txt", b"the cat\n\nthe dog\n");
    let not_utf8 = tmp("latin1.txt", b"caf\xe9\n");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["embed", &bert, "--prompt", ""], "empty"),
        (vec!["embed", &bert, "--file", empty_line.to_str().unwrap()], "line 2 is empty"),
        (vec!["embed", &bert, "--file", not_utf8.to_str().unwrap()], "not UTF-8"),
        (vec!["embed", &bert, "--prompt", "the cat\n"], "x"),
        (vec!["embed", &bert, "--prompt", &long], "at most 64"),
        (vec!["embed", &bert, "--prompt", "a", "--n-ctx", "65"], "position_embd"),
        (vec!["embed", &bert, "--prompt", "a", "--pooling", "max"], "unknown pooling"),
        (vec!["embed", "/nonexistent.gguf", "--prompt", "a"], "nonexistent"),
        (vec!["run", &bert, "--prompt", "a"], "embedding model"),
    ];
    for (args, want) in cases {
        let o = rgml(&args);
        if want == "x" {
            // a final newline ends the line, it does not add an empty input
            assert_eq!(ok(&o).lines().count(), 1);
            continue;
        }
        let err = fails(&o);
        assert!(err.contains(want), "{args:?}: {err}");
    }
    std::fs::remove_file(empty_line).ok();
    std::fs::remove_file(not_utf8).ok();
}

#[test]
fn inspect_describes_an_encoder() {
    let out = ok(&rgml(&["inspect", &fixture("embed/nomic_f32.gguf")]));
    assert!(out.contains("architecture nomic-bert (an encoder"), "{out}");
    assert!(out.contains("pooling mean") && out.contains("bidirectional") && out.contains("base 1000"), "{out}");
}
