//! A Hugging Face byte-level BPE tokenizer (`tokenizer.json`, with `tokenizer_config.json`)
//! as GGUF's `gpt2` vocabulary: the tokens and their types, the merges, the pre-tokenizer's
//! name, the special tokens and the chat template, as llama.cpp's converter writes them.

use std::collections::HashMap;
use std::path::Path;

use rgml::gguf::{Array, GgufWriter};
use serde_json::{Map, Value};

use super::common::{bad, read_json};

/// The largest `tokenizer.json` read (256 MiB; large vocabularies take tens of MB).
const MAX_TOKENIZER_BYTES: u64 = 256 << 20;
/// The largest `tokenizer_config.json` or `chat_template.jinja` read (16 MiB).
const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// GGUF token types (llama.cpp's `llama_token_type`).
const NORMAL: i32 = 1;
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;
const UNUSED: i32 = 5;

/// Llama 3's split pattern (`tokenizer.json`'s `Split` pre-tokenizer), llama.cpp's `llama-bpe`.
const LLAMA3_PATTERN: &str = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/// The special-token kinds read from `tokenizer_config.json` (`<kind>_token`) and
/// `config.json` (`<kind>_token_id`), with their GGUF keys.
const SPECIAL_KINDS: [(&str, &str); 5] = [
    ("bos", "tokenizer.ggml.bos_token_id"),
    ("eos", "tokenizer.ggml.eos_token_id"),
    ("unk", "tokenizer.ggml.unknown_token_id"),
    ("sep", "tokenizer.ggml.seperator_token_id"),
    ("pad", "tokenizer.ggml.padding_token_id"),
];

/// A BPE vocabulary ready for GGUF's `tokenizer.*` metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct BpeVocab {
    /// Every token id's text (ids with no token: `[PAD<id>]`).
    pub tokens: Vec<String>,
    /// Every token's GGUF type.
    pub types: Vec<i32>,
    /// The merges, `"left right"`.
    pub merges: Vec<String>,
    /// `tokenizer.ggml.pre`: llama.cpp's name of the pre-tokenizer.
    pub pre: &'static str,
    /// (GGUF key, token id) of the special tokens found.
    pub specials: Vec<(&'static str, u32)>,
    /// `tokenizer.ggml.add_bos_token`, where the files say.
    pub add_bos: Option<bool>,
    /// `tokenizer.ggml.add_eos_token`, where the files say.
    pub add_eos: Option<bool>,
    /// `tokenizer.ggml.add_space_prefix`: `tokenizer_config.json`'s `add_prefix_space`, where given.
    pub add_space_prefix: Option<bool>,
    /// `tokenizer.chat_template`.
    pub chat_template: Option<String>,
}

/// What `config.json` tells the tokenizer: the vocabulary size and the fallback special ids.
pub struct VocabHints {
    /// `vocab_size`: the number of token ids (the embedding's rows).
    pub n_vocab: Option<usize>,
    /// `bos_token_id`.
    pub bos: Option<u32>,
    /// `eos_token_id`.
    pub eos: Option<u32>,
}

impl BpeVocab {
    /// Reads `tokenizer.json` in `dir` (and `tokenizer_config.json`, `chat_template.jinja`
    /// where present).
    ///
    /// # Errors
    /// [`rgml::Error::Io`] for a file that cannot be read (a missing `tokenizer.json`
    /// says so); [`rgml::Error::Invalid`] for a tokenizer other than byte-level BPE, a
    /// pre-tokenizer llama.cpp has no name for here, malformed vocabularies or merges, a
    /// token id at or past `vocab_size`, two tokens with one id, and oversized files.
    pub fn read(dir: &Path, hints: &VocabHints) -> rgml::Result<BpeVocab> {
        let path = dir.join("tokenizer.json");
        if !path.is_file() {
            return Err(bad(&path, "is missing; rgml convert reads a Hugging Face tokenizers file (byte-level BPE)"));
        }
        let tok = read_json(&path, MAX_TOKENIZER_BYTES)?;
        let tok = tok.as_object().ok_or_else(|| bad(&path, "is not a JSON object"))?;
        let e = |msg: &str| bad(&path, msg);
        let model = tok.get("model").and_then(Value::as_object).ok_or_else(|| e("has no \"model\" object"))?;
        match model.get("type").and_then(Value::as_str) {
            Some("BPE") => {}
            t => {
                let t = t.unwrap_or("(none)");
                return Err(e(&format!("model type {t} is not supported by rgml convert (byte-level BPE only)")));
            }
        }
        if model.get("byte_fallback").and_then(Value::as_bool) == Some(true) {
            return Err(e("is a byte-fallback (SentencePiece-style) BPE; rgml convert handles byte-level BPE only"));
        }
        let pre = pre_name(tok.get("pre_tokenizer")).map_err(|m| e(&m))?;

        // id -> text: the model's vocabulary, then the added tokens over it
        let vocab = model.get("vocab").and_then(Value::as_object).ok_or_else(|| e("has no model.vocab object"))?;
        let mut by_id: HashMap<u32, (String, bool)> = HashMap::with_capacity(vocab.len());
        for (text, id) in vocab {
            let id = token_id(id).ok_or_else(|| e(&format!("model.vocab: token {text:?} has id {id}")))?;
            if let Some((other, _)) = by_id.insert(id, (text.clone(), false)) {
                return Err(e(&format!("model.vocab: tokens {other:?} and {text:?} both have id {id}")));
            }
        }
        let mut added_special: HashMap<u32, bool> = HashMap::new();
        let mut added_by_text: Vec<(String, u32)> = Vec::new();
        for a in tok.get("added_tokens").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
            let (Some(id), Some(text)) = (a.get("id").and_then(token_id), a.get("content").and_then(Value::as_str))
            else {
                return Err(e(&format!("added_tokens: entry {a} lacks an id or content")));
            };
            by_id.insert(id, (text.to_string(), true));
            added_special.insert(id, a.get("special").and_then(Value::as_bool).unwrap_or(false));
            added_by_text.push((text.to_string(), id));
        }
        let largest = by_id.keys().max().map_or(0, |&m| m as usize + 1);
        let n_vocab = hints.n_vocab.unwrap_or(largest);
        if largest > n_vocab {
            return Err(e(&format!("token id {} is past config.json's vocab_size {n_vocab}", largest - 1)));
        }
        let mut tokens = Vec::with_capacity(n_vocab);
        let mut types = Vec::with_capacity(n_vocab);
        for i in 0..n_vocab as u32 {
            match by_id.remove(&i) {
                None => {
                    tokens.push(format!("[PAD{i}]"));
                    types.push(UNUSED);
                }
                Some((text, false)) => {
                    tokens.push(text);
                    types.push(NORMAL);
                }
                Some((text, true)) => {
                    if added_special[&i] || looks_special(&text) {
                        tokens.push(text);
                        types.push(CONTROL);
                    } else {
                        // llama.cpp takes user-defined tokens as pre-normalized: SentencePiece's
                        // space marker stands for a space
                        tokens.push(text.replace('\u{2581}', " "));
                        types.push(USER_DEFINED);
                    }
                }
            }
        }
        let merges = merges(model.get("merges")).map_err(|m| e(&m))?;

        let config_path = dir.join("tokenizer_config.json");
        let config = if config_path.is_file() {
            let v = read_json(&config_path, MAX_CONFIG_BYTES)?;
            match v {
                Value::Object(o) => Some(o),
                _ => return Err(bad(&config_path, "is not a JSON object")),
            }
        } else {
            None
        };
        let (mut add_bos, mut add_eos) = post_processor_adds(tok.get("post_processor"), config.as_ref());
        let mut specials = Vec::new();
        for (kind, key) in SPECIAL_KINDS {
            let from_config = config
                .as_ref()
                .and_then(|c| special_content(c, kind))
                .and_then(|content| added_by_text.iter().find(|(t, _)| t == content).map(|&(_, id)| id));
            let fallback = match kind {
                "bos" => hints.bos,
                "eos" => hints.eos,
                _ => None,
            };
            if let Some(id) = from_config.or(fallback).filter(|&id| (id as usize) < n_vocab) {
                specials.push((key, id));
            }
        }
        let mut chat_template = None;
        let add_space_prefix = config.as_ref().and_then(|c| c.get("add_prefix_space")).and_then(Value::as_bool);
        if let Some(c) = &config {
            add_bos = add_bos.or(c.get("add_bos_token").and_then(Value::as_bool));
            add_eos = add_eos.or(c.get("add_eos_token").and_then(Value::as_bool));
            chat_template = match c.get("chat_template") {
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Array(named)) => named
                    .iter()
                    .find(|t| t.get("name").and_then(Value::as_str) == Some("default"))
                    .and_then(|t| t.get("template").and_then(Value::as_str))
                    .map(str::to_string),
                _ => None,
            };
            let jinja = dir.join("chat_template.jinja");
            if chat_template.is_none() && jinja.is_file() {
                let len = std::fs::metadata(&jinja)?.len();
                if len > MAX_CONFIG_BYTES {
                    return Err(bad(&jinja, &format!("is {len} bytes, more than the {MAX_CONFIG_BYTES} read")));
                }
                chat_template = Some(std::fs::read_to_string(&jinja)?);
            }
        }
        Ok(BpeVocab { tokens, types, merges, pre, specials, add_bos, add_eos, add_space_prefix, chat_template })
    }

    /// Sets the `tokenizer.*` metadata on `w`.
    ///
    /// # Errors
    /// As [`GgufWriter::set`].
    pub fn write(&self, w: &mut GgufWriter) -> rgml::Result<()> {
        w.set("tokenizer.ggml.model", "gpt2")?;
        w.set("tokenizer.ggml.pre", self.pre)?;
        w.set("tokenizer.ggml.tokens", Array::String(self.tokens.clone()))?;
        w.set("tokenizer.ggml.token_type", Array::I32(self.types.clone()))?;
        w.set("tokenizer.ggml.merges", Array::String(self.merges.clone()))?;
        for &(key, id) in &self.specials {
            w.set(key, id)?;
        }
        if let Some(b) = self.add_bos {
            w.set("tokenizer.ggml.add_bos_token", b)?;
        }
        if let Some(b) = self.add_eos {
            w.set("tokenizer.ggml.add_eos_token", b)?;
        }
        if let Some(b) = self.add_space_prefix {
            w.set("tokenizer.ggml.add_space_prefix", b)?;
        }
        if let Some(t) = &self.chat_template {
            w.set("tokenizer.chat_template", t.as_str())?;
        }
        Ok(())
    }
}

fn token_id(v: &Value) -> Option<u32> {
    v.as_u64().and_then(|n| u32::try_from(n).ok())
}

/// Added tokens llama.cpp's converter marks as control tokens though they are not `special`.
fn looks_special(t: &str) -> bool {
    matches!(t, "<pad>" | "<mask>" | "<2mass>" | "[@BOS@]")
        || (t.starts_with("<|") && t.ends_with("|>"))
        || (t.starts_with("<\u{ff5c}") && t.ends_with("\u{ff5c}>"))
        || (t.starts_with("<unused") && t.ends_with('>'))
}

/// llama.cpp's name for the pre-tokenizer. llama.cpp's converter recognizes it by hashing
/// what Hugging Face's tokenizer makes of a test text; without that library, the known
/// structures are matched instead.
fn pre_name(pre: Option<&Value>) -> Result<&'static str, String> {
    let Some(pre) = pre.filter(|p| !p.is_null()) else {
        return Err("has no pre_tokenizer; rgml convert handles byte-level BPE only".into());
    };
    let ty = |v: &Value| v.get("type").and_then(Value::as_str).unwrap_or("").to_string();
    let byte_level = |v: &Value, regex: bool| {
        ty(v) == "ByteLevel" && v.get("use_regex").and_then(Value::as_bool).unwrap_or(true) == regex
    };
    let parts: Vec<&Value> = match ty(pre).as_str() {
        "Sequence" => {
            pre.get("pretokenizers").and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default()
        }
        _ => vec![pre],
    };
    match parts.as_slice() {
        // GPT-2's own: ByteLevel splitting with its built-in pattern
        [b] if byte_level(b, true) => Ok("gpt-2"),
        // SmolLM's: single digits split off, then GPT-2's
        [d, b]
            if ty(d) == "Digits"
                && d.get("individual_digits").and_then(Value::as_bool) == Some(true)
                && byte_level(b, true) =>
        {
            Ok("smollm")
        }
        // Llama 3's: its split pattern, then bytes mapped without further splitting
        [s, b]
            if ty(s) == "Split"
                && s.get("pattern").and_then(|p| p.get("Regex")).and_then(Value::as_str) == Some(LLAMA3_PATTERN)
                && byte_level(b, false) =>
        {
            Ok("llama-bpe")
        }
        _ => Err(format!(
            "pre_tokenizer {pre} is not one rgml convert recognizes (GPT-2's ByteLevel, SmolLM's Digits + ByteLevel, \
             Llama 3's Split + ByteLevel)"
        )),
    }
}

/// The merges as GGUF stores them, `"left right"`; pairs (tokenizers ≥ 0.20) have their
/// spaces written as U+0120 (llama.cpp's converter does the same, since GGUF splits at the space).
fn merges(m: Option<&Value>) -> Result<Vec<String>, String> {
    let Some(Value::Array(list)) = m else {
        return Err("has no model.merges list".into());
    };
    let enc = |s: &str| s.replace(' ', "\u{120}");
    list.iter()
        .map(|m| match m {
            Value::String(s) if s.split(' ').count() == 2 => Ok(s.clone()),
            Value::Array(p) => match p.as_slice() {
                [Value::String(a), Value::String(b)] => Ok(format!("{} {}", enc(a), enc(b))),
                _ => Err(format!("model.merges: {m} is not a pair of strings")),
            },
            _ => Err(format!("model.merges: {m} is not a merge")),
        })
        .collect()
}

/// The text of the `<kind>_token` entry of `tokenizer_config.json` (a string or an
/// `AddedToken` object with `content`).
fn special_content<'a>(config: &'a Map<String, Value>, kind: &str) -> Option<&'a str> {
    match config.get(&format!("{kind}_token"))? {
        Value::String(s) => Some(s),
        Value::Object(o) => o.get("content").and_then(Value::as_str),
        _ => None,
    }
}

/// Whether the post-processor adds BOS and EOS (as gguf-py reads it: a ByteLevel step adds
/// neither; a template adds the special token it starts or ends with).
fn post_processor_adds(pp: Option<&Value>, config: Option<&Map<String, Value>>) -> (Option<bool>, Option<bool>) {
    let Some(pp) = pp.filter(|p| !p.is_null()) else {
        return (None, None);
    };
    let steps: Vec<&Value> = match pp.get("processors").and_then(Value::as_array) {
        Some(a) => a.iter().collect(),
        None => vec![pp],
    };
    let (mut bos, mut eos) = (None, None);
    let special_id =
        |v: &Value| v.get("SpecialToken").and_then(|s| s.get("id")).and_then(Value::as_str).map(str::to_string);
    for s in steps {
        match s.get("type").and_then(Value::as_str) {
            Some("ByteLevel") => {
                bos = bos.or(Some(false));
                eos = eos.or(Some(false));
            }
            Some("TemplateProcessing") => {
                let single = s.get("single").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
                if single.len() > 1 {
                    let want = |kind| config.and_then(|c| special_content(c, kind)).map(str::to_string);
                    if let Some(first) = special_id(&single[0]) {
                        bos = Some(want("bos").is_none_or(|b| b == first));
                    }
                    if let Some(last) = special_id(&single[single.len() - 1]) {
                        eos = Some(want("eos").is_none_or(|b| b == last));
                    }
                }
            }
            _ => {}
        }
    }
    (bos, eos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pre_tokenizers_by_structure() {
        let bl = |re: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "use_regex": re});
        assert_eq!(pre_name(Some(&bl(true))), Ok("gpt-2"));
        let smollm =
            json!({"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true}, bl(true)]});
        assert_eq!(pre_name(Some(&smollm)), Ok("smollm"));
        let split = json!({"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated"});
        let llama3 = json!({"type": "Sequence", "pretokenizers": [split, bl(false)]});
        assert_eq!(pre_name(Some(&llama3)), Ok("llama-bpe"));
        // the same structure with another pattern is not Llama 3's
        let other =
            json!({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\s+"}}, bl(false)]});
        assert!(pre_name(Some(&other)).is_err());
        assert!(pre_name(Some(&json!({"type": "Metaspace"}))).is_err());
        assert!(pre_name(None).is_err());
    }

    #[test]
    fn merges_in_both_forms() {
        assert_eq!(merges(Some(&json!(["Ġ t", "h e"]))), Ok(vec!["Ġ t".to_string(), "h e".into()]));
        // pairs: a space inside a part is written as U+0120, since GGUF splits at the space
        assert_eq!(merges(Some(&json!([["a b", "c"]]))), Ok(vec!["a\u{120}b c".to_string()]));
        assert!(merges(Some(&json!([["a"]]))).is_err());
        assert!(merges(Some(&json!(["abc"]))).is_err());
        assert!(merges(None).is_err());
    }

    #[test]
    fn bos_and_eos_from_the_post_processor() {
        let cfg = json!({"bos_token": "<s>", "eos_token": "</s>"});
        let cfg = cfg.as_object();
        let template = json!({"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]});
        assert_eq!(post_processor_adds(Some(&template), cfg), (Some(true), None));
        let seq = json!({"type": "Sequence", "processors": [{"type": "ByteLevel"}, template]});
        // Llama 3's: ByteLevel adds neither, the template then adds BOS (it sets, as gguf-py does)
        assert_eq!(post_processor_adds(Some(&seq), cfg), (Some(true), Some(false)));
        assert_eq!(post_processor_adds(None, cfg), (None, None));
    }

    #[test]
    fn special_looking_added_tokens() {
        assert!(looks_special("<|im_start|>") && looks_special("<pad>") && looks_special("<unused12>"));
        assert!(!looks_special("hello") && !looks_special("<s>"));
    }
}
