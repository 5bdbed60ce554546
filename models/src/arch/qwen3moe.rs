//! Qwen 3 MoE: Qwen 3's block (per-head Q/K norms, NEOX rotation) with a mixture
//! of experts as its feed-forward: softmax gating, the picked weights renormalised.

use crate::transformer::Architecture;

/// The `qwen3moe` architecture.
pub(crate) const ARCH: Architecture = Architecture {
    name: "qwen3moe",
    rope_mode: rgml::RopeParams::NEOX,
    read_hparams: super::llama::normed_experts,
    needs: super::qwen3::NEEDS,
    block: super::llama::block,
};
