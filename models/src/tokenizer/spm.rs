//! SentencePiece-style BPE (`tokenizer.ggml.model = llama`): characters merge pairwise,
//! highest-scoring vocabulary entry first; what forms no token falls back to bytes.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::unicode::utf8_len;
use super::vocab::Vocab;
use super::TokenizerError;

/// A run of the text: `len` bytes at `start`, in a doubly linked list of the live runs.
#[derive(Clone, Copy)]
pub(crate) struct Symbol {
    pub start: usize,
    pub len: usize,
    pub prev: Option<usize>,
    pub next: Option<usize>,
}

/// The text split into UTF-8 characters (a lead byte decides the length, as llama.cpp
/// steps), linked in order.
pub(crate) fn char_symbols(text: &str) -> Vec<Symbol> {
    let b = text.as_bytes();
    let mut syms = Vec::with_capacity(b.len());
    let mut at = 0;
    while at < b.len() {
        let len = utf8_len(b[at]).min(b.len() - at);
        let i = syms.len();
        syms.push(Symbol { start: at, len, prev: i.checked_sub(1), next: None });
        at += len;
        if at < b.len() {
            syms[i].next = Some(i + 1);
        }
    }
    syms
}

/// A candidate merge of two adjacent runs; the best has the highest score, then the
/// leftmost position.
struct Bigram {
    left: usize,
    right: usize,
    score: f32,
    len: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Bigram {
    fn cmp(&self, o: &Self) -> Ordering {
        self.score.total_cmp(&o.score).then(o.left.cmp(&self.left))
    }
}

struct Session<'a> {
    vocab: &'a Vocab,
    text: &'a str,
    syms: Vec<Symbol>,
    queue: BinaryHeap<Bigram>,
}

/// Appends the tokens of `text` (spaces already escaped as `▁`) to `out`.
pub(crate) fn tokenize(vocab: &Vocab, text: &str, out: &mut Vec<u32>) -> Result<(), TokenizerError> {
    let mut s = Session { vocab, text, syms: char_symbols(text), queue: BinaryHeap::new() };
    for i in 1..s.syms.len() {
        s.try_add(Some(i - 1), Some(i));
    }
    while let Some(bg) = s.queue.pop() {
        let (l, r) = (s.syms[bg.left], s.syms[bg.right]);
        // one side merged since: stale
        if l.len == 0 || r.len == 0 || l.len + r.len != bg.len {
            continue;
        }
        s.syms[bg.left].len += r.len;
        s.syms[bg.right].len = 0;
        s.syms[bg.left].next = r.next;
        if let Some(n) = r.next {
            s.syms[n].prev = Some(bg.left);
        }
        s.try_add(l.prev, Some(bg.left));
        s.try_add(Some(bg.left), r.next);
    }
    let mut i = (!s.syms.is_empty()).then_some(0);
    while let Some(k) = i {
        s.resegment(k, out)?;
        i = s.syms[k].next;
    }
    Ok(())
}

impl<'a> Session<'a> {
    fn piece(&self, i: usize) -> &'a str {
        let s = self.syms[i];
        &self.text[s.start..s.start + s.len]
    }

    fn try_add(&mut self, left: Option<usize>, right: Option<usize>) {
        let (Some(left), Some(right)) = (left, right) else { return };
        let (l, r) = (self.syms[left], self.syms[right]);
        let text = &self.text[l.start..l.start + l.len + r.len];
        let Some(id) = self.vocab.id(text) else { return };
        self.queue.push(Bigram { left, right, score: self.vocab.scores[id as usize], len: text.len() });
    }

    /// The tokens of run `i`: its token, else its bytes' tokens. Only a run that is one
    /// character can lack a token (a merge is made only into a token), so llama.cpp's
    /// fallback to the merged pair never applies and is left out.
    fn resegment(&self, i: usize, out: &mut Vec<u32>) -> Result<(), TokenizerError> {
        let text = self.piece(i);
        if let Some(id) = self.vocab.id(text) {
            out.push(id);
            return Ok(());
        }
        for &b in text.as_bytes() {
            out.push(byte_token(self.vocab, b)?);
        }
        Ok(())
    }
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
