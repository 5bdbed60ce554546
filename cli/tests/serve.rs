//! `rgml serve` on SmolLM2 through the official `openai` Python client
//! (`tests/serve/openai_client.py`): chat completions streamed and whole, the end of
//! turn, `max_tokens`, `stop`, seeds, log-probabilities, usage counts, the API key, the
//! error answers (malformed, wrong types, unsupported fields, a prompt over the context,
//! a body over the limit, a full queue, late headers and bodies, hundreds of idle
//! connections), a client that leaves cancelling its sequence, and eight concurrent
//! greedy requests getting the tokens each gets alone and from `rgml run`.
//!
//! `/v1/embeddings` on the embedding fixtures (tests/fixtures/embed, tests/fixtures/arch):
//! a BERT model served for embeddings alone (llama.cpp's vectors, every input shape,
//! base64, the errors, 501 for text; `tests/serve/openai_embeddings.py` through the
//! official client) and a decoder with `--embeddings` serving both.
//!
//! Skipped (with a SKIP line) without the model or the `openai` package; CI sets
//! `RGML_REQUIRE_MODELS` and `RGML_REQUIRE_OPENAI`, which turn a skip into a failure.
//! The embedding tests need neither but the client's script.

#[path = "common/models.rs"]
mod models;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

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
    let n_ctx = N_CTX.to_string();
    spawn(model, &[&["--n-ctx", &n_ctx], args].concat())
}

/// [`start`] with only `args` after the port and the threads.
fn spawn(model: &std::path::Path, args: &[&str]) -> (Server, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rgml"))
        .arg("serve")
        .arg(model)
        .args(["--port", "0", "--threads", "2"])
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

fn fixture(f: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures").join(f)
}

/// llama.cpp's results for the embedding fixtures.
fn embed_refs() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("embed/embeddings.json")).unwrap()).unwrap()
}

/// One request on its own connection: the status and the JSON body.
fn request(url: &str, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let addr = url.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let body = body.to_string();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let status = answer.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let text = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(text).unwrap_or(Value::Null))
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()
}

fn max_abs(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()))
}

/// Standard base64 decoded (the answers' `encoding_format: base64`) as f32 values.
fn unbase64(s: &str) -> Vec<f32> {
    let abc = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let six: Vec<u32> =
        s.bytes().take_while(|&c| c != b'=').map(|c| abc.iter().position(|&a| a == c).unwrap() as u32).collect();
    let mut bytes = Vec::new();
    for q in six.chunks(4) {
        let n = q.iter().enumerate().fold(0, |n, (i, &v)| n | (v << (18 - 6 * i)));
        bytes.extend(&n.to_be_bytes()[1..q.len()]);
    }
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

#[test]
fn an_embedding_model_serves_v1_embeddings_alone() {
    let r = embed_refs();
    let want = &r["files"]["bert_f32.gguf"];
    let (_server, url) = spawn(&fixture("embed/bert_f32.gguf"), &["--max-queue", "4"]);
    let prompts = r["prompts"].clone();
    let (status, a) = request(&url, "POST", "/v1/embeddings", &json!({"model": "bert", "input": prompts}));
    assert_eq!(status, 200, "{a}");
    assert_eq!((a["object"].as_str(), a["model"].as_str()), (Some("list"), Some("bert")));
    let data = a["data"].as_array().unwrap();
    assert_eq!(data.len(), 6);
    for (i, d) in data.iter().enumerate() {
        assert_eq!((d["object"].as_str(), d["index"].as_u64()), (Some("embedding"), Some(i as u64)));
        // the file's cls pooling, normalized as llama-server does
        let diff = max_abs(&floats(&d["embedding"]), &floats(&want["pooled"]["cls"]["normalized"][i]));
        assert!(diff <= 1e-4, "input {i}: {diff} from llama.cpp's");
    }
    let n: u64 = want["tokens"].as_array().unwrap().iter().map(|t| t.as_array().unwrap().len() as u64).sum();
    assert_eq!((a["usage"]["prompt_tokens"].as_u64(), a["usage"]["total_tokens"].as_u64()), (Some(n), Some(n)));
    // token ids, base64, raw vectors
    let ids = want["tokens"][1].clone();
    let (_, by_ids) = request(&url, "POST", "/v1/embeddings", &json!({"input": ids}));
    assert_eq!(by_ids["data"][0]["embedding"], data[1]["embedding"]);
    assert_eq!(by_ids["model"].as_str(), Some("bert_f32.gguf"));
    let (_, b64) = request(&url, "POST", "/v1/embeddings", &json!({"input": [ids], "encoding_format": "base64"}));
    assert_eq!(unbase64(b64["data"][0]["embedding"].as_str().unwrap()), floats(&data[1]["embedding"]));
    let (_, raw) = request(&url, "POST", "/v1/embeddings", &json!({"input": "Hello, world!", "embd_normalize": -1}));
    let diff = max_abs(&floats(&raw["data"][0]["embedding"]), &floats(&want["pooled"]["cls"]["raw"][1]));
    assert!(diff <= 1e-4, "raw: {diff}");
    // bad requests name the field; text endpoints are not there
    for (body, param, what) in [
        (json!({"input": []}), "input", "empty"),
        (json!({"input": ["a", ""]}), "input", "input[1]"),
        (json!({"input": [[2, 100000, 3]]}), "input", "vocabulary"),
        (json!({"input": "the ".repeat(70)}), "input", "at most 64"),
        (json!({"input": {"text": "a"}}), "input", "a string"),
        (json!({"input": "a", "encoding_format": "int8"}), "encoding_format", "base64"),
        (json!({"input": "a", "dimensions": 8}), "dimensions", "64"),
        (json!({"input": "a", "embd_normalize": 1}), "embd_normalize", "-1"),
        (json!({"input": "a", "model": 3}), "model", "model"),
    ] {
        let (status, e) = request(&url, "POST", "/v1/embeddings", &body);
        assert_eq!((status, e["error"]["param"].as_str()), (400, Some(param)), "{body}: {e}");
        assert!(e["error"]["message"].as_str().unwrap().contains(what), "{body}: {e}");
    }
    let (_, long) = request(&url, "POST", "/v1/embeddings", &json!({"input": "the ".repeat(70)}));
    assert_eq!(long["error"]["code"].as_str(), Some("context_length_exceeded"));
    for path in ["/v1/chat/completions", "/v1/completions"] {
        let (status, e) =
            request(&url, "POST", path, &json!({"prompt": "a", "messages": [{"role": "user", "content": "a"}]}));
        assert_eq!((status, e["error"]["type"].as_str()), (501, Some("not_supported_error")), "{path}: {e}");
    }
    let (status, h) = request(&url, "GET", "/health", &Value::Null);
    assert_eq!((status, h["status"].as_str()), (200, Some("ok")));
    let (_, m) = request(&url, "GET", "/v1/models", &Value::Null);
    assert_eq!(m["data"][0]["meta"]["embeddings"], json!({"n_embd": 64, "n_ctx": 64, "pooling": "cls"}));
    // and through the official client, where python3 has it
    if have_openai() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve/openai_embeddings.py");
        let out = Command::new("python3")
            .arg(&script)
            .arg(&url)
            .arg(fixture("embed/embeddings.json"))
            .arg("bert_f32.gguf")
            .output()
            .expect("python3 runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "the client's checks failed (above)");
        assert_eq!(stdout.lines().filter(|l| l.starts_with("ok: ")).count(), 3, "every check ran");
    }
}

#[test]
fn a_decoder_serves_embeddings_beside_text_with_the_flag() {
    let r = embed_refs();
    let dec = &r["decoders"];
    let model = fixture("arch/llama3_f32.gguf");
    let args = ["--embeddings", "--pooling", "mean", "--n-ctx", "64", "--parallel", "2"];
    let (_server, url) = spawn(&model, &args);
    let body = json!({"input": dec["tokens"], "embd_normalize": -1});
    let (status, a) = request(&url, "POST", "/v1/embeddings", &body);
    assert_eq!(status, 200, "{a}");
    let diff = max_abs(&floats(&a["data"][0]["embedding"]), &floats(&dec["files"]["llama3_f32.gguf"]["mean"]));
    assert!(diff <= 1e-4, "mean of the final norm: {diff} from llama.cpp's");
    let (status, c) = request(&url, "POST", "/v1/completions", &json!({"prompt": [5, 6, 7], "max_tokens": 2}));
    assert_eq!((status, c["usage"]["completion_tokens"].as_u64()), (200, Some(2)), "{c}");
    drop(_server);
    // without the flag: text only
    let (_server, url) = spawn(&model, &["--n-ctx", "64"]);
    let (status, e) = request(&url, "POST", "/v1/embeddings", &json!({"input": "a"}));
    assert_eq!((status, e["error"]["type"].as_str()), (501, Some("not_supported_error")), "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains("--embeddings"));
    // a file that names no pooling needs --pooling
    let o = Command::new(env!("CARGO_BIN_EXE_rgml"))
        .args(["serve", model.to_str().unwrap(), "--port", "0", "--embeddings"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--pooling"), "{err}");
}
