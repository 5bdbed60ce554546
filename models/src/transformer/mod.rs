//! What the architectures and the model runtime share: the hyperparameters read from a
//! file, a layer's weights, the blocks transformers are built of (the mixture of experts
//! among them), and [`Architecture`], the
//! description each architecture gives of itself; the same for encoders (`encoder`,
//! `encoder_blocks`, [`EncoderArchitecture`]) and the pooling of embeddings (`pooling`).
//! Nothing here knows which architectures exist ([`crate::arch`] lists them) or how a model
//! runs ([`crate::model`], [`crate::embed`]).

pub mod architecture;
pub mod blocks;
pub mod encoder;
pub mod encoder_arch;
pub(crate) mod encoder_blocks;
pub mod hparams;
mod moe;
pub mod pooling;
pub mod weights;

pub use architecture::Architecture;
pub use encoder_arch::EncoderArchitecture;
