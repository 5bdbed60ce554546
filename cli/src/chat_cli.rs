//! `rgml chat`: user turns from standard input, line by line, each reply streamed to
//! standard output, the conversation kept in the KV cache and within it.

use std::io::{BufRead, Write};
use std::ops::ControlFlow;
use std::path::Path;

use rgml::gguf::GgufFile;
use rgml::Backend;

use crate::out;
use crate::run::require_tokenizer;
use rgml_models::conversation::{ContextBudget, Conversation, ConversationError};
use rgml_models::generate::{GenerateOptions, Stop};
use rgml_models::model::{LoadOptions, Model};
use rgml_models::sampler::{Sampler, SamplerParams};

/// The longest input line taken as a turn: 1 MiB, about a quarter of a million tokens,
/// more than any context rgml runs; a longer line is an error for that line.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// What `rgml chat` does.
#[derive(Clone, Debug)]
pub struct ChatOptions {
    /// A system message opening the conversation.
    pub system: Option<String>,
    /// Tokens per reply at most (`None`: until an end-of-generation token).
    pub n_predict: Option<usize>,
    /// The sampler, its seed resolved.
    pub sampling: SamplerParams,
    /// Do not stop replies at end-of-generation tokens.
    pub ignore_eos: bool,
    /// The KV cache's size and type.
    pub load: LoadOptions,
}

/// One line of input.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A line of text, without its line end (`\n` or `\r\n`).
    Text(String),
    /// A line that is not UTF-8: the offset of its first bad byte.
    NotUtf8(usize),
    /// A line longer than the limit (its bytes were read and dropped).
    TooLong,
}

/// The next line of `input`, holding at most `limit` bytes of it; `None` at the end.
///
/// # Errors
/// Reading failed.
pub fn read_line(input: &mut impl BufRead, limit: usize) -> std::io::Result<Option<Line>> {
    let mut line = Vec::new();
    let (mut any, mut too_long) = (false, false);
    loop {
        let chunk = input.fill_buf()?;
        if chunk.is_empty() {
            break;
        }
        any = true;
        let (take, end) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if !too_long && line.len() + take <= limit + 2 {
            line.extend_from_slice(&chunk[..take]);
        } else {
            too_long = true;
            line.clear();
        }
        input.consume(take);
        if end {
            break;
        }
    }
    if !any {
        return Ok(None);
    }
    let body = line.strip_suffix(b"\n").unwrap_or(&line);
    let body = body.strip_suffix(b"\r").unwrap_or(body);
    if too_long || body.len() > limit {
        return Ok(Some(Line::TooLong));
    }
    Ok(Some(match String::from_utf8(body.to_vec()) {
        Ok(text) => Line::Text(text),
        Err(e) => Line::NotUtf8(e.utf8_error().valid_up_to()),
    }))
}

/// `rgml chat`: user turns from `input` line by line (empty lines skipped), each reply
/// streamed to standard output; the conversation stays in the KV cache, so each turn
/// evaluates only its new tokens. A turn that does not fit drops the oldest turns (said on
/// standard error); a line that is not UTF-8, longer than [`MAX_LINE_BYTES`], or too long
/// for the whole cache is an error for that line, and the chat reads the next. Ends at the
/// end of `input`.
pub fn chat<B: Backend>(model: &Path, opts: &ChatOptions, backend: B, mut input: impl BufRead) -> Result<(), String> {
    let file = GgufFile::open(model).map_err(|e| format!("{}: {e}", model.display()))?;
    let tok = require_tokenizer(&file, model)?;
    let template = crate::run::chat_template(&file, &tok)?;
    let mut m = Model::load_with(model, opts.load, backend).map_err(|e| e.to_string())?;
    let mut sampler = Sampler::new(opts.sampling, m.hp.n_vocab).map_err(|e| e.to_string())?;
    eprintln!("seed: {}", opts.sampling.seed);
    let n_ctx = m.n_ctx();
    // a reply gets room for -n tokens, at most a quarter of the cache
    let budget = ContextBudget { n_ctx, reply: opts.n_predict.unwrap_or(usize::MAX).min(n_ctx / 4) };
    let mut conv = Conversation::new(&tok, template, opts.system.as_deref()).with_budget(budget);
    let gen = GenerateOptions { max_tokens: opts.n_predict.unwrap_or(usize::MAX), all_logits: false };
    let mut n_line = 0;
    while let Some(line) = read_line(&mut input, MAX_LINE_BYTES).map_err(|e| format!("reading standard input: {e}"))? {
        n_line += 1;
        let line = match line {
            Line::Text(t) => t,
            Line::NotUtf8(at) => {
                eprintln!("error: line {n_line} is not UTF-8 text (invalid byte at offset {at}): skipped");
                continue;
            }
            Line::TooLong => {
                eprintln!("error: line {n_line} is longer than {MAX_LINE_BYTES} bytes: skipped");
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let turn = match conv.user_turn(&line) {
            Ok(turn) => turn,
            Err(e @ (ConversationError::Template(_) | ConversationError::TurnTooLong { .. })) => {
                eprintln!("error: line {n_line}: {e}: skipped");
                continue;
            }
            Err(e) => return Err(e.to_string()),
        };
        if turn.dropped > 0 {
            eprintln!(
                "[the conversation outgrew the KV cache ({n_ctx} positions): dropped its {} oldest messages, {} kept]",
                turn.dropped,
                conv.messages().len()
            );
        }
        m.truncate_cache(turn.keep).map_err(|e| e.to_string())?;
        let mut dec = tok.decoder(false);
        let mut stdout = std::io::stdout();
        let g = m
            .generate(
                &turn.tokens,
                &mut sampler,
                gen,
                |t| !opts.ignore_eos && tok.is_eog(t),
                |t| {
                    let piece = dec.push(t).unwrap_or_default();
                    match stdout.write_all(piece.as_bytes()).and_then(|()| stdout.flush()) {
                        Ok(()) => ControlFlow::Continue(()),
                        Err(_) => ControlFlow::Break(()),
                    }
                },
            )
            .map_err(|e| e.to_string())?;
        out!("{}\n", dec.finish());
        eprintln!(
            "[{} new prompt tokens, {} generated in {:.2} s, {} cached]",
            turn.tokens.len(),
            g.tokens.len(),
            (g.prompt_time + g.gen_time).as_secs_f64(),
            m.n_past()
        );
        conv.assistant_reply(&turn, &g);
        if g.stop == Stop::ContextFull {
            eprintln!(
                "[the KV cache is full ({n_ctx} positions): the reply was cut; the next turn drops the oldest ones]"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], limit: usize) -> Vec<Line> {
        let mut r = std::io::BufReader::with_capacity(4, input);
        std::iter::from_fn(|| read_line(&mut r, limit).unwrap()).collect()
    }

    #[test]
    fn lines_are_read_whole_bounded_and_checked() {
        use Line::*;
        let got = lines(b"hi\r\n\xffbad\nabcdefghijk\nok\n\nlast", 8);
        let want =
            [Text("hi".into()), NotUtf8(0), TooLong, Text("ok".into()), Text(String::new()), Text("last".into())];
        assert_eq!(got, want);
        assert_eq!(lines(b"12345678\r\n123456789\n", 8), [Text("12345678".into()), TooLong]);
        assert!(lines(b"", 8).is_empty());
    }
}
