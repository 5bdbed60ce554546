//! Nomic-BERT (`nomic-bert`, nomic-embed-text): BERT's post-norm encoder layer with
//! rotary positions (NEOX) instead of learned ones, a fused QKV projection and a SwiGLU
//! feed-forward (`ffn_gate`, `ffn_up`), without biases.

use crate::transformer::encoder::EncoderNeeds;
use crate::transformer::EncoderArchitecture;

/// The `nomic-bert` architecture.
pub(crate) const ARCH: EncoderArchitecture = EncoderArchitecture {
    name: "nomic-bert",
    rope_mode: rgml::RopeParams::NEOX,
    needs: EncoderNeeds { position_embd: false, rope: true, ffn_gate: true },
    // the blocks rotate where the hyperparameters have rope, and gate where the layer has a gate
    block: super::bert::block,
};
