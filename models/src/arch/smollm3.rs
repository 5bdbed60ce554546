//! SmolLM3: Llama's block, except that every fourth layer (the 4th, 8th, …)
//! attends without rotary embedding (llama.cpp's `n_no_rope_layer_step`, 4).

use rgml::Result;

use crate::transformer::hparams::{Hparams, Keys};
use crate::transformer::Architecture;

/// Layers `il` with `(il + 1) % 4 == 0` do not rotate.
const NO_ROPE_STEP: usize = 4;

/// The `smollm3` architecture.
pub(crate) const ARCH: Architecture = Architecture {
    name: "smollm3",
    rope_mode: rgml::RopeParams::NORMAL,
    read_hparams,
    needs: super::llama::NEEDS,
    block: super::llama::block,
};

fn read_hparams(_k: &Keys, hp: &mut Hparams) -> Result<()> {
    hp.no_rope = (0..hp.n_layer).map(|il| (il + 1) % NO_ROPE_STEP == 0).collect();
    Ok(())
}
