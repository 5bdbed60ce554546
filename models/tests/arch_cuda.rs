//! Every architecture on CUDA (a device, or `tools/cuda-emu`; else `SKIP: …`)
//! against llama.cpp: the tiny fixtures of `arch.rs` with F32 weights and cache,
//! fused and unfused attention, within the CPU's tolerances (1e-4; Gemma 2e-3,
//! its f16 GELU table), and Q8_0 weights through the dot kernels within 5e-3
//! (Gemma 5e-2).

#![cfg(feature = "cuda")]

use common::arch::{compare, dir, logits_on, reference, tolerance, CASES};
use rgml_models::model::kv::KvType;
use rgml_models::model::Attention;

mod common;

#[test]
fn every_architecture_matches_llama_cpp_on_cuda() {
    let Some(gpu) = common::cuda() else { return };
    let runs = [
        ("f32", Attention::Fused, 1e-4, 2e-3),
        ("f32", Attention::Unfused, 1e-4, 2e-3),
        ("q8_0", Attention::Unfused, 5e-3, 5e-2),
    ];
    for (weights, attention, base, gemma) in runs {
        for case in CASES {
            let file = format!("{case}_{weights}.gguf");
            // Q8_0 through the dot kernels, which compute the CPU's (and llama.cpp's CPU's)
            // function; the dequantized F16 GEMM of larger batches rounds otherwise
            let be = if weights == "q8_0" { gpu.clone().with_dequant_gemm(None) } else { gpu.clone() };
            let got = logits_on(&dir().join(&file), KvType::F32, attention, be);
            let (d, flips) = compare(&got, &reference(&file, "f32kv"));
            println!("{case} {weights} {attention:?}: max abs diff {d}, {flips} argmax flips");
            assert!(
                d <= tolerance(case, base, gemma) && flips == 0,
                "{case} {weights} {attention:?}: max abs diff {d}, {flips} flips"
            );
        }
    }
}
