//! BPE pre-tokenizers: the split patterns of each `tokenizer.ggml.pre` type, and the
//! matcher that applies them as llama.cpp does.
//!
//! llama.cpp runs a type's patterns one after the other, each splitting every piece the
//! previous one left into its matches and the gaps between them. Patterns that use
//! Unicode categories (`\p{L}`…) are matched against a *collapsed* text: every code
//! point from U+0080 up becomes one stand-in character for its category (letters one,
//! digits another…, white space U+000B), and each `\p{…}` in the pattern becomes a
//! class of that stand-in and the ASCII members of the category. Patterns without
//! categories see the text itself, with non-ASCII white space replaced by U+000B. The
//! patterns' `\s` is thereby only ever asked about ASCII, where every regex engine agrees.
//! This module reproduces that with `fancy_regex` (for the look-aheads).

use fancy_regex::Regex;

use super::unicode::{self, Category};
use super::TokenizerError;

/// How one pre-tokenizer type splits text.
pub(crate) struct PreTokenizer {
    passes: Vec<Pass>,
}

enum Pass {
    /// A pattern with Unicode categories, matched on the collapsed text.
    Collapsed(Regex),
    /// A pattern without categories, matched on the text.
    Plain(Regex),
    /// Runs of `\n` and runs of anything else (Gemma 4's `[^\n]+|[\n]+`).
    Newlines,
}

/// The categories a pattern may name, with the category llama.cpp files each under
/// (every letter subcategory counts as a letter) and the stand-in character for it.
const CATEGORIES: [(&str, Category, char); 10] = [
    ("\\p{N}", Category::NUMBER, '\u{D1}'),
    ("\\p{L}", Category::LETTER, '\u{D2}'),
    ("\\p{P}", Category::PUNCTUATION, '\u{D3}'),
    ("\\p{M}", Category::MARK, '\u{D4}'),
    ("\\p{S}", Category::SYMBOL, '\u{D5}'),
    ("\\p{Lu}", Category::LETTER, '\u{D2}'),
    ("\\p{Ll}", Category::LETTER, '\u{D2}'),
    ("\\p{Lt}", Category::LETTER, '\u{D2}'),
    ("\\p{Lm}", Category::LETTER, '\u{D2}'),
    ("\\p{Lo}", Category::LETTER, '\u{D2}'),
];
/// The stand-in for non-ASCII white space.
const WHITESPACE_STANDIN: char = '\u{0B}';
/// The stand-in for non-ASCII code points of the other categories (controls, separators,
/// unassigned).
const OTHER_STANDIN: char = '\u{D0}';

const NEWLINES: &str = "[^\\n]+|[\\n]+";

impl PreTokenizer {
    /// Compiles `patterns` (llama.cpp's spelling) in order.
    pub(crate) fn new(patterns: &[&str]) -> Result<PreTokenizer, TokenizerError> {
        let passes = patterns.iter().map(|p| compile(p)).collect::<Result<_, _>>()?;
        Ok(PreTokenizer { passes })
    }

    /// Splits `text` into words, in order; empty pieces (a pattern's empty match) are
    /// kept, as llama.cpp keeps them.
    pub(crate) fn split(&self, text: &str) -> Result<Vec<String>, TokenizerError> {
        let cps: Vec<char> = text.chars().collect();
        let mut pieces = vec![cps.len()];
        let (mut collapsed, mut plain) = (None, None);
        for pass in &self.passes {
            pieces = match pass {
                Pass::Newlines => split_newlines(&cps, &pieces),
                Pass::Collapsed(re) => {
                    split_regex(re, collapsed.get_or_insert_with(|| Mapped::collapsed(&cps)), &pieces)?
                }
                Pass::Plain(re) => split_regex(re, plain.get_or_insert_with(|| Mapped::plain(&cps)), &pieces)?,
            };
        }
        let mut start = 0;
        Ok(pieces
            .iter()
            .map(|&n| {
                let w: String = cps[start..start + n].iter().collect();
                start += n;
                w
            })
            .collect())
    }
}

fn compile(pattern: &str) -> Result<Pass, TokenizerError> {
    if pattern == NEWLINES {
        return Ok(Pass::Newlines);
    }
    let bad = |e: fancy_regex::Error| TokenizerError::Pattern { pattern: pattern.to_string(), msg: e.to_string() };
    if CATEGORIES.iter().any(|c| pattern.contains(c.0)) {
        if !pattern.is_ascii() {
            return Err(TokenizerError::Pattern {
                pattern: pattern.to_string(),
                msg: "Unicode categories and non-ASCII characters in one pattern".into(),
            });
        }
        Regex::new(&collapse_pattern(pattern)).map(Pass::Collapsed).map_err(bad)
    } else {
        Regex::new(pattern).map(Pass::Plain).map_err(bad)
    }
}

/// `pattern` with each `\p{…}` replaced by the class of its stand-in and the ASCII
/// members of its category; inside `[…]` only the members, to join the enclosing class.
fn collapse_pattern(pattern: &str) -> String {
    let b = pattern.as_bytes();
    let mut out = String::with_capacity(pattern.len() * 2);
    let mut inside = false;
    let mut i = 0;
    while i < b.len() {
        let escaped = i > 0 && b[i - 1] == b'\\';
        if b[i] == b'[' && !escaped {
            inside = true;
        } else if b[i] == b']' && inside && !escaped {
            inside = false;
        } else if let Some(&(name, cat, standin)) = CATEGORIES.iter().find(|c| pattern[i..].starts_with(c.0)) {
            let members = class_members(cat, standin);
            out.push_str(&if inside { members } else { format!("[{members}]") });
            i += name.len();
            continue;
        }
        out.push(b[i] as char);
        i += 1;
    }
    out
}

/// `standin` and the ASCII code points of `cat`, escaped for a character class.
fn class_members(cat: Category, standin: char) -> String {
    let ascii = (0..128u32).filter(|&c| unicode::category(c) == cat);
    std::iter::once(standin as u32).chain(ascii).map(|c| format!("\\x{{{c:X}}}")).collect()
}

/// The text a pattern is matched on, with the byte offset of each code point in it.
struct Mapped {
    text: String,
    offsets: Vec<usize>,
}

impl Mapped {
    fn new(chars: impl Iterator<Item = char>) -> Mapped {
        let (mut text, mut offsets) = (String::new(), Vec::new());
        for c in chars {
            offsets.push(text.len());
            text.push(c);
        }
        offsets.push(text.len());
        Mapped { text, offsets }
    }

    fn collapsed(cps: &[char]) -> Mapped {
        Mapped::new(cps.iter().map(|&c| {
            let cp = c as u32;
            if cp < 128 {
                c
            } else if unicode::is_whitespace(cp) {
                WHITESPACE_STANDIN
            } else {
                let cat = unicode::category(cp);
                CATEGORIES[..5].iter().find(|k| k.1 == cat).map_or(OTHER_STANDIN, |k| k.2)
            }
        }))
    }

    fn plain(cps: &[char]) -> Mapped {
        Mapped::new(cps.iter().map(|&c| {
            if c as u32 > 0x7F && unicode::is_whitespace(c as u32) {
                WHITESPACE_STANDIN
            } else {
                c
            }
        }))
    }

    /// The code point index at byte offset `byte` (a character boundary).
    fn index(&self, byte: usize) -> usize {
        self.offsets.partition_point(|&o| o < byte)
    }
}

/// Splits each piece (a code point count) into the matches of `re` within it and the
/// gaps between them.
fn split_regex(re: &Regex, m: &Mapped, pieces: &[usize]) -> Result<Vec<usize>, TokenizerError> {
    let mut out = Vec::with_capacity(pieces.len());
    let mut start = 0;
    for &n in pieces {
        let (lo, hi) = (m.offsets[start], m.offsets[start + n]);
        let mut done = start;
        for found in re.find_iter(&m.text[lo..hi]) {
            let found =
                found.map_err(|e| TokenizerError::Pattern { pattern: re.as_str().to_string(), msg: e.to_string() })?;
            let (a, b) = (m.index(lo + found.start()), m.index(lo + found.end()));
            if a > done {
                out.push(a - done);
            }
            out.push(b - a);
            done = b;
        }
        if start + n > done {
            out.push(start + n - done);
        }
        start += n;
    }
    Ok(out)
}

fn split_newlines(cps: &[char], pieces: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(pieces.len());
    let mut start = 0;
    for &n in pieces {
        let piece = &cps[start..start + n];
        let mut i = 0;
        while i < piece.len() {
            let nl = piece[i] == '\n';
            let run = piece[i..].iter().take_while(|&&c| (c == '\n') == nl).count();
            out.push(run);
            i += run;
        }
        start += n;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(patterns: &[&str], text: &str) -> Vec<String> {
        PreTokenizer::new(patterns).unwrap().split(text).unwrap()
    }

    const GPT2: &str = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";

    #[test]
    fn gpt2_pattern_splits_words_spaces_and_contractions() {
        assert_eq!(words(&[GPT2], "Hello world's  3 años!!"), ["Hello", " world", "'s", " ", " 3", " años", "!!"]);
        // a run of spaces before a word leaves its last space to the word
        assert_eq!(words(&[GPT2], "a   b"), ["a", "  ", " b"]);
        // trailing spaces: nothing follows, so the run matches whole
        assert_eq!(words(&[GPT2], "a  "), ["a", "  "]);
        // no pattern matches a lone space before a newline: a gap of its own
        assert_eq!(words(&[GPT2], "a \nb"), ["a", " ", "\n", "b"]);
    }

    #[test]
    fn categories_collapse_outside_and_inside_classes() {
        let p = collapse_pattern("[^\\s\\p{L}]\\p{N}");
        assert!(p.starts_with("[^\\s\\x{D2}\\x{41}"), "{p}");
        assert!(p.contains("][\\x{D1}\\x{30}"), "{p}");
        // non-ASCII letters count as letters, CJK too; U+3000 as white space
        assert_eq!(words(&[" ?\\p{L}+|\\s+"], "中文\u{3000}é"), ["中文", "\u{3000}", "é"]);
    }

    #[test]
    fn passes_refine_earlier_pieces_and_keep_gaps() {
        // the second pattern only sees the pieces the first left
        assert_eq!(words(&["\\p{N}", "[a-z]+"], "ab12cd"), ["ab", "1", "2", "cd"]);
        assert_eq!(words(&[NEWLINES], "a\n\nb\n"), ["a", "\n\n", "b", "\n"]);
    }

    #[test]
    fn plain_patterns_see_non_ascii_space_as_vertical_tab() {
        // U+3000 is in this class, but llama.cpp replaces it before matching
        assert_eq!(words(&["[　-。]+"], "a\u{3000}\u{3001}b"), ["a\u{3000}", "\u{3001}", "b"]);
    }

    #[test]
    fn mixed_pattern_is_an_error() {
        assert!(matches!(PreTokenizer::new(&["\\p{L}é"]), Err(TokenizerError::Pattern { .. })));
    }
}
