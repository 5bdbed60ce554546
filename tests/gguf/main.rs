//! GGUF reader and writer against the fixtures in tests/fixtures/gguf (made
//! with gguf-py 0.19.0; see manifest.json): valid files match the manifest bit
//! for bit, malformed ones are rejected for the right reason, rgml rewrites
//! gguf-py's files byte for byte and round-trips every type, gguf-py reads
//! rgml's files (when `import gguf` works), and mutated files never panic the
//! parser. (The writer's atomicity is tested in src/gguf/tests.rs.)

mod gguf_py;
mod json;
mod malformed;
mod mutation;
mod valid;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use json::J;

/// The fixture directory, tests/fixtures/gguf.
fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf")
}

/// The fixtures' manifest.json, parsed once.
fn manifest() -> &'static J {
    static M: OnceLock<J> = OnceLock::new();
    M.get_or_init(|| J::parse(&std::fs::read_to_string(fixtures().join("manifest.json")).unwrap()))
}
