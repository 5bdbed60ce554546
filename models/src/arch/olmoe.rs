//! OLMoE: Llama's block with RMS norms over the whole query and key projections
//! and a mixture of experts (softmax gating, the picked weights as they are);
//! NEOX rotation.

use crate::transformer::weights::Needs;
use crate::transformer::Architecture;

/// The `olmoe` architecture.
pub(crate) const ARCH: Architecture = Architecture {
    name: "olmoe",
    rope_mode: rgml::RopeParams::NEOX,
    read_hparams: Architecture::no_own_hparams,
    needs: Needs { qk_norm: true, full_qk_norm: true, ..Needs::LLAMA },
    block: super::llama::block,
};
