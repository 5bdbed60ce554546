//! Time per op kind across computes: what `rgml bench --model --profile`
//! prints. The executor loop times each node when a backend asks it to.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::dtype::DType;

/// What a profile entry counts: an op, and for a matrix product the type of
/// its weights (`mul_mat(q4_1)` and `mul_mat(f16)` are apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpKind {
    /// [`Op::name`](crate::Op::name).
    pub op: &'static str,
    /// The type of [`Op::weight`](crate::Op::weight)'s operand, if the op has one.
    pub weight: Option<DType>,
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.weight {
            Some(d) => write!(f, "{}({d})", self.op),
            None => f.write_str(self.op),
        }
    }
}

/// Calls and wall time of one op kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpTime {
    /// Nodes run.
    pub calls: u64,
    /// Their wall time, in all.
    pub time: Duration,
}

/// Wall time per op kind (by [`Op::name`](crate::Op::name)), summed over the
/// computes since the profile was last taken.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Profile {
    ops: BTreeMap<OpKind, OpTime>,
}

impl Profile {
    /// Adds one node of kind `op` that ran for `time`.
    pub fn add(&mut self, op: OpKind, time: Duration) {
        let e = self.ops.entry(op).or_default();
        e.calls += 1;
        e.time += time;
    }
    /// Adds every entry of `other`.
    pub fn merge(&mut self, other: &Profile) {
        for (&op, t) in &other.ops {
            let e = self.ops.entry(op).or_default();
            e.calls += t.calls;
            e.time += t.time;
        }
    }
    /// The op kinds, slowest first.
    pub fn by_time(&self) -> Vec<(OpKind, OpTime)> {
        let mut v: Vec<_> = self.ops.iter().map(|(&k, &t)| (k, t)).collect();
        v.sort_by(|a, b| b.1.time.cmp(&a.1.time).then(a.0.cmp(&b.0)));
        v
    }
    /// The time of every node, in all.
    pub fn total(&self) -> Duration {
        self.ops.values().map(|t| t.time).sum()
    }
    /// True if no node was timed.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_merges_and_orders() {
        let ms = Duration::from_millis;
        let k = |op| OpKind { op, weight: None };
        let mut a = Profile::default();
        a.add(k("add"), ms(1));
        a.add(k("mul_mat"), ms(5));
        a.add(k("add"), ms(2));
        let mut b = Profile::default();
        b.add(k("rope"), ms(3));
        b.add(k("add"), ms(1));
        a.merge(&b);
        let v = a.by_time();
        assert_eq!(v[0], (k("mul_mat"), OpTime { calls: 1, time: ms(5) }));
        assert_eq!(v[1], (k("add"), OpTime { calls: 3, time: ms(4) }));
        assert_eq!(v[2], (k("rope"), OpTime { calls: 1, time: ms(3) }));
        let q = OpKind { op: "mul_mat", weight: Some(DType::Q4_1) };
        a.add(q, ms(1));
        assert_eq!(a.by_time().len(), 4);
        assert_eq!((q.to_string(), k("add").to_string()), ("mul_mat(q4_1)".to_string(), "add".to_string()));
        assert_eq!(a.total(), ms(13));
        assert!(!a.is_empty() && Profile::default().is_empty());
    }
}
