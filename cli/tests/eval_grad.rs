//! Graph cases with gradients (`tests/fixtures/graph_cases_grad.jsonl`, made
//! by `scripts/make_grad_cases.py` with JAX in float64): rgml's backward
//! graphs match, the in-place hazards are refused, `--emit` writes the
//! gradients; a wrong gradient or a hazard let through fails the case.

use std::path::PathBuf;
use std::process::Command;

use rgml::CpuBackend;
use rgml_cli::graph_cases;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/graph_cases_grad.jsonl")
}

fn cases() -> Vec<serde_json::Value> {
    std::fs::read_to_string(fixture()).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn gradient_cases_pass_and_hazards_are_refused() {
    let cases = cases();
    assert_eq!(cases.len(), 7);
    assert_eq!(cases.iter().filter(|c| c.get("expected_error").is_some()).count(), 3);
    for threads in [1, 2] {
        for c in &cases {
            let r = graph_cases::run_case(&CpuBackend::new(threads).unwrap(), c);
            assert!(r.passed(), "{}: {:?} {:?}", r.id, r.error, r.failures);
        }
    }
}

#[test]
fn a_wrong_gradient_or_a_missing_refusal_fails() {
    let mut c = cases().into_iter().find(|c| c["id"] == "grad-mlp-xent").unwrap();
    let v = c["expected_grads"]["b"][2].as_f64().unwrap();
    c["expected_grads"]["b"][2] = serde_json::json!(v + 0.01);
    let r = graph_cases::run_case(&CpuBackend::new(1).unwrap(), &c);
    assert!(!r.passed() && r.failures.iter().any(|f| f.contains("grad of b[2]")), "{:?}", r.failures);

    let mut c = cases().into_iter().find(|c| c["id"] == "hazard-own-gradient").unwrap();
    c["nodes"][3]["op"] = serde_json::json!("sqr"); // no longer in place: allowed
    let r = graph_cases::run_case(&CpuBackend::new(1).unwrap(), &c);
    assert!(!r.passed() && r.failures.iter().any(|f| f.contains("no error")), "{:?}", r.failures);
}

#[test]
fn cli_eval_emits_gradients_and_errors() {
    let out = std::env::temp_dir().join(format!("rgml-emit-grad-{}.jsonl", std::process::id()));
    let run =
        Command::new(env!("CARGO_BIN_EXE_rgml")).arg("eval").arg(fixture()).arg("--emit").arg(&out).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}");
    assert_eq!(stdout.lines().last(), Some("7 passed, 0 failed"));
    let emitted = std::fs::read_to_string(&out).unwrap();
    std::fs::remove_file(&out).ok();
    for (line, case) in emitted.lines().zip(cases()) {
        let e: serde_json::Value = serde_json::from_str(line).unwrap();
        if let Some(want) = case["expected_error"].as_str() {
            assert!(e["error"].as_str().is_some_and(|m| m.contains(want)), "{line}");
        } else {
            for (name, g) in case["expected_grads"].as_object().unwrap() {
                assert_eq!(e["grads"][name].as_array().unwrap().len(), g.as_array().unwrap().len(), "{line}");
            }
        }
    }
}

#[test]
fn the_plan_report_shows_what_forward_keeps_for_backward() {
    let (step, kept) = rgml_cli::plan_report::train_step(32).unwrap();
    assert!(step.stats.planned < step.stats.naive && step.stats.planned >= step.stats.lower_bound, "{step}");
    // the ReLU output (4096 × 32) and the logits (10 × 32), F32
    assert!(
        kept.contains(&format!("kept for backward: {} B in 2 forward results", (4096 * 32 + 10 * 32) * 4)),
        "{kept}"
    );
}
