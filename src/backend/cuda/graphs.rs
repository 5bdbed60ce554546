//! CUDA graphs ([`CudaBackend::with_graphs`](crate::CudaBackend::with_graphs)): a compute that a storage has
//! already run once, for the same graph at the same device addresses, is
//! captured as a CUDA graph and launched; later ones launch the captured
//! graph again. One launch then replaces one driver call per node, which is
//! what a decode step of a small model spends most of its time on.
//!
//! What a replay depends on, and is checked against before each launch (a
//! [`Key`]): the graph (id and revision), every storage root's device range
//! (plan buffer offsets, leaf copies), the index-flag buffer, the scratch
//! buffer and the `mul_mat` paths chosen. Leaves' data, inputs set since the last
//! run, a KV cache: all are read by the kernels at launch time, so they may
//! change between replays. Nothing is allocated during a capture (scratch is
//! fixed, cuBLAS has its own workspace) and nothing synchronizes.
//!
//! Any failure to capture or instantiate (a driver that refuses some call in
//! capture mode) falls back to running the nodes one by one, for this run
//! and every later one of the storage, and the reason is kept in
//! [`GraphStats::fallback`].

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::CudaGraph;

use super::device::Device;
use super::launch::cuda_err;
use super::matmul::QuantPath;
use crate::backend::cuda_config::GraphStats;
use crate::backend::exec::Regions;
use crate::error::Result;
use crate::graph::Graph;
use crate::tensor::TensorId;

/// How many captured graphs a storage keeps (the least recently used goes first).
/// (A split graph's stages on one storage each take one.)
const KEEP: usize = 16;

/// What a captured graph's launches depend on (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    graph: (u64, u32),
    steps: (usize, usize),
    roots: Vec<(TensorId, u64, usize)>,
    flags: u64,
    quant: QuantPath,
}

impl Key {
    /// The key of a run of `graph`'s nodes at `steps` over `regions`, index flags at `flags`.
    pub(crate) fn new(
        graph: &Graph,
        regions: &Regions<u64>,
        flags: u64,
        quant: QuantPath,
        steps: &std::ops::Range<usize>,
    ) -> Key {
        let mut roots: Vec<_> = regions.iter().map(|(&id, r)| (id, r.base, r.len)).collect();
        roots.sort_unstable();
        Key { graph: (graph.id(), graph.revision()), steps: (steps.start, steps.end), roots, flags, quant }
    }
}

/// An instantiated graph, launched only through `&mut` (so never from two
/// threads at once, which CUDA forbids for graph objects).
struct Exec(CudaGraph);

// SAFETY: CUDA graph objects may be used from any thread as long as calls on
// one object are serialized; `Exec` is only reachable through the storage
// that owns it and only `launch(&mut self)` touches the graph, so moving it
// or sharing `&Exec` between threads cannot make two calls overlap.
unsafe impl Send for Exec {}
// SAFETY: as above: `&Exec` gives access to nothing.
unsafe impl Sync for Exec {}

impl Exec {
    fn launch(&mut self) -> Result<()> {
        self.0.launch().map_err(cuda_err("cuGraphLaunch"))
    }
}

struct Captured {
    key: Key,
    /// The scratch buffer (address, size) the graph's kernels use.
    scratch: (u64, usize),
    graph: Exec,
    last_use: u64,
}

/// A storage's captured graphs and what it has run eagerly.
#[derive(Default)]
pub(crate) struct GraphCache {
    graphs: Vec<Captured>,
    /// Keys run eagerly once (the next run with one of them is captured).
    seen: Vec<Key>,
    stats: GraphStats,
    clock: u64,
}

impl GraphCache {
    pub(crate) fn stats(&self) -> &GraphStats {
        &self.stats
    }
    /// Drops every captured graph (their addresses may have gone).
    pub(crate) fn clear(&mut self) {
        self.graphs.clear();
        self.seen.clear();
    }

    /// Runs the nodes through this cache: replays a graph captured for `key`,
    /// captures one (`eager` queued under capture) if `key` ran before, else
    /// calls `eager` (see the module docs). Returns with the work queued.
    pub(crate) fn run(&mut self, dev: &Device, key: Key, eager: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let cache = self;
        if cache.stats.fallback.is_some() {
            cache.stats.eager += 1;
            return eager();
        }
        cache.clock += 1;
        let scratch = dev.scratch.extent(&dev.stream)?;
        if let Some(c) = cache.graphs.iter_mut().find(|c| c.key == key && c.scratch == scratch) {
            c.last_use = cache.clock;
            c.graph.launch()?;
            cache.stats.replayed += 1;
            return Ok(());
        }
        if !cache.seen.contains(&key) {
            eager()?;
            cache.stats.eager += 1;
            if cache.seen.len() >= KEEP {
                cache.seen.remove(0);
            }
            cache.seen.push(key);
            return Ok(());
        }
        match capture(dev, eager) {
            Ok(graph) => {
                let mut graph = Exec(graph);
                graph.launch()?;
                cache.stats.captured += 1;
                cache.seen.retain(|k| *k != key);
                // an older capture of this key used a scratch buffer since outgrown
                cache.graphs.retain(|c| c.key != key);
                if cache.graphs.len() >= KEEP {
                    let oldest = (0..cache.graphs.len()).min_by_key(|&i| cache.graphs[i].last_use).unwrap_or(0);
                    cache.graphs.swap_remove(oldest);
                }
                let scratch = dev.scratch.extent(&dev.stream)?;
                cache.graphs.push(Captured { key, scratch, graph, last_use: cache.clock });
                Ok(())
            }
            Err(why) => {
                // the eager run is the reference: it returns the node's error if
                // there is one, and otherwise graphs are given up
                eager()?;
                cache.stats.eager += 1;
                cache.stats.fallback = Some(why);
                cache.clear();
                Ok(())
            }
        }
    }
}

/// Captures what `eager` queues on the stream (nothing runs) as an
/// instantiated graph, or why it could not.
fn capture(dev: &Device, eager: &mut dyn FnMut() -> Result<()>) -> std::result::Result<CudaGraph, String> {
    dev.scratch.set_fixed(true).map_err(|e| e.to_string())?;
    let begun = dev.stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    let run = begun.map_err(|e| format!("cuStreamBeginCapture: {e:?}")).map(|()| eager());
    // a begun capture is always ended, whatever happened inside it
    let ended = match &run {
        Ok(_) => Some(dev.stream.end_capture(CUgraphInstantiate_flags(0))),
        Err(_) => None,
    };
    let _ = dev.scratch.set_fixed(false);
    let _ = dev.scratch.release();
    match (run?, ended) {
        (Err(e), _) => Err(format!("a node during capture: {e}")),
        (Ok(()), Some(Ok(Some(g)))) => Ok(g),
        (Ok(()), Some(Ok(None))) => Err("cuStreamEndCapture: no graph".into()),
        (Ok(()), Some(Err(e))) => Err(format!("cuStreamEndCapture/cuGraphInstantiate: {e:?}")),
        (Ok(()), None) => Err("the capture did not end (no graph)".into()),
    }
}
