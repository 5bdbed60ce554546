//! The architectures rgml runs, one module each, on the shared blocks of
//! [`crate::transformer`]: what each reads from the metadata beyond the common keys, which
//! tensors it needs, and its transformer block, given as an
//! [`Architecture`]; and the registry of them, [`ARCHS`]. The encoders (BERT and kin),
//! which give embeddings and no text, are [`EncoderArchitecture`]s in [`ENCODERS`].

mod bert;
mod gemma3;
mod gpt_oss;
mod granite;
mod llama;
mod nomic_bert;
mod olmo2;
mod olmoe;
mod phi3;
mod qwen2;
mod qwen2moe;
mod qwen3;
mod qwen3moe;
mod smollm3;

use rgml::gguf::GgufFile;
use rgml::Result;

use crate::transformer::hparams::{meta, Hparams, Keys};
use crate::transformer::{Architecture, EncoderArchitecture};

/// Every architecture rgml runs. Adding one is a module here and a line in this list.
pub const ARCHS: &[&Architecture] = &[
    &llama::ARCH,
    &qwen2::ARCH,
    &qwen3::ARCH,
    &gemma3::ARCH,
    &phi3::ARCH,
    &qwen2moe::ARCH,
    &qwen3moe::ARCH,
    &olmoe::ARCH,
    &granite::ARCH,
    &olmo2::ARCH,
    &smollm3::ARCH,
    &gpt_oss::ARCH,
];

/// The encoder architectures: their files hold embedding models, run by
/// [`crate::embed::EmbeddingModel`] (which runs the decoders of [`ARCHS`] too).
pub const ENCODERS: &[&EncoderArchitecture] = &[&bert::ARCH, &nomic_bert::ARCH];

/// The encoder architecture named `name`, if rgml runs it.
pub fn encoder_by_name(name: &str) -> Option<&'static EncoderArchitecture> {
    ENCODERS.iter().copied().find(|a| a.name == name)
}

/// The architecture named `name`, if rgml runs it.
pub fn by_name(name: &str) -> Option<&'static Architecture> {
    ARCHS.iter().copied().find(|a| a.name == name)
}

/// The architecture of `f` (`general.architecture`).
///
/// # Errors
/// An architecture rgml does not run, named, with the ones it does.
pub fn from_gguf(f: &GgufFile) -> Result<&'static Architecture> {
    let name = f.get_str("general.architecture")?;
    if encoder_by_name(name).is_some() {
        let why = format!("{name:?} is an embedding model (an encoder): it gives embeddings (rgml embed), not text");
        return Err(meta("general.architecture", why));
    }
    by_name(name).ok_or_else(|| {
        let known: Vec<&str> = ARCHS.iter().map(|a| a.name).chain(ENCODERS.iter().map(|a| a.name)).collect();
        meta("general.architecture", format!("rgml does not run {name:?} models (it runs {})", known.join(", ")))
    })
}

/// The architecture of `f` and its hyperparameters: the keys every architecture has, then
/// the architecture's own.
///
/// # Errors
/// [`rgml::Error::Metadata`] naming the key for a missing, mistyped or absurd value, and
/// for an architecture rgml does not run (the message lists the ones it does).
pub fn read_hparams(f: &GgufFile) -> Result<(&'static Architecture, Hparams)> {
    let arch = from_gguf(f)?;
    let mut hp = Hparams::read_common(f, arch.name, arch.rope_mode)?;
    (arch.read_hparams)(&Keys { f, prefix: arch.name }, &mut hp)?;
    Ok((arch, hp))
}

impl Hparams {
    /// Reads and checks the hyperparameters of `f` ([`read_hparams`]).
    ///
    /// # Errors
    /// As [`read_hparams`].
    pub fn from_gguf(f: &GgufFile) -> Result<Hparams> {
        read_hparams(f).map(|(_, hp)| hp)
    }
}
