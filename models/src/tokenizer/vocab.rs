//! The vocabulary of a GGUF file: token texts, scores and attributes, the special
//! tokens, and the flags that steer tokenization — read as llama.cpp's
//! `llama_vocab::impl::load` reads them.

use std::collections::{BTreeSet, HashMap};

use rgml::gguf::{Array, GgufHeader, Value};

use super::TokenizerError;

/// What a token is, as llama.cpp's `llama_token_attr` bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TokenAttr(pub u16);

impl TokenAttr {
    /// The unknown-token placeholder (`<unk>`).
    pub const UNKNOWN: TokenAttr = TokenAttr(1);
    /// A token marked unused.
    pub const UNUSED: TokenAttr = TokenAttr(2);
    /// An ordinary piece of text.
    pub const NORMAL: TokenAttr = TokenAttr(4);
    /// A control token (`<s>`, `<|im_end|>`…): matched in text only with `parse_special`,
    /// rendered only with `special`.
    pub const CONTROL: TokenAttr = TokenAttr(8);
    /// A user-defined token: always matched in text, always rendered.
    pub const USER_DEFINED: TokenAttr = TokenAttr(16);
    /// A byte-fallback token (`<0x0A>`).
    pub const BYTE: TokenAttr = TokenAttr(32);
    /// White space before the token is absorbed by it when it is matched in text.
    pub const LSTRIP: TokenAttr = TokenAttr(128);
    /// White space after the token is absorbed by it when it is matched in text.
    pub const RSTRIP: TokenAttr = TokenAttr(256);

    /// Whether any bit of `other` is set.
    pub fn has(self, other: TokenAttr) -> bool {
        self.0 & other.0 != 0
    }

    fn set(&mut self, other: TokenAttr, on: bool) {
        self.0 = if on { self.0 | other.0 } else { self.0 & !other.0 };
    }

    /// The attribute of GGUF token type `t` (`tokenizer.ggml.token_type`).
    fn from_token_type(t: i32) -> TokenAttr {
        match t {
            1 => TokenAttr::NORMAL,
            2 => TokenAttr::UNKNOWN,
            3 => TokenAttr::CONTROL,
            4 => TokenAttr::USER_DEFINED,
            5 => TokenAttr::UNUSED,
            6 => TokenAttr::BYTE,
            _ => TokenAttr(0),
        }
    }
}

/// The tokenizer algorithm a vocabulary uses (`tokenizer.ggml.model`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VocabKind {
    /// SentencePiece BPE over scores (`llama`).
    Spm,
    /// Byte-pair merges (`gpt2`; `gemma4`: merges over raw UTF-8).
    Bpe,
    /// WordPiece (`bert`).
    Wpm,
    /// Unigram (`t5`).
    Ugm,
}

/// The special tokens a vocabulary names; `None` where it has none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpecialTokens {
    /// Beginning of sequence.
    pub bos: Option<u32>,
    /// End of sequence.
    pub eos: Option<u32>,
    /// End of turn.
    pub eot: Option<u32>,
    /// End of message.
    pub eom: Option<u32>,
    /// Unknown.
    pub unk: Option<u32>,
    /// Separator.
    pub sep: Option<u32>,
    /// Padding.
    pub pad: Option<u32>,
    /// Mask.
    pub mask: Option<u32>,
    /// Fill-in-the-middle: prefix, suffix, middle, padding, repository, file separator.
    pub fim: [Option<u32>; 6],
}

/// Flags that steer tokenization, from the model type, the pre-tokenizer type and the file.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct VocabFlags {
    pub add_space_prefix: bool,
    pub add_bos: bool,
    pub add_eos: bool,
    pub add_sep: bool,
    pub ignore_merges: bool,
    pub clean_spaces: bool,
    pub remove_extra_whitespaces: bool,
    pub escape_whitespaces: bool,
    pub lowercase: bool,
    pub strip_accents: bool,
}

/// Token texts, scores, attributes and the special tokens.
pub(crate) struct Vocab {
    pub kind: VocabKind,
    pub texts: Vec<String>,
    pub scores: Vec<f32>,
    pub attrs: Vec<TokenAttr>,
    pub ids: HashMap<String, u32>,
    /// The longest token text, in bytes.
    pub max_token_len: usize,
    pub special: SpecialTokens,
    pub eog: BTreeSet<u32>,
    pub flags: VocabFlags,
    /// Control, user-defined and unknown tokens, longest text first (ties by id): the
    /// order in which text is searched for them.
    pub special_order: Vec<u32>,
    /// What loading adjusted or ignored, as llama.cpp's load warnings.
    pub warnings: Vec<String>,
}

const KEY_TOKENS: &str = "tokenizer.ggml.tokens";

impl Vocab {
    /// Reads the token list and everything about it; `flags` and `special` come in with
    /// the model type's defaults.
    pub(crate) fn load(
        h: &GgufHeader,
        kind: VocabKind,
        mut flags: VocabFlags,
        mut special: SpecialTokens,
    ) -> Result<Vocab, TokenizerError> {
        let texts = read_texts(h)?;
        let n = texts.len();
        let scores = read_scores(h, n)?;
        let attrs = read_attrs(h, n)?;
        let mut ids = HashMap::with_capacity(n);
        for (i, t) in texts.iter().enumerate() {
            if ids.insert(t.clone(), i as u32).is_some() {
                return Err(meta(KEY_TOKENS, format!("token {i} repeats the text {t:?} of an earlier token")));
            }
        }
        let mut warnings = Vec::new();
        read_special_ids(h, n, &mut special, &mut warnings)?;
        for (key, flag) in [
            ("tokenizer.ggml.add_bos_token", &mut flags.add_bos),
            ("tokenizer.ggml.add_eos_token", &mut flags.add_eos),
            ("tokenizer.ggml.add_sep_token", &mut flags.add_sep),
            ("tokenizer.ggml.normalizer.lowercase", &mut flags.lowercase),
        ] {
            read_bool(h, key, flag)?;
        }
        flags.strip_accents = flags.lowercase;
        read_bool(h, "tokenizer.ggml.normalizer.strip_accents", &mut flags.strip_accents)?;
        let max_token_len = texts.iter().map(String::len).max().unwrap_or(0);
        let mut v = Vocab {
            kind,
            texts,
            scores,
            attrs,
            ids,
            max_token_len,
            special,
            eog: BTreeSet::new(),
            flags,
            special_order: Vec::new(),
            warnings,
        };
        v.detect_special_by_text();
        v.collect_eog();
        v.special_order = (0..n as u32)
            .filter(|&i| {
                v.attrs[i as usize]
                    .has(TokenAttr(TokenAttr::CONTROL.0 | TokenAttr::USER_DEFINED.0 | TokenAttr::UNKNOWN.0))
            })
            .collect();
        v.special_order.sort_by_key(|&i| std::cmp::Reverse(v.texts[i as usize].len()));
        v.model_specific_attrs(h);
        Ok(v)
    }

    /// The id of a token text.
    pub(crate) fn id(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }

    pub(crate) fn attr(&self, id: u32) -> TokenAttr {
        self.attrs[id as usize]
    }

    fn mark_control(&mut self, id: u32) {
        self.attrs[id as usize].set(TokenAttr::CONTROL, true);
    }

    /// End-of-turn, end-of-message and fill-in-the-middle tokens found by their text where
    /// the file names none, as llama.cpp does (it scans a hash map, so which of several
    /// candidates wins is unspecified there; here the lowest id wins). Each found token
    /// becomes a control token.
    fn detect_special_by_text(&mut self) {
        let lists: [(&[&str], usize); 8] = [
            (EOT_TEXTS, 0),
            (&["<|eom_id|>"], 1),
            (FIM_PRE, 2),
            (FIM_SUF, 3),
            (FIM_MID, 4),
            (FIM_PAD, 5),
            (FIM_REP, 6),
            (&["<|file_sep|>"], 7),
        ];
        for (texts, slot) in lists {
            let s = &mut self.special;
            let target = match slot {
                0 => &mut s.eot,
                1 => &mut s.eom,
                k => &mut s.fim[k - 2],
            };
            if target.is_some() {
                continue;
            }
            let found = (0..self.texts.len() as u32).find(|&i| texts.contains(&self.texts[i as usize].as_str()));
            if let Some(id) = found {
                *target = Some(id);
                self.mark_control(id);
            }
        }
        // control tokens named "unused…" are unused
        for a in
            self.attrs.iter_mut().zip(&self.texts).filter(|(a, t)| a.has(TokenAttr::CONTROL) && t.contains("unused"))
        {
            a.0.set(TokenAttr::UNUSED, true);
        }
    }

    /// The end-of-generation set: fim pad/repo/separator, the tokens llama.cpp lists by
    /// text, and eos/eot/eom; with its two corrections (`<|end|>` is not one when
    /// `<|return|>`/`<|call|>` or `<|calls|>`/`<|flush|>` are; `</s>` is not one for
    /// Gemma 4 and PLaMo).
    fn collect_eog(&mut self) {
        let s = &self.special;
        let mut eog: BTreeSet<u32> = [s.fim[3], s.fim[4], s.fim[5]].into_iter().flatten().collect();
        for i in 0..self.texts.len() as u32 {
            if EOG_TEXTS.contains(&self.texts[i as usize].as_str()) {
                eog.insert(i);
                self.mark_control(i);
            }
            if ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"].contains(&self.texts[i as usize].as_str()) {
                // gpt-oss: always rendered
                self.attrs[i as usize] = TokenAttr::USER_DEFINED;
            }
        }
        eog.extend([self.special.eos, self.special.eot, self.special.eom].into_iter().flatten());
        let find = |t: &str| eog.iter().copied().find(|&i| self.texts[i as usize] == t);
        let call = find("<|call|>").or(find("<|calls|>")).is_some();
        let (ret, flush) = (find("<|return|>").is_some(), find("<|flush|>").is_some());
        let end = find("<|end|>").filter(|_| call && (ret || flush));
        let gemma4_or_plamo = find("<|tool_response>").or(find("<|plamo:eos|>")).is_some();
        let s = find("</s>").filter(|_| gemma4_or_plamo);
        if let Some(end) = end {
            eog.remove(&end);
            self.attrs[end as usize] = TokenAttr::USER_DEFINED;
        }
        if let Some(s) = s {
            eog.remove(&s);
            self.attrs[s as usize] = TokenAttr::NORMAL;
        }
        self.eog = eog;
    }

    /// Attributes llama.cpp sets by model or tokenizer name: `<mask>` absorbs the space
    /// before it (jina v2, nomic-bert-moe), Phi-3's special tokens the space after them.
    fn model_specific_attrs(&mut self, h: &GgufHeader) {
        let s = |k: &str| h.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let (name, pre, arch) = (s("general.name").to_lowercase(), s("tokenizer.ggml.pre"), s("general.architecture"));
        let any = |s: &str, subs: &[&str]| subs.iter().any(|x| s.contains(x));
        if any(&pre, &["jina-v2-de", "jina-v2-es", "jina-v2-code"]) || any(&arch, &["nomic-bert-moe", "jina-bert-v3"]) {
            self.set_attr("<mask>", TokenAttr::LSTRIP, true);
        } else if any(&name, &["phi-3", "phi3"]) {
            for &id in &self.special_order {
                self.attrs[id as usize].set(TokenAttr::RSTRIP, true);
            }
            self.set_attr("</s>", TokenAttr::RSTRIP, true);
            for t in ["<unk>", "<s>", "<|endoftext|>"] {
                self.set_attr(t, TokenAttr::RSTRIP, false);
            }
        } else if name.contains("modern-bert") {
            self.set_attr("[MASK]", TokenAttr::LSTRIP, true);
        }
    }

    fn set_attr(&mut self, text: &str, a: TokenAttr, on: bool) {
        if let Some(&id) = self.ids.get(text) {
            self.attrs[id as usize].set(a, on);
        }
    }
}

const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
const FIM_PRE: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP: &[&str] = &["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"];
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

pub(crate) fn meta(key: &str, msg: impl Into<String>) -> TokenizerError {
    TokenizerError::Metadata { key: key.to_string(), msg: msg.into() }
}

fn read_texts(h: &GgufHeader) -> Result<Vec<String>, TokenizerError> {
    let texts = h.get_str_array(KEY_TOKENS).map_err(|e| meta(KEY_TOKENS, e.to_string()))?;
    if texts.is_empty() {
        return Err(meta(KEY_TOKENS, "the vocabulary is empty"));
    }
    if u32::try_from(texts.len()).is_err() || texts.len() > i32::MAX as usize {
        return Err(meta(KEY_TOKENS, format!("{} tokens is more than token ids can number", texts.len())));
    }
    // llama.cpp names empty tokens so that each text stays unique
    Ok(texts.iter().enumerate().map(|(i, t)| if t.is_empty() { format!("[EMPTY_{i}]") } else { t.clone() }).collect())
}

fn read_scores(h: &GgufHeader, n: usize) -> Result<Vec<f32>, TokenizerError> {
    const KEY: &str = "tokenizer.ggml.scores";
    let scores: Vec<f32> = match h.get(KEY) {
        None => return Ok(vec![0.0; n]),
        Some(Value::Array(Array::F32(v))) => v.clone(),
        Some(Value::Array(Array::I32(v))) => v.iter().map(|&x| x as f32).collect(),
        Some(v) => return Err(meta(KEY, format!("expected an array of f32 or i32, found {}", v.type_description()))),
    };
    if scores.len() < n {
        return Err(meta(KEY, format!("{} scores for {n} tokens", scores.len())));
    }
    Ok(scores[..n].to_vec())
}

fn read_attrs(h: &GgufHeader, n: usize) -> Result<Vec<TokenAttr>, TokenizerError> {
    const KEY: &str = "tokenizer.ggml.token_type";
    match h.get(KEY) {
        None => Ok(vec![TokenAttr::NORMAL; n]),
        Some(Value::Array(Array::I32(v))) if v.len() >= n => {
            Ok(v[..n].iter().map(|&t| TokenAttr::from_token_type(t)).collect())
        }
        Some(Value::Array(Array::I32(v))) => Err(meta(KEY, format!("{} token types for {n} tokens", v.len()))),
        Some(v) => Err(meta(KEY, format!("expected an array of i32, found {}", v.type_description()))),
    }
}

pub(crate) fn read_bool(h: &GgufHeader, key: &str, flag: &mut bool) -> Result<(), TokenizerError> {
    match h.get(key) {
        None => Ok(()),
        Some(Value::Bool(b)) => {
            *flag = *b;
            Ok(())
        }
        Some(v) => Err(meta(key, format!("expected bool, found {}", v.type_description()))),
    }
}

/// An integer metadata value, whatever its width.
pub(crate) fn read_int(h: &GgufHeader, key: &str) -> Result<Option<i64>, TokenizerError> {
    let v = match h.get(key) {
        None => return Ok(None),
        Some(v) => v,
    };
    let x = match *v {
        Value::U8(x) => i64::from(x),
        Value::I8(x) => i64::from(x),
        Value::U16(x) => i64::from(x),
        Value::I16(x) => i64::from(x),
        Value::U32(x) => i64::from(x),
        Value::I32(x) => i64::from(x),
        Value::U64(x) => i64::try_from(x).unwrap_or(i64::MAX),
        Value::I64(x) => x,
        _ => return Err(meta(key, format!("expected an integer, found {}", v.type_description()))),
    };
    Ok(Some(x))
}

/// The special token ids: the model type's defaults (dropped when outside the
/// vocabulary), overridden by the file's keys where those are inside it.
fn read_special_ids(
    h: &GgufHeader,
    n: usize,
    s: &mut SpecialTokens,
    warnings: &mut Vec<String>,
) -> Result<(), TokenizerError> {
    let [fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep] = &mut s.fim;
    let slots: [(&str, &mut Option<u32>); 17] = [
        ("bos_token_id", &mut s.bos),
        ("eos_token_id", &mut s.eos),
        ("eot_token_id", &mut s.eot),
        ("eom_token_id", &mut s.eom),
        ("unknown_token_id", &mut s.unk),
        ("seperator_token_id", &mut s.sep),
        ("padding_token_id", &mut s.pad),
        ("mask_token_id", &mut s.mask),
        ("fim_pre_token_id", fim_pre),
        ("fim_suf_token_id", fim_suf),
        ("fim_mid_token_id", fim_mid),
        ("fim_pad_token_id", fim_pad),
        ("fim_rep_token_id", fim_rep),
        ("fim_sep_token_id", fim_sep),
        // deprecated spellings of the first three fim keys
        ("prefix_token_id", &mut None),
        ("suffix_token_id", &mut None),
        ("middle_token_id", &mut None),
    ];
    let mut deprecated = [None; 3];
    for (i, (name, slot)) in slots.into_iter().enumerate() {
        let key = format!("tokenizer.ggml.{name}");
        if slot.is_some_and(|id| id as usize >= n) {
            warnings.push(format!("default {key} {} is outside the vocabulary; none", slot.unwrap_or(0)));
            *slot = None;
        }
        match read_int(h, &key)? {
            Some(id) if (0..n as i64).contains(&id) => {
                if i >= 14 {
                    deprecated[i - 14] = Some(id as u32);
                } else {
                    *slot = Some(id as u32);
                }
            }
            Some(id) => warnings.push(format!("{key} {id} is outside the vocabulary of {n}; ignored")),
            None => {}
        }
    }
    for (slot, d) in s.fim[..3].iter_mut().zip(deprecated) {
        if d.is_some() {
            *slot = d;
        }
    }
    Ok(())
}
