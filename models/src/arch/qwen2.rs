//! Qwen 2 / 2.5: Llama's block with Q/K/V biases and NEOX rotary embedding (the
//! rotation style comes from [`super::Arch::rope_mode`], the biases from the file).

use rgml::{Result, TensorId};

use crate::model::blocks::Block;
use crate::model::weights::{Layer, Needs};

pub(super) const NEEDS: Needs = super::llama::NEEDS;

/// Llama's block; the biases are in the layer's projections.
pub(super) fn block(b: &mut Block, l: &Layer, x: TensorId) -> Result<TensorId> {
    super::llama::block(b, l, x)
}
