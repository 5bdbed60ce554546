//! splitmix64, the property tests' generator: values and state-dependent
//! choices drawn from a proptest-chosen seed (shared by `tests/prop_ops` and
//! `tests/prop_plan`).

// each test crate uses a different subset
#![allow(dead_code)]

/// splitmix64 state.
#[derive(Clone, Debug)]
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (0 when `n == 0`).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    /// A random permutation of 0..4.
    pub fn perm(&mut self) -> [usize; 4] {
        let mut p = [0, 1, 2, 3];
        for i in (1..4).rev() {
            p.swap(i, self.below(i + 1));
        }
        p
    }
    /// A value with a random binary exponent in 2^-26..2^18 (F16 subnormals to beyond F16's range).
    pub fn wide(&mut self) -> f64 {
        let e = self.below(44) as i32 - 26;
        let s = if self.chance(0.5) { -1.0 } else { 1.0 };
        ((s * (1.0 + self.unit()) * 2f64.powi(e)) as f32) as f64
    }
    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as usize) as i64
    }
    /// One element of `v` (`None` when it is empty).
    pub fn pick<T: Copy>(&mut self, v: &[T]) -> Option<T> {
        if v.is_empty() {
            None
        } else {
            Some(v[self.below(v.len())])
        }
    }
}
