//! `rgml tokenize` and `rgml detokenize`, and the sampling flags of `rgml run` and `rgml chat`.

use std::path::Path;

use rgml::gguf::GgufFile;

use crate::outln;
use crate::run::require_tokenizer;
use rgml_models::sampler::SamplerParams;
use rgml_models::tokenizer::Tokenizer;

fn open_tokenizer(model: &Path) -> Result<Tokenizer, String> {
    let file = GgufFile::open(model).map_err(|e| format!("{}: {e}", model.display()))?;
    require_tokenizer(&file, model)
}

/// Each line of a JSON Lines file, parsed; an error names the file and line.
fn jsonl_lines<T>(path: &Path, parse: impl Fn(serde_json::Value) -> Option<T>, what: &str) -> Result<Vec<T>, String> {
    let text = crate::run::read_text_file(path)?;
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str(line)
                .ok()
                .and_then(&parse)
                .ok_or_else(|| format!("{}:{}: not {what}", path.display(), i + 1))
        })
        .collect()
}

/// `rgml tokenize`: the ids of `text` space-separated, or with `jsonl` one JSON array of
/// ids per JSON string line.
pub fn tokenize(model: &Path, text: Option<&str>, jsonl: Option<&Path>, add: bool, parse: bool) -> Result<(), String> {
    let tok = open_tokenizer(model)?;
    let ids = |t: &str| tok.tokenize(t, add, parse).map_err(|e| e.to_string());
    match (text, jsonl) {
        (Some(t), None) => outln!("{}", ids(t)?.iter().map(u32::to_string).collect::<Vec<_>>().join(" ")),
        (None, Some(p)) => {
            for t in jsonl_lines(p, |v| v.as_str().map(String::from), "a JSON string")? {
                outln!("{}", serde_json::Value::from(ids(&t)?));
            }
        }
        _ => return Err("give the text or --jsonl FILE, not both".into()),
    }
    Ok(())
}

/// `rgml detokenize`: the text of comma-separated ids, or with `jsonl` one JSON string per
/// line of JSON arrays of ids (invalid UTF-8 as U+FFFD).
pub fn detokenize(model: &Path, ids: Option<&str>, jsonl: Option<&Path>, special: bool) -> Result<(), String> {
    let tok = open_tokenizer(model)?;
    let text = |ids: &[u32]| tok.detokenize(ids, special).map_err(|e| e.to_string());
    match (ids, jsonl) {
        (Some(list), None) => {
            let ids = list
                .split(',')
                .map(|t| t.trim().parse::<u32>().map_err(|_| format!("{t:?} is not a token id")))
                .collect::<Result<Vec<_>, _>>()?;
            outln!("{}", text(&ids)?);
        }
        (None, Some(p)) => {
            let parse = |v: serde_json::Value| -> Option<Vec<u32>> {
                v.as_array()?.iter().map(|x| x.as_u64().and_then(|n| u32::try_from(n).ok())).collect()
            };
            for ids in jsonl_lines(p, parse, "a JSON array of token ids")? {
                outln!("{}", serde_json::Value::from(text(&ids)?));
            }
        }
        _ => return Err("give the ids or --jsonl FILE, not both".into()),
    }
    Ok(())
}

/// The sampling flags of `rgml run` and `rgml chat`, with llama.cpp's defaults.
#[derive(Clone, Debug, clap::Args)]
pub struct SamplingArgs {
    /// Temperature; 0 samples greedily. Default 0.8 (0 with --tokens, as before).
    #[arg(long)]
    pub temp: Option<f32>,
    /// Keep the K most likely tokens (0: all).
    #[arg(long, default_value_t = 40)]
    pub top_k: i32,
    /// Keep the most likely tokens whose probability adds up to P (1: all).
    #[arg(long, default_value_t = 0.95)]
    pub top_p: f32,
    /// Keep tokens at least P times as likely as the most likely (0: all).
    #[arg(long, default_value_t = 0.05)]
    pub min_p: f32,
    /// Penalise repeats of the last --repeat-last-n tokens (1: off).
    #[arg(long, default_value_t = 1.0)]
    pub repeat_penalty: f32,
    /// How many recent tokens the penalties look at (0: off, -1: all).
    #[arg(long, default_value_t = 64, allow_hyphen_values = true)]
    pub repeat_last_n: i32,
    /// Subtract this per occurrence from a recent token's logit (0: off).
    #[arg(long, default_value_t = 0.0)]
    pub frequency_penalty: f32,
    /// Subtract this once from a recent token's logit (0: off).
    #[arg(long, default_value_t = 0.0)]
    pub presence_penalty: f32,
    /// Seed of the draws (default: a random one, printed to standard error).
    #[arg(long)]
    pub seed: Option<u64>,
}

impl SamplingArgs {
    /// The sampler's parameters, `default_temp` where --temp is absent and a fresh random
    /// seed where --seed is.
    pub fn params(&self, default_temp: f32) -> SamplerParams {
        SamplerParams {
            temperature: self.temp.unwrap_or(default_temp),
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            frequency_penalty: self.frequency_penalty,
            presence_penalty: self.presence_penalty,
            repeat_last_n: self.repeat_last_n,
            min_keep: 0,
            seed: self.seed.unwrap_or_else(random_seed),
        }
    }
}

/// A seed from the clock and the process id (the sampler then runs deterministically from it).
pub fn random_seed() -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let mut z = t ^ (u64::from(std::process::id()) << 32);
    // SplitMix64's finaliser spreads nearby clocks apart
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `-n`: tokens to generate; negative means until an end-of-generation token.
pub fn n_predict(n: Option<i64>, default: Option<usize>) -> Option<usize> {
    match n {
        None => default,
        Some(n) => usize::try_from(n).ok(),
    }
}
