//! The plan verifier: recomputes lifetimes from the graph (not from the
//! planner's records) and checks that buffer roots stay inside the buffer,
//! are aligned, and that no two of them share bytes while both are live —
//! except a node that legitimately writes over its source in place.

use super::lifetimes::Lifetimes;
use super::placement::{Place, Plan};
use super::rules::ReuseRules;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;

struct Span {
    root: crate::tensor::TensorId,
    start: usize,
    end: usize,
    lo: usize,
    hi: usize,
}

impl Plan {
    /// Checks this plan against `graph` and the backend's `rules`; an error
    /// names the tensors and ranges at fault.
    pub fn verify(&self, ctx: &Context, graph: &Graph, rules: &dyn ReuseRules) -> Result<()> {
        graph.check_context(ctx)?;
        self.check_graph(graph)?;
        let bad = |msg: String| Err(Error::Invalid(format!("plan verify: {msg}")));
        let lt = Lifetimes::of(ctx, graph)?;
        let last = graph.nodes().len().saturating_sub(1);
        let mut spans = Vec::new();
        for (root, place) in self.places() {
            let t = ctx.tensor(root)?;
            if t.view_src().is_some() {
                return bad(format!("{} is a view but has a place of its own", ctx.label(root)));
            }
            let Place::Buffer { offset } = place else {
                if ctx.leaf_bytes(root).is_none() {
                    return bad(format!("{} has no data but is placed as {place:?}", ctx.label(root)));
                }
                continue;
            };
            let size = t.layout().nbytes();
            if !offset.is_multiple_of(self.alignment) || !offset.is_multiple_of(rules.alignment()) {
                return bad(format!(
                    "{} at offset {offset} is not {}-byte aligned",
                    ctx.label(root),
                    rules.alignment()
                ));
            }
            if offset.checked_add(size).is_none_or(|e| e > self.buffer_size) {
                return bad(format!(
                    "{} at {offset}+{size} lies outside the {}-byte buffer",
                    ctx.label(root),
                    self.buffer_size
                ));
            }
            let start = lt.pos.get(&root).copied().unwrap_or(0);
            let end =
                if lt.protected.contains(&root) { last } else { lt.last_use.get(&root).copied().unwrap_or(start) };
            spans.push(Span { root, start, end, lo: offset, hi: offset + size });
        }
        // every graph root that needs bytes has a place
        for &id in graph.nodes().iter().chain(graph.leafs()) {
            let t = ctx.tensor(id)?;
            let root = t.view_src().unwrap_or(id);
            if self.place(root).is_none() {
                return bad(format!("{} has no place", ctx.label(root)));
            }
        }
        spans.sort_by_key(|s| (s.start, s.lo));
        let mut active: Vec<&Span> = Vec::new();
        for s in &spans {
            active.retain(|a| a.end >= s.start);
            for a in &active {
                if a.lo < s.hi
                    && s.lo < a.hi
                    && a.hi > a.lo
                    && s.hi > s.lo
                    && !self.legit_handover(ctx, rules, &lt, a, s)?
                {
                    return bad(format!(
                        "{} [{}..{}) live at steps {}..={} overlaps {} [{}..{}) live at steps {}..={}",
                        ctx.label(a.root),
                        a.lo,
                        a.hi,
                        a.start,
                        a.end,
                        ctx.label(s.root),
                        s.lo,
                        s.hi,
                        s.start,
                        s.end
                    ));
                }
            }
            active.push(s);
        }
        Ok(())
    }

    /// `next` took `prev`'s block in place: it was recorded as such, it starts
    /// at `prev`'s last use, reads `prev` in the same layout through a slot the
    /// kernel allows, and `prev` is not protected.
    fn legit_handover(
        &self,
        ctx: &Context,
        rules: &dyn ReuseRules,
        lt: &Lifetimes,
        prev: &Span,
        next: &Span,
    ) -> Result<bool> {
        if self.reused_source(next.root) != Some(prev.root) || prev.end != next.start || prev.lo != next.lo {
            return Ok(false);
        }
        if lt.protected.contains(&prev.root) {
            return Ok(false);
        }
        let t = ctx.tensor(next.root)?;
        for (slot, &s) in t.src().iter().enumerate() {
            let st = ctx.tensor(s)?;
            if st.view_src().unwrap_or(s) == prev.root
                && st.layout().same_places(t.layout())
                && st.view_offs() == 0
                && rules.may_overwrite_source(&t.op(), slot)
            {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
