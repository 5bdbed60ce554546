//! Qwen 2 MoE: Qwen 2's block (Q/K/V biases, NEOX rotation) with a mixture of
//! experts whose softmax weights are used as picked (not renormalised), plus a
//! shared expert scaled by the sigmoid of its own gate.

use crate::transformer::Architecture;

/// The `qwen2moe` architecture.
pub(crate) const ARCH: Architecture = Architecture {
    name: "qwen2moe",
    rope_mode: rgml::RopeParams::NEOX,
    read_hparams: Architecture::no_own_hparams,
    needs: super::qwen2::NEEDS,
    block: super::llama::block,
};
