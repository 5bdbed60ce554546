//! A Hugging Face llama checkpoint (safetensors weights, `config.json`, `tokenizer.json`)
//! converted to a GGUF file of llama.cpp's `llama` architecture, as llama.cpp's
//! `convert_hf_to_gguf.py` converts `LlamaForCausalLM` (`rgml convert` is its front end).
//!
//! Everything is read and checked (the config's hyperparameters, the tokenizer, every
//! tensor's presence and shape) before the output is written; the output is written
//! atomically (a temporary file in its folder, renamed into place), and the input is only
//! read. Tensor data streams from the input's mapping to the output a row at a time.

mod common;
pub mod config;
pub mod tensors;
pub mod tokenizer;

use std::path::Path;

use rgml::gguf::GgufWriter;
use rgml::{DType, Error};

pub use common::OutType;

use common::bad;
use config::LlamaConfig;
use tensors::{plan, RowReader, Source};
use tokenizer::{BpeVocab, VocabHints};

/// What a conversion wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct Converted {
    /// The architecture `config.json` named.
    pub architecture: String,
    /// Tensors written.
    pub n_tensors: usize,
    /// Token ids in the vocabulary.
    pub n_vocab: usize,
    /// `tokenizer.ggml.pre`.
    pub pre: &'static str,
    /// `general.file_type` (llama.cpp's numbering).
    pub file_type: u32,
}

/// Converts the llama checkpoint `input` (a `.safetensors` file, or a sharded checkpoint's
/// `model.safetensors.index.json`, with `config.json` and `tokenizer.json` beside it) to the
/// GGUF file `output`, matrices typed per `out`. Calls `progress` per tensor.
///
/// # Errors
/// [`Error::Io`] for files that cannot be read or written; [`Error::Safetensors`] for a
/// malformed checkpoint; [`Error::Invalid`], naming the file, for an architecture other than
/// llama's, a missing or inconsistent hyperparameter, a tokenizer other than byte-level BPE,
/// a missing, unknown or mis-shaped tensor, and `output` being a file the conversion reads. Nothing is written
/// on error.
pub fn convert(input: &Path, output: &Path, out: OutType, mut progress: impl FnMut(&str)) -> rgml::Result<Converted> {
    let meta = std::fs::metadata(input)
        .map_err(|e| Error::Io(std::io::Error::new(e.kind(), format!("{}: {e}", input.display()))))?;
    if !meta.is_file() {
        return Err(bad(input, "is not a file (give the .safetensors file or model.safetensors.index.json)"));
    }
    let dir = match input.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let config_path = dir.join("config.json");
    if !config_path.is_file() {
        return Err(bad(&config_path, "is missing; a Hugging Face checkpoint keeps its hyperparameters there"));
    }
    let cfg = LlamaConfig::read(&config_path)?;
    let src = Source::open(input)?;
    // the output may not replace a file the conversion reads (the index or a shard)
    if let Ok(out_path) = output.canonicalize() {
        let inputs = std::iter::once(input).chain(src.paths());
        if inputs.filter_map(|p| p.canonicalize().ok()).any(|p| p == out_path) {
            return Err(bad(output, "is an input of the conversion; the converter never writes over its input"));
        }
    }
    let n_vocab = match cfg.n_vocab {
        Some(n) => n,
        None => src
            .rows("model.embed_tokens.weight")
            .map(|n| n as usize)
            .ok_or_else(|| bad(input, "tensor \"model.embed_tokens.weight\" is missing"))?,
    };
    let hints = VocabHints { n_vocab: Some(n_vocab), bos: cfg.bos_token_id, eos: cfg.eos_token_id };
    let vocab = BpeVocab::read(dir, &hints)?;
    let planned = plan(input, &src, &cfg, n_vocab, out)?;

    let mut w = GgufWriter::new();
    let name = dir.canonicalize().ok().and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()));
    let file_type = file_type(planned.iter().filter(|t| t.ne.len() >= 2).map(|t| t.to));
    w.set("general.architecture", "llama")?;
    w.set("general.type", "model")?;
    if let Some(n) = name {
        w.set("general.name", n)?;
    }
    w.set("llama.block_count", cfg.n_layer as u32)?;
    w.set("llama.context_length", cfg.n_ctx_train as u32)?;
    w.set("llama.embedding_length", cfg.n_embd as u32)?;
    w.set("llama.feed_forward_length", cfg.n_ff as u32)?;
    w.set("llama.attention.head_count", cfg.n_head as u32)?;
    w.set("llama.attention.head_count_kv", cfg.n_head_kv as u32)?;
    w.set("llama.rope.freq_base", cfg.rope_theta as f32)?;
    w.set("llama.attention.layer_norm_rms_epsilon", cfg.rms_eps as f32)?;
    w.set("general.file_type", file_type)?;
    w.set("llama.vocab_size", n_vocab as u32)?;
    w.set("llama.rope.dimension_count", cfg.head_dim() as u32)?;
    vocab.write(&mut w)?;
    w.set("general.quantization_version", 2u32)?;

    let n_tensors = planned.len();
    for (i, t) in planned.into_iter().enumerate() {
        progress(&format!("[{}/{n_tensors}] {:<28} {} -> {} {:?}", i + 1, t.name, t.from, t.to, t.ne));
        if t.from == t.to && t.permute_heads.is_none() {
            w.add_tensor(t.name.clone(), t.to, &t.ne, t.bytes)?;
        } else {
            let (name, to, ne) = (t.name.clone(), t.to, t.ne.clone());
            w.add_tensor_from_reader(name, to, &ne, RowReader::new(t))?;
        }
    }
    w.write(output)?;
    Ok(Converted { architecture: cfg.architecture, n_tensors, n_vocab, pre: vocab.pre, file_type })
}

/// llama.cpp's `general.file_type` for matrices of the types `types`: the most common one.
fn file_type(types: impl Iterator<Item = DType>) -> u32 {
    let mut counts: Vec<(DType, usize)> = Vec::new();
    for t in types {
        match counts.iter_mut().find(|(d, _)| *d == t) {
            Some(c) => c.1 += 1,
            None => counts.push((t, 1)),
        }
    }
    match counts.iter().max_by_key(|c| c.1).map(|c| c.0) {
        Some(DType::F16) => 1,
        Some(DType::Q8_0) => 7,
        Some(DType::BF16) => 32,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::tensors::permuted_row;
    use super::*;

    /// The row order of llama.cpp's `permute` (reshape to heads × 2 × hd/2, swap the
    /// middle axes), written out for 2 heads of 6 rows.
    #[test]
    fn permutation_interleaves_each_heads_halves() {
        let got: Vec<usize> = (0..12).map(|r| permuted_row(r, 12, 2)).collect();
        assert_eq!(got, [0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11]);
    }

    #[test]
    fn out_types_parse() {
        assert_eq!("F16".parse::<OutType>(), Ok(OutType::F16));
        assert_eq!("q8_0".parse::<OutType>(), Ok(OutType::Q8_0));
        assert_eq!("auto".parse::<OutType>(), Ok(OutType::Keep));
        assert!("q4_k".parse::<OutType>().is_err());
    }

    #[test]
    fn file_type_is_the_most_common_matrix_type() {
        assert_eq!(file_type([DType::F16, DType::F32, DType::F16].into_iter()), 1);
        assert_eq!(file_type([DType::BF16].into_iter()), 32);
        assert_eq!(file_type(std::iter::empty()), 0);
    }
}
