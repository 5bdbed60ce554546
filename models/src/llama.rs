//! The model runtime under its first name: [`Llama`] is [`crate::model::Model`], which
//! runs every architecture in [`crate::arch`].

pub use crate::model::hparams::Hparams;
pub use crate::model::{argmax, Model as Llama, KV_PAD, MAX_GRAPHS};
