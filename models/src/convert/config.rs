//! A Hugging Face `config.json` of a llama-family model: the hyperparameters GGUF's `llama`
//! architecture stores, each checked before any weight is read.

use std::path::Path;

use serde_json::{Map, Value};

use super::common::{bad, read_json};

/// The `architectures` entries converted (those llama.cpp's converter converts as plain
/// `llama`; its Mistral, Mixtral and multimodal variants need more than this converter does).
pub const ARCHITECTURES: [&str; 2] = ["LlamaForCausalLM", "LLaMAForCausalLM"];

/// The largest `config.json` read (16 MiB; real ones are a few KB).
const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// The hyperparameters of a llama checkpoint, as `config.json` gives them (with
/// Hugging Face's `LlamaConfig` defaults where a key may be left out).
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    /// The `architectures` entry that was accepted.
    pub architecture: String,
    /// `hidden_size`.
    pub n_embd: usize,
    /// `intermediate_size`.
    pub n_ff: usize,
    /// `num_hidden_layers`.
    pub n_layer: usize,
    /// `num_attention_heads`.
    pub n_head: usize,
    /// `num_key_value_heads` (default: `num_attention_heads`).
    pub n_head_kv: usize,
    /// `max_position_embeddings`.
    pub n_ctx_train: usize,
    /// `vocab_size` (absent: the tokenizer's size decides).
    pub n_vocab: Option<usize>,
    /// `rms_norm_eps` (default 1e-6).
    pub rms_eps: f64,
    /// `rope_theta`, or `rope_parameters.rope_theta` (default 10000).
    pub rope_theta: f64,
    /// `tie_word_embeddings` (default false): the output matrix is the embedding's.
    pub tied: bool,
    /// `bos_token_id`, the tokenizer's fallback.
    pub bos_token_id: Option<u32>,
    /// `eos_token_id` (when a single id), the tokenizer's fallback.
    pub eos_token_id: Option<u32>,
}

impl LlamaConfig {
    /// Dimension of one attention head.
    pub fn head_dim(&self) -> usize {
        self.n_embd / self.n_head
    }

    /// Reads and checks `config.json` at `path`.
    ///
    /// # Errors
    /// [`rgml::Error::Io`] if it cannot be read; [`rgml::Error::Invalid`] naming the key for a
    /// file that is too large or not a JSON object, an architecture other than llama's, a
    /// missing or mistyped key, hyperparameters out of range or inconsistent, and the
    /// features this converter does not carry (rope scaling, biases, other activations).
    pub fn read(path: &Path) -> rgml::Result<LlamaConfig> {
        let v = read_json(path, MAX_CONFIG_BYTES)?;
        let Some(obj) = v.as_object() else {
            return Err(bad(path, "is not a JSON object"));
        };
        Self::from_object(path, obj)
    }

    fn from_object(path: &Path, o: &Map<String, Value>) -> rgml::Result<LlamaConfig> {
        let e = |msg: String| bad(path, &msg);
        let archs: Vec<&str> = match o.get("architectures") {
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            _ => return Err(e("has no \"architectures\" list; cannot tell the model's architecture".into())),
        };
        let Some(architecture) = archs.iter().find(|a| ARCHITECTURES.contains(a)) else {
            return Err(e(format!(
                "architecture {archs:?} is not supported by rgml convert (supported: {})",
                ARCHITECTURES.join(", ")
            )));
        };
        let int = |key: &str, max: u64| -> rgml::Result<Option<usize>> {
            match o.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => match v.as_u64() {
                    Some(n) if (1..=max).contains(&n) => Ok(Some(n as usize)),
                    _ => Err(e(format!("\"{key}\" must be an integer from 1 to {max}, got {v}"))),
                },
            }
        };
        let need = |key: &str, max: u64| int(key, max)?.ok_or_else(|| e(format!("has no \"{key}\"")));
        let flag = |key: &str| -> rgml::Result<bool> {
            match o.get(key) {
                None | Some(Value::Null) => Ok(false),
                Some(Value::Bool(b)) => Ok(*b),
                Some(v) => Err(e(format!("\"{key}\" must be true or false, got {v}"))),
            }
        };
        let n_embd = need("hidden_size", 1 << 17)?;
        let n_head = need("num_attention_heads", 4096)?;
        let n_head_kv = int("num_key_value_heads", 4096)?.unwrap_or(n_head);
        let cfg = LlamaConfig {
            architecture: architecture.to_string(),
            n_embd,
            n_ff: need("intermediate_size", 1 << 20)?,
            n_layer: need("num_hidden_layers", 4096)?,
            n_head,
            n_head_kv,
            n_ctx_train: need("max_position_embeddings", 1 << 24)?,
            n_vocab: int("vocab_size", 1 << 22)?,
            rms_eps: float(path, o.get("rms_norm_eps"), "rms_norm_eps", 1e-6, |f| f > 0.0 && f < 1.0)?,
            rope_theta: rope_theta(path, o)?,
            tied: flag("tie_word_embeddings")?,
            bos_token_id: o.get("bos_token_id").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok()),
            eos_token_id: o.get("eos_token_id").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok()),
        };
        if !n_embd.is_multiple_of(n_head) || !n_head.is_multiple_of(n_head_kv) {
            return Err(e(format!(
                "hidden_size {n_embd}, num_attention_heads {n_head} and num_key_value_heads {n_head_kv}: \
                 the heads must divide hidden_size and the key-value heads the heads"
            )));
        }
        if !cfg.head_dim().is_multiple_of(2) {
            return Err(e(format!("head dimension {} is odd; rope rotates pairs", cfg.head_dim())));
        }
        if let Some(hd) = int("head_dim", 1 << 16)? {
            if hd != cfg.head_dim() {
                return Err(e(format!(
                    "head_dim {hd} differs from hidden_size / num_attention_heads = {}; rgml convert does not \
                     write separate key/value lengths",
                    cfg.head_dim()
                )));
            }
        }
        for key in ["attention_bias", "mlp_bias"] {
            if flag(key)? {
                return Err(e(format!("\"{key}\" is true; rgml convert converts llama without biases")));
            }
        }
        match o.get("hidden_act") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s == "silu" => {}
            Some(v) => return Err(e(format!("hidden_act {v} is not llama's silu"))),
        }
        if let Some(s) = o.get("rope_scaling").filter(|v| !v.is_null()) {
            return Err(e(format!("rope_scaling {s} is not supported by rgml convert (plain rope only)")));
        }
        Ok(cfg)
    }
}

/// The number `v` (`default` when absent or null), which must be finite and `ok`.
fn float(path: &Path, v: Option<&Value>, key: &str, default: f64, ok: fn(f64) -> bool) -> rgml::Result<f64> {
    match v {
        None | Some(Value::Null) => Ok(default),
        Some(x) => match x.as_f64() {
            Some(f) if f.is_finite() && ok(f) => Ok(f),
            _ => Err(bad(path, &format!("\"{key}\" = {x} is out of range"))),
        },
    }
}

/// `rope_theta`, also where newer transformers put it (`rope_parameters`), whose
/// `rope_type` must then be plain rope.
fn rope_theta(path: &Path, o: &Map<String, Value>) -> rgml::Result<f64> {
    let positive = |f: f64| f > 0.0;
    if let Some(Value::Object(p)) = o.get("rope_parameters") {
        if let Some(t) = p.get("rope_type").filter(|t| t.as_str() != Some("default")) {
            let msg = format!("rope_parameters.rope_type {t} is not supported by rgml convert (plain rope only)");
            return Err(bad(path, &msg));
        }
        if p.contains_key("rope_theta") {
            return float(path, p.get("rope_theta"), "rope_parameters.rope_theta", 10000.0, positive);
        }
    }
    float(path, o.get("rope_theta"), "rope_theta", 10000.0, positive)
}
