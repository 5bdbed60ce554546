//! Code point classification as llama.cpp's tokenizers see it (Unicode 15.1 tables),
//! and GPT-2's byte-level alphabet.

use std::sync::OnceLock;

use super::unicode_tables::{CATEGORY_RANGES, LOWERCASE, NFD_BASE, WHITESPACE};

/// The general-category group of a code point, one bit each (llama.cpp's flag values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Category(u8);

impl Category {
    pub(crate) const UNDEFINED: Category = Category(1);
    pub(crate) const NUMBER: Category = Category(2);
    pub(crate) const LETTER: Category = Category(4);
    pub(crate) const MARK: Category = Category(16);
    pub(crate) const PUNCTUATION: Category = Category(32);
    pub(crate) const SYMBOL: Category = Category(64);
    pub(crate) const CONTROL: Category = Category(128);
}

/// The category of every code point, expanded once from the range table (1.1 MB).
fn table() -> &'static [u8] {
    static TABLE: OnceLock<Vec<u8>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = vec![0u8; 0x11_0000];
        for (i, &(start, flag)) in CATEGORY_RANGES.iter().enumerate() {
            let end = CATEGORY_RANGES.get(i + 1).map_or(0x11_0000, |r| r.0);
            t[start as usize..end as usize].fill(flag);
        }
        t
    })
}

/// The category of `cp`; code points past U+10FFFF are undefined.
pub(crate) fn category(cp: u32) -> Category {
    Category(table().get(cp as usize).copied().unwrap_or(Category::UNDEFINED.0))
}

/// Whether `cp` has the White_Space property.
pub(crate) fn is_whitespace(cp: u32) -> bool {
    WHITESPACE.binary_search(&cp).is_ok()
}

/// The simple lowercase of `cp` (itself when it has none).
pub(crate) fn to_lower(cp: u32) -> u32 {
    LOWERCASE.binary_search_by_key(&cp, |p| p.0).map_or(cp, |i| LOWERCASE[i].1)
}

/// The first code point of `cp`'s canonical decomposition (itself when it has none):
/// the accent-stripping llama.cpp's WordPiece normaliser does.
pub(crate) fn nfd_base(cp: u32) -> u32 {
    let i = NFD_BASE.partition_point(|r| r.0 <= cp);
    match i.checked_sub(1).map(|i| NFD_BASE[i]) {
        Some((first, last, base)) if (first..=last).contains(&cp) => base,
        _ => cp,
    }
}

/// GPT-2's byte-level alphabet: each byte is shown as a printable code point
/// (printable Latin-1 bytes as themselves, the others from U+0100 on, in byte order).
/// Returns the byte -> char map and its inverse over code points below U+0144.
fn byte_alphabet() -> &'static ([char; 256], [Option<u8>; 0x144]) {
    static MAP: OnceLock<([char; 256], [Option<u8>; 0x144])> = OnceLock::new();
    MAP.get_or_init(|| {
        let printable = |b: u32| (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
        let (mut to_char, mut to_byte) = (['\0'; 256], [None; 0x144]);
        let mut next = 256;
        for b in 0..=255u8 {
            let cp = if printable(u32::from(b)) {
                u32::from(b)
            } else {
                next += 1;
                next - 1
            };
            to_char[b as usize] = char::from_u32(cp).unwrap_or('\u{FFFD}');
            to_byte[cp as usize] = Some(b);
        }
        (to_char, to_byte)
    })
}

/// The byte-level character standing for `byte`.
pub(crate) fn byte_to_char(byte: u8) -> char {
    byte_alphabet().0[byte as usize]
}

/// The byte a byte-level character stands for, if it is one.
pub(crate) fn char_to_byte(c: char) -> Option<u8> {
    byte_alphabet().1.get(c as usize).copied().flatten()
}

/// `text` as GPT-2's byte-level string.
pub(crate) fn byte_encode(text: &str) -> String {
    text.bytes().map(byte_to_char).collect()
}

/// The length of the UTF-8 sequence a lead byte starts (1 for stray continuation bytes),
/// as llama.cpp steps through text.
pub(crate) fn utf8_len(lead: u8) -> usize {
    match lead >> 4 {
        0xC | 0xD => 2,
        0xE => 3,
        0xF => 4,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_of_known_code_points() {
        assert_eq!(category('a' as u32), Category::LETTER);
        assert_eq!(category('7' as u32), Category::NUMBER);
        assert_eq!(category('!' as u32), Category::PUNCTUATION);
        assert_eq!(category('$' as u32), Category::SYMBOL);
        assert_eq!(category(' ' as u32), Category(8)); // a space separator
        assert_eq!(category('\n' as u32), Category::CONTROL);
        assert_eq!(category(0x0301), Category::MARK); // combining acute
        assert_eq!(category(0x4E2D), Category::LETTER); // 中
        assert_eq!(category(0x0378), Category::UNDEFINED); // unassigned
        assert_eq!(category(0x2FFC), Category::SYMBOL); // new in Unicode 15.1
        assert_eq!(category(0x1C89), Category::UNDEFINED); // assigned only in 16.0
        assert_eq!(category(0x11_0000), Category::UNDEFINED);
    }

    #[test]
    fn whitespace_lowercase_and_nfd() {
        assert!(is_whitespace(0x3000) && is_whitespace(0x85) && !is_whitespace(0x1C) && !is_whitespace(0x200B));
        assert_eq!(to_lower('A' as u32), 'a' as u32);
        assert_eq!(to_lower(0x130), 'i' as u32);
        assert_eq!(to_lower('a' as u32), 'a' as u32);
        assert_eq!(nfd_base('é' as u32), 'e' as u32);
        assert_eq!(nfd_base(0x1E09), 'c' as u32); // ḉ: two marks
        assert_eq!(nfd_base('e' as u32), 'e' as u32);
    }

    #[test]
    fn byte_alphabet_round_trips() {
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(byte_to_char(b)), Some(b));
        }
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(byte_to_char(b'a'), 'a');
        assert_eq!(char_to_byte('中'), None);
    }
}
