//! `rgml serve`: an OpenAI-compatible HTTP server over the models library's
//! [`Engine`] (continuous batching across `--parallel` sequences). This module is the
//! thin HTTP layer: hyper speaks HTTP/1.1 (header-read timeouts, a bound on open
//! connections), axum routes; `/v1/chat/completions` and `/v1/completions`
//! (`complete.rs`), `/v1/embeddings` (`embeddings.rs`, on the models library's
//! [`EmbedService`]), `/v1/models`, `/health`, `/metrics`. Every error is OpenAI's error
//! JSON ([`error::ApiError`]).
//!
//! An encoder's file (BERT: an embedding model) is served on `/v1/embeddings` alone; the
//! completion endpoints answer 501. A decoder serves text, and with `--embeddings` also
//! embeddings, from a second, cache-free instance of the model on its own thread (on the
//! CPU the weights' pages are shared through the file's mapping; repacked weights are
//! copied once more).

mod answer;
mod app;
mod complete;
pub mod embeddings;
pub mod error;
mod metrics;
pub mod request;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::json;

pub use app::{App, Limits};
use error::ApiError;
use request::Endpoint;
use rgml::gguf::GgufFile;
use rgml::Backend;
use rgml_models::chat::ChatTemplate;
use rgml_models::embed::service::{EmbedService, ServiceHealth};
use rgml_models::embed::{EmbedLoadOptions, EmbeddingModel, Pooling};
use rgml_models::engine::{Engine, EngineOptions, Health, Stats};
use rgml_models::model::{LoadOptions, Model};
use rgml_models::tokenizer::Tokenizer;

/// What `rgml serve` does.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The address to listen on (loopback by default).
    pub host: String,
    /// The port (0: any free port; the one taken is printed).
    pub port: u16,
    /// Sequences served at once.
    pub parallel: usize,
    /// Requests waiting for a sequence at most (more get 503).
    pub max_queue: usize,
    /// Prompt tokens evaluated per step.
    pub chunk: usize,
    /// With a key, every `/v1` request needs `Authorization: Bearer KEY`.
    pub api_key: Option<String>,
    /// HTTP limits.
    pub limits: Limits,
    /// The KV cache (its `n_ctx` per sequence; `n_seq` is set from `parallel`); an
    /// embedding model's longest input (`n_ctx`).
    pub load: LoadOptions,
    /// Serve `/v1/embeddings` with a decoder too (an encoder always does).
    pub embeddings: bool,
    /// How `/v1/embeddings` pools (default: the file's `pooling_type`; one is needed).
    pub pooling: Option<Pooling>,
}

/// The routes over `app`.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route(
            "/v1/chat/completions",
            post(|State(a): State<Arc<App>>, h: HeaderMap, b: Body| complete::handle(a, Endpoint::Chat, h, b)),
        )
        .route(
            "/v1/completions",
            post(|State(a): State<Arc<App>>, h: HeaderMap, b: Body| complete::handle(a, Endpoint::Completions, h, b)),
        )
        .route("/v1/embeddings", post(|State(a): State<Arc<App>>, h: HeaderMap, b: Body| embeddings::handle(a, h, b)))
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/metrics", get(metrics_text))
        .fallback(|uri: Uri| async move { ApiError::not_found(uri.path()) })
        .layer(axum::middleware::map_response_with_state(Arc::clone(&app), count_status))
        .with_state(app)
}

async fn count_status(State(app): State<Arc<App>>, r: Response) -> Response {
    app.http.count(r.status().as_u16());
    r
}

async fn models(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if let Err(e) = app.authorize(&headers) {
        return e.into_response();
    }
    let mut meta = match app.engine.as_ref().map(Engine::health) {
        Some(Health::Ready(i)) => {
            json!({"n_ctx": i.n_ctx, "n_seq": i.n_seq, "n_vocab": i.n_vocab, "rows_invariant": i.rows_invariant})
        }
        _ => json!({}),
    };
    if let Some(ServiceHealth::Ready(i)) = app.embedder.as_ref().map(EmbedService::health) {
        meta["embeddings"] = json!({"n_embd": i.n_embd, "n_ctx": i.n_ctx, "pooling": app.pooling.name()});
    }
    let model =
        json!({"id": app.model_name, "object": "model", "created": app.started, "owned_by": "rgml", "meta": meta});
    axum::Json(json!({"object": "list", "data": [model]})).into_response()
}

/// `GET /health`: 503 while loading (or failed), else 200 with the sequences' use;
/// `?fail_on_no_slot=1` answers 503 when every sequence is busy (llama-server's flag).
async fn health(State(app): State<Arc<App>>, Query(q): Query<std::collections::HashMap<String, String>>) -> Response {
    let Some(engine) = app.engine.as_ref() else {
        // an embedding model: its service's state
        return match app.embedder.as_ref().map(EmbedService::health) {
            Some(ServiceHealth::Ready(_)) => {
                let pending = app.embedder.as_ref().map_or(0, EmbedService::pending);
                axum::Json(json!({"status": "ok", "queue_depth": pending})).into_response()
            }
            Some(ServiceHealth::Failed(why)) => ApiError::internal(why).into_response(),
            _ => ApiError::unavailable("Loading model", 1).into_response(),
        };
    };
    match engine.health() {
        Health::Loading => ApiError::unavailable("Loading model", 1).into_response(),
        Health::Failed(why) => ApiError::internal(why).into_response(),
        Health::Ready(info) => {
            let st = engine.stats();
            let idle = info.n_seq.saturating_sub(st.busy);
            let body = |status| json!({"status": status, "slots_idle": idle, "slots_processing": st.busy, "queue_depth": st.queued});
            let strict = q.get("fail_on_no_slot").is_some_and(|v| v != "0" && v != "false");
            if strict && idle == 0 {
                (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body("no slot available"))).into_response()
            } else {
                axum::Json(body("ok")).into_response()
            }
        }
    }
}

async fn metrics_text(State(app): State<Arc<App>>) -> Response {
    let (stats, n_seq) = match app.engine.as_ref() {
        Some(e) => (e.stats(), if let Health::Ready(i) = e.health() { i.n_seq } else { 0 }),
        None => (Stats::default(), 0),
    };
    let text = metrics::render(&app.http, &stats, n_seq);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// The tokenizer, the chat template (an encoder's, never used, without a word on
/// standard error) and the model's name of `file` at `path`.
fn read_text_side(file: &GgufFile, path: &Path, encoder: bool) -> Result<(Tokenizer, ChatTemplate, String), String> {
    let tok = crate::run::require_tokenizer(file, path)?;
    let template = if encoder {
        rgml_models::conversation::template_for(file, &tok).map_err(|e| e.to_string())?.0
    } else {
        crate::run::chat_template(file, &tok)?
    };
    let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    Ok((tok, template, name))
}

/// The pooling of `/v1/embeddings`: as asked, else the file's; none is not OpenAI's
/// (llama-server refuses it too).
fn embedding_pooling(file: &GgufFile, asked: Option<Pooling>) -> Result<Pooling, String> {
    let pooling = match asked {
        Some(p) => p,
        None => rgml_models::embed::file_pooling(file).map_err(|e| e.to_string())?.unwrap_or(Pooling::None),
    };
    if pooling == Pooling::None {
        return Err("/v1/embeddings needs one vector per input, and the model file names no pooling: \
                    give --pooling mean, cls or last"
            .into());
    }
    Ok(pooling)
}

/// Serves `model` until the process is stopped, on backends `open` makes (one for the
/// text engine, one for the embedding service). The port is bound first (`/health`
/// says the model is loading), then the model loads on the engine's and the service's
/// threads.
pub fn serve<B, F>(model: PathBuf, opts: ServeOptions, open: F) -> Result<(), String>
where
    B: Backend + Send + 'static,
    F: Fn() -> Result<B, String>,
{
    if opts.parallel == 0 {
        return Err("--parallel must be at least 1".into());
    }
    let file = GgufFile::open(&model).map_err(|e| format!("{}: {e}", model.display()))?;
    let encoder = rgml_models::embed::is_encoder(&file);
    let (tok, template, model_name) = read_text_side(&file, &model, encoder)?;
    let pooling = if encoder || opts.embeddings { Some(embedding_pooling(&file, opts.pooling)?) } else { None };
    drop(file);
    let engine_backend = if encoder { None } else { Some(open()?) };
    let embed_backend = if pooling.is_some() { Some(open()?) } else { None };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("starting the I/O runtime: {e}"))?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind((opts.host.as_str(), opts.port))
            .await
            .map_err(|e| format!("listening on {}:{}: {e}", opts.host, opts.port))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let load = LoadOptions { n_seq: opts.parallel, ..opts.load };
        let engine = engine_backend.map(|backend| {
            let path = model.clone();
            Engine::start(
                move || Model::load_with(&path, load, backend),
                EngineOptions { chunk: opts.chunk, max_queue: opts.max_queue },
            )
        });
        let embedder = embed_backend.map(|backend| {
            let (path, n_ctx) = (model.clone(), opts.load.n_ctx);
            EmbedService::start(
                move || EmbeddingModel::load_with(&path, EmbedLoadOptions { n_ctx }, backend),
                opts.max_queue,
            )
        });
        let started = app::unix_now();
        let app = Arc::new(App {
            engine,
            embedder,
            pooling: pooling.unwrap_or(Pooling::None),
            tok: Arc::new(tok),
            template,
            model_name,
            api_key: opts.api_key.clone(),
            limits: opts.limits,
            http: metrics::HttpCounters::default(),
            next_id: AtomicU64::new(1),
            started,
        });
        let what = if encoder { "an embedding model".to_string() } else { format!("{} sequences", opts.parallel) };
        eprintln!("rgml serve: listening on http://{addr} ({what}; loading {})", model.display());
        report_when_loaded(Arc::clone(&app));
        accept_loop(listener, router(Arc::clone(&app)), opts.limits).await
    })
}

/// Says on standard error when the model is loaded (by the engine and the embedding
/// service, where the server has them), or why it failed.
fn report_when_loaded(app: Arc<App>) {
    tokio::spawn(async move {
        loop {
            let engine = match app.engine.as_ref().map(Engine::health) {
                None => Some(Ok(String::new())),
                Some(Health::Loading) => None,
                Some(Health::Ready(i)) => Some(Ok(format!("{} sequences of {} positions", i.n_seq, i.n_ctx))),
                Some(Health::Failed(why)) => Some(Err(why)),
            };
            let embedder = match app.embedder.as_ref().map(EmbedService::health) {
                None => Some(Ok(String::new())),
                Some(ServiceHealth::Loading) => None,
                Some(ServiceHealth::Ready(i)) => Some(Ok(format!(
                    "embeddings of {} values ({} pooling), inputs of at most {} tokens",
                    i.n_embd, app.pooling, i.n_ctx
                ))),
                Some(ServiceHealth::Failed(why)) => Some(Err(why)),
            };
            match (engine, embedder) {
                (Some(Err(why)), _) | (_, Some(Err(why))) => return eprintln!("rgml serve: {why}"),
                (Some(Ok(a)), Some(Ok(b))) => {
                    let said: Vec<String> = [a, b].into_iter().filter(|s| !s.is_empty()).collect();
                    return eprintln!("rgml serve: model loaded: {}", said.join("; "));
                }
                _ => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    });
}

/// Accepts connections (at most `max_connections` open) and serves each with hyper.
async fn accept_loop(listener: tokio::net::TcpListener, router: Router, limits: Limits) -> Result<(), String> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let open = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    loop {
        let Ok(permit) = Arc::clone(&open).acquire_owned().await else { return Ok(()) };
        let (stream, _peer): (tokio::net::TcpStream, SocketAddr) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // out of file descriptors and the like: wait, do not spin or exit
                eprintln!("rgml serve: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(limits.header_timeout_s))
                .serve_connection(TokioIo::new(stream), service);
            let _ = conn.await;
            drop(permit);
        });
    }
}
