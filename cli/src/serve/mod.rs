//! `rgml serve`: an OpenAI-compatible HTTP server over the models library's
//! [`Engine`] (continuous batching across `--parallel` sequences). This module is the
//! thin HTTP layer: hyper speaks HTTP/1.1 (header-read timeouts, a bound on open
//! connections), axum routes; `/v1/chat/completions` and `/v1/completions`
//! (`complete.rs`), `/v1/models`, `/health`, `/metrics`. Every error is OpenAI's error
//! JSON ([`error::ApiError`]).

mod answer;
mod app;
mod complete;
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
use rgml_models::engine::{Engine, EngineOptions, Health};
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
    /// The KV cache (its `n_ctx` per sequence; `n_seq` is set from `parallel`).
    pub load: LoadOptions,
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
    let meta = match app.engine.health() {
        Health::Ready(i) => {
            json!({"n_ctx": i.n_ctx, "n_seq": i.n_seq, "n_vocab": i.n_vocab, "rows_invariant": i.rows_invariant})
        }
        _ => json!(null),
    };
    let model =
        json!({"id": app.model_name, "object": "model", "created": app.started, "owned_by": "rgml", "meta": meta});
    axum::Json(json!({"object": "list", "data": [model]})).into_response()
}

/// `GET /health`: 503 while loading (or failed), else 200 with the sequences' use;
/// `?fail_on_no_slot=1` answers 503 when every sequence is busy (llama-server's flag).
async fn health(State(app): State<Arc<App>>, Query(q): Query<std::collections::HashMap<String, String>>) -> Response {
    match app.engine.health() {
        Health::Loading => ApiError::unavailable("Loading model", 1).into_response(),
        Health::Failed(why) => ApiError::internal(why).into_response(),
        Health::Ready(info) => {
            let st = app.engine.stats();
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
    let n_seq = match app.engine.health() {
        Health::Ready(i) => i.n_seq,
        _ => 0,
    };
    let text = metrics::render(&app.http, &app.engine.stats(), n_seq);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// The tokenizer, the chat template and the model's name of `path`.
fn read_text_side(path: &Path) -> Result<(Tokenizer, ChatTemplate, String), String> {
    let file = GgufFile::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let tok = crate::run::require_tokenizer(&file, path)?;
    let template = crate::run::chat_template(&file, &tok)?;
    let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    Ok((tok, template, name))
}

/// Serves `model` on `backend` until the process is stopped. The port is bound first
/// (`/health` says the model is loading), then the engine loads the model.
pub fn serve<B: Backend + Send + 'static>(model: PathBuf, opts: ServeOptions, backend: B) -> Result<(), String> {
    if opts.parallel == 0 {
        return Err("--parallel must be at least 1".into());
    }
    let (tok, template, model_name) = read_text_side(&model)?;
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
        let path = model.clone();
        let engine = Engine::start(
            move || Model::load_with(&path, load, backend),
            EngineOptions { chunk: opts.chunk, max_queue: opts.max_queue },
        );
        let started = app::unix_now();
        let app = Arc::new(App {
            engine,
            tok: Arc::new(tok),
            template,
            model_name,
            api_key: opts.api_key.clone(),
            limits: opts.limits,
            http: metrics::HttpCounters::default(),
            next_id: AtomicU64::new(1),
            started,
        });
        eprintln!("rgml serve: listening on http://{addr} ({} sequences; loading {})", opts.parallel, model.display());
        report_when_loaded(Arc::clone(&app));
        accept_loop(listener, router(Arc::clone(&app)), opts.limits).await
    })
}

/// Says on standard error when the model is loaded, or why it failed.
fn report_when_loaded(app: Arc<App>) {
    tokio::spawn(async move {
        loop {
            match app.engine.health() {
                Health::Loading => tokio::time::sleep(Duration::from_millis(20)).await,
                Health::Ready(i) => {
                    return eprintln!("rgml serve: model loaded: {} sequences of {} positions", i.n_seq, i.n_ctx);
                }
                Health::Failed(why) => return eprintln!("rgml serve: {why}"),
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
