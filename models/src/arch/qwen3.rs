//! Qwen 3: Llama's block with an RMS norm over each query and key head before the
//! rotary embedding (the layers must have them), NEOX rotation, and head dims from
//! `attention.key_length`.

use rgml::{Result, TensorId};

use crate::model::blocks::Block;
use crate::model::weights::{Layer, Needs};

pub(super) const NEEDS: Needs = Needs { qk_norm: true, post_norms: false, fused_gate_up: false };

/// Llama's block, which norms the heads where the layer has the norms.
pub(super) fn block(b: &mut Block, l: &Layer, x: TensorId) -> Result<TensorId> {
    super::llama::block(b, l, x)
}
