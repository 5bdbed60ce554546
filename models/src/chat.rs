//! Chat templates: a model's `tokenizer.chat_template` (Jinja2) rendered over a
//! conversation, with output equal to Hugging Face transformers' `apply_chat_template`
//! (Python jinja2) and llama.cpp's Jinja path.
//!
//! The engine is minijinja, set up as transformers sets up jinja2: `trim_blocks` and
//! `lstrip_blocks` on, the trailing newline dropped, `{% break %}`/`{% continue %}`, the
//! `raise_exception(msg)` and `strftime_now(fmt)` globals, transformers' `tojson` filter,
//! Python's `str`/`list`/`dict` methods (minijinja-contrib's pycompat), and jinja2's default
//! undefined (an undefined variable prints as nothing, `is defined` tests it, an attribute of
//! it is an error). Where minijinja's own behaviour differs from Python jinja2's, the
//! `python` module puts Python's back: how `{{ value }}` and `|string` print lists, dicts,
//! tuples and floats, `tojson` as `json.dumps`, Python's whitespace in `strip()`/`trim`/
//! `split()`/`splitlines()`, `str.title()`, and jinja2's `sequence` test. transformers'
//! `{% generation %}` tag renders its body, as there.
//!
//! What still differs from jinja2 (none of it in the templates the tests cover): printf-style
//! `'%s' % x`; the string-literal escapes `\U`, `\a`, `\v`, `\N{..}` (kept as written) and
//! `\/` (read as `/`); an unknown filter or test fails at render time, not compile time;
//! `map`/`select`/`reject` give lists, not generators; a namespace prints as its dict; an
//! operator on an undefined value is a [`ChatError::Render`], where jinja2 raises UndefinedError.
//!
//! ```
//! use rgml_models::chat::{ChatTemplate, Message};
//!
//! let source = ChatTemplate::builtin("chatml").unwrap();
//! let template = ChatTemplate::new(source, "<|im_start|>", "<|im_end|>").unwrap();
//! let text = template.apply(&[Message::new("user", "Hi")], true).unwrap();
//! assert_eq!(text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
//! ```

mod builtin;
mod python;

use std::fmt;

use minijinja::{AutoEscape, Environment, ErrorKind, UndefinedBehavior, Value};

/// The name the template is stored under in its environment (jinja2 calls it `<template>`).
const TEMPLATE_NAME: &str = "chat_template";

/// One message of a conversation, as the template sees it: `message['role']` and
/// `message['content']` (in that key order, as a Python dict built the same way).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// `system`, `user`, `assistant`, or whatever role the template knows.
    pub role: String,
    /// The message's text, passed unchanged (templates strip it themselves if they want).
    pub content: String,
}

impl Message {
    /// A message from a role and its text.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Message {
        Message { role: role.into(), content: content.into() }
    }
}

/// Why a chat template failed to compile or render. Every variant names the template line
/// (1-based) minijinja places the failure on; `0` where it gives none.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChatError {
    /// The template does not parse (jinja2's `TemplateSyntaxError`).
    #[error("chat template syntax error on line {line}: {msg}")]
    Syntax {
        /// The line the parser stopped on.
        line: usize,
        /// The parser's description.
        msg: String,
    },
    /// The template called `raise_exception(msg)`, as templates do to refuse a
    /// conversation (for instance roles that do not alternate).
    #[error("chat template raised an exception on line {line}: {msg}")]
    Raised {
        /// The line of the `raise_exception` call.
        line: usize,
        /// The template's own message, exactly as it passed it.
        msg: String,
    },
    /// Something undefined was used as if it existed: an attribute or item of an undefined
    /// value, an unknown function, filter, test or method (jinja2's `UndefinedError`).
    #[error("chat template used an undefined value on line {line}: {msg}")]
    Undefined {
        /// The line of the failing expression.
        line: usize,
        /// minijinja's description.
        msg: String,
    },
    /// Any other failure while rendering: an operator or filter given the wrong types, a
    /// wrong number of arguments, a bad `strftime_now` format (Python's `TypeError` and the like).
    #[error("chat template failed on line {line}: {msg}")]
    Render {
        /// The line of the failing expression.
        line: usize,
        /// minijinja's description.
        msg: String,
    },
    /// The render went past one of its [`RenderLimits`]: its work budget, or the size of
    /// the text it makes. A template is code from the model file; these bound what it can
    /// cost whoever renders it.
    #[error("chat template stopped on line {line}: {msg}")]
    Limit {
        /// The line the render had reached (0 for the output's size, found as it is written).
        line: usize,
        /// Which limit, and its value.
        msg: String,
    },
}

impl ChatError {
    /// The template line the error is on (1-based; 0 if minijinja gave none).
    pub fn line(&self) -> usize {
        match self {
            ChatError::Syntax { line, .. }
            | ChatError::Raised { line, .. }
            | ChatError::Undefined { line, .. }
            | ChatError::Render { line, .. }
            | ChatError::Limit { line, .. } => *line,
        }
    }

    /// The error's message without the line.
    pub fn msg(&self) -> &str {
        match self {
            ChatError::Syntax { msg, .. }
            | ChatError::Raised { msg, .. }
            | ChatError::Undefined { msg, .. }
            | ChatError::Render { msg, .. }
            | ChatError::Limit { msg, .. } => msg,
        }
    }
}

/// The marker `raise_exception` attaches to its error, to tell it from the engine's own.
#[derive(Debug)]
struct Raised(String);

impl fmt::Display for Raised {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Raised {}

/// A render error as a ChatError: `raise_exception`'s own, a limit of `limits`, an undefined
/// value, or the rest.
fn render_error(err: minijinja::Error, limits: &RenderLimits) -> ChatError {
    let line = err.line().unwrap_or(0);
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&err);
    while let Some(e) = source {
        if let Some(raised) = e.downcast_ref::<Raised>() {
            return ChatError::Raised { line, msg: raised.0.clone() };
        }
        if let Some(python::TooLong(n)) = e.downcast_ref::<python::TooLong>() {
            return ChatError::Limit { line, msg: format!("a value's text is longer than the limit of {n} bytes") };
        }
        source = e.source();
    }
    if err.kind() == ErrorKind::OutOfFuel {
        let msg = format!(
            "the render used up its work budget of {} fuel (RenderLimits::fuel: about one per instruction and per 64 bytes made)",
            limits.fuel
        );
        return ChatError::Limit { line, msg };
    }
    let msg = error_msg(&err);
    match err.kind() {
        ErrorKind::UndefinedError
        | ErrorKind::UnknownFunction
        | ErrorKind::UnknownFilter
        | ErrorKind::UnknownTest
        | ErrorKind::UnknownMethod => ChatError::Undefined { line, msg },
        _ => ChatError::Render { line, msg },
    }
}

/// A compile error (the parser's, or a bad escape in a string literal) as a ChatError.
fn syntax_error(err: minijinja::Error) -> ChatError {
    ChatError::Syntax { line: err.line().unwrap_or(0), msg: error_msg(&err) }
}

/// minijinja's description of `err`: its kind, then its detail.
fn error_msg(err: &minijinja::Error) -> String {
    match err.detail() {
        Some(detail) => format!("{}: {detail}", err.kind()),
        None => err.kind().to_string(),
    }
}

/// Bounds on one render of a chat template: what a template from a model file may cost.
///
/// The defaults are far above what any real conversation needs (about 0.1 fuel per byte of
/// conversation: a render of 200 messages, 470 KB, takes 25–50 thousand) and
/// far below what hurts a machine: a render stops within a fraction of a second, having
/// allocated at most about `fuel × 64` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RenderLimits {
    /// minijinja's fuel: about one unit per instruction run and per 64 bytes of data made
    /// (strings, lists, captured output); the render stops when it is used up.
    pub fuel: u64,
    /// The most bytes the rendered text, or any one value's text, may have.
    pub max_output_bytes: usize,
}

impl RenderLimits {
    /// 1 million fuel (at most about 64 MB made, well under a second) and 4 MiB of text.
    pub const DEFAULT: RenderLimits = RenderLimits { fuel: 1_000_000, max_output_bytes: 4 << 20 };
}

impl Default for RenderLimits {
    fn default() -> RenderLimits {
        RenderLimits::DEFAULT
    }
}

/// The rendered text, refusing to grow past its limit.
struct BoundedText {
    bytes: Vec<u8>,
    limit: usize,
    overflowed: bool,
}

impl std::io::Write for BoundedText {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + buf.len() > self.limit {
            self.overflowed = true;
            return Err(std::io::Error::other("the rendered text is too long"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A compiled chat template with the model's BOS and EOS token texts.
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
    bos_token: String,
    eos_token: String,
    limits: RenderLimits,
}

impl fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("source", &self.source)
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl ChatTemplate {
    /// Compiles `source` with the default [`RenderLimits`]; a syntax error is an error
    /// naming the template line. `bos_token` and `eos_token` are what the template sees as
    /// `bos_token`/`eos_token`.
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<ChatTemplate, ChatError> {
        ChatTemplate::with_limits(source, bos_token, eos_token, RenderLimits::DEFAULT)
    }

    /// [`ChatTemplate::new`] with other bounds on each render.
    pub fn with_limits(
        source: &str,
        bos_token: &str,
        eos_token: &str,
        limits: RenderLimits,
    ) -> Result<ChatTemplate, ChatError> {
        let mut env = Environment::new();
        configure(&mut env, &limits).map_err(syntax_error)?;
        env.add_template_owned(TEMPLATE_NAME, generation_as_with(source)).map_err(syntax_error)?;
        Ok(ChatTemplate {
            env,
            source: source.to_string(),
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
            limits,
        })
    }

    /// The bounds each render keeps to.
    pub fn limits(&self) -> RenderLimits {
        self.limits
    }

    /// The template's source text, as given to [`ChatTemplate::new`].
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Renders `messages`; with `add_generation_prompt` the template's assistant header.
    /// Errors (a raise_exception in the template, a type error, an undefined function, a
    /// render past its [`RenderLimits`]) name the template line.
    pub fn apply(&self, messages: &[Message], add_generation_prompt: bool) -> Result<String, ChatError> {
        let messages: Vec<Value> = messages
            .iter()
            .map(|m| {
                Value::from_pairs([
                    ("role", Value::from(m.role.as_str())),
                    ("content", Value::from(m.content.as_str())),
                ])
            })
            .collect();
        let ctx = Value::from_pairs([
            ("messages", Value::from(messages)),
            ("add_generation_prompt", Value::from(add_generation_prompt)),
            ("bos_token", Value::from(self.bos_token.as_str())),
            ("eos_token", Value::from(self.eos_token.as_str())),
        ]);
        // Dropping, comparing or printing a value nested n levels deep recurses n levels,
        // inside minijinja too; the fuel bounds n, so the stack is sized from it (memory is
        // only touched as deep as the render goes).
        let stack = usize::try_from(self.limits.fuel).unwrap_or(usize::MAX).saturating_mul(64).clamp(8 << 20, 1 << 30);
        std::thread::scope(|scope| {
            let thread = std::thread::Builder::new()
                .name("rgml-chat-template".into())
                .stack_size(stack)
                .spawn_scoped(scope, || self.render(ctx))
                .map_err(|e| ChatError::Render { line: 0, msg: format!("cannot start the render's thread: {e}") })?;
            thread
                .join()
                .unwrap_or_else(|_| Err(ChatError::Render { line: 0, msg: "the template engine panicked".into() }))
        })
    }

    /// Renders the template over `ctx` on this thread, within the limits.
    fn render(&self, ctx: Value) -> Result<String, ChatError> {
        let limits = &self.limits;
        let template = self.env.get_template(TEMPLATE_NAME).map_err(|e| render_error(e, limits))?;
        let mut text = BoundedText { bytes: Vec::new(), limit: limits.max_output_bytes, overflowed: false };
        match template.render_captured_to(ctx, &mut text) {
            Ok(_) => String::from_utf8(text.bytes)
                .map_err(|_| ChatError::Render { line: 0, msg: "the rendered text is not UTF-8".into() }),
            Err(_) if text.overflowed => Err(ChatError::Limit {
                line: 0,
                msg: format!(
                    "the rendered text is longer than the limit of {} bytes (RenderLimits::max_output_bytes)",
                    limits.max_output_bytes
                ),
            }),
            Err(e) => Err(render_error(e, limits)),
        }
    }

    /// A built-in template for a model architecture whose files often lack
    /// `tokenizer.chat_template`; None if there is none. `"gemma3"` is Gemma 3's official
    /// template (google/gemma-3-*-it's tokenizer_config.json, byte for byte); `"chatml"` is
    /// the ChatML format llama.cpp falls back to (`<|im_start|>{role}\n{content}<|im_end|>\n`
    /// per message, `<|im_start|>assistant\n` as the generation prompt).
    pub fn builtin(name: &str) -> Option<&'static str> {
        match name {
            "gemma3" => Some(builtin::GEMMA3),
            "chatml" => Some(builtin::CHATML),
            _ => None,
        }
    }
}

/// Sets `env` up as transformers sets up jinja2 (`ImmutableSandboxedEnvironment(trim_blocks=True,
/// lstrip_blocks=True, extensions=[AssistantTracker, loopcontrols])` plus its globals and
/// `tojson`), with the Python shims of the `python` module.
fn configure(env: &mut Environment<'static>, limits: &RenderLimits) -> Result<(), minijinja::Error> {
    let mut syntax = minijinja::syntax::SyntaxConfig::builder();
    syntax.trim_blocks(true).lstrip_blocks(true).keep_trailing_newline(false);
    env.set_syntax(syntax.build()?);
    // jinja2's default Undefined: prints as "", iterates as empty, is false, and an
    // attribute or item of it is an error.
    env.set_undefined_behavior(UndefinedBehavior::Lenient);
    // transformers' environment does not autoescape, whatever a template would be named.
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_fuel(Some(limits.fuel));
    // the shims that turn values into text stop at the output's limit: a longer value
    // could never be printed, and its text is made before fuel is charged for it
    let limit = limits.max_output_bytes;
    env.set_formatter(move |out, state, value| python::formatter(out, state, value, limit));
    env.set_unknown_method_callback(move |state, value, method, args| {
        python::unknown_method(state, value, method, args, limit)
    });
    env.add_filter("tojson", move |value: Value, positional, kwargs| python::tojson(&value, positional, kwargs, limit));
    env.add_filter("trim", move |value: Value, chars: Option<Value>| python::trim_filter(&value, chars, limit));
    env.add_filter("string", move |value: Value| python::string_filter(&value, limit));
    env.add_filter("format", move |state: &mut minijinja::State, format: Value, args| {
        python::format_filter(state, &format, args, limit)
    });
    env.add_test("sequence", python::is_sequence);
    env.add_function("raise_exception", move |msg: Value| raise_exception(&msg, limit));
    env.add_function("strftime_now", strftime_now);
    Ok(())
}

/// transformers' `{% generation %}...{% endgeneration %}` (its AssistantTracker extension,
/// which marks the assistant's tokens and renders the body unchanged) as `{% with %}...
/// {% endwith %}`: a block that renders its body, keeps its `set`s to itself as jinja2's
/// call block does, and has the same whitespace handling. Only the tag's name changes, so the
/// line numbers and `-`/`+` modifiers stay; `{% raw %}` blocks are left alone.
fn generation_as_with(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    let mut in_raw = false;
    while let Some(open) = rest.find("{%") {
        let (before, tag) = rest.split_at(open);
        out.push_str(before);
        out.push_str("{%");
        let inner = &tag[2..];
        let inner_start = inner.len() - inner.trim_start_matches(['-', '+']).trim_start().len();
        let word_len = inner[inner_start..].find(|c: char| !c.is_ascii_alphanumeric() && c != '_').unwrap_or(0);
        let word = &inner[inner_start..inner_start + word_len];
        out.push_str(&inner[..inner_start]);
        out.push_str(match word {
            "raw" => {
                in_raw = true;
                word
            }
            "endraw" => {
                in_raw = false;
                word
            }
            "generation" if !in_raw => "with",
            "endgeneration" if !in_raw => "endwith",
            _ => word,
        });
        rest = &inner[inner_start + word_len..];
    }
    out.push_str(rest);
    out
}

/// `raise_exception(msg)`: fails the render with the template's message (at most
/// `limit` bytes of it).
fn raise_exception(msg: &Value, limit: usize) -> Result<Value, minijinja::Error> {
    let msg = python::py_str(msg, limit)?;
    Err(minijinja::Error::new(ErrorKind::InvalidOperation, msg.clone()).with_source(Raised(msg)))
}

/// `strftime_now(fmt)`: the local time formatted as Python's `datetime.now().strftime(fmt)`.
fn strftime_now(fmt: Value) -> Result<String, minijinja::Error> {
    use chrono::format::{Item, StrftimeItems};
    let Some(fmt) = fmt.as_str() else {
        return Err(minijinja::Error::new(
            ErrorKind::InvalidOperation,
            format!("strftime() argument 1 must be str, not {}", fmt.kind()),
        ));
    };
    let items: Vec<Item> = StrftimeItems::new(fmt).collect();
    if items.iter().any(|i| matches!(i, Item::Error)) {
        return Err(minijinja::Error::new(ErrorKind::InvalidOperation, format!("invalid strftime format {fmt:?}")));
    }
    let mut out = String::new();
    fmt::Write::write_fmt(&mut out, format_args!("{}", chrono::Local::now().format_with_items(items.into_iter())))
        .map_err(|_| {
            minijinja::Error::new(ErrorKind::InvalidOperation, format!("cannot format the time as {fmt:?}"))
        })?;
    Ok(out)
}
