//! What the handlers share: the engine, the text side of the model, the limits and
//! counters, and the API key check.

use std::sync::atomic::AtomicU64;

use axum::http::{header, HeaderMap};

use super::error::ApiError;
use super::metrics::HttpCounters;
use rgml_models::chat::ChatTemplate;
use rgml_models::embed::service::EmbedService;
use rgml_models::embed::Pooling;
use rgml_models::engine::{Engine, Health};
use rgml_models::tokenizer::Tokenizer;
use std::sync::Arc;

/// Bounds on what clients can make the server hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest request body in bytes (413 beyond).
    pub max_body: usize,
    /// Seconds a request's headers may take to arrive.
    pub header_timeout_s: u64,
    /// Seconds a request's body may take to arrive (408 beyond).
    pub body_timeout_s: u64,
    /// Connections open at once; more wait in the listen backlog.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_body: 4 << 20, header_timeout_s: 10, body_timeout_s: 30, max_connections: 1024 }
    }
}

/// What the handlers share.
pub struct App {
    /// The text engine (none for an embedding model).
    pub(super) engine: Option<Engine>,
    /// The embedding service of `/v1/embeddings` (an encoder's, or a decoder's with
    /// `--embeddings`).
    pub(super) embedder: Option<EmbedService>,
    /// How `/v1/embeddings` pools.
    pub(super) pooling: Pooling,
    pub(super) tok: Arc<Tokenizer>,
    pub(super) template: ChatTemplate,
    pub(super) model_name: String,
    pub(super) api_key: Option<String>,
    pub(super) limits: Limits,
    pub(super) http: HttpCounters,
    pub(super) next_id: AtomicU64,
    /// Unix seconds at the start: answer ids stay unique across restarts.
    pub(super) started: u64,
}

impl App {
    /// Checks the API key of a `/v1` request.
    pub(super) fn authorize(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let Some(key) = &self.api_key else { return Ok(()) };
        let given =
            headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        match given {
            Some(g) if constant_time_eq(g.trim().as_bytes(), key.as_bytes()) => Ok(()),
            _ => Err(ApiError::unauthorized()),
        }
    }

    /// Positions per sequence, once the model is loaded.
    pub(super) fn n_ctx(&self) -> Option<usize> {
        match self.engine.as_ref()?.health() {
            Health::Ready(info) => Some(info.n_ctx),
            _ => None,
        }
    }
}

/// Compares without an early exit on the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Seconds since the Unix epoch (0 on a clock before it).
pub(super) fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
