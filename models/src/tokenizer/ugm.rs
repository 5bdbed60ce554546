//! Unigram (`tokenizer.ggml.model = t5`): SentencePiece's normaliser (the precompiled
//! character map), then the best-scoring segmentation by Viterbi.

use rgml::gguf::{Array, GgufHeader, Value};

use super::unicode::utf8_len;
use super::vocab::{meta, TokenAttr, Vocab};
use super::TokenizerError;

const CHARSMAP_KEY: &str = "tokenizer.ggml.precompiled_charsmap";
/// How much worse than the worst normal token an unknown code point scores.
const UNKNOWN_PENALTY: f32 = 10.0;

/// The normaliser's tables and the scores of a unigram vocabulary.
pub(crate) struct Ugm {
    /// The XOR-compressed double array of the character map's prefixes.
    xcda: Vec<u32>,
    /// NUL-terminated replacement strings the double array points into.
    replacements: Vec<u8>,
    /// User-defined token texts: a prefix of the input shared with one is kept as it is.
    user_defined: Vec<Vec<u8>>,
    unknown_score: f64,
}

impl Ugm {
    pub(crate) fn load(h: &GgufHeader, vocab: &Vocab) -> Result<Ugm, TokenizerError> {
        let blob: Vec<u8> = match h.get(CHARSMAP_KEY) {
            None => Vec::new(),
            Some(Value::Array(Array::U8(v))) => v.clone(),
            Some(Value::Array(Array::I8(v))) => v.iter().map(|&b| b as u8).collect(),
            Some(v) => {
                return Err(meta(CHARSMAP_KEY, format!("expected an array of u8, found {}", v.type_description())))
            }
        };
        let (xcda, replacements) = if blob.is_empty() { (Vec::new(), Vec::new()) } else { split_charsmap(&blob)? };
        let normal = (0..vocab.texts.len()).filter(|&i| vocab.attrs[i].has(TokenAttr::NORMAL));
        let min_score = normal.map(|i| vocab.scores[i]).fold(f32::MAX, f32::min);
        let user_defined = (0..vocab.texts.len())
            .filter(|&i| vocab.attrs[i].has(TokenAttr::USER_DEFINED))
            .map(|i| vocab.texts[i].as_bytes().to_vec())
            .collect();
        // in f32, as llama.cpp computes it
        Ok(Ugm { xcda, replacements, user_defined, unknown_score: f64::from(min_score - UNKNOWN_PENALTY) })
    }

    /// Appends the tokens of `text` to `out`.
    pub(crate) fn tokenize(&self, vocab: &Vocab, text: &str, out: &mut Vec<u32>) -> Result<(), TokenizerError> {
        let input = self.normalize(vocab, text.as_bytes())?;
        if input.is_empty() {
            return Ok(());
        }
        let unk = vocab.special.unk.ok_or(TokenizerError::MissingSpecial("unknown"))?;
        // best[i]: the best segmentation of input[..i]: (last token, where it starts, score)
        let mut best = vec![(unk, 0usize, f64::MIN); input.len() + 1];
        best[0].2 = 0.0;
        let mut at = 0;
        while at < input.len() {
            let n_char = utf8_len(input[at]).min(input.len() - at);
            let here = best[at].2;
            let mut whole_char = false;
            for end in at + 1..=input.len().min(at + vocab.max_token_len) {
                let Some(id) = std::str::from_utf8(&input[at..end]).ok().and_then(|t| self.matchable(vocab, t)) else {
                    continue;
                };
                whole_char |= end - at == n_char;
                let score = if vocab.attrs[id as usize].has(TokenAttr::USER_DEFINED) {
                    0.0
                } else {
                    f64::from(vocab.scores[id as usize])
                };
                if here + score > best[end].2 {
                    best[end] = (id, at, here + score);
                }
            }
            if !whole_char && here + self.unknown_score > best[at + n_char].2 {
                best[at + n_char] = (unk, at, here + self.unknown_score);
            }
            at += n_char;
        }
        // walk back from the end; runs of unknown tokens become one
        let first = out.len();
        let (mut i, mut prev_unknown) = (input.len(), false);
        loop {
            let (id, start, _) = best[i];
            let unknown = id == unk;
            if !(prev_unknown && unknown) {
                out.push(id);
            }
            if start == 0 {
                break;
            }
            prev_unknown = unknown;
            i = start;
        }
        out[first..].reverse();
        Ok(())
    }

    /// The token a piece of normalised text can be: a normal, user-defined or unused one.
    fn matchable(&self, vocab: &Vocab, text: &str) -> Option<u32> {
        let id = vocab.id(text)?;
        let a = vocab.attrs[id as usize];
        (a.has(TokenAttr(TokenAttr::NORMAL.0 | TokenAttr::USER_DEFINED.0 | TokenAttr::UNUSED.0))).then_some(id)
    }

    /// SentencePiece's normalisation: each prefix the character map knows is replaced,
    /// spaces become `▁` (merged when the vocabulary says so), and a space is put before
    /// the text when `add_space_prefix`.
    fn normalize(&self, vocab: &Vocab, input: &[u8]) -> Result<Vec<u8>, TokenizerError> {
        let space: &[u8] = if vocab.flags.escape_whitespaces { "\u{2581}".as_bytes() } else { b" " };
        let (prepend, merge) = (vocab.flags.add_space_prefix, vocab.flags.remove_extra_whitespaces);
        let mut out = Vec::with_capacity(input.len() * 3);
        let (mut prepended, mut in_word) = (false, false);
        let mut at = 0;
        while at < input.len() {
            let (piece, used) = self.normalize_prefix(input, at)?;
            for &c in piece.iter() {
                if c != b' ' {
                    if !in_word {
                        in_word = true;
                        if (prepend && !prepended) || merge {
                            out.extend_from_slice(space);
                            prepended = true;
                        }
                    }
                    out.push(c);
                } else {
                    in_word = false;
                    if !merge {
                        out.extend_from_slice(space);
                    }
                }
            }
            at += used;
        }
        Ok(out)
    }

    /// The normal form of the input at `at` and how many bytes it replaces.
    fn normalize_prefix<'a>(&'a self, input: &'a [u8], at: usize) -> Result<(&'a [u8], usize), TokenizerError> {
        let rest = &input[at..];
        // llama.cpp keeps the longest prefix shared with any user-defined token as it is
        // (its trie walk stops where the input leaves the trie, token or not)
        let shared = self.user_defined.iter().map(|t| t.iter().zip(rest).take_while(|(a, b)| a == b).count()).max();
        if let Some(n) = shared.filter(|&n| n > 0) {
            return Ok((&rest[..n], n));
        }
        if let Some((len, offset)) = self.longest_mapped_prefix(rest)? {
            let tail =
                self.replacements.get(offset..).ok_or_else(|| bad_charsmap("replacement offset out of range"))?;
            let end = tail.iter().position(|&b| b == 0).ok_or_else(|| bad_charsmap("unterminated replacement"))?;
            return Ok((&tail[..end], len));
        }
        let n = utf8_len(rest[0]).min(rest.len());
        match std::str::from_utf8(&rest[..n]) {
            Ok(_) => Ok((&rest[..n], n)),
            Err(_) => Ok(("\u{FFFD}".as_bytes(), 1)),
        }
    }

    /// The longest prefix of `s` the double array maps, as (its length, the offset of
    /// its replacement).
    fn longest_mapped_prefix(&self, s: &[u8]) -> Result<Option<(usize, usize)>, TokenizerError> {
        if self.xcda.is_empty() {
            return Ok(None);
        }
        let node =
            |i: u32| self.xcda.get(i as usize).copied().ok_or_else(|| bad_charsmap("index out of the double array"));
        let base = |n: u32| (n >> 10) << ((n & (1 << 9)) >> 6);
        let mut found = None;
        let mut index = base(node(0)?);
        for (k, &c) in s.iter().enumerate() {
            if c == 0 {
                break;
            }
            index ^= u32::from(c);
            let n = node(index)?;
            // LCHECK: the node's label (and the value bit, never set on a label)
            if n & ((1 << 31) | 0xFF) != u32::from(c) {
                break;
            }
            let leaf = (n >> 8) & 1 == 1;
            index ^= base(n);
            if leaf {
                found = Some((k + 1, (node(index)? & ((1 << 31) - 1)) as usize));
            }
        }
        Ok(found)
    }
}

fn bad_charsmap(msg: &str) -> TokenizerError {
    meta(CHARSMAP_KEY, msg)
}

/// The map's parts: a u32 byte length, that many bytes of double array, then the
/// replacement strings.
fn split_charsmap(blob: &[u8]) -> Result<(Vec<u32>, Vec<u8>), TokenizerError> {
    let size = blob.get(..4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let size = size.ok_or_else(|| bad_charsmap("shorter than its 4-byte header"))?;
    if size.saturating_add(4) >= blob.len() {
        return Err(bad_charsmap(&format!("double array of {size} bytes does not fit the {}-byte map", blob.len())));
    }
    let xcda = blob[4..4 + size].chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    Ok((xcda, blob[4 + size..].to_vec()))
}
