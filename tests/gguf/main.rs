//! GGUF reader and writer against the fixtures in tests/fixtures/gguf (made
//! with gguf-py 0.19.0; see manifest.json): valid files match the manifest bit
//! for bit, malformed ones are rejected for the right reason, rgml rewrites
//! gguf-py's files byte for byte and round-trips every type, gguf-py reads
//! rgml's files (when `import gguf` works), and mutated files never panic the
//! parser, and files with a tensor of an unknown type id open. (The writer's
//! atomicity is tested in src/gguf/tests.rs.)

mod gguf_py;
mod malformed;
mod mutation;
mod unknown;
mod valid;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value as Json;
use sha2::{Digest, Sha256};

/// The fixture directory, tests/fixtures/gguf.
fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf")
}

/// The fixtures' manifest.json, parsed once.
fn manifest() -> &'static Json {
    static M: OnceLock<Json> = OnceLock::new();
    M.get_or_init(|| serde_json::from_slice(&std::fs::read(fixtures().join("manifest.json")).unwrap()).unwrap())
}

/// A JSON integer that fits in u64 (every count, size and offset in the
/// manifest and gguf-py's dumps); panics on anything else, floats included.
fn uint(j: &Json) -> u64 {
    j.as_u64().unwrap_or_else(|| panic!("not a u64: {j}"))
}

/// A JSON array; panics on anything else.
fn array(j: &Json) -> &[Json] {
    j.as_array().unwrap_or_else(|| panic!("not an array: {j}"))
}

/// SHA-256 as lowercase hex, as the manifest and Python's `hexdigest()` write it.
fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}
