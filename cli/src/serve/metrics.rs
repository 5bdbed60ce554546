//! `GET /metrics`: Prometheus' text format — the HTTP answers by status, the engine's
//! counters (requests, tokens, time busy) and gauges (queue depth, busy sequences).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use rgml_models::engine::Stats;

/// The statuses counted apart; any other is counted as `other`.
const STATUSES: [u16; 10] = [200, 400, 401, 404, 405, 408, 413, 500, 501, 503];

/// HTTP answers by status.
#[derive(Default)]
pub struct HttpCounters {
    by_status: [AtomicU64; STATUSES.len() + 1],
}

impl HttpCounters {
    /// Counts an answer.
    pub fn count(&self, status: u16) {
        let i = STATUSES.iter().position(|&s| s == status).unwrap_or(STATUSES.len());
        self.by_status[i].fetch_add(1, Ordering::Relaxed);
    }
}

/// The exposition text.
pub fn render(http: &HttpCounters, st: &Stats, n_seq: usize) -> String {
    let mut s = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
        let _ = writeln!(s, "# HELP rgml_{name} {help}\n# TYPE rgml_{name} {kind}");
        for (labels, v) in samples {
            let _ = writeln!(s, "rgml_{name}{labels} {v}");
        }
    };
    let one = |v: f64| vec![(String::new(), v)];
    let mut statuses: Vec<(String, f64)> = STATUSES
        .iter()
        .map(|c| format!("{{status=\"{c}\"}}"))
        .chain(["{status=\"other\"}".to_string()])
        .zip(http.by_status.iter().map(|a| a.load(Ordering::Relaxed) as f64))
        .collect();
    statuses.retain(|(_, v)| *v > 0.0);
    metric("http_responses_total", "counter", "HTTP answers, by status.", &statuses);
    let outcomes = [("finished", st.finished), ("refused", st.refused), ("cancelled", st.cancelled)]
        .map(|(o, v)| (format!("{{outcome=\"{o}\"}}"), v as f64));
    metric("requests_total", "counter", "Requests the engine took.", &one(st.requests as f64));
    metric(
        "requests_ended_total",
        "counter",
        "Requests ended, by outcome (cancelled: the client left, or a stop string ended the answer).",
        &outcomes,
    );
    metric("prompt_tokens_total", "counter", "Prompt tokens of the finished requests.", &one(st.prompt_tokens as f64));
    metric("tokens_generated_total", "counter", "Tokens generated.", &one(st.generated_tokens as f64));
    let busy_s = st.busy_ns as f64 / 1e9;
    metric("busy_seconds_total", "counter", "Time the engine spent in steps.", &one(busy_s));
    metric("steps_total", "counter", "Steps the engine ran.", &one(st.steps as f64));
    let rate = if busy_s > 0.0 { st.generated_tokens as f64 / busy_s } else { 0.0 };
    metric("tokens_per_second", "gauge", "Tokens generated per second of engine time, since the start.", &one(rate));
    metric("queue_depth", "gauge", "Requests waiting for a sequence.", &one(st.queued as f64));
    metric("slots_busy", "gauge", "Sequences serving a request.", &one(st.busy as f64));
    metric("slots_total", "gauge", "Sequences the server runs at once (--parallel).", &one(n_seq as f64));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_lines() {
        let http = HttpCounters::default();
        http.count(200);
        http.count(200);
        http.count(418);
        let st = Stats { generated_tokens: 10, busy_ns: 2_000_000_000, queued: 3, ..Stats::default() };
        let text = render(&http, &st, 4);
        for line in [
            "rgml_http_responses_total{status=\"200\"} 2",
            "rgml_http_responses_total{status=\"other\"} 1",
            "rgml_tokens_per_second 5",
            "rgml_queue_depth 3",
            "rgml_slots_total 4",
            "# TYPE rgml_tokens_generated_total counter",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert!(!text.contains("status=\"400\""));
    }
}
