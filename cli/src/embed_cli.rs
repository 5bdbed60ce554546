//! `rgml embed`: the embeddings of a text's lines, one JSON array per line on standard
//! output, as llama.cpp's `llama-embedding` computes them (each line tokenized with the
//! model's special tokens added and special-token text parsed; pooled as the file says
//! unless `--pooling` says otherwise).

use std::path::{Path, PathBuf};
use std::time::Instant;

use rgml::gguf::GgufFile;
use rgml::Backend;
use rgml_models::embed::{EmbedLoadOptions, EmbedOptions, EmbeddingModel, Pooling};

use crate::outln;
use crate::run::{read_text_file, require_tokenizer};

/// Where the inputs come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EmbedInput {
    /// Text (`--prompt`): each of its lines an input.
    Text(String),
    /// A UTF-8 text file (`--file`): each of its lines an input.
    File(PathBuf),
}

/// What `rgml embed` does.
#[derive(Clone, Debug)]
pub struct EmbedRun {
    /// The inputs.
    pub input: EmbedInput,
    /// The pooling (`None`: the file's `pooling_type`, else none).
    pub pooling: Option<Pooling>,
    /// Scale each vector to Euclidean length 1.
    pub normalize: bool,
    /// The longest input in tokens.
    pub n_ctx: Option<usize>,
}

/// The inputs of `text`: its lines, split at `\n` as llama-embedding splits them, but a
/// final newline ends the last line instead of starting an empty one.
///
/// # Errors
/// An empty text or an empty line (named by its number).
pub fn lines(text: &str) -> Result<Vec<&str>, String> {
    let text = text.strip_suffix('\n').unwrap_or(text);
    if text.is_empty() {
        return Err("the input is empty".into());
    }
    let lines: Vec<&str> = text.split('\n').collect();
    match lines.iter().position(|l| l.is_empty()) {
        Some(i) => Err(format!("line {} is empty: every line is an input to embed", i + 1)),
        None => Ok(lines),
    }
}

/// Runs `rgml embed` on `model` with `backend`: prints one JSON array per input line (an
/// array of arrays, one per token, with pooling none).
pub fn run<B: Backend>(model: &Path, r: &EmbedRun, backend: B) -> Result<(), String> {
    let t = Instant::now();
    let file = GgufFile::open(model).map_err(|e| format!("{}: {e}", model.display()))?;
    let tok = require_tokenizer(&file, model)?;
    let text = match &r.input {
        EmbedInput::Text(t) => t.clone(),
        EmbedInput::File(p) => read_text_file(p)?,
    };
    let inputs = lines(&text)?
        .into_iter()
        .map(|l| tok.tokenize(l, true, true).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut m = EmbeddingModel::load_with(model, EmbedLoadOptions { n_ctx: r.n_ctx }, backend)
        .map_err(|e| format!("{}: {e}", model.display()))?;
    let info = m.info().clone();
    // every input checked before any runs: a bad line prints nothing
    for (i, ids) in inputs.iter().enumerate() {
        if ids.is_empty() {
            return Err(format!("line {} has no tokens", i + 1));
        }
        if ids.len() > info.n_ctx {
            return Err(format!(
                "line {} has {} tokens; the model takes at most {} (--n-ctx)",
                i + 1,
                ids.len(),
                info.n_ctx
            ));
        }
    }
    let pooling = r.pooling.unwrap_or(info.pooling);
    eprintln!(
        "loaded {} in {:.1} ms on {}: {} {}, n_embd {}, inputs of at most {} tokens, pooling {pooling}{}",
        model.display(),
        t.elapsed().as_secs_f64() * 1e3,
        m.backend().describe(),
        if info.encoder { "encoder" } else { "decoder" },
        info.arch,
        info.n_embd,
        info.n_ctx,
        if r.normalize { ", normalized" } else { "" }
    );
    let t = Instant::now();
    let opts = EmbedOptions { pooling: Some(pooling), normalize: r.normalize };
    for ids in &inputs {
        let v = m.embed(ids, &opts).map_err(|e| e.to_string())?;
        let json = if pooling == Pooling::None {
            serde_json::to_string(&v.chunks(info.n_embd).collect::<Vec<_>>())
        } else {
            serde_json::to_string(&v)
        };
        outln!("{}", json.map_err(|e| e.to_string())?);
    }
    let n: usize = inputs.iter().map(Vec::len).sum();
    let secs = t.elapsed().as_secs_f64();
    eprintln!(
        "{} inputs, {n} tokens in {:.2} ms ({:.1} tokens/s)",
        inputs.len(),
        secs * 1e3,
        n as f64 / secs.max(1e-9)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_inputs() {
        assert_eq!(lines("a\nb c\n").unwrap(), ["a", "b c"]);
        assert_eq!(lines("one").unwrap(), ["one"]);
        assert!(lines("").unwrap_err().contains("empty"));
        assert!(lines("\n").unwrap_err().contains("empty"));
        assert!(lines("a\n\nb").unwrap_err().contains("line 2"));
    }
}
