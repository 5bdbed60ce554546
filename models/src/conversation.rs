//! A chat held in the model's KV cache: each turn renders the whole conversation with
//! the chat template, and only the part the cache does not hold yet is evaluated.

use rgml::gguf::{GgufHeader, Value};

use crate::chat::{ChatError, ChatTemplate, Message};
use crate::generate::{Generated, Stop};
use crate::tokenizer::{Tokenizer, TokenizerError};

/// A failure preparing a turn.
#[derive(Debug, thiserror::Error)]
pub enum ConversationError {
    /// The chat template failed.
    #[error(transparent)]
    Template(#[from] ChatError),
    /// Tokenization failed.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
}

/// Where a model's chat template came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TemplateOrigin {
    /// The file's `tokenizer.chat_template`.
    File,
    /// rgml's built-in template for the file's architecture (Gemma 3 files often ship
    /// without one; llama.cpp then falls back to ChatML, whose markers Gemma's vocabulary
    /// does not have).
    Builtin(&'static str),
    /// ChatML, llama.cpp's fallback for files without a template.
    ChatMl,
}

/// The text of a special token (empty when the vocabulary has none).
fn special_text(tok: &Tokenizer, id: Option<u32>) -> String {
    id.and_then(|t| tok.token_to_piece(t, true).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// The chat template of a model file, with its BOS and EOS token texts: the file's own,
/// else a built-in one for its architecture, else ChatML.
///
/// # Errors
/// A template that does not compile ([`ChatError::Syntax`] names its line).
pub fn template_for(h: &GgufHeader, tok: &Tokenizer) -> Result<(ChatTemplate, TemplateOrigin), ChatError> {
    let (bos, eos) = (special_text(tok, tok.special().bos), special_text(tok, tok.special().eos));
    let arch = h.get("general.architecture").and_then(Value::as_str).unwrap_or("");
    let builtin = |name: &'static str| ChatTemplate::builtin(name).map(|s| (s, name));
    let (source, origin) = match (h.get("tokenizer.chat_template").and_then(Value::as_str), arch) {
        (Some(s), _) => (s, TemplateOrigin::File),
        (None, "gemma3") => {
            builtin("gemma3").map_or(("", TemplateOrigin::ChatMl), |(s, n)| (s, TemplateOrigin::Builtin(n)))
        }
        (None, _) => (ChatTemplate::builtin("chatml").unwrap_or_default(), TemplateOrigin::ChatMl),
    };
    Ok((ChatTemplate::new(source, &bos, &eos)?, origin))
}

/// The rendered text as llama.cpp tokenizes it (with add_special and parse_special on): a
/// leading BOS text dropped when the vocabulary adds BOS itself, a trailing EOS text when
/// it adds EOS.
pub fn prompt_text<'a>(rendered: &'a str, tok: &Tokenizer) -> &'a str {
    let (bos, eos) = (special_text(tok, tok.special().bos), special_text(tok, tok.special().eos));
    let mut s = rendered;
    if tok.add_bos() && !bos.is_empty() {
        s = s.strip_prefix(bos.as_str()).unwrap_or(s);
    }
    if tok.add_eos() && !eos.is_empty() {
        s = s.strip_suffix(eos.as_str()).unwrap_or(s);
    }
    s
}

/// What to evaluate for a turn: keep the first `keep` cached positions, then run `tokens`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnPrompt {
    /// Cached positions that stay.
    pub keep: usize,
    /// Tokens to evaluate after them.
    pub tokens: Vec<u32>,
}

/// A conversation and what of it the KV cache holds.
pub struct Conversation<'t> {
    tok: &'t Tokenizer,
    template: ChatTemplate,
    messages: Vec<Message>,
    /// Tokens in the cache, in order.
    cached: Vec<u32>,
    /// The reply's last token: sampled, not yet evaluated.
    pending: Option<u32>,
    /// The text that `cached` and `pending` spell, as the template renders it.
    text: String,
}

impl<'t> Conversation<'t> {
    /// A new conversation, optionally opened by a system message.
    pub fn new(tok: &'t Tokenizer, template: ChatTemplate, system: Option<&str>) -> Conversation<'t> {
        let messages = system.map(|s| vec![Message::new("system", s)]).unwrap_or_default();
        Conversation { tok, template, messages, cached: Vec::new(), pending: None, text: String::new() }
    }

    /// The messages so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Adds a user message and returns what the model must evaluate next: when the new
    /// rendering extends the text the cache holds, only the extension (the reply's
    /// unevaluated last token first); otherwise the whole conversation again from the
    /// first token where it differs from the cache.
    ///
    /// # Errors
    /// The template's or the tokenizer's.
    pub fn user_turn(&mut self, content: &str) -> Result<TurnPrompt, ConversationError> {
        self.messages.push(Message::new("user", content));
        let rendered = self.template.apply(&self.messages, true);
        let rendered = match rendered {
            Ok(r) => r,
            Err(e) => {
                self.messages.pop();
                return Err(e.into());
            }
        };
        let target = prompt_text(&rendered, self.tok).to_string();
        let prompt = match target.strip_prefix(self.text.as_str()).filter(|_| !self.cached.is_empty()) {
            Some(delta) => {
                let mut tokens: Vec<u32> = self.pending.into_iter().collect();
                tokens.extend(self.tok.tokenize(delta, false, true)?);
                TurnPrompt { keep: self.cached.len(), tokens }
            }
            None => {
                let full = self.tok.tokenize(&target, true, true)?;
                let mut keep = self.cached.iter().zip(&full).take_while(|(a, b)| a == b).count();
                // at least one token to evaluate, for the logits of the reply
                keep = keep.min(full.len().saturating_sub(1));
                TurnPrompt { keep, tokens: full[keep..].to_vec() }
            }
        };
        self.cached.truncate(prompt.keep);
        self.text = target;
        Ok(prompt)
    }

    /// Records the model's reply to the turn `prompt` was for; returns the reply's text
    /// (what becomes the assistant message).
    pub fn assistant_reply(&mut self, prompt: &TurnPrompt, reply: &Generated) -> String {
        let mut tokens = reply.tokens.clone();
        let end = matches!(reply.stop, Stop::EndOfGeneration(_)).then(|| tokens.pop()).flatten();
        let content = String::from_utf8_lossy(&self.pieces(&tokens, false)).into_owned();
        self.cached.extend(&prompt.tokens);
        let mut all = tokens.clone();
        all.extend(end);
        self.pending = all.pop();
        self.cached.extend(&all);
        self.text.push_str(&String::from_utf8_lossy(&self.pieces(&tokens, false)));
        if let Some(e) = end {
            self.text.push_str(&String::from_utf8_lossy(&self.pieces(&[e], true)));
        }
        self.messages.push(Message::new("assistant", content.clone()));
        content
    }

    fn pieces(&self, ids: &[u32], special: bool) -> Vec<u8> {
        ids.iter().flat_map(|&t| self.tok.token_to_piece(t, special).unwrap_or_default()).collect()
    }

    /// The tokens the cache holds now.
    pub fn cached(&self) -> &[u32] {
        &self.cached
    }
}
