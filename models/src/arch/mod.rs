//! The architectures rgml runs, one module each, on the shared blocks of
//! [`crate::model::blocks`]: what each reads from the metadata beyond the common keys,
//! which tensors it needs, and its transformer block.

mod gemma3;
mod llama;
mod phi3;
mod qwen2;
mod qwen3;

use rgml::gguf::GgufFile;
use rgml::{Result, RopeParams, TensorId};

use crate::model::blocks::Block;
use crate::model::hparams::{meta, Hparams, Keys};
use crate::model::weights::{Layer, Needs};

/// A model architecture (`general.architecture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// Llama 1–3 and the models that share its graph (SmolLM2, Mistral…): llama-3's
    /// frequency factors, linear and YaRN scaling.
    Llama,
    /// Qwen 2 / 2.5: Q/K/V biases.
    Qwen2,
    /// Qwen 3: per-head Q and K RMS norms.
    Qwen3,
    /// Gemma 3: scaled embeddings, Q/K norms, post-attention and post-FFN norms, GELU, local
    /// sliding-window layers.
    Gemma3,
    /// Phi-3: fused QKV and gate-up projections.
    Phi3,
}

/// Every architecture, by its GGUF name.
pub const ARCHS: [(&str, Arch); 5] = [
    ("llama", Arch::Llama),
    ("qwen2", Arch::Qwen2),
    ("qwen3", Arch::Qwen3),
    ("gemma3", Arch::Gemma3),
    ("phi3", Arch::Phi3),
];

impl Arch {
    /// The architecture of `f`.
    ///
    /// # Errors
    /// An architecture rgml does not run, named, with the ones it does.
    pub fn from_gguf(f: &GgufFile) -> Result<Arch> {
        let name = f.get_str("general.architecture")?;
        ARCHS.iter().find(|a| a.0 == name).map(|a| a.1).ok_or_else(|| {
            let known: Vec<&str> = ARCHS.iter().map(|a| a.0).collect();
            meta("general.architecture", format!("rgml does not run {name:?} models (it runs {})", known.join(", ")))
        })
    }

    /// The GGUF name (the prefix of the architecture's keys).
    pub fn name(self) -> &'static str {
        ARCHS.iter().find(|a| a.1 == self).map_or("?", |a| a.0)
    }

    /// How the architecture rotates head dims (llama.cpp's `llama_model_rope_type`).
    pub fn rope_mode(self) -> i32 {
        match self {
            Arch::Llama => RopeParams::NORMAL,
            Arch::Qwen2 | Arch::Qwen3 | Arch::Gemma3 | Arch::Phi3 => RopeParams::NEOX,
        }
    }

    /// The architecture's own keys and derived values.
    pub(crate) fn read_hparams(self, k: &Keys, hp: &mut Hparams) -> Result<()> {
        match self {
            Arch::Gemma3 => gemma3::read_hparams(k, hp),
            Arch::Phi3 => phi3::read_hparams(k, hp),
            Arch::Llama | Arch::Qwen2 | Arch::Qwen3 => Ok(()),
        }
    }

    /// The tensors a layer of this architecture must or may have.
    pub(crate) fn needs(self) -> Needs {
        match self {
            Arch::Llama => llama::NEEDS,
            Arch::Qwen2 => qwen2::NEEDS,
            Arch::Qwen3 => qwen3::NEEDS,
            Arch::Gemma3 => gemma3::NEEDS,
            Arch::Phi3 => phi3::NEEDS,
        }
    }

    /// One transformer block on `x` (`[n_embd, n_tokens]`).
    pub(crate) fn block(self, b: &mut Block, l: &Layer, x: TensorId) -> Result<TensorId> {
        match self {
            Arch::Llama => llama::block(b, l, x),
            Arch::Qwen2 => qwen2::block(b, l, x),
            Arch::Qwen3 => qwen3::block(b, l, x),
            Arch::Gemma3 => gemma3::block(b, l, x),
            Arch::Phi3 => phi3::block(b, l, x),
        }
    }
}
