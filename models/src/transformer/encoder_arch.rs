//! [`EncoderArchitecture`]: what an encoder architecture module tells the embedding
//! runtime about itself.

use std::fmt;

use rgml::gguf::GgufFile;
use rgml::{Result, TensorId};

use super::encoder::{EncoderHparams, EncoderLayer, EncoderNeeds};
use super::encoder_blocks::EncoderBlock;

/// An encoder architecture (`general.architecture`): its name, what its files hold
/// beyond the common tensors, and its layer. Each encoder module of [`crate::arch`]
/// defines one; [`crate::arch::ENCODERS`] lists them.
pub struct EncoderArchitecture {
    /// The GGUF name (the prefix of the architecture's keys).
    pub name: &'static str,
    /// How it rotates head dims where it uses rope (llama.cpp's `llama_model_rope_type`).
    pub rope_mode: i32,
    /// The tensors and settings it needs.
    pub(crate) needs: EncoderNeeds,
    /// One layer on `x` (`[n_embd, n_tokens]`).
    pub(crate) block: fn(&EncoderBlock, &EncoderLayer, TensorId) -> Result<TensorId>,
}

impl EncoderArchitecture {
    /// The GGUF name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Reads and checks the hyperparameters of `f`, a file of this architecture.
    ///
    /// # Errors
    /// [`rgml::Error::Metadata`] naming the key for a missing, mistyped or absurd value.
    pub fn read_hparams(&self, f: &GgufFile) -> Result<EncoderHparams> {
        EncoderHparams::read(f, self.name, self.needs, self.rope_mode)
    }
}

impl fmt::Debug for EncoderArchitecture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EncoderArchitecture({})", self.name)
    }
}
