//! `rgml chat` and `rgml run --chat` against what a hostile file or a careless user gives
//! them: templates that loop or grow without end (in vocabulary-only files made here), a
//! chat longer than its context, lines that are not text or are too long, absurd flags.

// the model library's test helpers and fixtures, shared
#[path = "../../models/tests/common/mod.rs"]
mod common;
#[path = "../../models/tests/vocab_common/mod.rs"]
mod vocab_common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `rgml` with `args` and `stdin` under an address-space limit of `limit_mb` MiB (the
/// shell's `ulimit -v`: an allocation past it fails, so memory that is not bounded shows
/// as a crash, not a slow test); the output and the wall time.
fn rgml_limited(args: &[&str], stdin: &[u8], limit_mb: usize) -> (Output, Duration) {
    let script = format!("ulimit -v {}; exec \"$0\" \"$@\"", limit_mb * 1024);
    let mut c = Command::new("sh");
    c.arg("-c").arg(script).arg(env!("CARGO_BIN_EXE_rgml")).args(args);
    c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let t0 = Instant::now();
    let mut child = c.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    // a chat may stop reading early; a closed pipe is not the test's failure
    let _ = input.write_all(stdin);
    drop(input);
    let out = child.wait_with_output().unwrap();
    (out, t0.elapsed())
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A vocabulary-only copy of SmolLM2's tokenizer with `template` as its chat template.
fn vocab_with_template(name: &str, template: &str) -> PathBuf {
    let src = vocab_common::real_vocab_dir().join("smollm2-vocab.gguf");
    common::gguf_with(&src, name, &[("tokenizer.chat_template", rgml::gguf::Value::from(template))], &[])
}

/// The tiny llama with a short template its byte-level vocabulary can spell.
fn tiny_chat_model(name: &str) -> PathBuf {
    let template = "{% for m in messages %}{{ m['role'][0] }}:{{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}a:{% endif %}";
    let src = common::fixture("tiny_llama_f32.gguf");
    common::gguf_with(&src, name, &[("tokenizer.chat_template", rgml::gguf::Value::from(template))], &[])
}

/// The templates and their kin: each `rgml run --chat` ends with exit 2 and an
/// error naming the template within a second, in a 1 GiB address space.
#[test]
fn hostile_templates_end_cleanly_from_the_command_line() {
    let x44 = "x".repeat(44);
    let cases = [
        (
            "loops",
            format!("{{% for i in range(10000) %}}{{% for j in range(10000) %}}{x44}{{% endfor %}}{{% endfor %}}"),
        ),
        ("empty-loops", "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}".into()),
        (
            "doubling",
            "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}"
                .into(),
        ),
        ("macros", "{% macro f(n) %}{{ f(n + 1) }}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}".into()),
        ("join", "{{ (['x' * 100000] * 100000)|join }}".into()),
    ];
    for (name, template) in cases {
        let file = vocab_with_template(&format!("hostile-{name}"), &template);
        let (o, took) =
            rgml_limited(&["run", file.to_str().unwrap(), "--chat", "--prompt", "hi", "-n", "4"], b"", 1024);
        std::fs::remove_file(&file).ok();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {:?} {err}", o.status);
        assert!(err.contains("chat template") && !err.contains("panicked"), "{name}: {err}");
        assert!(took < Duration::from_secs(1), "{name}: took {took:?}");
    }
}

/// A chat in a 64-position cache: turns that no longer fit drop the oldest ones and the
/// chat answers every line; a line too long for the whole cache, one that is not UTF-8 and
/// one over the line limit are errors for those lines, and the chat goes on.
#[test]
fn a_chat_outlives_its_context_and_bad_lines() {
    let model = tiny_chat_model("chat-budget");
    let mut input = Vec::new();
    for i in 0..6 {
        input.extend_from_slice(format!("hello number {i}\n").as_bytes());
    }
    input.extend_from_slice(format!("{}\n", "long ".repeat(40)).as_bytes());
    input.extend_from_slice(b"bad \xff\xfe bytes\n");
    input.extend(std::iter::repeat_n(b'y', rgml_cli::chat_cli::MAX_LINE_BYTES + 1));
    input.extend_from_slice(b"\nstill here\n");
    let args = ["chat", model.to_str().unwrap(), "--n-ctx", "64", "-n", "8", "--ignore-eos", "--seed", "1"];
    let (o, _) = rgml_limited(&args, &input, 4096);
    std::fs::remove_file(&model).ok();
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{:?}\n{err}", o.status);
    // one reply per good line: the six greetings and the last line
    let replies = err.matches("new prompt tokens").count();
    assert_eq!(replies, 7, "{err}");
    assert_eq!(out.lines().count(), 7, "{out}");
    assert!(err.contains("dropped its"), "old turns dropped to fit: {err}");
    assert!(err.contains("error: line 7:") && err.contains("positions with only the system prompt"), "{err}");
    assert!(err.contains("error: line 8 is not UTF-8 text (invalid byte at offset 4)"), "{err}");
    assert!(
        err.contains(&format!("error: line 9 is longer than {} bytes", rgml_cli::chat_cli::MAX_LINE_BYTES)),
        "{err}"
    );
    // every turn fit: the cache never held more than its 64 positions
    for line in err.lines().filter(|l| l.contains("new prompt tokens")) {
        let cached: usize = line.rsplit(", ").next().unwrap().trim_end_matches(" cached]").parse().unwrap();
        assert!(cached <= 64, "{line}");
    }
}

/// Flags that ask for more than the machine has are refused before anything starts.
#[test]
fn absurd_resource_flags_are_refused_up_front() {
    let tiny = common::fixture("tiny_llama_f32.gguf");
    let tiny = tiny.to_str().unwrap();
    for (args, says) in [
        (vec!["run", tiny, "--tokens", "1,2", "--threads", "100000"], "at most"),
        (vec!["run", tiny, "--tokens", "1,2", "--n-ctx", "1000000000000"], "--n-ctx"),
        (vec!["demo", "--n", "10000000"], "--n 10000000 is out of range"),
        (vec!["demo", "--n=-5"], "out of range"),
    ] {
        let (o, took) = rgml_limited(&args, b"", 4096);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says) && !err.contains("panicked"), "{args:?}: {err}");
        assert!(took < Duration::from_secs(5), "{args:?}: {took:?}");
    }
}
