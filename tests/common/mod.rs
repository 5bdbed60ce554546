//! Helpers shared by the tests that run on CUDA when a device is present
//! (`tests/cuda_*.rs`, `models/tests/llama_cuda.rs`).

use rgml::{CudaBackend, Error};

/// CUDA device 0, or `None` after printing `SKIP: …` when there is none.
/// Opening must fail only with [`Error::Unavailable`]; with
/// `RGML_REQUIRE_CUDA=1` a missing device fails the test instead.
pub fn cuda() -> Option<CudaBackend> {
    match CudaBackend::new(0) {
        Ok(b) => Some(b),
        Err(e) => {
            assert!(matches!(e, Error::Unavailable { .. }), "CudaBackend::new must fail with Unavailable: {e}");
            if std::env::var("RGML_REQUIRE_CUDA").is_ok_and(|v| v == "1") {
                panic!("RGML_REQUIRE_CUDA=1 but {e}");
            }
            println!("SKIP: CUDA: {e}");
            None
        }
    }
}
