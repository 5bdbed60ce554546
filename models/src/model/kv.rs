//! The KV cache's element type and size, and the check that it fits in memory before
//! anything is allocated.

use rgml::{DType, Error, Result};

use crate::transformer::hparams::{Hparams, MAX_CONTEXT};

/// The element type of the KV cache (`--kv-type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KvType {
    /// binary16 (llama.cpp's default).
    #[default]
    F16,
    /// binary32.
    F32,
    /// Q8_0 blocks of 32 values (head dims must be multiples of 32).
    Q8_0,
}

impl KvType {
    /// The cache tensors' element type.
    pub fn dtype(self) -> DType {
        match self {
            KvType::F16 => DType::F16,
            KvType::F32 => DType::F32,
            KvType::Q8_0 => DType::Q8_0,
        }
    }

    /// `f16`, `f32` or `q8_0`.
    pub fn from_name(name: &str) -> Option<KvType> {
        match name.to_ascii_lowercase().as_str() {
            "f16" => Some(KvType::F16),
            "f32" => Some(KvType::F32),
            "q8_0" => Some(KvType::Q8_0),
            _ => None,
        }
    }
}

/// The default context: the training context, at most 4096 positions (as llama.cpp's tools).
pub fn default_n_ctx(hp: &Hparams) -> usize {
    hp.n_ctx_train.min(4096)
}

/// Bytes of the keys and values of every layer for `n_ctx` positions.
///
/// # Errors
/// [`Error::Invalid`] for a context outside 1..=2^24, or head dims a Q8_0 cache cannot hold.
pub fn cache_bytes(hp: &Hparams, n_ctx: usize, kv: KvType) -> Result<u64> {
    if !(1..=MAX_CONTEXT).contains(&n_ctx) {
        return Err(Error::Invalid(format!("--n-ctx {n_ctx} is outside 1..={MAX_CONTEXT}")));
    }
    let dt = kv.dtype();
    for (what, d) in [("key", hp.head_dim), ("value", hp.head_dim_v)] {
        if d % dt.block_size() != 0 {
            return Err(Error::Invalid(format!(
                "a {} KV cache needs {what} heads of a multiple of {} values; this model's have {d}",
                dt.name(),
                dt.block_size()
            )));
        }
    }
    let row = |w: usize| dt.row_size(w as i64).unwrap_or(usize::MAX) as u64;
    let per_pos = row(hp.n_embd_k_gqa()).saturating_add(row(hp.n_embd_v_gqa()));
    Ok(per_pos.saturating_mul(n_ctx as u64).saturating_mul(hp.n_layer as u64))
}

/// Memory the system can still give (Linux's `MemAvailable`); `None` where unknown.
pub fn memory_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// An error when `bytes` of `what` exceed the memory available.
///
/// # Errors
/// [`Error::Invalid`] naming the sizes, with `hint`.
pub fn check_fits(bytes: u64, what: &str, hint: &str) -> Result<()> {
    match memory_available() {
        Some(avail) if bytes > avail => Err(Error::Invalid(format!(
            "{what} needs {} but {} of memory is available; {hint}",
            mib(bytes),
            mib(avail)
        ))),
        _ => Ok(()),
    }
}

/// `bytes` in MiB, for messages.
pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

/// Causal mask rows over `n_kv` cache cells, one per entry of `lasts`: a row
/// with `Some(last)` shows cells `..=last` (only the last `window` of them with a
/// window), a row with `None` shows none; 0 where shown, −∞ elsewhere.
pub(crate) fn causal_mask(n_kv: usize, lasts: &[Option<usize>], window: Option<usize>) -> Vec<f32> {
    let mut m = vec![f32::NEG_INFINITY; n_kv * lasts.len()];
    for (row, last) in m.chunks_mut(n_kv.max(1)).zip(lasts) {
        if let Some(last) = *last {
            row[window.map_or(0, |w| (last + 1).saturating_sub(w))..=last].fill(0.0);
        }
    }
    m
}
