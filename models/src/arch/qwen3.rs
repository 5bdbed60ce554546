//! Qwen 3: Llama's block with an RMS norm over each query and key head before the
//! rotary embedding (the layers must have them), NEOX rotation, and head dims from
//! `attention.key_length`.

use rgml::{Result, TensorId};

use crate::transformer::blocks::Block;
use crate::transformer::weights::{Layer, Needs};
use crate::transformer::Architecture;

pub(super) const NEEDS: Needs = Needs { qk_norm: true, ..Needs::LLAMA };

/// The `qwen3` architecture.
pub(crate) const ARCH: Architecture = Architecture {
    name: "qwen3",
    rope_mode: rgml::RopeParams::NEOX,
    read_hparams: Architecture::no_own_hparams,
    needs: NEEDS,
    block,
};

/// Llama's block, which norms the heads where the layer has the norms.
pub(super) fn block(b: &mut Block, l: &Layer, x: TensorId) -> Result<TensorId> {
    super::llama::block(b, l, x)
}
