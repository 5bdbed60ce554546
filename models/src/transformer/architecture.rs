//! [`Architecture`]: what an architecture module tells the runtime about itself.

use std::fmt;

use rgml::{Result, TensorId};

use super::blocks::Block;
use super::hparams::{Hparams, Keys};
use super::weights::{Layer, Needs};

/// A model architecture (`general.architecture`): its name, the metadata and tensors it
/// reads beyond the common ones, and its transformer block. Each module of [`crate::arch`]
/// defines one; the registry there lists them.
pub struct Architecture {
    /// The GGUF name (the prefix of the architecture's keys).
    pub name: &'static str,
    /// How it rotates head dims (llama.cpp's `llama_model_rope_type`): `RopeParams::NORMAL`
    /// or `RopeParams::NEOX`.
    pub rope_mode: i32,
    /// Reads the architecture's own keys and derived values into `hp`.
    pub(crate) read_hparams: fn(&Keys, &mut Hparams) -> Result<()>,
    /// The tensors a layer must or may have.
    pub(crate) needs: Needs,
    /// One transformer block on `x` (`[n_embd, n_tokens]`).
    pub(crate) block: fn(&mut Block, &Layer, TensorId) -> Result<TensorId>,
}

impl Architecture {
    /// The GGUF name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// `read_hparams` for an architecture with no keys of its own.
    pub(crate) fn no_own_hparams(_: &Keys, _: &mut Hparams) -> Result<()> {
        Ok(())
    }
}

impl fmt::Debug for Architecture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Architecture({})", self.name)
    }
}

/// Architectures are one of a kind: equal when their names are.
impl PartialEq for Architecture {
    fn eq(&self, other: &Architecture) -> bool {
        self.name == other.name
    }
}

impl Eq for Architecture {}
