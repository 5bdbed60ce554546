//! Splitting text at the special tokens it spells, before any tokenizer sees it
//! (llama.cpp's `tokenizer_st_partition`).

use super::vocab::{TokenAttr, Vocab};

/// A piece of the input: text still to tokenize (a byte range), or a token found in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fragment {
    Text(usize, usize),
    Token(u32),
}

/// C's `isspace` in the C locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

/// `text` split at every occurrence of a special token, longest tokens first.
/// User-defined tokens are always found; control and unknown tokens only with
/// `parse_special`. A token with LSTRIP (RSTRIP) absorbs the white space before (after) it.
pub(crate) fn partition(vocab: &Vocab, text: &str, parse_special: bool) -> Vec<Fragment> {
    if text.is_empty() {
        return Vec::new();
    }
    let bytes = text.as_bytes();
    let mut frags = vec![Fragment::Text(0, text.len())];
    for &id in &vocab.special_order {
        let attr = vocab.attr(id);
        if !parse_special && attr.has(TokenAttr(TokenAttr::CONTROL.0 | TokenAttr::UNKNOWN.0)) {
            continue;
        }
        let needle = &vocab.texts[id as usize];
        if !frags.iter().any(|f| matches!(f, Fragment::Text(a, b) if text[*a..*b].contains(needle.as_str()))) {
            continue;
        }
        let mut next = Vec::with_capacity(frags.len() + 2);
        for f in frags {
            match f {
                Fragment::Token(_) => next.push(f),
                Fragment::Text(mut start, end) => loop {
                    let Some(at) = text[start..end].find(needle.as_str()).map(|i| start + i) else {
                        next.push(Fragment::Text(start, end));
                        break;
                    };
                    let mut left_end = at;
                    if attr.has(TokenAttr::LSTRIP) {
                        while left_end > start && is_c_space(bytes[left_end - 1]) {
                            left_end -= 1;
                        }
                    }
                    if left_end > start {
                        next.push(Fragment::Text(start, left_end));
                    }
                    next.push(Fragment::Token(id));
                    start = at + needle.len();
                    if attr.has(TokenAttr::RSTRIP) {
                        while start < end && is_c_space(bytes[start]) {
                            start += 1;
                        }
                    }
                    if start >= end {
                        break;
                    }
                },
            }
        }
        frags = next;
    }
    frags
}
