//! One request's answer as the engine's events come: the text (stop strings applied),
//! the tokens counted, the log-probabilities, why it ended; and the JSON of OpenAI's
//! answers and stream chunks for both endpoints, built from it.

use std::sync::Arc;

use serde_json::{json, Value};

use super::request::Endpoint;
use rgml_models::generate::Stop;
use rgml_models::sampler::Logprobs;
use rgml_models::scheduler::Event;
use rgml_models::text_stream::TextStream;
use rgml_models::tokenizer::Tokenizer;

/// Why an answer ended, as OpenAI names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// An end-of-generation token or a stop string.
    Stop,
    /// `max_tokens`, or the context is full.
    Length,
}

impl Finish {
    fn name(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length => "length",
        }
    }
}

/// What an event added to the answer.
#[derive(Debug, PartialEq)]
pub enum Update {
    /// Text now final, and the log-probabilities of the token that brought it.
    Text(String, Option<Value>),
    /// The answer is complete.
    Finished(Finish),
    /// The engine could not run or go on with the request.
    Failed(String),
}

/// Identity of an answer: its id, time and model.
#[derive(Clone, Debug)]
pub struct Meta {
    /// `chatcmpl-…` or `cmpl-…`.
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    /// The model's name.
    pub model: String,
    /// Which endpoint answers.
    pub endpoint: Endpoint,
}

/// An answer being built.
pub struct Answer {
    meta: Meta,
    tok: Arc<Tokenizer>,
    text: TextStream,
    /// Tokens sampled (an end-of-generation token included, as llama-server counts).
    pub completion_tokens: usize,
    /// Prompt tokens.
    pub prompt_tokens: usize,
    finish: Option<Finish>,
}

impl Answer {
    /// An empty answer.
    pub fn new(meta: Meta, tok: Arc<Tokenizer>, stops: &[String], prompt_tokens: usize) -> Answer {
        let text = TextStream::new(Arc::clone(&tok), stops);
        Answer { meta, tok, text, completion_tokens: 0, prompt_tokens, finish: None }
    }

    /// The answer's identity.
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// Takes an engine event; a stop string finishes the answer early.
    pub fn on_event(&mut self, event: Event) -> Vec<Update> {
        if self.finish.is_some() {
            return Vec::new();
        }
        match event {
            Event::Token { token, logprobs, .. } => {
                self.completion_tokens += 1;
                let piece = self.text.push(token).unwrap_or_default();
                let lp = logprobs.map(|lp| self.logprob_json(&lp, &piece.text));
                let mut out = Vec::new();
                if !piece.text.is_empty() || lp.is_some() {
                    out.push(Update::Text(piece.text, lp));
                }
                if piece.stopped {
                    self.finish = Some(Finish::Stop);
                    out.push(Update::Finished(Finish::Stop));
                }
                out
            }
            Event::Done { stop, tokens, .. } => {
                self.completion_tokens = tokens;
                let finish = match stop {
                    Stop::EndOfGeneration(_) => Finish::Stop,
                    _ => Finish::Length,
                };
                self.finish = Some(finish);
                let rest = self.text.finish();
                let mut out = Vec::new();
                if !rest.is_empty() {
                    out.push(Update::Text(rest, None));
                }
                out.push(Update::Finished(finish));
                out
            }
            Event::Refused { why, .. } => {
                self.finish = Some(Finish::Stop);
                vec![Update::Failed(why)]
            }
        }
    }

    /// One token's log-probabilities in the endpoint's shape (the completions
    /// endpoint's arrays are assembled by [`Answer::full`] and the chunks).
    fn logprob_json(&self, lp: &Logprobs, text: &str) -> Value {
        let piece = |t: u32| self.tok.token_to_piece(t, false).unwrap_or_default();
        let entry = |t: u32, logprob: f32| {
            let bytes = piece(t);
            json!({"token": String::from_utf8_lossy(&bytes), "logprob": logprob, "bytes": bytes})
        };
        match self.meta.endpoint {
            Endpoint::Chat => {
                let mut e = entry(lp.chosen.token, lp.chosen.logprob);
                e["top_logprobs"] = lp.top.iter().map(|t| entry(t.token, t.logprob)).collect();
                e
            }
            Endpoint::Completions => {
                let top: serde_json::Map<String, Value> = lp
                    .top
                    .iter()
                    .map(|t| (String::from_utf8_lossy(&piece(t.token)).into_owned(), json!(t.logprob)))
                    .collect();
                let token = String::from_utf8_lossy(&piece(lp.chosen.token)).into_owned();
                json!({"token": token, "logprob": lp.chosen.logprob, "top": top, "text": text})
            }
        }
    }

    /// The usage object.
    pub fn usage(&self) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        })
    }

    fn envelope(&self, object: &str, choices: Value) -> Value {
        json!({
            "id": self.meta.id,
            "object": object,
            "created": self.meta.created,
            "model": self.meta.model,
            "system_fingerprint": concat!("rgml-", env!("CARGO_PKG_VERSION")),
            "choices": choices,
        })
    }

    /// A whole (non-streamed) answer from its pieces.
    pub fn full(&self, text: &str, logprobs: &[Value], finish: Finish) -> Value {
        let mut v = match self.meta.endpoint {
            Endpoint::Chat => {
                let lp = (!logprobs.is_empty()).then(|| json!({"content": logprobs}));
                let choice = json!({"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": lp, "finish_reason": finish.name()});
                self.envelope("chat.completion", json!([choice]))
            }
            Endpoint::Completions => {
                let lp = (!logprobs.is_empty()).then(|| completion_logprobs(logprobs, 0));
                let choice = json!({"index": 0, "text": text, "logprobs": lp, "finish_reason": finish.name()});
                self.envelope("text_completion", json!([choice]))
            }
        };
        v["usage"] = self.usage();
        v
    }

    /// A stream chunk: text (with its token's log-probabilities), or the last one with
    /// the finish reason. `offset`: the text streamed before (completions' text_offset).
    pub fn chunk(&self, text: Option<&str>, logprobs: Option<&Value>, finish: Option<Finish>, offset: usize) -> Value {
        let finish = finish.map(Finish::name);
        match self.meta.endpoint {
            Endpoint::Chat => {
                let delta = match text {
                    Some(t) => json!({"content": t}),
                    None => json!({}),
                };
                let lp = logprobs.map(|l| json!({"content": [l]}));
                self.envelope(
                    "chat.completion.chunk",
                    json!([{"index": 0, "delta": delta, "logprobs": lp, "finish_reason": finish}]),
                )
            }
            Endpoint::Completions => {
                let lp = logprobs.map(|l| completion_logprobs(std::slice::from_ref(l), offset));
                self.envelope(
                    "text_completion",
                    json!([{"index": 0, "text": text.unwrap_or(""), "logprobs": lp, "finish_reason": finish}]),
                )
            }
        }
    }

    /// The chat stream's first chunk: the role.
    pub fn role_chunk(&self) -> Value {
        self.envelope("chat.completion.chunk", json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}]))
    }

    /// The stream's last chunk with `include_usage`: no choices, the usage.
    pub fn usage_chunk(&self) -> Value {
        let object = match self.meta.endpoint {
            Endpoint::Chat => "chat.completion.chunk",
            Endpoint::Completions => "text_completion",
        };
        let mut v = self.envelope(object, json!([]));
        v["usage"] = self.usage();
        v
    }
}

/// The completions endpoint's logprobs object from per-token entries.
fn completion_logprobs(entries: &[Value], mut offset: usize) -> Value {
    let mut tokens = Vec::new();
    let mut token_logprobs = Vec::new();
    let mut top = Vec::new();
    let mut text_offset = Vec::new();
    for e in entries {
        tokens.push(e["token"].clone());
        token_logprobs.push(e["logprob"].clone());
        top.push(e["top"].clone());
        text_offset.push(offset);
        offset += e["text"].as_str().map_or(0, str::len);
    }
    json!({"tokens": tokens, "token_logprobs": token_logprobs, "top_logprobs": top, "text_offset": text_offset})
}
