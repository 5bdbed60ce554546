//! What the architectures and the model runtime share: the hyperparameters read from a
//! file, a layer's weights, the blocks transformers are built of (the mixture of
//! experts among them), and [`Architecture`], the
//! description each architecture gives of itself. Nothing here knows which architectures
//! exist ([`crate::arch`] lists them) or how a model runs ([`crate::model`]).

pub mod architecture;
pub mod blocks;
pub mod hparams;
mod moe;
pub mod weights;

pub use architecture::Architecture;
