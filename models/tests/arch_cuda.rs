//! Every architecture on CUDA (a device, or `tools/cuda-emu`; else `SKIP: …`)
//! against llama.cpp: the tiny fixtures of `arch.rs` with F32 weights and cache,
//! fused and unfused attention, within the CPU's tolerances (1e-4; Gemma 2e-3,
//! its f16 GELU table), and Q8_0 weights through the dot kernels judged as a
//! quantized model is: the same argmax everywhere, each position's next-token
//! distribution within KL 1e-3 of llama.cpp's, logits within 5e-2.
//!
//! Why Q8_0 is not held to 1e-4 on a GPU: the dot kernels round each activation
//! row to Q8 blocks, as the CPU does, so a last-bit difference upstream can move
//! one activation by a whole Q8 step. On an H200 the tiny Qwen3 is 0.027 away
//! from llama.cpp's CPU logits with the staged and the generic dot kernels
//! alike; the CPU gives the very same 0.027 when the attention's small F32
//! products run through its dot kernels instead of its GEMM (another summation
//! order), while the emulator, whose arithmetic is the CPU's, is within 5e-7.

#![cfg(feature = "cuda")]

use common::arch::{compare, dir, logits_on, max_kl, reference, tolerance, CASES};
use rgml_models::model::kv::KvType;
use rgml_models::model::Attention;

mod common;

#[test]
fn every_architecture_matches_llama_cpp_on_cuda() {
    let Some(gpu) = common::cuda() else { return };
    let runs = [
        ("f32", Attention::Fused, 1e-4, 2e-3),
        ("f32", Attention::Unfused, 1e-4, 2e-3),
        ("q8_0", Attention::Unfused, 5e-2, 5e-2),
    ];
    for (weights, attention, base, gemma) in runs {
        for case in CASES {
            let file = format!("{case}_{weights}.gguf");
            // Q8_0 through the dot kernels, which compute the CPU's (and llama.cpp's CPU's)
            // function; the dequantized F16 GEMM of larger batches rounds otherwise
            let be = if weights == "q8_0" { gpu.clone().with_dequant_gemm(None) } else { gpu.clone() };
            let got = logits_on(&dir().join(&file), KvType::F32, attention, be);
            let want = reference(&file, "f32kv");
            let (d, flips) = compare(&got, &want);
            let kl = max_kl(&got, &want);
            println!("{case} {weights} {attention:?}: max abs diff {d}, {flips} argmax flips, max KL {kl:.2e}");
            assert!(
                d <= tolerance(case, base, gemma) && flips == 0 && kl <= 1e-3,
                "{case} {weights} {attention:?}: max abs diff {d}, {flips} flips, max KL {kl:.2e}"
            );
        }
    }
}
