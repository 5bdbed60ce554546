//! An [`EmbeddingModel`] on a thread of its own, fed from any thread: what a server runs
//! behind its `/v1/embeddings` connections, beside (or instead of) the text
//! [`crate::engine::Engine`]. Jobs wait in a bounded queue and run one after another,
//! each input of a job in its own graph; a job's answer goes to the callback it came
//! with. The model loads on the service's thread (its backend never crosses threads).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rgml::{Backend, Result};

use super::{EmbedInfo, EmbedOptions, EmbeddingModel};
use crate::engine::SubmitError;

/// The service's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServiceHealth {
    /// The model is loading.
    Loading,
    /// Serving.
    Ready(EmbedInfo),
    /// Loading failed, or the service's thread ended.
    Failed(String),
}

/// A job's answer: each input's embedding ([`EmbeddingModel::embed`]), or the error of
/// the first input that failed.
pub type Reply = Box<dyn FnOnce(Result<Vec<Vec<f32>>>) + Send>;

/// Inputs to embed alike, and where the answer goes.
struct Job {
    inputs: Vec<Vec<u32>>,
    opts: EmbedOptions,
    reply: Reply,
}

struct Shared {
    health: Mutex<ServiceHealth>,
    /// Jobs submitted and not yet answered.
    pending: AtomicUsize,
}

impl Shared {
    fn set_health(&self, h: ServiceHealth) {
        *self.health.lock().unwrap_or_else(|e| e.into_inner()) = h;
    }
}

/// An embedding model on its own thread.
pub struct EmbedService {
    tx: Option<SyncSender<Job>>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl EmbedService {
    /// Starts the service's thread, which calls `load` and then answers jobs; at most
    /// `max_queue` (≥ 1) jobs wait beside the one running.
    pub fn start<B, F>(load: F, max_queue: usize) -> EmbedService
    where
        B: Backend + 'static,
        F: FnOnce() -> Result<EmbeddingModel<B>> + Send + 'static,
    {
        let shared = Arc::new(Shared { health: Mutex::new(ServiceHealth::Loading), pending: AtomicUsize::new(0) });
        let (tx, rx) = mpsc::sync_channel(max_queue.max(1));
        let worker = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("rgml-embed".into())
            .spawn(move || match load() {
                Ok(model) => serve(model, &rx, &worker),
                Err(e) => worker.set_health(ServiceHealth::Failed(format!("loading the model failed: {e}"))),
            })
            .ok();
        if thread.is_none() {
            shared.set_health(ServiceHealth::Failed("could not start the embedding thread".into()));
        }
        EmbedService { tx: Some(tx), shared, thread }
    }

    /// The service's state.
    pub fn health(&self) -> ServiceHealth {
        self.shared.health.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Jobs submitted and not yet answered.
    pub fn pending(&self) -> usize {
        self.shared.pending.load(Ordering::Relaxed)
    }

    /// Queues the embedding of `inputs` as `opts` says; `reply` gets the answer on the
    /// service's thread (or is dropped unanswered if the service stops first).
    ///
    /// # Errors
    /// [`SubmitError`]: loading, down, or the queue is full.
    pub fn submit(
        &self,
        inputs: Vec<Vec<u32>>,
        opts: EmbedOptions,
        reply: Reply,
    ) -> std::result::Result<(), SubmitError> {
        match self.health() {
            ServiceHealth::Ready(_) => {}
            ServiceHealth::Loading => return Err(SubmitError::Loading),
            ServiceHealth::Failed(why) => return Err(SubmitError::Down(why)),
        }
        let Some(tx) = self.tx.as_ref() else { return Err(SubmitError::Down("the service has stopped".into())) };
        self.shared.pending.fetch_add(1, Ordering::AcqRel);
        tx.try_send(Job { inputs, opts, reply }).map_err(|e| {
            self.shared.pending.fetch_sub(1, Ordering::AcqRel);
            match e {
                TrySendError::Full(_) => SubmitError::QueueFull(self.pending()),
                TrySendError::Disconnected(_) => SubmitError::Down("the embedding thread has ended".into()),
            }
        })
    }
}

impl Drop for EmbedService {
    /// Stops taking jobs, lets the queued ones finish, and joins the thread.
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The service's loop: answer jobs until the service is dropped.
fn serve<B: Backend>(mut model: EmbeddingModel<B>, rx: &Receiver<Job>, shared: &Shared) {
    shared.set_health(ServiceHealth::Ready(model.info().clone()));
    while let Ok(job) = rx.recv() {
        let out = job.inputs.iter().map(|ids| model.embed(ids, &job.opts)).collect();
        shared.pending.fetch_sub(1, Ordering::AcqRel);
        (job.reply)(out);
    }
    shared.set_health(ServiceHealth::Failed("the embedding service has stopped".into()));
}
