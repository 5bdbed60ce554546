//! A generated sequence's text as its tokens come: whole UTF-8 characters, cut at the
//! first stop string (OpenAI's `stop`), with the text that could still become a stop
//! string held back until it cannot. A server streams what [`TextStream::push`]
//! returns; the joined pieces are the whole answer.

use std::sync::Arc;

use crate::tokenizer::{Tokenizer, TokenizerError, Utf8Stream};

/// What a token added to the text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Piece {
    /// Text now final (possibly empty: a character or a stop string in the making).
    pub text: String,
    /// A stop string was reached: the text ends before it, and generation should stop.
    pub stopped: bool,
}

/// Tokens to text, stop strings applied.
#[derive(Debug)]
pub struct TextStream {
    tok: Arc<Tokenizer>,
    utf8: Utf8Stream,
    stops: Vec<String>,
    /// Decoded text not yet returned: a suffix that may begin a stop string.
    held: String,
    stopped: bool,
}

impl TextStream {
    /// A stream over `tok`'s pieces (special tokens not rendered), ending at the first
    /// of `stops` (empty strings are ignored).
    pub fn new(tok: Arc<Tokenizer>, stops: &[String]) -> TextStream {
        let stops = stops.iter().filter(|s| !s.is_empty()).cloned().collect();
        TextStream { tok, utf8: Utf8Stream::default(), stops, held: String::new(), stopped: false }
    }

    /// Adds token `id`. After a stop, returns empty pieces.
    ///
    /// # Errors
    /// [`TokenizerError::TokenOutOfRange`].
    pub fn push(&mut self, id: u32) -> Result<Piece, TokenizerError> {
        if self.stopped {
            return Ok(Piece { text: String::new(), stopped: true });
        }
        let piece = self.tok.token_to_piece(id, false)?;
        self.held.push_str(&self.utf8.push(&piece));
        Ok(self.release())
    }

    /// Ends the stream: what was held back (an unfinished character as U+FFFD), unless
    /// a stop string was reached.
    pub fn finish(&mut self) -> String {
        if self.stopped {
            return String::new();
        }
        let rest = self.utf8.finish();
        self.held.push_str(&rest);
        let piece = self.release();
        if piece.stopped {
            return piece.text;
        }
        piece.text + &std::mem::take(&mut self.held)
    }

    /// Whether a stop string was reached.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// The held text up to a stop string, or up to the longest suffix that begins one.
    fn release(&mut self) -> Piece {
        let first_stop = self.stops.iter().filter_map(|s| self.held.find(s.as_str())).min();
        if let Some(at) = first_stop {
            self.stopped = true;
            let mut text = std::mem::take(&mut self.held);
            text.truncate(at);
            return Piece { text, stopped: true };
        }
        let keep = self.stops.iter().map(|s| partial_suffix(&self.held, s)).max().unwrap_or(0);
        let text = self.held[..self.held.len() - keep].to_string();
        self.held.drain(..self.held.len() - keep);
        Piece { text, stopped: false }
    }
}

/// The length of the longest suffix of `text` that is a proper prefix of `stop`, at a
/// character boundary.
fn partial_suffix(text: &str, stop: &str) -> usize {
    let longest = text.len().min(stop.len().saturating_sub(1));
    (1..=longest)
        .rev()
        .find(|&n| {
            text.is_char_boundary(text.len() - n) && stop.as_bytes().starts_with(&text.as_bytes()[text.len() - n..])
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_that_begin_a_stop() {
        assert_eq!(partial_suffix("hello wor", "world"), 3);
        assert_eq!(partial_suffix("hello", "world"), 0);
        assert_eq!(partial_suffix("xab", "abc"), 2);
        assert_eq!(partial_suffix("aa", "aa"), 1, "a proper prefix only: a whole stop is found, not held");
        assert_eq!(partial_suffix("xé", "éa"), 2);
        assert_eq!(partial_suffix("", "a"), 0);
    }
}
