//! A chat held in the model's KV cache: each turn renders the whole conversation with
//! the chat template, and only the part the cache does not hold yet is evaluated.

use rgml::gguf::{GgufHeader, Value};

use crate::chat::{ChatError, ChatTemplate, Message};
use crate::generate::{Generated, Stop};
use crate::tokenizer::{Tokenizer, TokenizerError};

/// A failure preparing a turn. The conversation is as it was before the turn.
#[derive(Debug, thiserror::Error)]
pub enum ConversationError {
    /// The chat template failed.
    #[error(transparent)]
    Template(#[from] ChatError),
    /// Tokenization failed.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    /// The turn does not fit in the context even with every earlier turn dropped.
    #[error(
        "the turn needs {need} positions with only the system prompt before it, but the KV cache has {n_ctx}: \
         shorten it or use a larger --n-ctx"
    )]
    TurnTooLong {
        /// Positions the turn needs, the system prompt included.
        need: usize,
        /// The cache's size.
        n_ctx: usize,
    },
}

/// The KV cache a conversation must fit in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextBudget {
    /// The cache's positions.
    pub n_ctx: usize,
    /// Positions a turn leaves free for its reply when it can (by dropping the oldest turns).
    pub reply: usize,
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
    /// Messages dropped from the start of the conversation (after the system prompt) so
    /// that the turn fits the [`ContextBudget`].
    pub dropped: usize,
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
    /// The cache it must fit in, if any.
    budget: Option<ContextBudget>,
}

impl<'t> Conversation<'t> {
    /// A new conversation, optionally opened by a system message, with no bound on its size.
    pub fn new(tok: &'t Tokenizer, template: ChatTemplate, system: Option<&str>) -> Conversation<'t> {
        let messages = system.map(|s| vec![Message::new("system", s)]).unwrap_or_default();
        Conversation { tok, template, messages, cached: Vec::new(), pending: None, text: String::new(), budget: None }
    }

    /// The conversation kept within `budget`: a turn that does not fit drops the oldest
    /// turns (the system prompt stays) until it does, leaving `budget.reply` positions for
    /// the reply where it can.
    pub fn with_budget(mut self, budget: ContextBudget) -> Conversation<'t> {
        self.budget = Some(budget);
        self
    }

    /// The messages so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Adds a user message and returns what the model must evaluate next: when the new
    /// rendering extends the text the cache holds, only the extension (the reply's
    /// unevaluated last token first); otherwise the whole conversation again from the
    /// first token where it differs from the cache. With a [`ContextBudget`], the oldest
    /// turns (a user message and the replies after it) are dropped until the turn fits.
    ///
    /// # Errors
    /// The template's or the tokenizer's, or [`ConversationError::TurnTooLong`]; the
    /// conversation is then unchanged.
    pub fn user_turn(&mut self, content: &str) -> Result<TurnPrompt, ConversationError> {
        let mut messages = self.messages.clone();
        messages.push(Message::new("user", content));
        let first = usize::from(messages[0].role == "system" && messages.len() > 1);
        let mut dropped = 0;
        loop {
            let (mut prompt, target) = self.prompt_for(&messages)?;
            let need = prompt.keep + prompt.tokens.len();
            let can_drop = messages.len() - first > 1;
            if let Some(budget) = self.budget {
                if need.saturating_add(budget.reply) > budget.n_ctx && can_drop {
                    // the oldest exchange: its user message and every reply up to the next one
                    messages.remove(first);
                    dropped += 1;
                    while messages.len() - first > 1 && messages[first].role != "user" {
                        messages.remove(first);
                        dropped += 1;
                    }
                    continue;
                }
                if need > budget.n_ctx {
                    return Err(ConversationError::TurnTooLong { need, n_ctx: budget.n_ctx });
                }
            }
            prompt.dropped = dropped;
            self.messages = messages;
            self.cached.truncate(prompt.keep);
            self.text = target;
            return Ok(prompt);
        }
    }

    /// What the cache must evaluate for `messages` (rendered with the generation prompt),
    /// and the text it then holds.
    fn prompt_for(&self, messages: &[Message]) -> Result<(TurnPrompt, String), ConversationError> {
        let rendered = self.template.apply(messages, true)?;
        let target = prompt_text(&rendered, self.tok).to_string();
        let prompt = match target.strip_prefix(self.text.as_str()).filter(|_| !self.cached.is_empty()) {
            Some(delta) => {
                let mut tokens: Vec<u32> = self.pending.into_iter().collect();
                tokens.extend(self.tok.tokenize(delta, false, true)?);
                TurnPrompt { keep: self.cached.len(), tokens, dropped: 0 }
            }
            None => {
                let full = self.tok.tokenize(&target, true, true)?;
                let mut keep = self.cached.iter().zip(&full).take_while(|(a, b)| a == b).count();
                // at least one token to evaluate, for the logits of the reply
                keep = keep.min(full.len().saturating_sub(1));
                TurnPrompt { keep, tokens: full[keep..].to_vec(), dropped: 0 }
            }
        };
        Ok((prompt, target))
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
