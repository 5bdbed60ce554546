//! [`SplitBackend`]: one graph run across several backends (a GPU and the
//! CPU), the way llama.cpp's scheduler runs a model partly offloaded.
//!
//! Each compute node gets a backend: the home of the leaf it reads (weights
//! pull their products to where they live; a caller's [`LeafHome`] says
//! where, by name for instance, as `--n-gpu-layers` does), else the backend
//! holding most bytes of its computed operands (the fewest cross; a tie goes
//! to the backend the node before it wanted); a `to_device` node
//! ([`Context::to_device`]) runs on its device's backend; a backend that cannot run a node
//! ([`Backend::supports_node`]) hands it to the next, and only it. Runs of consecutive
//! nodes on one backend are parts; all the parts of one backend are one
//! stage graph ([`Graph::part`]) with one plan and one storage on it, run a
//! part at a time ([`Backend::compute_steps`]), so weights are uploaded only
//! where their nodes run and roots passed between parts of one backend stay
//! in its buffer. Between backends only the roots a part needs from another
//! cross, copied through the host before it runs; a written leaf (a KV
//! cache) lives in the storage of its first writer, and its state follows
//! the part that wrote it last.

mod partition;
mod storage;

use std::sync::Arc;

pub use partition::LeafHome;
use storage::Inner;
pub use storage::SplitStorage;

use super::traits::Backend;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::plan::Plan;
use crate::tensor::TensorId;

/// Several backends of one kind `B` (e.g. [`AnyBackend`](crate::AnyBackend))
/// running one graph (see the module docs). The first is where nodes go by
/// default; list the CPU last, as the one that runs everything.
pub struct SplitBackend<B: Backend> {
    inner: Arc<Inner<B>>,
}

impl<B: Backend + std::fmt::Debug> std::fmt::Debug for SplitBackend<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SplitBackend").field("backends", &self.inner.backends).finish()
    }
}

impl<B: Backend> SplitBackend<B> {
    /// `backends` in order of preference, every leaf without a home (nodes go
    /// to the first backend that runs them).
    ///
    /// # Errors
    /// [`Error::Invalid`] for no backends.
    pub fn new(backends: Vec<B>) -> Result<SplitBackend<B>> {
        SplitBackend::with_homes(backends, |_, _| None)
    }
    /// `backends` with the leaves' homes given by `home` (an index into
    /// `backends`, or `None`): a node reading a leaf with a home runs there
    /// when that backend can run it.
    ///
    /// # Errors
    /// [`Error::Invalid`] for no backends.
    pub fn with_homes(
        backends: Vec<B>,
        home: impl Fn(&Context, TensorId) -> Option<usize> + Send + Sync + 'static,
    ) -> Result<SplitBackend<B>> {
        if backends.is_empty() {
            return Err(Error::Invalid("a split backend needs at least one backend".into()));
        }
        Ok(SplitBackend { inner: Arc::new(Inner { backends, home: Box::new(home) }) })
    }
    /// `f` applied to every backend (a setting such as poison mode), made
    /// before the first storage: while a storage of this backend is alive (it
    /// shares the backends) the backend comes back unchanged.
    pub fn map_backends(self, f: impl FnMut(B) -> B) -> SplitBackend<B> {
        match Arc::try_unwrap(self.inner) {
            Ok(inner) => {
                let backends = inner.backends.into_iter().map(f).collect();
                SplitBackend { inner: Arc::new(Inner { backends, home: inner.home }) }
            }
            Err(inner) => SplitBackend { inner },
        }
    }
    /// The backends, in order of preference.
    pub fn backends(&self) -> &[B] {
        &self.inner.backends
    }
}

impl<B: Backend> Backend for SplitBackend<B> {
    type Storage = SplitStorage<B>;
    type Rules = B::Rules;

    /// The first backend's rules (for the whole-graph plan, which sizes
    /// nothing: each part is planned on its own backend).
    fn rules(&self) -> B::Rules {
        self.inner.backends[0].rules()
    }
    /// The first backend's (where nodes go by default).
    fn device(&self) -> crate::device::Device {
        self.inner.backends[0].device()
    }
    fn describe(&self) -> String {
        let all: Vec<String> = self.inner.backends.iter().map(Backend::describe).collect();
        format!("split: {}", all.join(" + "))
    }
    /// Whether every backend has a kernel for `op` (a model builds around an
    /// op any of them lacks).
    fn supports(&self, op: &str) -> bool {
        self.inner.backends.iter().all(|b| b.supports(op))
    }
    fn supports_node(&self, ctx: &Context, id: TensorId) -> bool {
        self.inner.backends.iter().any(|b| b.supports_node(ctx, id))
    }
    fn take_profile(&self) -> Option<super::Profile> {
        self.inner.backends.iter().find_map(Backend::take_profile)
    }
    fn alloc(&self, ctx: &Context, graph: &Graph, plan: Plan) -> Result<SplitStorage<B>> {
        SplitStorage::new(self.inner.clone(), ctx, graph, plan)
    }
    /// As [`Backend::alloc`]: each part's storage grows to its plan when bound.
    fn alloc_with_capacity(
        &self,
        ctx: &Context,
        graph: &Graph,
        plan: Plan,
        _capacity: usize,
    ) -> Result<SplitStorage<B>> {
        SplitStorage::new(self.inner.clone(), ctx, graph, plan)
    }
    /// The whole graph only: its parts are the stages a split run makes.
    fn compute_steps(
        &self,
        ctx: &Context,
        graph: &Graph,
        storage: &mut SplitStorage<B>,
        steps: std::ops::Range<usize>,
    ) -> Result<()> {
        if steps != (0..graph.nodes().len()) {
            return Err(Error::Invalid("a split backend runs a whole graph, not a range of its steps".into()));
        }
        storage.compute(&self.inner, ctx, graph)
    }
}

#[cfg(test)]
mod tests;
