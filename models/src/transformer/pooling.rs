//! How a sequence's hidden states become one embedding (llama.cpp's
//! `llama_pooling_type`), the `{arch}.pooling_type` key that names a model's own, and the
//! Euclidean normalization llama.cpp's embedding tools apply.

use std::fmt;
use std::str::FromStr;

use rgml::Result;

use super::hparams::{meta, Keys};

/// How the final hidden states of a sequence are pooled into its embedding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pooling {
    /// No pooling: every token's hidden state is an embedding of its own.
    None,
    /// The mean of the tokens' hidden states.
    Mean,
    /// The first token's (BERT's `[CLS]`).
    Cls,
    /// The last token's (a decoder's, which has seen the whole input).
    Last,
}

impl Pooling {
    /// `none`, `mean`, `cls` or `last`, as llama.cpp's `--pooling` spells them.
    pub fn name(self) -> &'static str {
        match self {
            Pooling::None => "none",
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
            Pooling::Last => "last",
        }
    }

    /// The pooling of llama.cpp's `llama_pooling_type` value `v` (`{arch}.pooling_type`):
    /// 0 none, 1 mean, 2 cls, 3 last; `Ok(None)` for −1 (unspecified).
    ///
    /// # Errors
    /// A message for 4 (rank: a reranker's classification head, which rgml does not run)
    /// and for any other value.
    pub fn from_llama(v: i64) -> std::result::Result<Option<Pooling>, String> {
        match v {
            -1 => Ok(None),
            0 => Ok(Some(Pooling::None)),
            1 => Ok(Some(Pooling::Mean)),
            2 => Ok(Some(Pooling::Cls)),
            3 => Ok(Some(Pooling::Last)),
            4 => Err("4 (rank: a reranker's classification head) is not supported".into()),
            v => Err(format!("{v} is not a pooling type (0 none, 1 mean, 2 cls, 3 last)")),
        }
    }
}

impl fmt::Display for Pooling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Pooling {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Pooling, String> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(Pooling::None),
            "mean" => Ok(Pooling::Mean),
            "cls" => Ok(Pooling::Cls),
            "last" => Ok(Pooling::Last),
            _ => Err(format!("unknown pooling {s:?} (none, mean, cls or last)")),
        }
    }
}

/// The file's `{arch}.pooling_type`, `None` when absent or unspecified.
pub(crate) fn read_pooling(k: &Keys) -> Result<Option<Pooling>> {
    let key = k.key("pooling_type");
    if k.get("pooling_type").is_none() {
        return Ok(None);
    }
    let v = k.f.get_i64(&key).or_else(|_| k.f.get_u64(&key).map(|v| i64::try_from(v).unwrap_or(i64::MAX)))?;
    Pooling::from_llama(v).map_err(|why| meta(&key, why))
}

/// `hidden` (`n` rows of `n_embd`, token-major) pooled as `pooling` says: one row, or
/// all of them unchanged for [`Pooling::None`]. The mean is summed in f64.
pub fn pool(hidden: &[f32], n_embd: usize, pooling: Pooling) -> Vec<f32> {
    let rows = hidden.chunks_exact(n_embd.max(1));
    match pooling {
        Pooling::None => hidden.to_vec(),
        Pooling::Cls => rows.take(1).flatten().copied().collect(),
        Pooling::Last => rows.last().map(<[f32]>::to_vec).unwrap_or_default(),
        Pooling::Mean => {
            let n = rows.len();
            let mut sum = vec![0f64; n_embd];
            for row in rows {
                for (s, &x) in sum.iter_mut().zip(row) {
                    *s += f64::from(x);
                }
            }
            sum.into_iter().map(|s| (s / n.max(1) as f64) as f32).collect()
        }
    }
}

/// Scales `v` to Euclidean length 1 as llama.cpp's `common_embd_normalize(…, 2)` does
/// (squares of the f32 values summed in f64); a zero vector stays zero.
pub fn normalize(v: &mut [f32]) {
    let sum: f64 = v.iter().map(|&x| f64::from(x * x)).sum();
    let norm = sum.sqrt();
    let scale = if norm > 0.0 { (1.0 / norm) as f32 } else { 0.0 };
    v.iter_mut().for_each(|x| *x *= scale);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_and_normalizes() {
        let h = [1.0, 2.0, 3.0, 4.0, 5.0, 9.0];
        assert_eq!(pool(&h, 2, Pooling::Mean), [3.0, 5.0]);
        assert_eq!(pool(&h, 2, Pooling::Cls), [1.0, 2.0]);
        assert_eq!(pool(&h, 2, Pooling::Last), [5.0, 9.0]);
        assert_eq!(pool(&h, 2, Pooling::None), h);
        let mut v = [3.0, 4.0];
        normalize(&mut v);
        assert_eq!(v, [0.6, 0.8]);
        let mut z = [0.0, 0.0];
        normalize(&mut z);
        assert_eq!(z, [0.0, 0.0]);
    }

    #[test]
    fn names_and_llama_values() {
        for p in [Pooling::None, Pooling::Mean, Pooling::Cls, Pooling::Last] {
            assert_eq!(p.name().parse::<Pooling>(), Ok(p));
        }
        assert!("max".parse::<Pooling>().is_err());
        assert_eq!(Pooling::from_llama(2), Ok(Some(Pooling::Cls)));
        assert_eq!(Pooling::from_llama(-1), Ok(None));
        assert!(Pooling::from_llama(4).unwrap_err().contains("rank"));
        assert!(Pooling::from_llama(7).is_err());
    }
}
