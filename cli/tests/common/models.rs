//! The real model files `.ci/run` downloads into target/models, for the tests
//! that compare with llama.cpp.

use std::path::{Path, PathBuf};

/// `target/models/FILE`, or `None` with a `SKIP:` line when it is missing (a
/// failure with `RGML_REQUIRE_MODELS=1`).
pub fn model_path(file: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/models").join(file);
    if p.exists() {
        return Some(p);
    }
    assert!(
        std::env::var_os("RGML_REQUIRE_MODELS").is_none(),
        "RGML_REQUIRE_MODELS is set but {} is missing",
        p.display()
    );
    eprintln!("SKIP: {} not found (.ci/run downloads it)", p.display());
    None
}
