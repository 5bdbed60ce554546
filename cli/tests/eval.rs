//! The dev graph cases (checked against real ggml) pass through the public API,
//! and `rgml eval` reports failures and writes `--emit` records.

use std::path::PathBuf;
use std::process::Command;

use rgml::CpuBackend;
use rgml_cli::graph_cases;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/graph_cases_dev.jsonl")
}

fn cases() -> Vec<serde_json::Value> {
    std::fs::read_to_string(fixture()).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn all_dev_cases_pass_with_one_and_two_threads() {
    let cases = cases();
    assert_eq!(cases.len(), 80);
    for threads in [1, 2] {
        let cpu = CpuBackend::new(threads).unwrap();
        for c in &cases {
            let r = graph_cases::run_case(&cpu, c);
            assert!(r.passed(), "{}: {:?} {:?}", r.id, r.error, r.failures);
        }
    }
}

#[test]
fn a_wrong_expectation_is_reported() {
    let mut c = cases().into_iter().find(|c| c["exact"] == true).unwrap();
    let node = c["nodes"].as_array_mut().unwrap().iter_mut().find(|n| n.get("expected").is_some()).unwrap();
    let v = node["expected"][0].as_f64().unwrap();
    node["expected"][0] = serde_json::json!(v + 1.0 / 64.0);
    node["nb"][1] = serde_json::json!(12345);
    let r = graph_cases::run_case(&CpuBackend::new(1).unwrap(), &c);
    assert!(!r.passed());
    assert!(r.failures.iter().any(|f| f.contains("nb")), "{:?}", r.failures);
    assert!(r.failures.iter().any(|f| f.contains("expected")), "{:?}", r.failures);
}

#[test]
fn cli_eval_passes_and_emits_round_trip_values() {
    let out = std::env::temp_dir().join(format!("rgml-emit-{}.jsonl", std::process::id()));
    let run =
        Command::new(env!("CARGO_BIN_EXE_rgml")).arg("eval").arg(fixture()).arg("--emit").arg(&out).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}");
    assert_eq!(stdout.lines().last(), Some("80 passed, 0 failed"));
    let emitted = std::fs::read_to_string(&out).unwrap();
    std::fs::remove_file(&out).ok();
    let cases = cases();
    assert_eq!(emitted.lines().count(), cases.len());
    for (line, case) in emitted.lines().zip(&cases) {
        let e: serde_json::Value =
            serde_json::from_str(&line.replace("NaN", "null").replace("Infinity", "1e999")).unwrap();
        assert_eq!(e["id"], case["id"]);
        assert!(e["error"].is_null());
        for n in case["nodes"].as_array().unwrap() {
            let got = &e["nodes"][n["name"].as_str().unwrap()];
            assert_eq!(got["ne"], n["ne"]);
            assert_eq!(got["nb"], n["nb"]);
            assert_eq!(got["contiguous"], n["contiguous"]);
            if let Some(exp) = n["expected"].as_array() {
                assert_eq!(got["values"].as_array().unwrap().len(), exp.len());
            } else {
                assert!(got.get("values").is_none());
            }
        }
    }
}

#[test]
fn cli_eval_fails_with_status_1_on_a_failing_case() {
    let mut c = cases().into_iter().next().unwrap();
    c["nodes"][1]["ne"][0] = serde_json::json!(99);
    let path = std::env::temp_dir().join(format!("rgml-bad-{}.jsonl", std::process::id()));
    std::fs::write(&path, format!("{c}\n")).unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_rgml")).arg("eval").arg(&path).output().unwrap();
    std::fs::remove_file(&path).ok();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAIL gc-0000"), "{stdout}");
    assert_eq!(stdout.lines().last(), Some("0 passed, 1 failed"));
}

#[test]
fn cli_demo_checks_pass() {
    let run = Command::new(env!("CARGO_BIN_EXE_rgml")).args(["demo", "--n", "256"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}");
    assert_eq!(stdout.matches(" ok").count(), 4, "{stdout}");
    assert!(!stdout.contains("FAILED"));
}

/// (At n = 64 the Q4_K rows, which need whole 256-value super-blocks, are left out.)
#[test]
fn cli_bench_json_lines() {
    let run = Command::new(env!("CARGO_BIN_EXE_rgml"))
        .args(["bench", "--json", "--n", "64", "--reps", "1"])
        .output()
        .unwrap();
    assert!(run.status.success());
    let stdout = String::from_utf8_lossy(&run.stdout);
    let names: Vec<String> = stdout
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert!(v["median_s"].as_f64().unwrap() > 0.0 && v["gbps"].as_f64().unwrap() > 0.0);
            assert!(v["ratio"].as_f64().unwrap() > 0.0);
            v["name"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(
        names,
        [
            "W1",
            "W2a",
            "W2b",
            "W3",
            "W7",
            "W4-n1",
            "W4-n16",
            "W4-n128",
            "W4-n512",
            "W5-q4_0-n1",
            "W5-q4_0-n128",
            "W5-q8_0-n1",
            "W5-q8_0-n128",
            "W5-q4_0-n1-rp",
            "W5-q4_0-n128-rp",
            "W6-t1",
            "W6-t2"
        ]
    );
}

/// `rgml bench --stream`: one row per type, each against a read of as many bytes, and
/// the CPU named first.
#[test]
fn cli_bench_stream_rows() {
    let args = ["bench", "--stream", "--n", "256", "--types", "q8_0,q4_0", "--stream-mib", "2", "--reps", "1"];
    let run = Command::new(env!("CARGO_BIN_EXE_rgml")).args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}{}", String::from_utf8_lossy(&run.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("CPU: ") && lines[0].contains("L3"), "{stdout}");
    assert!(lines[1].starts_with("MV-stream-q8_0") && lines[2].starts_with("MV-stream-q4_0"), "{stdout}");
    let run = Command::new(env!("CARGO_BIN_EXE_rgml")).args(args).arg("--json").output().unwrap();
    for l in String::from_utf8_lossy(&run.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        // 2 MiB of weights: 29 matrices of 256x256 Q8_0
        assert!(v["bytes"].as_u64().unwrap() >= 2 << 20 && v["ratio"].as_f64().unwrap() > 0.0, "{v}");
    }
}

/// `rgml bench --stream --act-rows 4`: the rows of a batched decode (named `-n4`, the
/// products of 4 activation rows, repacked too); 0 rows are refused.
#[test]
fn cli_bench_stream_rows_take_activation_rows() {
    let args = ["bench", "--stream", "--n", "256", "--types", "q4_0", "--stream-mib", "1", "--reps", "1"];
    for repack in [false, true] {
        let extra: &[&str] = if repack { &["--act-rows", "4", "--stream-repack"] } else { &["--act-rows", "4"] };
        let run = Command::new(env!("CARGO_BIN_EXE_rgml")).args(args).args(extra).output().unwrap();
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(run.status.success(), "{stdout}{}", String::from_utf8_lossy(&run.stderr));
        let want = if repack { "MV-stream-q4_0-rp-n4 " } else { "MV-stream-q4_0-n4 " };
        let row = stdout.lines().nth(1).unwrap_or_default();
        assert!(row.starts_with(want) && row.contains("N=4"), "{stdout}");
    }
    let run = Command::new(env!("CARGO_BIN_EXE_rgml")).args(args).args(["--act-rows", "0"]).output().unwrap();
    assert!(!run.status.success() && String::from_utf8_lossy(&run.stderr).contains("act-rows"));
}

/// `rgml bench --model`: the CPU, the weight bytes a token reads (every tensor, one row of
/// the token embeddings when the output matrix is its own) and generation against the
/// machine's read bandwidth.
#[test]
fn cli_bench_model_reports_bytes_and_bandwidth() {
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tiny_llama/tiny_llama_f32.gguf");
    let f = rgml::gguf::GgufFile::open(&model).unwrap();
    let embd = f.tensor("token_embd.weight").unwrap();
    assert!(f.tensor("output.weight").is_some(), "the tiny llama has its own output matrix");
    let all: usize = f.tensors().iter().map(|t| t.size).sum();
    let per_token = all - embd.size + embd.size / embd.ne[1] as usize;
    let args =
        ["bench", "--model", model.to_str().unwrap(), "--reps", "1", "--prompt-tokens", "4", "--gen-tokens", "4"];
    let run = Command::new(env!("CARGO_BIN_EXE_rgml")).args(args).args(["--stream-mib", "8"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}{}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.starts_with("CPU: "), "{stdout}");
    let line = stdout.lines().find(|l| l.starts_with("weights per token")).unwrap();
    assert!(line.contains(&format!("{:.1} MB", per_token as f64 / 1e6)) && line.contains("read bandwidth"), "{line}");
    let run =
        Command::new(env!("CARGO_BIN_EXE_rgml")).args(args).args(["--stream-mib", "8", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_str(String::from_utf8_lossy(&run.stdout).trim()).unwrap();
    assert_eq!(v["bytes_per_token"].as_u64(), Some(per_token as u64));
    assert!(v["read_gbps"].as_f64().unwrap() > 0.0 && v["gen_read_ratio"].as_f64().unwrap() > 0.0, "{v}");
}

/// `rgml eval … | head -0`: output into a closed pipe ends the process quietly
/// with success (no `println!` panic).
#[test]
fn cli_output_into_a_closed_pipe_is_not_a_panic() {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_rgml"))
        .arg("eval")
        .arg(fixture())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes away before the first line
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

/// A case with a `sum` node over a transposed input: its value is the f64 sum
/// computed here, and a wrong expectation fails.
#[test]
fn a_sum_node_sums_every_element_through_views() {
    let data: Vec<f64> = (0..12).map(|i| (i as f64 - 5.5) * 0.375).collect();
    let want: f64 = data.iter().sum();
    let case = |expected: f64| {
        serde_json::json!({
            "id": "sum-0", "exact": false, "atol": 1e-6, "rtol": 1e-6,
            "nodes": [
                {"name": "x", "op": "input", "src": [], "ne": [3, 4, 1, 1], "nb": [4, 12, 48, 48], "data": data,
                 "view_of": null, "view_offs": 0, "contiguous": true},
                {"name": "xt", "op": "transpose", "src": ["x"], "ne": [4, 3, 1, 1], "nb": [12, 4, 48, 48],
                 "view_of": "x", "view_offs": 0, "contiguous": false},
                {"name": "s", "op": "sum", "src": ["xt"], "ne": [1, 1, 1, 1], "nb": [4, 4, 4, 4],
                 "view_of": null, "view_offs": 0, "contiguous": true, "expected": [expected]}
            ]
        })
    };
    let cpu = CpuBackend::new(2).unwrap();
    let r = graph_cases::run_case(&cpu, &case(want));
    assert!(r.passed(), "{:?} {:?}", r.error, r.failures);
    assert!(!graph_cases::run_case(&cpu, &case(want + 0.5)).passed());
}
