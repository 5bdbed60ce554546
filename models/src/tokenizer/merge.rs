//! The pairwise merge SentencePiece BPE and byte-pair encoding share: adjacent runs of a
//! text merge, best candidate first (leftmost among equals), until no adjacent pair
//! qualifies.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use super::unicode::utf8_len;

/// A run of the text: `len` bytes at `start`, in a doubly linked list of the live runs
/// (a merged-away run keeps length 0).
#[derive(Clone, Copy)]
pub(crate) struct Symbol {
    pub start: usize,
    pub len: usize,
    pub prev: Option<usize>,
    pub next: Option<usize>,
}

/// The text split into UTF-8 characters (a lead byte decides the length, as llama.cpp
/// steps), linked in order.
pub(crate) fn char_symbols(text: &str) -> Vec<Symbol> {
    let b = text.as_bytes();
    let mut syms = Vec::with_capacity(b.len());
    let mut at = 0;
    while at < b.len() {
        let len = utf8_len(b[at]).min(b.len() - at);
        let i = syms.len();
        syms.push(Symbol { start: at, len, prev: i.checked_sub(1), next: None });
        at += len;
        if at < b.len() {
            syms[i].next = Some(i + 1);
        }
    }
    syms
}

/// A candidate merge of runs `left` and `right`, `len` bytes together when proposed.
struct Candidate<K> {
    key: K,
    left: usize,
    right: usize,
    len: usize,
}

impl<K: Ord> Ord for Candidate<K> {
    fn cmp(&self, o: &Self) -> Ordering {
        self.key.cmp(&o.key).then(Reverse(self.left).cmp(&Reverse(o.left)))
    }
}
impl<K: Ord> PartialOrd for Candidate<K> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<K: Ord> PartialEq for Candidate<K> {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl<K: Ord> Eq for Candidate<K> {}

/// Merges `syms` (runs of `text`) while some adjacent pair has a priority:
/// `priority(left, right, both)` of the two runs' texts, the highest merged first.
pub(crate) fn merge<K: Ord>(
    text: &str,
    mut syms: Vec<Symbol>,
    mut priority: impl FnMut(&str, &str, &str) -> Option<K>,
) -> Vec<Symbol> {
    let mut queue = BinaryHeap::new();
    let mut propose = |syms: &[Symbol], queue: &mut BinaryHeap<Candidate<K>>, l: Option<usize>, r: Option<usize>| {
        let (Some(left), Some(right)) = (l, r) else { return };
        let (a, b) = (syms[left], syms[right]);
        let both = &text[a.start..b.start + b.len];
        if let Some(key) = priority(&text[a.start..a.start + a.len], &text[b.start..b.start + b.len], both) {
            queue.push(Candidate { key, left, right, len: a.len + b.len });
        }
    };
    for i in 1..syms.len() {
        propose(&syms, &mut queue, Some(i - 1), Some(i));
    }
    while let Some(c) = queue.pop() {
        let (l, r) = (syms[c.left], syms[c.right]);
        // stale: a side merged since (runs only grow rightwards, so equal lengths mean
        // the same two texts)
        if l.len == 0 || r.len == 0 || l.len + r.len != c.len {
            continue;
        }
        syms[c.left].len += r.len;
        syms[c.right].len = 0;
        syms[c.left].next = r.next;
        if let Some(n) = r.next {
            syms[n].prev = Some(c.left);
        }
        propose(&syms, &mut queue, l.prev, Some(c.left));
        propose(&syms, &mut queue, Some(c.left), r.next);
    }
    syms
}
