//! Tokens back to text: each token's piece, llama.cpp's detokenizer clean-up, and a
//! streaming decoder that only emits whole UTF-8 characters.

use super::unicode::char_to_byte;
use super::vocab::{TokenAttr, Vocab, VocabKind};

/// The bytes of token `id` (in range) as llama.cpp's `token_to_piece` renders them:
/// control and unknown tokens only with `special`; `lstrip` leading spaces dropped.
pub(crate) fn piece(vocab: &Vocab, id: u32, special: bool, lstrip: usize) -> Vec<u8> {
    let attr = vocab.attr(id);
    let special_attr = TokenAttr(TokenAttr::UNKNOWN.0 | TokenAttr::CONTROL.0);
    if !special && attr.has(special_attr) {
        return Vec::new();
    }
    let text = &vocab.texts[id as usize];
    let mut bytes = if attr.has(TokenAttr(special_attr.0 | TokenAttr::USER_DEFINED.0)) {
        text.as_bytes().to_vec()
    } else if attr.has(TokenAttr::NORMAL) {
        if vocab.kind == VocabKind::Bpe && !vocab.flags.escape_whitespaces {
            byte_level_decode(text)
        } else {
            text.replace('\u{2581}', " ").into_bytes()
        }
    } else if attr.has(TokenAttr::BYTE) {
        text.get(3..5).and_then(|h| u8::from_str_radix(h, 16).ok()).into_iter().collect()
    } else {
        Vec::new()
    };
    let n = bytes.iter().take(lstrip).take_while(|&&b| b == b' ').count();
    bytes.drain(..n);
    bytes
}

/// GPT-2 byte-level text back to bytes; a character outside the alphabet becomes
/// `[UNK_BYTE_0x…<token text>]`, as in llama.cpp.
fn byte_level_decode(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        match char_to_byte(c) {
            Some(b) => out.push(b),
            None => {
                out.extend_from_slice(b"[UNK_BYTE_0x");
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                out.extend_from_slice(text.as_bytes());
                out.push(b']');
            }
        }
    }
    out
}

/// llama.cpp's `detokenize` over ids already checked to be in range: the pieces (the
/// first one's leading space dropped where the vocabulary adds one), then, for
/// vocabularies that clean up spaces, no space before `?!.,`, none around a lone `'`, and
/// none before `'s 'm 're 've`.
pub(crate) fn detokenize(vocab: &Vocab, ids: &[u32], remove_special: bool, special: bool) -> Vec<u8> {
    let mut ids = ids;
    let mut strip_space = vocab.flags.add_space_prefix;
    if remove_special && vocab.flags.add_bos && ids.first().is_some_and(|&t| Some(t) == vocab.special.bos) {
        strip_space = false;
        ids = &ids[1..];
    }
    if remove_special && vocab.flags.add_eos && ids.last().is_some_and(|&t| Some(t) == vocab.special.eos) {
        ids = &ids[..ids.len() - 1];
    }
    let mut text = Vec::new();
    for &id in ids {
        text.extend(piece(vocab, id, special, usize::from(strip_space)));
        strip_space = false;
    }
    if vocab.flags.clean_spaces {
        clean_spaces(&mut text);
    }
    text
}

/// The three clean-up passes, in place, reading each byte's left neighbour as it was.
fn clean_spaces(t: &mut Vec<u8>) {
    // " ?", " !", " .", " ,"
    compact(t, |t, i, w| (t[i - 1] == b' ' && matches!(t[i], b'?' | b'!' | b'.' | b',')).then(|| w - 1));
    // " ' " -> "'"
    let mut w = usize::from(!t.is_empty());
    let mut i = 1;
    while i < t.len() {
        let x = t[i];
        if x == b'\'' && i + 1 < t.len() && t[i - 1] == b' ' && t[i + 1] == b' ' {
            w -= 1;
            i += 1;
            t[i] = 0; // the space after is dropped; llama.cpp leaves a NUL its next look-back sees
        }
        t[w] = x;
        w += 1;
        i += 1;
    }
    t.truncate(w);
    // " 's", " 'm", " 're", " 've" (not " 't", " 'd", " 'll")
    let n = t.len();
    compact(t, |t, i, w| {
        let contraction = t[i - 1] == b' '
            && t[i] == b'\''
            && i + 1 < n
            && (matches!(t[i + 1], b's' | b'm') || (i + 2 < n && matches!((t[i + 1], t[i + 2]), (b'r' | b'v', b'e'))));
        contraction.then(|| w - 1)
    });
}

/// Copies each byte from index 1 on to a write position that `rewind` may move back
/// (dropping the byte written last) before the copy.
fn compact(t: &mut Vec<u8>, rewind: impl Fn(&[u8], usize, usize) -> Option<usize>) {
    let mut w = usize::from(!t.is_empty());
    for i in 1..t.len() {
        if let Some(back) = rewind(t, i, w) {
            w = back;
        }
        t[w] = t[i];
        w += 1;
    }
    t.truncate(w);
}

/// Turns a stream of token pieces into text, holding back the bytes of a character
/// split across tokens until it is whole. Bytes that can never form a character come
/// out as U+FFFD.
#[derive(Debug, Default, Clone)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Adds `bytes`; returns the text that is complete now.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let good = e.valid_up_to();
                    out.push_str(std::str::from_utf8(&self.pending[..good]).unwrap_or_default());
                    match e.error_len() {
                        // an incomplete character at the end: keep it for the next push
                        None => {
                            self.pending.drain(..good);
                            return out;
                        }
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..good + bad);
                        }
                    }
                }
            }
        }
    }

    /// Ends the stream: what is held back comes out as U+FFFD.
    pub fn finish(&mut self) -> String {
        let rest = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        rest
    }

    /// Bytes held back, waiting for the rest of a character.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean(s: &str) -> String {
        let mut b = s.as_bytes().to_vec();
        clean_spaces(&mut b);
        String::from_utf8_lossy(&b).into_owned()
    }

    #[test]
    fn clean_up_passes() {
        assert_eq!(clean("Hi , there . Ok ?"), "Hi, there. Ok?");
        assert_eq!(clean("it ' s"), "it's");
        assert_eq!(clean("he 's we 're they 've I 'm"), "he's we're they've I'm");
        assert_eq!(clean("don 't I 'd we 'll"), "don 't I 'd we 'll");
        assert_eq!(clean(""), "");
        assert_eq!(clean(" ."), ".");
    }

    #[test]
    fn stream_holds_back_split_characters() {
        let mut s = Utf8Stream::default();
        let e = "é".as_bytes();
        assert_eq!(s.push(b"a"), "a");
        assert_eq!(s.push(&e[..1]), "");
        assert_eq!(s.pending(), 1);
        assert_eq!(s.push(&e[1..]), "é");
        let euro = "€".as_bytes();
        assert_eq!(s.push(&euro[..2]), "");
        assert_eq!(s.push(&[euro[2], b'!']), "€!");
        assert_eq!(s.push(&[0xFF, b'x']), "\u{FFFD}x");
        assert_eq!(s.push(&euro[..1]), "");
        assert_eq!(s.finish(), "\u{FFFD}");
    }
}
