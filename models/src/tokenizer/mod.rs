//! Text to token ids and back, from a GGUF file's `tokenizer.ggml.*` metadata, as
//! llama.cpp tokenizes: SentencePiece BPE (`llama`), byte-pair merges with the
//! pre-tokenizers of `tokenizer.ggml.pre` (`gpt2`, `gemma4`), WordPiece (`bert`) and
//! Unigram (`t5`).
//!
//! ```no_run
//! use rgml_models::tokenizer::Tokenizer;
//! let file = rgml::gguf::GgufFile::open("model.gguf")?;
//! let tok = Tokenizer::from_gguf(&file)?;
//! let ids = tok.tokenize("Hello world", true, false)?;
//! assert_eq!(tok.detokenize(&ids, false)?, "Hello world");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Where llama.cpp's behaviour depends on a hash map's iteration order (which of several
//! end-of-turn candidates it picks) rgml takes the lowest id; where llama.cpp stops with
//! an exception (a byte with no token) rgml uses the unknown token or returns an error.

mod bpe;
mod decode;
mod error;
mod merge;
mod pretok;
mod special;
mod spm;
mod ugm;
mod unicode;
#[rustfmt::skip] // generated, and kept compact
mod unicode_tables;
mod vocab;
mod wpm;

use std::collections::BTreeSet;

use rgml::gguf::{GgufHeader, Value};

pub use decode::Utf8Stream;
pub use error::TokenizerError;
pub use vocab::{SpecialTokens, TokenAttr, VocabKind};

use bpe::Bpe;
use special::Fragment;
use ugm::Ugm;
use vocab::{Vocab, VocabFlags};

/// The algorithm-specific part of a tokenizer.
enum Model {
    Spm,
    Bpe(Bpe),
    Wpm,
    Ugm(Ugm),
}

/// A tokenizer read from GGUF metadata.
pub struct Tokenizer {
    vocab: Vocab,
    model: Model,
    model_name: String,
    pre_name: Option<String>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("model", &self.model_name)
            .field("pre", &self.pre_name)
            .field("n_vocab", &self.n_vocab())
            .finish()
    }
}

impl Tokenizer {
    /// Reads the tokenizer of a GGUF file (its header: a vocabulary-only file will do).
    ///
    /// # Errors
    /// [`TokenizerError::Missing`] without `tokenizer.ggml.model`; an unknown model or
    /// pre-tokenizer type names itself; malformed keys are [`TokenizerError::Metadata`].
    pub fn from_gguf(h: &GgufHeader) -> Result<Tokenizer, TokenizerError> {
        let model_name = match h.get("tokenizer.ggml.model") {
            None => return Err(TokenizerError::Missing),
            Some(Value::String(s)) => s.clone(),
            Some(v) => {
                return Err(vocab::meta(
                    "tokenizer.ggml.model",
                    format!("expected string, found {}", v.type_description()),
                ))
            }
        };
        let pre_key = h.get("tokenizer.ggml.pre").and_then(Value::as_str);
        let (kind, mut flags, mut special) = defaults(&model_name)?;
        let mut warnings = Vec::new();
        let (pre_name, cfg) = match model_name.as_str() {
            "gpt2" | "gemma4" => {
                let name = if model_name == "gemma4" { "gemma4" } else { pre_key.unwrap_or("default") };
                if model_name == "gpt2" && pre_key.is_none() {
                    warnings
                        .push("no tokenizer.ggml.pre: the 'default' pre-tokenizer (quality may suffer)".to_string());
                }
                let cfg = bpe::pre_config(name)
                    .ok_or_else(|| TokenizerError::UnknownPre { name: name.to_string(), supported: bpe::PRE_NAMES })?;
                (cfg.flags)(&mut flags);
                if cfg.no_default_bos {
                    special.bos = None;
                }
                (Some(name.to_string()), Some(cfg))
            }
            _ => (None, None),
        };
        vocab::read_bool(h, "tokenizer.ggml.add_space_prefix", &mut flags.add_space_prefix)?;
        vocab::read_bool(h, "tokenizer.ggml.remove_extra_whitespaces", &mut flags.remove_extra_whitespaces)?;
        let mut vocab = Vocab::load(h, kind, flags, special)?;
        vocab.warnings.splice(0..0, warnings);
        let gemma4 = pre_name.as_deref() == Some("gemma4") || pre_name.as_deref() == Some("granite-embed-multi-311m");
        if gemma4 && !vocab.flags.add_bos {
            // llama.cpp's workaround: Gemma 4 files say add_bos false but need it
            vocab.flags.add_bos = true;
        }
        let model = match (kind, cfg) {
            (VocabKind::Bpe, Some(cfg)) => Model::Bpe(Bpe::load(h, &cfg, gemma4)?),
            (VocabKind::Spm, _) => Model::Spm,
            (VocabKind::Wpm, _) => Model::Wpm,
            (VocabKind::Ugm, _) => Model::Ugm(Ugm::load(h, &vocab)?),
            (VocabKind::Bpe, None) => return Err(TokenizerError::UnknownModel(model_name)),
        };
        Ok(Tokenizer { vocab, model, model_name, pre_name })
    }

    /// Opens `path` and reads its tokenizer.
    ///
    /// # Errors
    /// The file's error as [`TokenizerError::Metadata`], or [`Tokenizer::from_gguf`]'s.
    pub fn from_file(path: &std::path::Path) -> Result<Tokenizer, TokenizerError> {
        let f = rgml::gguf::GgufFile::open(path)
            .map_err(|e| TokenizerError::Metadata { key: path.display().to_string(), msg: e.to_string() })?;
        Tokenizer::from_gguf(&f)
    }

    /// The token ids of `text`. With `add_special`, the BOS/EOS (or CLS/SEP) tokens the
    /// vocabulary adds; with `parse_special`, control tokens spelled in the text become
    /// their ids (user-defined tokens always do).
    ///
    /// # Errors
    /// When the vocabulary lacks a token the text needs (see [`TokenizerError`]).
    pub fn tokenize(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<u32>, TokenizerError> {
        let v = &self.vocab;
        let frags = special::partition(v, text, parse_special);
        let mut out = Vec::new();
        let need = |t: Option<u32>, what| t.ok_or(TokenizerError::MissingSpecial(what));
        let wpm = matches!(self.model, Model::Wpm);
        if add_special && (v.flags.add_bos || wpm) {
            out.push(need(v.special.bos, "BOS")?);
        }
        // SentencePiece puts a space before text that starts the input or follows a token
        let mut after_special = true;
        for f in frags {
            let (a, b) = match f {
                Fragment::Token(id) => {
                    out.push(id);
                    after_special = true;
                    continue;
                }
                Fragment::Text(a, b) => (a, b),
            };
            let piece = &text[a..b];
            match &self.model {
                Model::Spm => {
                    let prefix = if v.flags.add_space_prefix && after_special { " " } else { "" };
                    spm::tokenize(v, &format!("{prefix}{piece}").replace(' ', "\u{2581}"), &mut out)?;
                }
                Model::Bpe(bpe) if v.flags.escape_whitespaces => {
                    bpe.tokenize(v, &piece.replace(' ', "\u{2581}"), &mut out)?
                }
                Model::Bpe(bpe) => bpe.tokenize(v, piece, &mut out)?,
                Model::Wpm => wpm::tokenize(v, piece, &mut out)?,
                Model::Ugm(ugm) => ugm.tokenize(v, piece, &mut out)?,
            }
            after_special = false;
        }
        if add_special && wpm {
            out.push(need(v.special.sep, "SEP")?);
        } else if add_special && v.flags.add_eos {
            out.push(need(v.special.eos, "EOS")?);
        }
        Ok(out)
    }

    /// The bytes token `id` stands for; control and unknown tokens only with `special`.
    ///
    /// # Errors
    /// [`TokenizerError::TokenOutOfRange`].
    pub fn token_to_piece(&self, id: u32, special: bool) -> Result<Vec<u8>, TokenizerError> {
        self.check(id)?;
        Ok(decode::piece(&self.vocab, id, special, 0))
    }

    /// The text of `ids` as llama.cpp's `llama_detokenize` (with `remove_special` off)
    /// gives it, as bytes (a byte-level or byte-fallback sequence may not be UTF-8).
    ///
    /// # Errors
    /// [`TokenizerError::TokenOutOfRange`] naming the first id outside the vocabulary.
    pub fn detokenize_bytes(&self, ids: &[u32], special: bool) -> Result<Vec<u8>, TokenizerError> {
        ids.iter().try_for_each(|&id| self.check(id))?;
        Ok(decode::detokenize(&self.vocab, ids, false, special))
    }

    /// [`Tokenizer::detokenize_bytes`] as a string, invalid UTF-8 as U+FFFD.
    ///
    /// # Errors
    /// [`TokenizerError::TokenOutOfRange`].
    pub fn detokenize(&self, ids: &[u32], special: bool) -> Result<String, TokenizerError> {
        Ok(String::from_utf8_lossy(&self.detokenize_bytes(ids, special)?).into_owned())
    }

    /// A streaming decoder: feed it generated ids, get the text that is complete.
    pub fn decoder(&self, special: bool) -> TokenDecoder<'_> {
        TokenDecoder { tok: self, special, utf8: Utf8Stream::default() }
    }

    fn check(&self, id: u32) -> Result<(), TokenizerError> {
        if (id as usize) < self.n_vocab() {
            Ok(())
        } else {
            Err(TokenizerError::TokenOutOfRange { id, n_vocab: self.n_vocab() })
        }
    }

    /// Tokens in the vocabulary.
    pub fn n_vocab(&self) -> usize {
        self.vocab.texts.len()
    }
    /// The tokenizer model (`tokenizer.ggml.model`).
    pub fn model_name(&self) -> &str {
        &self.model_name
    }
    /// The pre-tokenizer type of a BPE vocabulary.
    pub fn pre_name(&self) -> Option<&str> {
        self.pre_name.as_deref()
    }
    /// The algorithm.
    pub fn kind(&self) -> VocabKind {
        self.vocab.kind
    }
    /// The stored text of token `id` (`▁`, byte-level characters and all).
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.vocab.texts.get(id as usize).map(String::as_str)
    }
    /// The id of a token's stored text.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab.id(text)
    }
    /// What token `id` is.
    pub fn token_attr(&self, id: u32) -> Option<TokenAttr> {
        self.vocab.attrs.get(id as usize).copied()
    }
    /// The vocabulary's special tokens.
    pub fn special(&self) -> &SpecialTokens {
        &self.vocab.special
    }
    /// Whether generation stops at `id` (eos, eot and the end-of-turn tokens llama.cpp knows).
    pub fn is_eog(&self, id: u32) -> bool {
        self.vocab.eog.contains(&id)
    }
    /// The end-of-generation tokens.
    pub fn eog_ids(&self) -> &BTreeSet<u32> {
        &self.vocab.eog
    }
    /// Whether `tokenize` with `add_special` puts BOS first.
    pub fn add_bos(&self) -> bool {
        self.vocab.flags.add_bos || matches!(self.model, Model::Wpm)
    }
    /// Whether `tokenize` with `add_special` puts EOS last.
    pub fn add_eos(&self) -> bool {
        self.vocab.flags.add_eos
    }
    /// What loading adjusted or ignored in the metadata (llama.cpp logs these as warnings).
    pub fn warnings(&self) -> &[String] {
        &self.vocab.warnings
    }
}

/// Turns generated ids into text as they come: each token's piece (as llama.cpp prints
/// them during generation), whole UTF-8 characters only.
#[derive(Debug)]
pub struct TokenDecoder<'a> {
    tok: &'a Tokenizer,
    special: bool,
    utf8: Utf8Stream,
}

impl TokenDecoder<'_> {
    /// Adds `id`; returns the text now complete (often empty mid-character).
    ///
    /// # Errors
    /// [`TokenizerError::TokenOutOfRange`].
    pub fn push(&mut self, id: u32) -> Result<String, TokenizerError> {
        let piece = self.tok.token_to_piece(id, self.special)?;
        Ok(self.utf8.push(&piece))
    }
    /// Ends the stream; an incomplete character comes out as U+FFFD.
    pub fn finish(&mut self) -> String {
        self.utf8.finish()
    }
}

/// The algorithm, flags and special ids a tokenizer model starts from.
fn defaults(model: &str) -> Result<(VocabKind, VocabFlags, SpecialTokens), TokenizerError> {
    let base = VocabFlags { escape_whitespaces: true, lowercase: true, strip_accents: true, ..VocabFlags::default() };
    let ids = |bos, eos, unk| SpecialTokens { bos, eos, unk, ..SpecialTokens::default() };
    Ok(match model {
        "llama" => (
            VocabKind::Spm,
            VocabFlags { add_space_prefix: true, add_bos: true, ..base },
            ids(Some(1), Some(2), Some(0)),
        ),
        "bert" => (
            VocabKind::Wpm,
            VocabFlags { add_sep: true, add_bos: true, clean_spaces: true, ..base },
            SpecialTokens { sep: Some(102), pad: Some(0), mask: Some(103), ..ids(Some(101), None, Some(100)) },
        ),
        "gpt2" => (
            VocabKind::Bpe,
            VocabFlags { escape_whitespaces: false, clean_spaces: true, ..base },
            ids(Some(11), Some(11), None),
        ),
        "gemma4" => (
            VocabKind::Bpe,
            VocabFlags { escape_whitespaces: false, clean_spaces: true, ..base },
            SpecialTokens::default(),
        ),
        "t5" => (
            VocabKind::Ugm,
            VocabFlags { add_eos: true, ..base },
            SpecialTokens { pad: Some(0), ..ids(None, Some(1), Some(2)) },
        ),
        other => return Err(TokenizerError::UnknownModel(other.to_string())),
    })
}
