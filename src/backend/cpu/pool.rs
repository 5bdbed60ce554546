//! The thread pool the CPU executor runs a graph on.
//!
//! A graph is hundreds of small parallel steps, so what matters is the cost of
//! handing one step to the workers and of waiting for them, not stealing work.
//! The calling thread is one of the pool's threads: it publishes a step (a
//! closure over `0..n` in fixed chunks), takes chunks itself, and waits only for
//! chunks a worker has already claimed, so a worker that is asleep or has lost
//! its core never holds a step up. Idle workers spin for a short while, then
//! yield, then park; during a compute ([`GraphPool::session`]) they spin long
//! enough to bridge the gap between two nodes, so a node costs no futex wake.
//! Chunk boundaries depend only on `n`, the cost and the thread count, and every
//! kernel's result is independent of which thread ran a chunk. A step whose
//! items give the same result however they are grouped (a product's blocks of
//! weight rows) may instead hand them out in shrinking ranges, each a share of
//! what is left: long runs first, then short ones, so that no thread waits long
//! for the other at the step's end.

use std::any::Any;
use std::ops::Range;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// How long an idle worker spins for the next step during a compute before it
/// yields (and later parks): longer than the executor's gap between two nodes.
const SPIN_IN_SESSION: Duration = Duration::from_micros(200);
/// How long an idle worker spins outside a compute.
const SPIN_IDLE: Duration = Duration::from_micros(5);
/// How many times an idle worker yields its core before it parks.
const YIELDS: u32 = 16;

/// How a step's items are handed out.
#[derive(Clone, Copy)]
enum Claim {
    /// Chunks of `step` items, at fixed boundaries.
    Fixed { step: usize },
    /// Each claim a `1 / (2 · threads)` share of the items left, at least
    /// `min`: long runs first, then ever shorter ones, so the threads finish
    /// together. For steps whose items do not depend on how they are grouped.
    Shrinking { min: usize, threads: usize },
}

/// One parallel step, on the publishing thread's stack.
struct Job<'a> {
    f: &'a (dyn Fn(Range<usize>) + Sync),
    n: usize,
    claim: Claim,
    /// The next chunk (`Fixed`) or item (`Shrinking`) to hand out.
    next: AtomicUsize,
    /// The first panic of `f`, re-raised by the publisher.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

impl Job<'_> {
    /// Claims and runs chunks until none is left. A panic in `f` is recorded
    /// (the publisher re-raises it) and ends this thread's part.
    fn work(&self) {
        while let Some(range) = self.take() {
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| (self.f)(range))) {
                self.panic.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(p);
                return;
            }
        }
    }

    /// The next range of items for this thread, or `None` when all are handed out.
    fn take(&self) -> Option<Range<usize>> {
        match self.claim {
            Claim::Fixed { step } => {
                let start = self.next.fetch_add(1, SeqCst).saturating_mul(step);
                (start < self.n).then(|| start..(start + step).min(self.n))
            }
            Claim::Shrinking { min, threads } => {
                let mut start = self.next.load(SeqCst);
                loop {
                    if start >= self.n {
                        return None;
                    }
                    let size = ((self.n - start) / (2 * threads)).max(min);
                    let end = (start + size).min(self.n);
                    match self.next.compare_exchange_weak(start, end, SeqCst, SeqCst) {
                        Ok(_) => return Some(start..end),
                        Err(now) => start = now,
                    }
                }
            }
        }
    }
}

/// What the pool's threads share.
struct Shared {
    /// The step being run, or null. Points at a `Job` on the publisher's stack.
    job: AtomicPtr<Job<'static>>,
    /// Bumped for every step published (and at shutdown).
    epoch: AtomicU64,
    /// Workers between taking the job pointer and being done with it.
    active: AtomicUsize,
    /// Workers parked (or about to park) on `wake`.
    sleeping: AtomicUsize,
    /// A compute is running: idle workers spin longer.
    in_session: AtomicBool,
    stop: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

/// A pool of `threads` threads: the caller of [`Session::for_ranges`] and
/// `threads - 1` workers.
pub(crate) struct GraphPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    threads: usize,
    /// One publisher at a time (two computes on one backend take turns).
    publisher: Mutex<()>,
}

thread_local! {
    /// True on a worker thread, and on a publisher while its step runs: a
    /// nested parallel call runs inline.
    static IN_STEP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl GraphPool {
    /// A pool of `threads` threads in all (0: one per core).
    pub(crate) fn new(threads: usize) -> Result<GraphPool> {
        let threads = if threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { threads };
        let shared = Arc::new(Shared {
            job: AtomicPtr::new(ptr::null_mut()),
            epoch: AtomicU64::new(0),
            active: AtomicUsize::new(0),
            sleeping: AtomicUsize::new(0),
            in_session: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        });
        let mut pool = GraphPool { shared, workers: Vec::new(), threads, publisher: Mutex::new(()) };
        for i in 1..threads {
            let s = Arc::clone(&pool.shared);
            let h = std::thread::Builder::new()
                .name(format!("rgml-graph-{i}"))
                .spawn(move || worker(&s))
                .map_err(|e| Error::Unavailable { what: "CPU thread pool".into(), why: e.to_string() })?;
            pool.workers.push(h);
        }
        Ok(pool)
    }

    /// Threads in all, the caller's included.
    pub(crate) fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `f` as one compute, the only thread publishing steps to this pool
    /// (two computes on one pool take turns); the workers stay awake between
    /// its steps.
    pub(crate) fn session<R>(&self, f: impl FnOnce(&Session<'_>) -> R) -> R {
        let _turn = lock(&self.publisher);
        self.shared.in_session.store(true, SeqCst);
        let r = catch_unwind(AssertUnwindSafe(|| f(&Session { pool: self })));
        self.shared.in_session.store(false, SeqCst);
        r.unwrap_or_else(|p| resume_unwind(p))
    }
}

/// The right to publish steps to a pool, for the length of one
/// [`GraphPool::session`].
pub(crate) struct Session<'p> {
    pool: &'p GraphPool,
}

impl Session<'_> {
    /// Threads in all, the caller's included.
    pub(crate) fn threads(&self) -> usize {
        self.pool.threads
    }

    /// Calls `f` on the chunks `[c·step, (c+1)·step) ∩ 0..n`, on every thread of
    /// the pool, and returns when all are done. A panic in `f` is re-raised
    /// here. On a worker thread (a nested call) it runs inline.
    pub(crate) fn for_ranges(&self, n: usize, step: usize, f: &(dyn Fn(Range<usize>) + Sync)) {
        let step = step.max(1);
        if n <= step {
            return f(0..n);
        }
        self.publish(n, Claim::Fixed { step }, f);
    }

    /// Calls `f` on ranges covering `0..n` on every thread of the pool, as
    /// [`Session::for_ranges`], but each range a shrinking share of the items
    /// left (at least `min`): the threads read long runs, then finish
    /// together. Which ranges there are depends on the timing, so only for
    /// steps whose every item's result is the same however items are grouped.
    pub(crate) fn for_shrinking_ranges(&self, n: usize, min: usize, f: &(dyn Fn(Range<usize>) + Sync)) {
        let min = min.max(1);
        if n <= min {
            return f(0..n);
        }
        self.publish(n, Claim::Shrinking { min, threads: self.pool.threads }, f);
    }

    /// Runs `f` over `0..n` as `claim` hands the items out, on every thread.
    fn publish(&self, n: usize, claim: Claim, f: &(dyn Fn(Range<usize>) + Sync)) {
        if self.pool.threads == 1 || IN_STEP.get() {
            return f(0..n);
        }
        let job = Job { f, n, claim, next: AtomicUsize::new(0), panic: Mutex::new(None) };
        let s = &*self.pool.shared;
        // SAFETY: only the lifetime is erased. The pointer is withdrawn below,
        // and `active` is waited to 0, before `job` goes out of scope: a worker
        // dereferences it only between raising `active` and reading a non-null
        // pointer, and lowers `active` when done (see `worker`).
        let p = ptr::from_ref(&job).cast_mut().cast::<Job<'static>>();
        s.job.store(p, SeqCst);
        s.epoch.fetch_add(1, SeqCst);
        if s.sleeping.load(SeqCst) > 0 {
            let _g = lock(&s.lock);
            s.wake.notify_all();
        }
        IN_STEP.set(true);
        job.work();
        IN_STEP.set(false);
        s.job.store(ptr::null_mut(), SeqCst);
        let mut spins = 0u32;
        while s.active.load(SeqCst) != 0 {
            spins += 1;
            if spins < 1 << 12 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        if let Some(p) = job.panic.into_inner().unwrap_or_else(|e| e.into_inner()) {
            resume_unwind(p);
        }
    }
}

impl Drop for GraphPool {
    fn drop(&mut self) {
        let s = &*self.shared;
        s.stop.store(true, SeqCst);
        s.epoch.fetch_add(1, SeqCst);
        {
            let _g = lock(&s.lock);
            s.wake.notify_all();
        }
        for h in self.workers.drain(..) {
            h.join().ok();
        }
    }
}

fn lock(m: &Mutex<()>) -> MutexGuard<'_, ()> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A worker: wait for a new step, help with it, repeat until the pool drops.
fn worker(s: &Shared) {
    IN_STEP.set(true);
    // from the pool's first epoch, not this thread's start: a thread that
    // starts late must not sleep through a step (or the shutdown) before it
    let mut seen = 0;
    loop {
        seen = wait_for_step(s, seen);
        if s.stop.load(SeqCst) {
            return;
        }
        s.active.fetch_add(1, SeqCst);
        let p = s.job.load(SeqCst);
        if !p.is_null() {
            // SAFETY: `active` was raised before the load, so the publisher,
            // which withdraws the pointer and then waits for `active` to reach 0,
            // keeps the job alive until the decrement below.
            unsafe { &*p }.work();
        }
        s.active.fetch_sub(1, SeqCst);
    }
}

/// Waits until the epoch moves past `seen` (spin, yield, then park); returns it.
fn wait_for_step(s: &Shared, seen: u64) -> u64 {
    let start = Instant::now();
    let mut yields = 0;
    loop {
        let e = s.epoch.load(SeqCst);
        if e != seen {
            return e;
        }
        let budget = if s.in_session.load(SeqCst) { SPIN_IN_SESSION } else { SPIN_IDLE };
        if start.elapsed() < budget {
            for _ in 0..64 {
                std::hint::spin_loop();
            }
        } else if yields < YIELDS {
            yields += 1;
            std::thread::yield_now();
        } else {
            park(s, seen);
            return s.epoch.load(SeqCst);
        }
    }
}

/// Sleeps until the epoch moves past `seen`. The publisher bumps the epoch and
/// then reads `sleeping`; this raises `sleeping` and then re-reads the epoch
/// under the lock, so one of the two sees the other and no wake-up is lost.
fn park(s: &Shared, seen: u64) {
    s.sleeping.fetch_add(1, SeqCst);
    let mut g = lock(&s.lock);
    while s.epoch.load(SeqCst) == seen && !s.stop.load(SeqCst) {
        g = s.wake.wait(g).unwrap_or_else(|e| e.into_inner());
    }
    drop(g);
    s.sleeping.fetch_sub(1, SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    fn covered(pool: &Session, n: usize, step: usize) -> Vec<u32> {
        let hits: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
        pool.for_ranges(n, step, &|r| {
            for i in r {
                hits[i].fetch_add(1, SeqCst);
            }
        });
        hits.into_iter().map(AtomicU32::into_inner).collect()
    }

    #[test]
    fn every_index_once() {
        for threads in [1, 2, 3, 5] {
            GraphPool::new(threads).unwrap().session(|pool| {
                for (n, step) in [(0, 1), (1, 1), (7, 3), (1000, 7), (1000, 1000), (4096, 1), (10, 0)] {
                    assert!(covered(pool, n, step).iter().all(|&h| h == 1), "threads {threads} n {n} step {step}");
                }
            });
        }
    }

    #[test]
    fn shrinking_ranges_cover_every_index_once_in_runs_of_at_least_min() {
        for threads in [1, 2, 3, 5] {
            GraphPool::new(threads).unwrap().session(|pool| {
                for (n, min) in [(0, 1), (1, 1), (7, 3), (1000, 7), (1000, 1000), (4096, 1), (10, 0)] {
                    let hits: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
                    let short = AtomicU32::new(0);
                    pool.for_shrinking_ranges(n, min, &|r| {
                        // only the last range may be shorter than `min`
                        if r.len() < min.max(1) && r.end != n {
                            short.fetch_add(1, SeqCst);
                        }
                        for i in r {
                            hits[i].fetch_add(1, SeqCst);
                        }
                    });
                    assert!(hits.iter().all(|h| h.load(SeqCst) == 1), "threads {threads} n {n} min {min}");
                    assert_eq!(short.into_inner(), 0, "threads {threads} n {n} min {min}");
                }
            });
        }
    }

    #[test]
    fn many_steps_in_a_session_and_after_parking() {
        let pool = GraphPool::new(3).unwrap();
        pool.session(|s| {
            for n in 0..2000 {
                assert!(covered(s, n % 97 + 2, 1).iter().all(|&h| h == 1));
            }
        });
        // the workers park; a step after that wakes them
        std::thread::sleep(Duration::from_millis(20));
        pool.session(|s| assert!(covered(s, 64, 1).iter().all(|&h| h == 1)));
    }

    #[test]
    fn workers_take_part() {
        let pool = GraphPool::new(2).unwrap();
        let ids = Mutex::new(std::collections::HashSet::new());
        pool.session(|s| {
            for _ in 0..200 {
                s.for_ranges(64, 1, &|_| {
                    ids.lock().unwrap().insert(std::thread::current().id());
                    std::thread::sleep(Duration::from_micros(50));
                });
            }
        });
        assert_eq!(ids.into_inner().unwrap().len(), 2);
    }

    #[test]
    fn nested_calls_run_inline() {
        let pool = GraphPool::new(2).unwrap();
        let total = AtomicUsize::new(0);
        pool.session(|s| {
            s.for_ranges(8, 1, &|_| {
                s.for_ranges(10, 1, &|r| {
                    total.fetch_add(r.len(), SeqCst);
                })
            })
        });
        assert_eq!(total.into_inner(), 80);
    }

    #[test]
    fn a_panic_reaches_the_caller_and_the_pool_survives() {
        let pool = GraphPool::new(2).unwrap();
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.session(|s| {
                s.for_ranges(100, 1, &|r| {
                    if r.start == 57 {
                        panic!("boom");
                    }
                })
            })
        }));
        assert_eq!(r.unwrap_err().downcast_ref::<&str>(), Some(&"boom"));
        pool.session(|s| assert!(covered(s, 100, 1).iter().all(|&h| h == 1)));
    }

    #[test]
    fn two_publishers_take_turns() {
        let pool = Arc::new(GraphPool::new(2).unwrap());
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let pool = Arc::clone(&pool);
                std::thread::spawn(move || {
                    pool.session(|s| (0..300).all(|n| covered(s, n + 2, 1).iter().all(|&h| h == 1)))
                })
            })
            .collect();
        assert!(handles.into_iter().all(|h| h.join().unwrap()));
    }
}
