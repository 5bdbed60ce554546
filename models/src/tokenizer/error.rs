//! [`TokenizerError`]: what the tokenizer's modules report (a leaf they all import).

/// What can go wrong reading a vocabulary or turning text into tokens and back.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// The file has no `tokenizer.ggml.model`.
    #[error("the model file has no tokenizer (no tokenizer.ggml.model metadata)")]
    Missing,
    /// A `tokenizer.ggml.model` rgml does not implement.
    #[error("unknown tokenizer model '{0}' (tokenizer.ggml.model); supported: llama, gpt2, gemma4, bert, t5")]
    UnknownModel(String),
    /// A `tokenizer.ggml.pre` rgml does not implement.
    #[error("unknown pre-tokenizer type '{name}' (tokenizer.ggml.pre); supported: {supported}")]
    UnknownPre {
        /// The file's pre-tokenizer name.
        name: String,
        /// The names rgml knows.
        supported: &'static str,
    },
    /// A tokenizer key is malformed.
    #[error("metadata {key}: {msg}")]
    Metadata {
        /// The key.
        key: String,
        /// What is wrong with it.
        msg: String,
    },
    /// A split pattern did not compile or failed on the text.
    #[error("pre-tokenizer pattern {pattern:?}: {msg}")]
    Pattern {
        /// The pattern, as llama.cpp spells it.
        pattern: String,
        /// The regex engine's message.
        msg: String,
    },
    /// A token id outside the vocabulary.
    #[error("token id {id} is outside the vocabulary of {n_vocab} tokens")]
    TokenOutOfRange {
        /// The id.
        id: u32,
        /// The vocabulary size.
        n_vocab: usize,
    },
    /// The vocabulary lacks a special token tokenization needs.
    #[error("the vocabulary has no {0} token")]
    MissingSpecial(&'static str),
    /// A byte that has no token and no unknown token to stand for it.
    #[error("byte 0x{0:02X} has no token in the vocabulary, and there is no unknown token")]
    NoByteToken(u8),
}
