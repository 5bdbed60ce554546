//! SentencePiece-style BPE (`tokenizer.ggml.model = llama`): characters merge pairwise,
//! highest-scoring vocabulary entry first; what forms no token falls back to bytes.

use super::merge::{char_symbols, merge};
use super::vocab::Vocab;
use super::TokenizerError;

/// A piece's score, ordered as llama.cpp compares them (higher merges first; -0 equals 0;
/// NaN, which llama.cpp leaves unordered, lowest).
struct Score(f32);

impl Score {
    fn key(&self) -> f32 {
        if self.0.is_nan() {
            f32::NEG_INFINITY
        } else {
            self.0 + 0.0
        }
    }
}

impl Ord for Score {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.key().total_cmp(&o.key())
    }
}
impl PartialOrd for Score {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl PartialEq for Score {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o).is_eq()
    }
}
impl Eq for Score {}

/// Appends the tokens of `text` (spaces already escaped as `▁`) to `out`.
pub(crate) fn tokenize(vocab: &Vocab, text: &str, out: &mut Vec<u32>) -> Result<(), TokenizerError> {
    // two runs merge when together they are a token, the best-scoring first
    let syms = merge(text, char_symbols(text), |_, _, both| vocab.id(both).map(|id| Score(vocab.scores[id as usize])));
    let mut i = (!syms.is_empty()).then_some(0);
    while let Some(k) = i {
        resegment(vocab, &text[syms[k].start..syms[k].start + syms[k].len], out)?;
        i = syms[k].next;
    }
    Ok(())
}

/// The tokens of a run: its token, else its bytes' tokens. Only a run that is one
/// character can lack a token (a merge is made only into a token), so llama.cpp's
/// fallback to the merged pair never applies and is left out.
fn resegment(vocab: &Vocab, text: &str, out: &mut Vec<u32>) -> Result<(), TokenizerError> {
    if let Some(id) = vocab.id(text) {
        out.push(id);
        return Ok(());
    }
    for &b in text.as_bytes() {
        out.push(byte_token(vocab, b)?);
    }
    Ok(())
}

/// The token of byte `b`: `<0xNN>`, else the byte as a one-character token, else the
/// unknown token (llama.cpp stops with an exception there).
pub(crate) fn byte_token(vocab: &Vocab, b: u8) -> Result<u32, TokenizerError> {
    vocab
        .id(&format!("<0x{b:02X}>"))
        .or_else(|| (b < 0x80).then(|| vocab.id(&(b as char).to_string())).flatten())
        .or(vocab.special.unk)
        .ok_or(TokenizerError::NoByteToken(b))
}
