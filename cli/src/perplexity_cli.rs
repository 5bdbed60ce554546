//! `rgml perplexity`: llama.cpp's `llama-perplexity` measure
//! (`rgml_models::perplexity`) on a text file, printing each chunk's running
//! value and the final `PPL = x +/- y` line as llama.cpp does.

use std::path::Path;
use std::time::Instant;

use rgml::Backend;
use rgml_models::model::{LoadOptions, Model};
use rgml_models::perplexity::perplexity;

use crate::run::{read_text_file, require_tokenizer};
use crate::{out, outln};

/// Tokenizes `file` with the model's vocabulary (special tokens added as
/// llama.cpp adds them) and prints its perplexity in chunks of `n_ctx`.
pub fn run<B: Backend>(model: &Path, file: &Path, n_ctx: usize, load: LoadOptions, backend: B) -> Result<(), String> {
    let gguf = rgml::gguf::GgufFile::open(model).map_err(|e| format!("{}: {e}", model.display()))?;
    let tok = require_tokenizer(&gguf, model)?;
    if tok.add_eos() {
        return Err(format!(
            "{}: the vocabulary adds EOS to every text; llama-perplexity refuses it too",
            model.display()
        ));
    }
    let tokens = tok.tokenize(&read_text_file(file)?, true, false).map_err(|e| e.to_string())?;
    let bos = if tok.add_bos() { tok.special().bos } else { None };
    let load = LoadOptions { n_ctx: Some(load.n_ctx.unwrap_or(n_ctx).max(n_ctx)), ..load };
    let mut m = Model::load_with(model, load, backend).map_err(|e| e.to_string())?;
    eprintln!(
        "perplexity: {} tokens, {} chunks of {n_ctx} on {}",
        tokens.len(),
        tokens.len() / n_ctx,
        m.backend().describe()
    );
    let t = Instant::now();
    let p =
        perplexity(&mut m, &tokens, n_ctx, bos, |chunk, ppl| out!("[{chunk}]{ppl:.4},")).map_err(|e| e.to_string())?;
    outln!();
    let secs = t.elapsed().as_secs_f64();
    eprintln!("{} tokens scored in {secs:.1} s ({:.1} tokens/s evaluated)", p.count, (p.chunks * n_ctx) as f64 / secs);
    outln!("Final estimate: PPL = {:.4} +/- {:.5}", p.ppl, p.uncertainty);
    Ok(())
}
