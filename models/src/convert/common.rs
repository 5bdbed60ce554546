//! What the converter's modules share: the output type, and errors naming a file and
//! size-capped JSON reads.

use std::path::Path;
use std::str::FromStr;

use rgml::Error;

/// The type of the converted weight matrices (vectors, the norms, are always F32).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutType {
    /// Each matrix as the checkpoint stores it (F32, F16 or BF16).
    #[default]
    Keep,
    /// F32.
    F32,
    /// F16 (rounded to nearest even).
    F16,
    /// BF16 (rounded to nearest even).
    BF16,
    /// Q8_0 (F16 for a matrix whose rows are not whole 32-value blocks).
    Q8_0,
}

impl FromStr for OutType {
    type Err = String;

    /// `f32`, `f16`, `bf16`, `q8_0` or `auto` (keep), case-insensitive.
    fn from_str(s: &str) -> Result<OutType, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" | "keep" => Ok(OutType::Keep),
            "f32" => Ok(OutType::F32),
            "f16" => Ok(OutType::F16),
            "bf16" => Ok(OutType::BF16),
            "q8_0" => Ok(OutType::Q8_0),
            _ => Err(format!("unknown output type {s:?} (f32, f16, bf16, q8_0 or auto)")),
        }
    }
}

/// An [`Error::Invalid`] about the file `path`.
pub fn bad(path: &Path, msg: &str) -> Error {
    Error::Invalid(format!("convert: {}: {msg}", path.display()))
}

/// The JSON document in `path`, refused past `max` bytes (before it is read).
pub fn read_json(path: &Path, max: u64) -> rgml::Result<serde_json::Value> {
    let len = std::fs::metadata(path)?.len();
    if len > max {
        return Err(bad(path, &format!("is {len} bytes, more than the {max} this converter reads")));
    }
    let bytes = std::fs::read(path)?;
    serde_json::from_slice(&bytes).map_err(|e| bad(path, &format!("is not valid JSON: {e}")))
}
