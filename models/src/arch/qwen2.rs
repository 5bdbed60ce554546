//! Qwen 2 / 2.5: Llama's block with Q/K/V biases and NEOX rotary embedding (the
//! rotation style comes from [`Architecture::rope_mode`](super::Architecture::rope_mode), the biases from the file).

use rgml::{Result, TensorId};

use crate::transformer::blocks::Block;
use crate::transformer::weights::{Layer, Needs};
use crate::transformer::Architecture;

pub(super) const NEEDS: Needs = super::llama::NEEDS;

/// The `qwen2` architecture.
pub(crate) const ARCH: Architecture = Architecture {
    name: "qwen2",
    rope_mode: rgml::RopeParams::NEOX,
    read_hparams: Architecture::no_own_hparams,
    needs: NEEDS,
    block,
};

/// Llama's block; the biases are in the layer's projections.
pub(super) fn block(b: &mut Block, l: &Layer, x: TensorId) -> Result<TensorId> {
    super::llama::block(b, l, x)
}
