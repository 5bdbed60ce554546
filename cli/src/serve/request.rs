//! The request bodies of `/v1/chat/completions` and `/v1/completions`: OpenAI's fields
//! (and llama-server's `n_predict`, `n_probs`, `repeat_penalty`, `ignore_eos`), read
//! with the path of a field of the wrong type in the error, checked, and turned into
//! what the engine runs.

use serde::Deserialize;
use serde_json::Value;

use super::error::ApiError;
use rgml_models::chat::Message;
use rgml_models::sampler::SamplerParams;

/// Stop strings a request may give at most, and their longest length in bytes.
pub const MAX_STOPS: usize = 16;
const MAX_STOP_BYTES: usize = 1024;
/// Alternatives per token that `top_logprobs` / `logprobs` / `n_probs` may ask for.
pub const MAX_TOP_LOGPROBS: usize = 20;

/// The fields of both endpoints (each reads its own).
#[derive(Debug, Default, Deserialize)]
pub struct Params {
    /// Chat: the conversation.
    pub messages: Option<Vec<ChatMessage>>,
    /// Completions: a string, a one-string array, or token ids.
    pub prompt: Option<Value>,
    /// Accepted and ignored: the server runs one model.
    pub model: Option<String>,
    /// Tokens to generate at most (`-1`: until the end of the context).
    pub max_tokens: Option<i64>,
    /// Chat's newer name for `max_tokens`.
    pub max_completion_tokens: Option<i64>,
    /// llama-server's name for `max_tokens`.
    pub n_predict: Option<i64>,
    /// Sampling.
    pub temperature: Option<f32>,
    /// Sampling.
    pub top_p: Option<f32>,
    /// Sampling (llama.cpp's extension).
    pub top_k: Option<i32>,
    /// Sampling (llama.cpp's extension).
    pub min_p: Option<f32>,
    /// Sampling.
    pub presence_penalty: Option<f32>,
    /// Sampling.
    pub frequency_penalty: Option<f32>,
    /// Sampling (llama.cpp's extension).
    pub repeat_penalty: Option<f32>,
    /// Sampling (llama.cpp's extension).
    pub repeat_last_n: Option<i32>,
    /// The random stream's seed (random when absent).
    pub seed: Option<u64>,
    /// Stop strings: one or an array.
    pub stop: Option<StopField>,
    /// Server-sent events.
    pub stream: Option<bool>,
    /// `{"include_usage": true}`: a last chunk with the usage.
    pub stream_options: Option<StreamOptions>,
    /// Chat: a bool; completions: how many alternatives (0–5 in OpenAI's API).
    pub logprobs: Option<Value>,
    /// Chat: alternatives per token with `logprobs: true`.
    pub top_logprobs: Option<i64>,
    /// llama-server's alternatives per token.
    pub n_probs: Option<i64>,
    /// Keep generating past end-of-generation tokens (llama.cpp's extension).
    pub ignore_eos: Option<bool>,
    /// Choices per request: only 1.
    pub n: Option<i64>,
    /// Completions: only 1.
    pub best_of: Option<i64>,
    /// Completions: echoing the prompt is not supported.
    pub echo: Option<bool>,
    /// Completions: not supported.
    pub suffix: Option<Value>,
    /// Not supported (an empty map is accepted).
    pub logit_bias: Option<serde_json::Map<String, Value>>,
    /// Not supported.
    pub tools: Option<Value>,
    /// Not supported.
    pub tool_choice: Option<Value>,
    /// Not supported.
    pub functions: Option<Value>,
    /// Not supported.
    pub function_call: Option<Value>,
    /// Only `{"type": "text"}`.
    pub response_format: Option<Value>,
    /// Accepted and ignored.
    pub user: Option<String>,
}

/// One chat message.
#[derive(Debug, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`, … as the template knows them.
    pub role: String,
    /// A string, or an array of `{"type": "text", "text": …}` parts.
    pub content: Option<Content>,
}

/// A message's content.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Parts; only text parts are supported.
    Parts(Vec<ContentPart>),
}

/// A part of a message's content.
#[derive(Debug, Deserialize)]
pub struct ContentPart {
    /// `text` (images and audio are refused).
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a text part.
    pub text: Option<String>,
}

/// `stop`: one string or several.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum StopField {
    /// One.
    One(String),
    /// Several.
    Many(Vec<String>),
}

/// `stream_options`.
#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    /// Send the usage in a last chunk.
    pub include_usage: Option<bool>,
}

/// Which endpoint a body came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/completions`.
    Completions,
}

/// The prompt of a completions request.
#[derive(Debug, PartialEq)]
pub enum PromptInput {
    /// Text to tokenize.
    Text(String),
    /// Token ids as given.
    Tokens(Vec<u32>),
}

/// Reads a body: JSON, an object, each field of its type (the error names the field).
pub fn parse(body: &[u8]) -> Result<Params, ApiError> {
    parse_json(body)
}

/// [`parse`] into any body type (`/v1/embeddings`' too).
pub fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        ApiError::bad_param(&path, format!("{path}: {}", e.inner()))
    })
}

impl Params {
    /// Refuses what rgml does not do rather than ignoring it.
    pub fn check_supported(&self, endpoint: Endpoint) -> Result<(), ApiError> {
        let refuse = |param: &str, what: &str| {
            Err(ApiError::bad_param(param, format!("{param}: {what} is not supported by rgml")))
        };
        if self.n.is_some_and(|n| n != 1) {
            return refuse("n", "more than one choice");
        }
        if self.best_of.is_some_and(|n| n != 1) {
            return refuse("best_of", "more than one candidate");
        }
        if self.echo == Some(true) {
            return refuse("echo", "echoing the prompt");
        }
        if self.suffix.as_ref().is_some_and(|s| !s.is_null()) {
            return refuse("suffix", "a suffix (fill-in-the-middle)");
        }
        if self.logit_bias.as_ref().is_some_and(|m| !m.is_empty()) {
            return refuse("logit_bias", "a logit bias");
        }
        for (name, v) in [
            ("tools", &self.tools),
            ("tool_choice", &self.tool_choice),
            ("functions", &self.functions),
            ("function_call", &self.function_call),
        ] {
            if v.as_ref().is_some_and(|v| !v.is_null()) {
                return refuse(name, "tool calling");
            }
        }
        if let Some(f) = self.response_format.as_ref().filter(|f| !f.is_null()) {
            if f.get("type").and_then(Value::as_str) != Some("text") {
                return refuse("response_format", "a response format other than {\"type\": \"text\"}");
            }
        }
        match endpoint {
            Endpoint::Chat if self.messages.is_none() => Err(ApiError::bad_param("messages", "messages: required")),
            Endpoint::Completions if self.prompt.is_none() => Err(ApiError::bad_param("prompt", "prompt: required")),
            _ => Ok(()),
        }
    }

    /// The chat messages, their content as text.
    pub fn messages(&self) -> Result<Vec<Message>, ApiError> {
        let msgs = self.messages.as_deref().unwrap_or_default();
        if msgs.is_empty() {
            return Err(ApiError::bad_param("messages", "messages: give at least one message"));
        }
        msgs.iter()
            .enumerate()
            .map(|(i, m)| {
                let at = format!("messages[{i}].content");
                let content = match &m.content {
                    None => {
                        return Err(ApiError::bad_param(&at, format!("{at}: required (tool calls are not supported)")))
                    }
                    Some(Content::Text(t)) => t.clone(),
                    Some(Content::Parts(parts)) => {
                        let mut text = String::new();
                        for p in parts {
                            match (p.kind.as_str(), &p.text) {
                                ("text", Some(t)) => text.push_str(t),
                                ("text", None) => {
                                    return Err(ApiError::bad_param(&at, format!("{at}: a text part without text")))
                                }
                                (kind, _) => {
                                    return Err(ApiError::bad_param(
                                        &at,
                                        format!("{at}: {kind:?} parts are not supported (text only)"),
                                    ))
                                }
                            }
                        }
                        text
                    }
                };
                Ok(Message::new(m.role.clone(), content))
            })
            .collect()
    }

    /// The completions prompt.
    pub fn prompt(&self) -> Result<PromptInput, ApiError> {
        let bad =
            || ApiError::bad_param("prompt", "prompt: a string, an array of one string, or an array of token ids");
        match self.prompt.as_ref() {
            Some(Value::String(s)) => Ok(PromptInput::Text(s.clone())),
            Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => {
                Ok(PromptInput::Text(a[0].as_str().unwrap_or_default().to_string()))
            }
            Some(Value::Array(a)) if !a.is_empty() => a
                .iter()
                .map(|v| v.as_u64().and_then(|t| u32::try_from(t).ok()).ok_or_else(bad))
                .collect::<Result<_, _>>()
                .map(PromptInput::Tokens),
            _ => Err(bad()),
        }
    }

    /// Tokens to generate at most (`None`: until the end of the context).
    pub fn max_tokens(&self) -> Result<Option<usize>, ApiError> {
        let given = [
            ("max_completion_tokens", self.max_completion_tokens),
            ("max_tokens", self.max_tokens),
            ("n_predict", self.n_predict),
        ];
        match given.into_iter().find_map(|(name, v)| Some((name, v?))) {
            None | Some((_, -1)) => Ok(None),
            Some((_, n)) if n >= 1 => Ok(Some(n as usize)),
            Some((name, n)) => Err(ApiError::bad_param(
                name,
                format!("{name}: {n}; give at least 1 (or -1: until the context is full)"),
            )),
        }
    }

    /// The sampler's parameters (llama.cpp's defaults for what is absent; a random seed).
    pub fn sampling(&self) -> Result<SamplerParams, ApiError> {
        let d = SamplerParams::default();
        let p = SamplerParams {
            temperature: self.temperature.unwrap_or(d.temperature),
            top_k: self.top_k.unwrap_or(d.top_k),
            top_p: self.top_p.unwrap_or(d.top_p),
            min_p: self.min_p.unwrap_or(d.min_p),
            repeat_penalty: self.repeat_penalty.unwrap_or(d.repeat_penalty),
            frequency_penalty: self.frequency_penalty.unwrap_or(d.frequency_penalty),
            presence_penalty: self.presence_penalty.unwrap_or(d.presence_penalty),
            repeat_last_n: self.repeat_last_n.unwrap_or(d.repeat_last_n),
            seed: self.seed.unwrap_or_else(crate::text_cli::random_seed),
            ..d
        };
        p.validate().map_err(|e| ApiError::bad_request(e.to_string()))?;
        Ok(p)
    }

    /// The stop strings.
    pub fn stops(&self) -> Result<Vec<String>, ApiError> {
        let stops = match &self.stop {
            None => Vec::new(),
            Some(StopField::One(s)) => vec![s.clone()],
            Some(StopField::Many(v)) => v.clone(),
        };
        if stops.len() > MAX_STOPS {
            return Err(ApiError::bad_param("stop", format!("stop: {} strings; at most {MAX_STOPS}", stops.len())));
        }
        if stops.iter().any(|s| s.len() > MAX_STOP_BYTES) {
            return Err(ApiError::bad_param("stop", format!("stop: a string over {MAX_STOP_BYTES} bytes")));
        }
        Ok(stops)
    }

    /// Alternatives per token to report (`None`: no log-probabilities).
    pub fn logprobs(&self, endpoint: Endpoint) -> Result<Option<usize>, ApiError> {
        let count = |name: &str, n: i64| {
            usize::try_from(n)
                .ok()
                .filter(|&n| n <= MAX_TOP_LOGPROBS)
                .ok_or_else(|| ApiError::bad_param(name, format!("{name}: {n}; give 0 to {MAX_TOP_LOGPROBS}")))
        };
        let n_probs = self.n_probs.map(|n| count("n_probs", n)).transpose()?;
        let asked = match (endpoint, &self.logprobs) {
            (_, None | Some(Value::Null)) => None,
            (Endpoint::Chat, Some(Value::Bool(false))) => None,
            (Endpoint::Chat, Some(Value::Bool(true))) => {
                Some(self.top_logprobs.map(|n| count("top_logprobs", n)).transpose()?.unwrap_or(0))
            }
            (Endpoint::Completions, Some(Value::Number(n))) => Some(count("logprobs", n.as_i64().unwrap_or(-1))?),
            (Endpoint::Chat, _) => return Err(ApiError::bad_param("logprobs", "logprobs: a boolean")),
            (Endpoint::Completions, _) => return Err(ApiError::bad_param("logprobs", "logprobs: an integer")),
        };
        Ok(asked.or(n_probs))
    }

    /// Server-sent events asked for, and whether a usage chunk ends them.
    pub fn streaming(&self) -> (bool, bool) {
        let stream = self.stream.unwrap_or(false);
        (stream, stream && self.stream_options.as_ref().and_then(|o| o.include_usage).unwrap_or(false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_of_the_wrong_type_are_named() {
        let e = parse(br#"{"messages": [], "temperature": "hot"}"#).unwrap_err();
        assert_eq!((e.status.as_u16(), e.param.as_deref()), (400, Some("temperature")));
        assert!(parse(b"{not json").unwrap_err().message.contains("not valid JSON"));
        assert!(parse(b"[1]").unwrap_err().message.contains("object"));
        let e = parse(br#"{"messages": [{"role": "user", "content": 3}]}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages[0].content"));
    }

    #[test]
    fn what_rgml_does_not_do_is_refused() {
        for body in [
            r#"{"messages": [], "n": 2}"#,
            r#"{"messages": [], "tools": [{}]}"#,
            r#"{"messages": [], "response_format": {"type": "json_object"}}"#,
            r#"{"prompt": "a", "echo": true}"#,
        ] {
            let p = parse(body.as_bytes()).unwrap();
            let endpoint = if p.messages.is_some() { Endpoint::Chat } else { Endpoint::Completions };
            assert!(p.check_supported(endpoint).unwrap_err().message.contains("not supported"), "{body}");
        }
        let p = parse(br#"{"messages": [], "n": 1, "logit_bias": {}, "response_format": {"type": "text"}}"#).unwrap();
        assert!(p.check_supported(Endpoint::Chat).is_ok());
        assert!(p.check_supported(Endpoint::Completions).unwrap_err().message.contains("prompt"));
    }

    #[test]
    fn fields_are_read_and_checked() {
        let p =
            parse(br#"{"prompt": [1, 2], "max_tokens": 5, "stop": "x", "logprobs": 2, "seed": 7, "temperature": 0}"#)
                .unwrap();
        assert_eq!(p.prompt().unwrap(), PromptInput::Tokens(vec![1, 2]));
        assert_eq!(
            (p.max_tokens().unwrap(), p.stops().unwrap(), p.logprobs(Endpoint::Completions).unwrap()),
            (Some(5), vec!["x".to_string()], Some(2))
        );
        assert_eq!((p.sampling().unwrap().seed, p.sampling().unwrap().temperature), (7, 0.0));
        assert!(p.logprobs(Endpoint::Chat).is_err());
        assert!(parse(br#"{"max_tokens": 0}"#).unwrap().max_tokens().is_err());
        assert_eq!(parse(br#"{"max_tokens": -1}"#).unwrap().max_tokens().unwrap(), None);
        assert!(parse(br#"{"top_p": 2}"#).unwrap().sampling().is_err());
        assert!(parse(br#"{"prompt": [-1]}"#).unwrap().prompt().is_err());
        assert!(parse(br#"{"prompt": ["a", "b"]}"#).unwrap().prompt().is_err());
        let p = parse(br#"{"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}], "logprobs": true, "top_logprobs": 3}"#).unwrap();
        assert_eq!(p.messages().unwrap()[0].content, "ab");
        assert_eq!(p.logprobs(Endpoint::Chat).unwrap(), Some(3));
        let p = parse(br#"{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}"#).unwrap();
        assert!(p.messages().is_err());
        assert!(parse(br#"{"stop": ["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]}"#)
            .unwrap()
            .stops()
            .is_err());
    }
}
