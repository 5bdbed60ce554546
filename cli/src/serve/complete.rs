//! `POST /v1/chat/completions` and `POST /v1/completions`: a body read within its limits,
//! the prompt rendered and tokenized off the connection threads, the request handed to
//! the engine with a channel for its events, and the answer sent whole or as
//! server-sent events. A client that goes away drops the channel, which cancels its
//! sequence at the engine's next step.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::body::Body;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use super::answer::{Answer, Finish, Meta, Update};
use super::app::App;
use super::error::ApiError;
use super::request::{self, Endpoint, Params, PromptInput};
use rgml_models::conversation::prompt_text;
use rgml_models::engine::{Sink, SubmitError};
use rgml_models::scheduler::{Event, Request};

/// Events into a tokio channel; closed when the connection's end of it is dropped.
struct ChannelSink(UnboundedSender<Event>);

impl Sink for ChannelSink {
    fn send(&mut self, event: Event) -> bool {
        self.0.send(event).is_ok()
    }
    fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

/// Either endpoint.
pub async fn handle(app: Arc<App>, endpoint: Endpoint, headers: HeaderMap, body: Body) -> Response {
    match run(app, endpoint, headers, body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn run(app: Arc<App>, endpoint: Endpoint, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    app.authorize(&headers)?;
    let Some(engine) = app.engine.as_ref() else {
        let why = format!("{} is an embedding model: this server answers /v1/embeddings only", app.model_name);
        return Err(ApiError::not_supported(why));
    };
    let bytes = read_body(&app, &headers, body).await?;
    let params = request::parse(&bytes)?;
    params.check_supported(endpoint)?;
    let (stream, include_usage) = params.streaming();
    let stops = params.stops()?;
    let sampling = params.sampling()?;
    let max_tokens = params.max_tokens()?;
    let logprobs = params.logprobs(endpoint)?;
    let ignore_eos = params.ignore_eos.unwrap_or(false);
    let prompt = tokenize(&app, endpoint, params).await?;
    let n_ctx = app.n_ctx().ok_or_else(|| ApiError::unavailable("the model is loading", 1))?;
    if prompt.len() >= n_ctx {
        let mut e = ApiError::bad_param(
            if endpoint == Endpoint::Chat { "messages" } else { "prompt" },
            format!("the prompt has {} tokens; a sequence holds {n_ctx} positions (--n-ctx), and at least one must be left to generate", prompt.len()),
        );
        e.code = Some("context_length_exceeded");
        return Err(e);
    }
    let end = if ignore_eos { Vec::new() } else { app.tok.eog_ids().iter().copied().collect() };
    let req = Request { max_tokens: max_tokens.unwrap_or(n_ctx), prompt, sampling, end, logprobs };
    let (tx, rx) = unbounded_channel();
    let n_prompt = req.prompt.len();
    engine.submit(req, Box::new(ChannelSink(tx))).map_err(|e| match e {
        SubmitError::QueueFull(n) => {
            ApiError::unavailable(format!("the server is busy: {n} requests are waiting; retry later"), 1)
        }
        SubmitError::Loading => ApiError::unavailable("the model is loading", 1),
        SubmitError::Down(why) => ApiError::internal(why),
    })?;
    let id = app.next_id.fetch_add(1, Ordering::Relaxed);
    let prefix = if endpoint == Endpoint::Chat { "chatcmpl" } else { "cmpl" };
    let meta = Meta {
        id: format!("{prefix}-rgml{}-{id}", app.started),
        created: super::app::unix_now(),
        model: app.model_name.clone(),
        endpoint,
    };
    let answer = Answer::new(meta, Arc::clone(&app.tok), &stops, n_prompt);
    if stream {
        Ok(streamed(answer, rx, include_usage))
    } else {
        whole(answer, rx).await.map(|v| axum::Json(v).into_response())
    }
}

/// The body, bounded in size (413) and in time (408).
pub(super) async fn read_body(app: &App, headers: &HeaderMap, body: Body) -> Result<axum::body::Bytes, ApiError> {
    let limit = app.limits.max_body;
    let declared = headers.get(axum::http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::too_large(limit));
    }
    let secs = app.limits.body_timeout_s;
    match tokio::time::timeout(std::time::Duration::from_secs(secs), axum::body::to_bytes(body, limit)).await {
        Err(_) => Err(ApiError::timeout(secs)),
        Ok(Err(e)) if e.to_string().contains("length limit") => Err(ApiError::too_large(limit)),
        Ok(Err(e)) => Err(ApiError::bad_request(format!("reading the body failed: {e}"))),
        Ok(Ok(b)) => Ok(b),
    }
}

/// The prompt's tokens: chat messages through the model's template, text as a prompt
/// (the model's special tokens added, special-token text parsed, as llama-server), ids
/// as given (checked against the vocabulary).
async fn tokenize(app: &Arc<App>, endpoint: Endpoint, params: Params) -> Result<Vec<u32>, ApiError> {
    let source = match endpoint {
        Endpoint::Chat => Ok(params.messages()?),
        Endpoint::Completions => match params.prompt()? {
            PromptInput::Text(t) => Err(t),
            PromptInput::Tokens(ids) => {
                let n_vocab = app.tok.n_vocab();
                if let Some(bad) = ids.iter().find(|&&t| t as usize >= n_vocab) {
                    let why = format!("prompt: token {bad} is outside the vocabulary of {n_vocab}");
                    return Err(ApiError::bad_param("prompt", why));
                }
                return Ok(ids);
            }
        },
    };
    // rendering and tokenizing take time in proportion to the body: off the connections' threads
    let app = Arc::clone(app);
    let ids = tokio::task::spawn_blocking(move || {
        let text = match source {
            Ok(messages) => app.template.apply(&messages, true).map_err(|e| {
                ApiError::bad_param("messages", format!("the chat template failed on these messages: {e}"))
            })?,
            Err(text) => text,
        };
        let text = if endpoint == Endpoint::Chat { prompt_text(&text, &app.tok) } else { &text };
        app.tok
            .tokenize(text, true, true)
            .map_err(|e| ApiError::bad_request(format!("tokenizing the prompt failed: {e}")))
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))??;
    if ids.is_empty() {
        return Err(ApiError::bad_request("the prompt is empty"));
    }
    Ok(ids)
}

/// Waits for the whole answer.
async fn whole(mut answer: Answer, mut rx: UnboundedReceiver<Event>) -> Result<Value, ApiError> {
    let (mut text, mut logprobs) = (String::new(), Vec::new());
    while let Some(event) = rx.recv().await {
        for u in answer.on_event(event) {
            match u {
                Update::Text(t, lp) => {
                    text.push_str(&t);
                    logprobs.extend(lp);
                }
                Update::Finished(finish) => return Ok(answer.full(&text, &logprobs, finish)),
                Update::Failed(why) => return Err(ApiError::internal(why)),
            }
        }
    }
    Err(ApiError::internal("the engine stopped before the answer was complete"))
}

/// The answer as server-sent events: a role chunk (chat), text chunks, a chunk with the
/// finish reason, the usage chunk if asked, `[DONE]`.
fn streamed(answer: Answer, rx: UnboundedReceiver<Event>, include_usage: bool) -> Response {
    let mut out = VecDeque::new();
    if answer.meta().endpoint == Endpoint::Chat {
        out.push_back(SseEvent::default().data(answer.role_chunk().to_string()));
    }
    let state = Streaming { answer, rx: Some(rx), out, include_usage, offset: 0 };
    let events = futures_util::stream::unfold(state, |mut s| async move {
        loop {
            if let Some(e) = s.out.pop_front() {
                return Some((Ok::<_, Infallible>(e), s));
            }
            let rx = s.rx.as_mut()?;
            match rx.recv().await {
                Some(event) => s.take(event),
                None => {
                    s.rx = None;
                    let why = "the engine stopped before the answer was complete";
                    s.out.push_back(SseEvent::default().data(ApiError::internal(why).body().to_string()));
                }
            }
        }
    });
    Sse::new(events).into_response()
}

/// A stream's state: the answer, the events channel (dropped at the end, which frees
/// the sequence), the SSE events ready to send.
struct Streaming {
    answer: Answer,
    rx: Option<UnboundedReceiver<Event>>,
    out: VecDeque<SseEvent>,
    include_usage: bool,
    offset: usize,
}

impl Streaming {
    fn take(&mut self, event: Event) {
        for u in self.answer.on_event(event) {
            let data = match u {
                Update::Text(t, lp) => {
                    let chunk = self.answer.chunk(Some(&t), lp.as_ref(), None, self.offset);
                    self.offset += t.len();
                    chunk
                }
                Update::Finished(finish) => {
                    self.finish(finish);
                    return;
                }
                Update::Failed(why) => {
                    self.out.push_back(SseEvent::default().data(ApiError::internal(why).body().to_string()));
                    self.rx = None;
                    return;
                }
            };
            self.out.push_back(SseEvent::default().data(data.to_string()));
        }
    }

    fn finish(&mut self, finish: Finish) {
        let last = self.answer.chunk(None, None, Some(finish), self.offset);
        self.out.push_back(SseEvent::default().data(last.to_string()));
        if self.include_usage {
            self.out.push_back(SseEvent::default().data(self.answer.usage_chunk().to_string()));
        }
        self.out.push_back(SseEvent::default().data("[DONE]"));
        self.rx = None;
    }
}
