//! A [`Scheduler`] on a thread of its own, fed from any number of threads: what a server
//! runs behind its connections, without HTTP. Each request comes with a [`Sink`] for its
//! events; a sink whose receiver is gone cancels its request at the next step, so a
//! client that leaves frees its sequence. The model loads on the engine's thread (its
//! backend never crosses threads) while [`Engine::health`] says it is loading.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use rgml::{Backend, Result};

use crate::model::Model;
use crate::scheduler::{Event, Request, RequestId, Scheduler};

/// Where a request's events go.
pub trait Sink: Send {
    /// Delivers `event`; false when nobody will read it (the request is then cancelled).
    fn send(&mut self, event: Event) -> bool;
    /// Nobody will read this sink's events any more.
    fn is_closed(&self) -> bool;
}

/// How the engine schedules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineOptions {
    /// Prompt tokens evaluated per step at most ([`Scheduler::new`]).
    pub chunk: usize,
    /// Requests waiting for a sequence at most, beyond those the free sequences
    /// take; more are refused ([`SubmitError::QueueFull`]).
    pub max_queue: usize,
}

/// What the loaded model offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelInfo {
    /// Sequences served at once.
    pub n_seq: usize,
    /// Positions of each sequence.
    pub n_ctx: usize,
    /// Vocabulary size.
    pub n_vocab: usize,
    /// A sequence's results are those of its lone run ([`Model::rows_invariant`]);
    /// otherwise they are still independent of the other sequences, but not equal
    /// to a one-sequence model's.
    pub rows_invariant: bool,
}

/// The engine's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    /// The model is loading.
    Loading,
    /// Serving.
    Ready(ModelInfo),
    /// Loading failed, or the engine's thread ended.
    Failed(String),
}

/// Why a request was not taken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    /// The model is still loading.
    #[error("the model is loading")]
    Loading,
    /// The engine cannot serve.
    #[error("the engine is down: {0}")]
    Down(String),
    /// [`EngineOptions::max_queue`] requests are waiting.
    #[error("{0} requests are waiting for a sequence already")]
    QueueFull(usize),
}

/// Counters since the engine started, and the gauges now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests taken.
    pub requests: u64,
    /// Requests that ended with [`Event::Done`].
    pub finished: u64,
    /// Requests refused by the scheduler or ended by a failed step.
    pub refused: u64,
    /// Requests cancelled (their sink closed).
    pub cancelled: u64,
    /// Prompt tokens of the finished requests.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub generated_tokens: u64,
    /// Steps run.
    pub steps: u64,
    /// Time spent in steps, in nanoseconds.
    pub busy_ns: u64,
    /// Requests waiting for a sequence now.
    pub queued: usize,
    /// Sequences serving a request now.
    pub busy: usize,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    finished: AtomicU64,
    refused: AtomicU64,
    cancelled: AtomicU64,
    prompt_tokens: AtomicU64,
    generated_tokens: AtomicU64,
    steps: AtomicU64,
    busy_ns: AtomicU64,
    queued: AtomicUsize,
    busy: AtomicUsize,
}

struct Shared {
    health: Mutex<Health>,
    counters: Counters,
}

impl Shared {
    fn set_health(&self, h: Health) {
        *self.health.lock().unwrap_or_else(|e| e.into_inner()) = h;
    }
}

/// A request and where its events go.
type Job = (Request, Box<dyn Sink>);

/// A scheduler on its own thread.
pub struct Engine {
    tx: Option<Sender<Job>>,
    shared: Arc<Shared>,
    opts: EngineOptions,
    thread: Option<JoinHandle<()>>,
}

impl Engine {
    /// Starts the engine's thread, which calls `load` and then serves the model's
    /// sequences ([`crate::model::LoadOptions::n_seq`]).
    pub fn start<B, F>(load: F, opts: EngineOptions) -> Engine
    where
        B: Backend + 'static,
        F: FnOnce() -> Result<Model<B>> + Send + 'static,
    {
        let shared = Arc::new(Shared { health: Mutex::new(Health::Loading), counters: Counters::default() });
        let (tx, rx) = mpsc::channel();
        let worker = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("rgml-engine".into())
            .spawn(move || {
                match load() {
                    Ok(model) => serve(model, &rx, &worker, opts),
                    Err(e) => worker.set_health(Health::Failed(format!("loading the model failed: {e}"))),
                }
                // whatever is still queued is dropped with its sinks: their receivers see the end
            })
            .ok();
        if thread.is_none() {
            shared.set_health(Health::Failed("could not start the engine's thread".into()));
        }
        Engine { tx: Some(tx), shared, opts, thread }
    }

    /// The engine's state.
    pub fn health(&self) -> Health {
        self.shared.health.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The counters and gauges now.
    pub fn stats(&self) -> Stats {
        let c = &self.shared.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Stats {
            requests: get(&c.requests),
            finished: get(&c.finished),
            refused: get(&c.refused),
            cancelled: get(&c.cancelled),
            prompt_tokens: get(&c.prompt_tokens),
            generated_tokens: get(&c.generated_tokens),
            steps: get(&c.steps),
            busy_ns: get(&c.busy_ns),
            queued: c.queued.load(Ordering::Relaxed),
            busy: c.busy.load(Ordering::Relaxed),
        }
    }

    /// Queues `req`; its events go to `sink`, ending with [`Event::Done`] or
    /// [`Event::Refused`] (or the sink is dropped unsent if the engine stops).
    ///
    /// # Errors
    /// [`SubmitError`]: loading, down, or the queue is full.
    pub fn submit(&self, req: Request, sink: Box<dyn Sink>) -> std::result::Result<(), SubmitError> {
        let n_seq = match self.health() {
            Health::Ready(info) => info.n_seq,
            Health::Loading => return Err(SubmitError::Loading),
            Health::Failed(why) => return Err(SubmitError::Down(why)),
        };
        // waiting and running together stay within the queue and the sequences: a
        // burst that fits in free sequences is taken before the engine admits it
        let c = &self.shared.counters;
        let capacity = self.opts.max_queue + n_seq;
        let busy = c.busy.load(Ordering::Acquire);
        c.queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| (q + busy < capacity).then_some(q + 1))
            .map_err(|q| SubmitError::QueueFull(q.saturating_sub(n_seq.saturating_sub(busy))))?;
        let queued = &c.queued;
        let sent = self.tx.as_ref().is_some_and(|tx| tx.send((req, sink)).is_ok());
        if !sent {
            queued.fetch_sub(1, Ordering::AcqRel);
            return Err(SubmitError::Down("the engine's thread has ended".into()));
        }
        self.shared.counters.requests.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl Drop for Engine {
    /// Stops taking requests, lets the running ones finish, and joins the thread.
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The engine's loop: take requests, step, deliver events, until the engine is dropped
/// and nothing is left to run.
fn serve<B: Backend>(model: Model<B>, rx: &Receiver<Job>, shared: &Shared, opts: EngineOptions) {
    let info = ModelInfo {
        n_seq: model.n_seq(),
        n_ctx: model.n_ctx(),
        n_vocab: model.hp.n_vocab,
        rows_invariant: model.rows_invariant(),
    };
    let mut sched = Scheduler::new(model, opts.chunk);
    let mut sinks: HashMap<RequestId, Box<dyn Sink>> = HashMap::new();
    shared.set_health(Health::Ready(info));
    let c = &shared.counters;
    // requests counted in `queued` that the scheduler holds in its queue
    let mut in_queue = 0;
    let mut open = true;
    loop {
        let mut received = 0;
        if sched.is_idle() && open {
            match rx.recv() {
                Ok((req, sink)) => {
                    sinks.insert(sched.submit(req), sink);
                    received += 1;
                }
                Err(_) => open = false,
            }
        }
        while open {
            match rx.try_recv() {
                Ok((req, sink)) => {
                    sinks.insert(sched.submit(req), sink);
                    received += 1;
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => open = false,
            }
        }
        if sched.is_idle() && !open {
            break;
        }
        sinks.retain(|&id, s| {
            let closed = s.is_closed();
            if closed && sched.cancel(id) {
                c.cancelled.fetch_add(1, Ordering::Relaxed);
            }
            !closed
        });
        let t = Instant::now();
        let events = sched.step().unwrap_or_else(|e| {
            let why = format!("evaluating the step failed: {e}");
            sched.abort_all().into_iter().map(|id| Event::Refused { id, why: why.clone() }).collect()
        });
        c.busy_ns.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        c.steps.fetch_add(1, Ordering::Relaxed);
        // the gauges first: a client that has its last event sees them current
        let now = sched.queued();
        c.queued.fetch_sub(in_queue + received - now, Ordering::AcqRel);
        in_queue = now;
        c.busy.store(sched.busy(), Ordering::Release);
        for event in events {
            deliver(event, &mut sinks, &mut sched, c);
        }
        // (a sink found closed while delivering cancels its request)
        c.busy.store(sched.busy(), Ordering::Release);
    }
    shared.set_health(Health::Failed("the engine has stopped".into()));
}

/// Hands `event` to its request's sink; a closed sink cancels the request.
fn deliver<B: Backend>(
    event: Event,
    sinks: &mut HashMap<RequestId, Box<dyn Sink>>,
    sched: &mut Scheduler<B>,
    c: &Counters,
) {
    let (id, last) = match &event {
        Event::Token { id, .. } => {
            c.generated_tokens.fetch_add(1, Ordering::Relaxed);
            (*id, false)
        }
        Event::Done { id, prompt_tokens, .. } => {
            c.finished.fetch_add(1, Ordering::Relaxed);
            c.prompt_tokens.fetch_add(*prompt_tokens as u64, Ordering::Relaxed);
            (*id, true)
        }
        Event::Refused { id, .. } => {
            c.refused.fetch_add(1, Ordering::Relaxed);
            (*id, true)
        }
    };
    let Some(sink) = sinks.get_mut(&id) else { return };
    let delivered = sink.send(event);
    if last {
        sinks.remove(&id);
    } else if !delivered {
        sinks.remove(&id);
        if sched.cancel(id) {
            c.cancelled.fetch_add(1, Ordering::Relaxed);
        }
    }
}
