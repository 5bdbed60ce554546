//! A classifier's dataset: feature rows and their classes, CSV input, fixed
//! splits, minibatches in a shuffled order.

use crate::error::{Error, Result};

/// Feature rows and their classes.
#[derive(Clone, Debug)]
pub struct Dataset {
    features: Vec<f32>,
    pub(crate) n_features: usize,
    pub(crate) labels: Vec<usize>,
    pub(crate) n_classes: usize,
}

impl Dataset {
    /// `features` holds `labels.len()` rows of `n_features` values; every
    /// label is below `n_classes`.
    pub fn new(features: Vec<f32>, n_features: usize, labels: Vec<usize>, n_classes: usize) -> Result<Dataset> {
        if n_features == 0 || n_classes < 2 || features.len() != labels.len() * n_features {
            return Err(Error::Invalid(format!(
                "dataset: {} values for {} rows of {n_features} features, {n_classes} classes",
                features.len(),
                labels.len()
            )));
        }
        if let Some(bad) = labels.iter().find(|&&l| l >= n_classes) {
            return Err(Error::Invalid(format!("dataset: label {bad} of {n_classes} classes")));
        }
        Ok(Dataset { features, n_features, labels, n_classes })
    }
    /// A dataset from CSV text: one row per line, its features then its
    /// class (an integer) last, each feature multiplied by `scale`. Blank
    /// lines are skipped; anything else that does not parse is an error
    /// naming the line.
    pub fn from_csv(text: &str, n_classes: usize, scale: f32) -> Result<Dataset> {
        let (mut features, mut labels, mut n_features) = (Vec::new(), Vec::new(), None);
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let bad = || Error::Invalid(format!("csv line {}: {:.60}", i + 1, line));
            let cells: Vec<&str> = line.split(',').map(str::trim).collect();
            let (label, row) = cells.split_last().ok_or_else(bad)?;
            if *n_features.get_or_insert(row.len()) != row.len() {
                return Err(bad());
            }
            for c in row {
                features.push(c.parse::<f32>().map_err(|_| bad())? * scale);
            }
            labels.push(label.parse::<usize>().map_err(|_| bad())?);
        }
        Dataset::new(features, n_features.unwrap_or(0), labels, n_classes)
    }
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.labels.len()
    }
    /// True without rows.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
    /// The rows `0..at` and `at..`.
    pub fn split(&self, at: usize) -> (Dataset, Dataset) {
        let at = at.min(self.len());
        let part = |r: std::ops::Range<usize>| Dataset {
            features: self.features[r.start * self.n_features..r.end * self.n_features].to_vec(),
            n_features: self.n_features,
            labels: self.labels[r].to_vec(),
            n_classes: self.n_classes,
        };
        (part(0..at), part(at..self.len()))
    }
    /// A fixed split: every `k`-th row (rows `k-1, 2k-1, …`) in the second
    /// part, the others in the first (`k = 5`: 80 / 20, each part drawn from
    /// the whole file).
    pub fn split_every(&self, k: usize) -> (Dataset, Dataset) {
        let k = k.max(1);
        let pick = |second: bool| {
            let rows: Vec<usize> = (0..self.len()).filter(|r| (r % k == k - 1) == second).collect();
            Dataset {
                features: rows
                    .iter()
                    .flat_map(|&r| self.features[r * self.n_features..(r + 1) * self.n_features].to_vec())
                    .collect(),
                n_features: self.n_features,
                labels: rows.iter().map(|&r| self.labels[r]).collect(),
                n_classes: self.n_classes,
            }
        };
        (pick(false), pick(true))
    }
    /// The features and one-hot labels of `rows`, padded with zero rows to `batch`.
    pub(crate) fn batch(&self, rows: &[usize], batch: usize) -> (Vec<f32>, Vec<f32>) {
        let mut x = vec![0f32; batch * self.n_features];
        let mut y = vec![0f32; batch * self.n_classes];
        for (i, &r) in rows.iter().enumerate() {
            x[i * self.n_features..(i + 1) * self.n_features]
                .copy_from_slice(&self.features[r * self.n_features..(r + 1) * self.n_features]);
            y[i * self.n_classes + self.labels[r]] = 1.0;
        }
        (x, y)
    }
}

/// `0..n` in an order given by `seed` (Fisher–Yates over xorshift64*).
pub(crate) fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..n).rev() {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        let j = (s.wrapping_mul(0x2545_F491_4F6C_DD1D) % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}
