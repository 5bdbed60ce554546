//! `POST /v1/embeddings`: OpenAI's request (`input`: a string, strings, token ids, or
//! arrays of token ids; `encoding_format` float or base64) answered as llama-server
//! answers it: texts tokenized with the model's special tokens added and special-token
//! text parsed, ids taken as given, every vector pooled as the server was started and
//! normalized to length 1 (llama-server's `embd_normalize` 2; −1 in the body: raw). The
//! inputs run on the embedding service's thread, apart from the text engine.

use std::sync::Arc;

use axum::body::Body;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::app::App;
use super::complete::read_body;
use super::error::ApiError;
use super::request::parse_json;
use rgml_models::embed::service::ServiceHealth;
use rgml_models::embed::EmbedOptions;
use rgml_models::engine::SubmitError;

/// Inputs a request may give at most (OpenAI's limit).
pub const MAX_INPUTS: usize = 2048;

/// The body of `/v1/embeddings`.
#[derive(Debug, Default, Deserialize)]
pub struct EmbeddingParams {
    /// What to embed.
    pub input: Option<Value>,
    /// Echoed in the answer; the server runs one model.
    pub model: Option<String>,
    /// `float` (the default) or `base64` (little-endian f32 bytes).
    pub encoding_format: Option<String>,
    /// Only the model's width.
    pub dimensions: Option<i64>,
    /// Accepted and ignored.
    pub user: Option<String>,
    /// llama-server's extension: 2 (Euclidean, the default) or −1 (raw vectors).
    pub embd_normalize: Option<i64>,
}

/// One input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// Text to tokenize.
    Text(String),
    /// Token ids as given.
    Tokens(Vec<u32>),
}

impl EmbeddingParams {
    /// The inputs, in order.
    pub fn inputs(&self) -> Result<Vec<Input>, ApiError> {
        let shape = "input: a string, an array of strings, an array of token ids, or an array of arrays of token ids";
        let ids = |a: &[Value], at: &str| -> Result<Vec<u32>, ApiError> {
            let ids = a.iter().map(|v| v.as_u64().and_then(|t| u32::try_from(t).ok())).collect::<Option<Vec<_>>>();
            ids.ok_or_else(|| ApiError::bad_param("input", format!("{at}: token ids are integers from 0")))
        };
        let inputs = match &self.input {
            None => return Err(ApiError::bad_param("input", "input: required")),
            Some(Value::String(s)) => vec![Input::Text(s.clone())],
            Some(Value::Array(a)) if a.is_empty() => return Err(ApiError::bad_param("input", "input: an empty array")),
            Some(Value::Array(a)) if a.iter().all(Value::is_number) => vec![Input::Tokens(ids(a, "input")?)],
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::String(s) => Ok(Input::Text(s.clone())),
                    Value::Array(t) => ids(t, &format!("input[{i}]")).map(Input::Tokens),
                    _ => Err(ApiError::bad_param("input", shape)),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(ApiError::bad_param("input", shape)),
        };
        if inputs.len() > MAX_INPUTS {
            let why = format!("input: {} inputs; at most {MAX_INPUTS}", inputs.len());
            return Err(ApiError::bad_param("input", why));
        }
        for (i, input) in inputs.iter().enumerate() {
            let empty = match input {
                Input::Text(t) => t.is_empty(),
                Input::Tokens(t) => t.is_empty(),
            };
            if empty {
                return Err(ApiError::bad_param("input", format!("input[{i}]: empty")));
            }
        }
        Ok(inputs)
    }

    /// Whether the vectors go out as base64.
    pub fn base64(&self) -> Result<bool, ApiError> {
        match self.encoding_format.as_deref() {
            None | Some("float") => Ok(false),
            Some("base64") => Ok(true),
            Some(f) => Err(ApiError::bad_param("encoding_format", format!("encoding_format: {f:?}; float or base64"))),
        }
    }

    /// Whether the vectors are normalized.
    pub fn normalize(&self) -> Result<bool, ApiError> {
        match self.embd_normalize {
            None | Some(2) => Ok(true),
            Some(-1) => Ok(false),
            Some(n) => Err(ApiError::bad_param(
                "embd_normalize",
                format!("embd_normalize: {n}; rgml does 2 (Euclidean) and -1 (none)"),
            )),
        }
    }
}

/// The endpoint.
pub async fn handle(app: Arc<App>, headers: HeaderMap, body: Body) -> Response {
    match run(app, headers, body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn run(app: Arc<App>, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    app.authorize(&headers)?;
    let Some(service) = app.embedder.as_ref() else {
        return Err(ApiError::not_supported(
            "this server does not serve embeddings: start rgml serve with --embeddings (and --pooling where the model file names none)",
        ));
    };
    let info = match service.health() {
        ServiceHealth::Ready(info) => info,
        ServiceHealth::Loading => return Err(ApiError::unavailable("the model is loading", 1)),
        ServiceHealth::Failed(why) => return Err(ApiError::internal(why)),
    };
    let bytes = read_body(&app, &headers, body).await?;
    let params: EmbeddingParams = parse_json(&bytes)?;
    let (base64, normalize, inputs) = (params.base64()?, params.normalize()?, params.inputs()?);
    if params.dimensions.is_some_and(|d| d != info.n_embd as i64) {
        let why = format!("dimensions: this model's embeddings have {} (it cannot shorten them)", info.n_embd);
        return Err(ApiError::bad_param("dimensions", why));
    }
    // tokenizing takes time in proportion to the body: off the connections' threads
    let tok = Arc::clone(&app.tok);
    let ids = tokio::task::spawn_blocking(move || {
        let n_vocab = tok.n_vocab();
        inputs
            .into_iter()
            .enumerate()
            .map(|(i, input)| match input {
                Input::Text(t) => tok
                    .tokenize(&t, true, true)
                    .map_err(|e| ApiError::bad_param("input", format!("input[{i}]: tokenizing failed: {e}"))),
                Input::Tokens(ids) => match ids.iter().find(|&&t| t as usize >= n_vocab) {
                    Some(t) => Err(ApiError::bad_param(
                        "input",
                        format!("input[{i}]: token {t} is outside the vocabulary of {n_vocab}"),
                    )),
                    None => Ok(ids),
                },
            })
            .collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))??;
    if let Some((i, t)) = ids.iter().enumerate().find(|(_, t)| t.len() > info.n_ctx) {
        let why = format!("input[{i}] has {} tokens; the model takes at most {} (--n-ctx)", t.len(), info.n_ctx);
        let mut e = ApiError::bad_param("input", why);
        e.code = Some("context_length_exceeded");
        return Err(e);
    }
    let n_tokens: usize = ids.iter().map(Vec::len).sum();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let opts = EmbedOptions { pooling: Some(app.pooling), normalize };
    service.submit(ids, opts, Box::new(move |r| drop(tx.send(r)))).map_err(|e| match e {
        SubmitError::QueueFull(n) => {
            ApiError::unavailable(format!("the server is busy: {n} embedding requests are waiting; retry later"), 1)
        }
        SubmitError::Loading => ApiError::unavailable("the model is loading", 1),
        SubmitError::Down(why) => ApiError::internal(why),
    })?;
    let vectors = rx
        .await
        .map_err(|_| ApiError::internal("the embedding service stopped before answering"))?
        .map_err(|e| ApiError::internal(format!("embedding failed: {e}")))?;
    let data = vectors
        .into_iter()
        .enumerate()
        .map(|(index, v)| Item {
            object: "embedding",
            index,
            embedding: if base64 { Vector::Base64(base64_f32(&v)) } else { Vector::Float(v) },
        })
        .collect();
    let model = params.model.unwrap_or_else(|| app.model_name.clone());
    let usage = Usage { prompt_tokens: n_tokens, total_tokens: n_tokens };
    Ok(axum::Json(Answer { object: "list", data, model, usage }).into_response())
}

/// The answer's JSON (serialized as it is: f32 values in their shortest form).
#[derive(Serialize)]
struct Answer {
    object: &'static str,
    data: Vec<Item>,
    model: String,
    usage: Usage,
}

#[derive(Serialize)]
struct Item {
    object: &'static str,
    index: usize,
    embedding: Vector,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Vector {
    Float(Vec<f32>),
    Base64(String),
}

#[derive(Serialize)]
struct Usage {
    prompt_tokens: usize,
    total_tokens: usize,
}

/// `v`'s little-endian bytes in standard base64 (what OpenAI's clients decode).
fn base64_f32(v: &[f32]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (k, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            out.push(if k <= chunk.len() { ABC[(n >> shift) as usize & 63] as char } else { '=' });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(body: &str) -> EmbeddingParams {
        parse_json(body.as_bytes()).unwrap()
    }

    #[test]
    fn every_shape_of_input() {
        let text = |s: &str| Input::Text(s.into());
        assert_eq!(params(r#"{"input": "a"}"#).inputs().unwrap(), [text("a")]);
        assert_eq!(params(r#"{"input": ["a", "b"]}"#).inputs().unwrap(), [text("a"), text("b")]);
        assert_eq!(params(r#"{"input": [1, 2]}"#).inputs().unwrap(), [Input::Tokens(vec![1, 2])]);
        assert_eq!(params(r#"{"input": [[1], "c"]}"#).inputs().unwrap(), [Input::Tokens(vec![1]), text("c")]);
        for bad in [
            r#"{}"#,
            r#"{"input": []}"#,
            r#"{"input": ""}"#,
            r#"{"input": [[]]}"#,
            r#"{"input": 3}"#,
            r#"{"input": [-1]}"#,
            r#"{"input": [{"a": 1}]}"#,
        ] {
            let e = params(bad).inputs().unwrap_err();
            assert_eq!((e.status.as_u16(), e.param.as_deref()), (400, Some("input")), "{bad}");
        }
        let many = format!(r#"{{"input": [{}]}}"#, vec!["\"a\""; MAX_INPUTS + 1].join(","));
        assert!(params(&many).inputs().unwrap_err().message.contains("at most"));
    }

    #[test]
    fn formats_and_normalization() {
        assert!(!params("{}").base64().unwrap());
        assert!(params(r#"{"encoding_format": "base64"}"#).base64().unwrap());
        assert!(params(r#"{"encoding_format": "int8"}"#).base64().is_err());
        assert!(params("{}").normalize().unwrap());
        assert!(!params(r#"{"embd_normalize": -1}"#).normalize().unwrap());
        assert!(params(r#"{"embd_normalize": 1}"#).normalize().is_err());
        // base64 of the bytes 00 00 80 3f (1.0) and 00 00 00 c0 (-2.0)
        assert_eq!(base64_f32(&[1.0, -2.0]), "AACAPwAAAMA=");
        assert_eq!(base64_f32(&[1.0]), "AACAPw==");
    }
}
