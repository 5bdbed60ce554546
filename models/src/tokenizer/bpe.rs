//! Byte-pair encoding (`gpt2`, `gemma4`): each pre-tokenized word's characters merge
//! pairwise, lowest-ranked merge first.

use std::cmp::Reverse;
use std::collections::HashMap;

use rgml::gguf::GgufHeader;

use super::merge::{char_symbols, merge, Symbol};
use super::pretok::PreTokenizer;
use super::unicode::byte_encode;
use super::vocab::{meta, Vocab, VocabFlags};
use super::TokenizerError;

/// The merges and the pre-tokenizer of a BPE vocabulary.
pub(crate) struct Bpe {
    /// `(left, right)` → rank, keyed by [`pair_key`].
    ranks: HashMap<Vec<u8>, u32>,
    pre: PreTokenizer,
    /// GPT-2's byte-level alphabet (false: raw UTF-8 with `<0xNN>` byte tokens, Gemma 4).
    byte_encode: bool,
    /// Gemma 4: a word of newlines that is a token stays whole.
    newline_words: bool,
}

/// A pair's key: the left part's length, then both parts, so no two pairs share one.
fn pair_key(key: &mut Vec<u8>, left: &str, right: &str) {
    key.clear();
    key.extend_from_slice(&(left.len() as u32).to_le_bytes());
    key.extend_from_slice(left.as_bytes());
    key.extend_from_slice(right.as_bytes());
}

/// How one `tokenizer.ggml.pre` type tokenizes.
pub(crate) struct PreConfig {
    pub patterns: &'static [&'static str],
    /// Adjusts the BPE defaults (`clean_spaces` on, no space prefix, no escaping).
    pub flags: fn(&mut VocabFlags),
    /// Drops the default BOS id (ChatGLM).
    pub no_default_bos: bool,
    pub byte_encode: bool,
}

const LLAMA3: &[&str] = &["(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"];
const QWEN2: &[&str] = &["(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"];
const QWEN35: &[&str] = &["(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"];
const GPT2_WORDS: &str = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const GPT2: &[&str] = &[GPT2_WORDS];
const STARCODER: &[&str] = &["\\p{N}", GPT2_WORDS];
const FALCON: &[&str] = &["[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_WORDS, "[0-9][0-9][0-9]"];
const DEFAULT: &[&str] = &["[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_WORDS, "\\p{N}+", "[0-9][0-9][0-9]"];
const DEEPSEEK_CODER: &[&str] =
    &["[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[\u{4E00}-\u{9FA5}\u{800}-\u{4E00}\u{AC00}-\u{D7FF}]+", "\\p{N}"];
const DEEPSEEK_LLM: &[&str] = &[
    "[\r\n]",
    "\\s?[A-Za-z\u{B5}\u{C0}-\u{D6}\u{D8}-\u{F6}\u{F8}-\u{1BA}\u{1BC}-\u{1BF}\u{1C4}-\u{293}\u{295}-\u{2AF}\u{370}-\u{373}\u{376}\u{377}\u{37B}-\u{37D}\u{37F}\u{386}\u{388}-\u{38A}\u{38C}\u{38E}-\u{3A1}\u{3A3}-\u{3F5}\u{3F7}-\u{481}\u{48A}-\u{52F}\u{531}-\u{556}\u{10A0}-\u{10C5}\u{13A0}-\u{13F5}\u{13F8}-\u{13FD}\u{1C90}-\u{1CBA}\u{1CBD}-\u{1CBF}\u{1D00}-\u{1D2B}\u{1D6B}-\u{1D77}\u{1D79}-\u{1D9A}\u{1E00}-\u{1F15}\u{1F18}-\u{1F1D}\u{1F20}-\u{1F45}\u{1F48}-\u{1F4D}\u{1F50}-\u{1F57}\u{1F59}\u{1F5B}\u{1F5D}\u{1F5F}-\u{1F7D}\u{1F80}-\u{1FB4}\u{1FB6}-\u{1FBC}\u{1FBE}\u{1FC2}-\u{1FC4}\u{1FC6}-\u{1FCC}\u{1FD0}-\u{1FD3}\u{1FD6}-\u{1FDB}\u{1FE0}-\u{1FEC}\u{1FF2}-\u{1FF4}\u{1FF6}-\u{1FFC}\u{2102}\u{2107}\u{210A}-\u{2113}\u{2115}\u{2119}-\u{211D}\u{2124}\u{2126}\u{2128}\u{212A}-\u{212D}\u{212F}-\u{2134}\u{2139}\u{213C}-\u{213F}\u{2145}-\u{2149}\u{214E}\u{2183}\u{2184}\u{2C00}-\u{2C7B}\u{2C7E}-\u{2CE4}\u{2CEB}-\u{2CEE}\u{2CF2}\u{2CF3}\u{A640}-\u{A66D}\u{A680}-\u{A69B}\u{A722}-\u{A76F}\u{A771}-\u{A787}\u{A78B}-\u{A78E}\u{AB70}-\u{ABBF}\u{FB00}-\u{FB06}\u{FB13}-\u{FB17}\u{FF21}-\u{FF3A}\u{FF41}-\u{FF5A}\u{10400}-\u{1044F}\u{104B0}-\u{104D3}\u{104D8}-\u{104FB}\u{10C80}-\u{10CB2}\u{10CC0}-\u{10CF2}\u{118A0}-\u{118DF}\u{1E900}-\u{1E943}]+",
    "\\s?[!-/:-~\u{FF01}-\u{FF0F}\u{FF1A}-\u{FF5E}\u{2018}-\u{201F}\u{3000}-\u{3002}]+",
    "\\s+$",
    "[\u{4E00}-\u{9FA5}\u{800}-\u{4E00}\u{AC00}-\u{D7FF}]+",
    "\\p{N}+",
];
const NEWLINES: &[&str] = &["[^\\n]+|[\\n]+"];

fn keep(_: &mut VocabFlags) {}
fn no_clean(f: &mut VocabFlags) {
    f.clean_spaces = false;
}
fn llama3(f: &mut VocabFlags) {
    f.ignore_merges = true;
    f.add_bos = true;
}
fn add_sep(f: &mut VocabFlags) {
    f.add_sep = true;
}
fn ignore_merges(f: &mut VocabFlags) {
    f.ignore_merges = true;
}
fn escape(f: &mut VocabFlags) {
    f.escape_whitespaces = true;
}

/// The pre-tokenizer types rgml knows, by `tokenizer.ggml.pre` name, as llama.cpp maps
/// them. Only types whose patterns llama.cpp's test vocabularies check are here (with
/// the other names llama.cpp gives the same patterns); any other name is an error.
pub(crate) fn pre_config(name: &str) -> Option<PreConfig> {
    let cfg =
        |patterns, flags: fn(&mut VocabFlags)| PreConfig { patterns, flags, no_default_bos: false, byte_encode: true };
    Some(match name {
        "default" => cfg(DEFAULT, keep),
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0" | "lfm2"
        | "jina-v5-nano" => cfg(LLAMA3, llama3),
        "dbrx" | "smaug-bpe" => cfg(LLAMA3, keep),
        "chatglm-bpe" => PreConfig { no_default_bos: true, ..cfg(LLAMA3, keep) },
        "glm4" | "glm5" => PreConfig { no_default_bos: true, ..cfg(LLAMA3, ignore_merges) },
        "deepseek-llm" => cfg(DEEPSEEK_LLM, no_clean),
        "deepseek-coder" => cfg(DEEPSEEK_CODER, no_clean),
        "falcon" => cfg(FALCON, keep),
        "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es" | "jina-v2-de" | "a.x-4.0" | "mellum"
        | "modern-bert" | "exaone4" | "mpt" | "olmo" | "jais" => cfg(GPT2, keep),
        "jina-v1-en" | "jina-v2-code" | "roberta-bpe" => cfg(GPT2, add_sep),
        "trillion" | "granite-docling" => cfg(GPT2, no_clean),
        "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" | "mellum2" => cfg(STARCODER, keep),
        "command-r" | "smollm" => cfg(STARCODER, no_clean),
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "hunyuan" | "solar-open" | "grok-2" => {
            cfg(QWEN2, no_clean)
        }
        "stablelm2" | "megrez" => cfg(QWEN2, keep),
        "qwen35" => cfg(QWEN35, no_clean),
        "gemma4" | "granite-embed-multi-311m" => PreConfig { byte_encode: false, ..cfg(NEWLINES, escape) },
        _ => return None,
    })
}

/// Every name [`pre_config`] accepts, for error messages.
pub(crate) const PRE_NAMES: &str =
    "default, llama-bpe (llama3, llama-v3, falcon3, falcon-h1, pixtral, midm-2.0, lfm2, \
jina-v5-nano, dbrx, smaug-bpe, chatglm-bpe, glm4, glm5), deepseek-llm, deepseek-coder, falcon, gpt-2 (phi-2, jina-es, \
jina-de, gigachat, jina-v2-es, jina-v2-de, a.x-4.0, mellum, modern-bert, exaone4, mpt, olmo, jais, jina-v1-en, \
jina-v2-code, roberta-bpe, trillion, granite-docling), starcoder (refact, codeshell, exaone, minerva-7b, mellum2, \
command-r, smollm), qwen2 (deepseek-r1-qwen, kormo, f2llmv2, hunyuan, solar-open, grok-2, stablelm2, megrez), qwen35, \
gemma4 (granite-embed-multi-311m)";

impl Bpe {
    /// Reads `tokenizer.ggml.merges` and compiles the pre-tokenizer.
    pub(crate) fn load(h: &GgufHeader, cfg: &PreConfig, newline_words: bool) -> Result<Bpe, TokenizerError> {
        const KEY: &str = "tokenizer.ggml.merges";
        let merges = h.get_str_array(KEY).map_err(|e| meta(KEY, e.to_string()))?;
        let mut ranks = HashMap::with_capacity(merges.len());
        let mut key = Vec::new();
        for (rank, m) in merges.iter().enumerate() {
            // split at the first space after the first byte; llama.cpp files a merge without one under ("", "")
            let space = m.as_bytes().iter().skip(1).position(|&b| b == b' ').map(|i| i + 1);
            let (l, r) = space.map_or(("", ""), |i| (&m[..i], &m[i + 1..]));
            pair_key(&mut key, l, r);
            ranks.entry(key.clone()).or_insert(rank as u32);
        }
        Ok(Bpe { ranks, pre: PreTokenizer::new(cfg.patterns)?, byte_encode: cfg.byte_encode, newline_words })
    }

    /// Appends the tokens of `text` to `out`.
    pub(crate) fn tokenize(&self, vocab: &Vocab, text: &str, out: &mut Vec<u32>) -> Result<(), TokenizerError> {
        let mut key = Vec::new();
        for word in self.pre.split(text)? {
            let word = if self.byte_encode { byte_encode(&word) } else { word };
            let whole = (vocab.flags.ignore_merges || (self.newline_words && word.bytes().all(|b| b == b'\n')))
                && vocab.id(&word).is_some();
            let syms = if whole {
                vec![Symbol { start: 0, len: word.len(), prev: None, next: None }]
            } else {
                self.merge(&word, &mut key)
            };
            for s in syms.iter().filter(|s| s.len > 0) {
                let piece = &word[s.start..s.start + s.len];
                match vocab.id(piece) {
                    Some(id) => out.push(id),
                    None => out.extend(piece.bytes().filter_map(|b| self.byte_token(vocab, b))),
                }
            }
        }
        Ok(())
    }

    /// The token of one byte of a piece that has none: with byte-level encoding the byte
    /// as a one-byte text, else `<0xNN>`; none is skipped, as llama.cpp skips it.
    fn byte_token(&self, vocab: &Vocab, b: u8) -> Option<u32> {
        if self.byte_encode {
            (b < 0x80).then(|| vocab.id(&(b as char).to_string())).flatten()
        } else {
            vocab.id(&format!("<0x{b:02X}>"))
        }
    }

    /// The merged runs of `word`, in order (merged-away runs have length 0): a pair
    /// merges when the merges list has it, the lowest rank first.
    fn merge(&self, word: &str, key: &mut Vec<u8>) -> Vec<Symbol> {
        merge(word, char_symbols(word), |l, r, _| {
            pair_key(key, l, r);
            self.ranks.get(key.as_slice()).map(|&rank| Reverse(rank))
        })
    }
}
