//! `rgml bench --model FILE`: prompt and generation speed of a model file, in
//! the way of `llama-bench`: one untimed warm-up pass, then `reps` timed
//! passes, each from an empty KV cache; the prompt is `prompt_tokens` tokens
//! evaluated as one batch, generation is `gen_tokens` steps of one token (the
//! greedy next token, only the last position's logits computed, as llama.cpp
//! does). The figures are the medians over the passes.

use std::path::Path;
use std::time::Instant;

use rgml::{Backend, Profile};

use rgml_models::model::kv::KvType;
use rgml_models::model::{argmax, LoadOptions, Model};

/// What to time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelBench {
    /// Tokens of the prompt (one batch); 0 skips the prompt test.
    pub prompt_tokens: usize,
    /// Generated tokens (one per step); 0 skips the generation test.
    pub gen_tokens: usize,
    /// Timed passes (the medians are reported); at least 1.
    pub reps: usize,
    /// The KV cache's element type.
    pub kv_type: KvType,
    /// Collect the backend's time per op kind ([`rgml::Backend::take_profile`]).
    pub profile: bool,
}

impl Default for ModelBench {
    fn default() -> Self {
        ModelBench { prompt_tokens: 64, gen_tokens: 32, reps: 3, kv_type: KvType::F16, profile: false }
    }
}

/// The speed of one model file.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSpeed {
    /// The model (file name, architecture, size) and how it ran.
    pub what: String,
    /// Median prompt tokens per second (0 when not timed).
    pub prompt_tok_s: f64,
    /// Median generated tokens per second (0 when not timed).
    pub gen_tok_s: f64,
    /// Every pass's prompt tokens per second, in order.
    pub prompt_runs: Vec<f64>,
    /// Every pass's generated tokens per second, in order.
    pub gen_runs: Vec<f64>,
    /// With [`ModelBench::profile`], the prompts' time per op kind, over the timed passes.
    pub prompt_profile: Option<Profile>,
    /// With [`ModelBench::profile`], the generations' time per op kind, over the timed passes.
    pub gen_profile: Option<Profile>,
    /// Weight bytes one generated token reads ([`Model::weight_bytes_per_token`]).
    pub bytes_per_token: u64,
    /// The machine's read bandwidth (GB/s), measured after each timed pass, the median;
    /// `None` when no baseline was given.
    pub read_gbps: Option<f64>,
    /// Generation's weight GB/s as a share of the read bandwidth measured after the same
    /// pass, the median over the passes.
    pub gen_read_ratio: Option<f64>,
    /// Every pass's read bandwidth (GB/s), in order (empty without a baseline).
    pub read_runs: Vec<f64>,
    /// Every pass's generation share of its read bandwidth, in order.
    pub ratio_runs: Vec<f64>,
}

impl ModelSpeed {
    /// One JSON object (`prompt_tok_s`, `gen_tok_s`, the passes and the settings).
    pub fn json(&self, b: &ModelBench) -> String {
        serde_json::json!({
            "model": self.what, "prompt_tokens": b.prompt_tokens, "gen_tokens": b.gen_tokens,
            "reps": b.reps, "kv_type": b.kv_type.dtype().to_string(),
            "prompt_tok_s": self.prompt_tok_s, "gen_tok_s": self.gen_tok_s,
            "prompt_runs": self.prompt_runs, "gen_runs": self.gen_runs,
            "bytes_per_token": self.bytes_per_token, "read_gbps": self.read_gbps,
            "gen_read_ratio": self.gen_read_ratio,
            "read_runs": self.read_runs, "ratio_runs": self.ratio_runs,
        })
        .to_string()
    }
}

/// Loads `path` on `backend` (`how` says how, for the report) and times it as
/// `b` says. With `read_baseline` (the machine's read bandwidth in GB/s, measured anew
/// at each call), generation's weight bandwidth is compared with it after every pass.
pub fn model_speed<B: Backend>(
    path: &Path,
    backend: B,
    how: &str,
    b: &ModelBench,
    mut read_baseline: Option<&mut dyn FnMut() -> f64>,
) -> Result<ModelSpeed, String> {
    let e = |e: rgml::Error| e.to_string();
    if b.reps == 0 {
        return Err("--reps must be at least 1".into());
    }
    let n_ctx = b.prompt_tokens.max(1) + b.gen_tokens + 1;
    let mut m =
        Model::load_with(path, LoadOptions { n_ctx: Some(n_ctx), kv_type: b.kv_type, ..Default::default() }, backend)
            .map_err(e)?;
    let n_vocab = m.hp.n_vocab as u32;
    let bytes_per_token = m.weight_bytes_per_token();
    // a fixed spread of ids, as llama-bench feeds arbitrary tokens
    let prompt: Vec<u32> = (0..b.prompt_tokens.max(1) as u32).map(|i| (1 + i * 7919) % n_vocab).collect();
    let (mut prompt_profile, mut gen_profile) = (Profile::default(), Profile::default());
    let mut pass = |m: &mut Model<B>, timed: bool| -> Result<(f64, f64), String> {
        m.reset().map_err(e)?;
        m.backend().take_profile();
        let t = Instant::now();
        let mut next = argmax(&m.eval_last(&prompt).map_err(e)?);
        let prompt_s = t.elapsed().as_secs_f64();
        let p = m.backend().take_profile();
        let t = Instant::now();
        for _ in 0..b.gen_tokens {
            next = argmax(&m.eval_last(&[next]).map_err(e)?);
        }
        let gen_s = t.elapsed().as_secs_f64();
        if let (true, Some(p), Some(g)) = (timed, p, m.backend().take_profile()) {
            prompt_profile.merge(&p);
            gen_profile.merge(&g);
        }
        Ok((rate(b.prompt_tokens, prompt_s), rate(b.gen_tokens, gen_s)))
    };
    pass(&mut m, false)?;
    let (mut prompt_runs, mut gen_runs, mut reads, mut ratios) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..b.reps {
        let (p, g) = pass(&mut m, true)?;
        prompt_runs.push(p);
        gen_runs.push(g);
        if let Some(read) = read_baseline.as_mut() {
            let gbps = read();
            reads.push(gbps);
            ratios.push(g * bytes_per_token as f64 / 1e9 / gbps);
        }
    }
    let measured = |v: &[f64]| (!v.is_empty()).then(|| median(v));
    let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    Ok(ModelSpeed {
        what: format!("{name} ({}), {} KV cache, {how}", m.hp.arch, b.kv_type.dtype()),
        prompt_tok_s: median(&prompt_runs),
        gen_tok_s: median(&gen_runs),
        prompt_runs,
        gen_runs,
        prompt_profile: b.profile.then_some(prompt_profile),
        gen_profile: b.profile.then_some(gen_profile),
        bytes_per_token,
        read_gbps: measured(&reads),
        gen_read_ratio: measured(&ratios),
        read_runs: reads,
        ratio_runs: ratios,
    })
}

/// A profile as a table: op kind, nodes per token, microseconds per token and
/// share of the nodes' time, slowest first (`tokens` tokens were timed).
pub fn profile_table(p: &Profile, tokens: usize) -> String {
    let per = tokens.max(1) as f64;
    let total = p.total().as_secs_f64().max(1e-12);
    let mut out = format!("{:<16} {:>11} {:>11} {:>6}\n", "op", "nodes/tok", "us/tok", "share");
    for (op, t) in p.by_time() {
        let s = t.time.as_secs_f64();
        out += &format!(
            "{:<16} {:>11.1} {:>11.1} {:>5.1}%\n",
            op.to_string(),
            t.calls as f64 / per,
            s * 1e6 / per,
            100.0 * s / total
        );
    }
    out += &format!("{:<16} {:>11} {:>11.1}\n", "all nodes", "", total * 1e6 / per);
    out
}

fn rate(tokens: usize, secs: f64) -> f64 {
    if tokens == 0 || secs <= 0.0 {
        0.0
    } else {
        tokens as f64 / secs
    }
}

/// The median (the mean of the middle two for an even count); 0 for none.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}
