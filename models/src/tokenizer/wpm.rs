//! WordPiece (`tokenizer.ggml.model = bert`): BERT's normalisation, then the longest
//! vocabulary entries that spell each word (`▁` marks a word's start).

use super::unicode::{self, Category};
use super::vocab::Vocab;
use super::TokenizerError;

/// Appends the tokens of `text` to `out`; a word no entries spell becomes the unknown token.
pub(crate) fn tokenize(vocab: &Vocab, text: &str, out: &mut Vec<u32>) -> Result<(), TokenizerError> {
    for word in words(text, vocab.flags.lowercase, vocab.flags.strip_accents) {
        let word = format!("\u{2581}{word}");
        let before = out.len();
        let mut i = 0;
        while i < word.len() {
            let longest = (i + 1..=word.len().min(i + vocab.max_token_len + 1))
                .rev()
                .find_map(|j| word.get(i..j).and_then(|w| vocab.id(w)).map(|id| (id, j)));
            match longest {
                Some((id, j)) => {
                    out.push(id);
                    i = j;
                }
                None => {
                    out.truncate(before);
                    break;
                }
            }
        }
        if out.len() == before {
            out.push(vocab.special.unk.ok_or(TokenizerError::MissingSpecial("unknown"))?);
        }
    }
    Ok(())
}

/// BERT's basic tokenisation: split at white space, drop controls (and, when stripping
/// accents, the accents of the decomposed text), lowercase, and make each punctuation
/// mark, ASCII symbol and CJK ideograph a word of its own.
fn words(text: &str, lowercase: bool, strip_accents: bool) -> Vec<String> {
    let mut words = vec![String::new()];
    let end_word = |words: &mut Vec<String>| {
        if words.last().is_some_and(|w| !w.is_empty()) {
            words.push(String::new());
        }
    };
    for c in text.chars() {
        let cp = if strip_accents { unicode::nfd_base(c as u32) } else { c as u32 };
        if unicode::is_whitespace(cp) {
            end_word(&mut words);
            continue;
        }
        let cat = unicode::category(cp);
        if cp == 0 || cp == 0xFFFD || cat == Category::CONTROL || (strip_accents && cat == Category::MARK) {
            continue;
        }
        let shown = char::from_u32(if lowercase { unicode::to_lower(cp) } else { cp }).unwrap_or('\u{FFFD}');
        if cat == Category::PUNCTUATION || (cp < 0x7F && cat == Category::SYMBOL) || is_cjk_ideograph(cp) {
            end_word(&mut words);
            if let Some(w) = words.last_mut() {
                w.push(shown);
            }
            words.push(String::new());
        } else if let Some(w) = words.last_mut() {
            w.push(shown);
        }
    }
    words.retain(|w| !w.is_empty());
    words
}

/// The CJK ideograph blocks BERT splits on (with the upper bound of Extension B..E as
/// Hugging Face's tokenizers has it, 0x2CEAF from 0x2B920).
fn is_cjk_ideograph(cp: u32) -> bool {
    matches!(cp,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B920..=0x2CEAF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bert_words() {
        assert_eq!(words("Héllo, WORLD!", true, true), ["hello", ",", "world", "!"]);
        assert_eq!(words("a中b  c\u{0}", false, false), ["a", "中", "b", "c"]);
        assert_eq!(words("x+y", false, false), ["x", "+", "y"]);
        assert!(words(" \t\n", true, true).is_empty());
    }
}
