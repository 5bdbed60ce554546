//! Models on rgml: architectures, weights from GGUF files, the KV cache, embeddings,
//! tokenizers, chat templates, sampling, generation and conversations, and the model graphs
//! the benchmarks build (an MLP, synthetic llama files). The `rgml` program and its benchmarks are the
//! `rgml-cli` crate, on top of this one; nothing here parses arguments.
//!
//! Text in, text out: a model file's tokenizer and chat template, the sampler, and
//! generation that streams whole characters:
//!
//! ```no_run
//! use std::ops::ControlFlow;
//! use rgml_models::chat::Message;
//! use rgml_models::conversation::{prompt_text, template_for};
//! use rgml_models::generate::GenerateOptions;
//! use rgml_models::model::Model;
//! use rgml_models::sampler::{Sampler, SamplerParams};
//! use rgml_models::tokenizer::Tokenizer;
//!
//! let path = std::path::Path::new("SmolLM2-135M-Instruct.Q4_1.gguf");
//! let file = rgml::gguf::GgufFile::open(path)?;
//! let tok = Tokenizer::from_gguf(&file)?;                     // tokenizer.ggml.* metadata
//! let (template, _) = template_for(&file, &tok)?;             // tokenizer.chat_template (minijinja)
//! let text = template.apply(&[Message::new("user", "What is 2+2?")], true)?;
//! let prompt = tok.tokenize(prompt_text(&text, &tok), true, true)?;  // add_special, parse_special
//! let mut model = Model::load(path, Some(512), 0)?;
//! let mut sampler = Sampler::new(SamplerParams { temperature: 0.0, ..Default::default() }, tok.n_vocab())?;
//! let mut decoder = tok.decoder(false);                       // holds back split UTF-8 characters
//! let opts = GenerateOptions { max_tokens: 64, all_logits: false };
//! let g = model.generate(&prompt, &mut sampler, opts, |t| tok.is_eog(t), |t| {
//!     print!("{}", decoder.push(t).unwrap_or_default());
//!     ControlFlow::Continue(())                               // Break stops generation
//! })?;
//! println!("{}  [{:?}]", decoder.finish(), g.stop);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod arch;
pub mod chat;
pub mod conversation;
pub mod convert;
pub mod embed;
pub mod engine;
pub mod finetune;
pub mod generate;
pub mod llama;
pub mod mlp;
pub mod model;
pub mod perplexity;
pub mod quantize;
pub mod sampler;
pub mod scheduler;
pub mod synthetic;
pub mod text_stream;
pub mod tokenizer;
pub mod transformer;
