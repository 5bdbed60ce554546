//! `rgml serve` on SmolLM2 through the official `openai` Python client
//! (`tests/serve/openai_client.py`): chat completions streamed and whole, the end of
//! turn, `max_tokens`, `stop`, seeds, log-probabilities, usage counts, the API key, the
//! error answers (malformed, wrong types, unsupported fields, a prompt over the context,
//! a body over the limit, a full queue, late headers and bodies, hundreds of idle
//! connections), a client that leaves cancelling its sequence, and eight concurrent
//! greedy requests getting the tokens each gets alone and from `rgml run`.
//!
//! Skipped (with a SKIP line) without the model or the `openai` package; CI sets
//! `RGML_REQUIRE_MODELS` and `RGML_REQUIRE_OPENAI`, which turn a skip into a failure.

#[path = "common/models.rs"]
mod models;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

const N_CTX: usize = 512;
const KEY: &str = "test-key-0123";

/// A server process, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `rgml serve` on a free loopback port; returns it and its base URL once the
/// model is loaded (the server says so on standard error).
fn start(model: &std::path::Path, args: &[&str]) -> (Server, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rgml"))
        .arg("serve")
        .arg(model)
        .args(["--port", "0", "--n-ctx", &N_CTX.to_string(), "--threads", "2"])
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .expect("rgml serve starts");
    let stderr = child.stderr.take().expect("stderr");
    let server = Server(child);
    let mut lines = BufReader::new(stderr).lines();
    let mut url = None;
    for line in lines.by_ref() {
        let line = line.expect("stderr is text");
        eprintln!("server: {line}");
        if let Some(rest) = line.strip_prefix("rgml serve: listening on ") {
            url = rest.split_whitespace().next().map(str::to_string);
        }
        if line.starts_with("rgml serve: model loaded") {
            break;
        }
        assert!(!line.contains("error"), "the server failed: {line}");
    }
    // keep draining its standard error so that it never blocks on a full pipe
    std::thread::spawn(move || lines.for_each(drop));
    (server, url.expect("the server printed its address"))
}

/// Whether `python3` has the openai package (a failure with RGML_REQUIRE_OPENAI set).
fn have_openai() -> bool {
    let ok = Command::new("python3").args(["-c", "import openai"]).status().is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("RGML_REQUIRE_OPENAI").is_none(),
            "RGML_REQUIRE_OPENAI is set but python3 cannot import openai"
        );
        eprintln!("SKIP: python3 has no openai package (pip install openai)");
    }
    ok
}

#[test]
fn the_openai_client_is_served() {
    let Some(model) = models::model_path("SmolLM2-135M-Instruct.Q4_1.gguf") else { return };
    if !have_openai() {
        return;
    }
    let args = ["--parallel", "8", "--max-queue", "2", "--api-key", KEY, "--max-body", "65536", "--timeout", "2"];
    let (_server, url) = start(&model, &args);
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve/openai_client.py");
    let out = Command::new("python3")
        .arg(&script)
        .args([url.as_str(), KEY, env!("CARGO_BIN_EXE_rgml")])
        .arg(&model)
        .arg(N_CTX.to_string())
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the client's checks failed (above)");
    assert_eq!(stdout.lines().filter(|l| l.starts_with("ok: ")).count(), 13, "every check ran");
}
