//! `rgml convert`: a Hugging Face llama checkpoint (safetensors) to a GGUF file, on
//! [`rgml_models::convert`].

use std::path::Path;

use rgml_models::convert::{convert as convert_checkpoint, OutType};

use crate::outln;

/// Converts `input` (a `.safetensors` file or `model.safetensors.index.json`, with
/// `config.json` and `tokenizer.json` beside it) to `output`, matrices as `outtype` says
/// (`f32`, `f16`, `bf16`, `q8_0`; `None` or `auto`: as stored), printing a line per tensor
/// and a summary.
///
/// # Errors
/// The message of a bad `outtype` or of any conversion error (nothing is written then).
pub fn convert(input: &Path, output: &Path, outtype: Option<&str>) -> Result<(), String> {
    let out: OutType = outtype.map_or(Ok(OutType::Keep), str::parse)?;
    let c = convert_checkpoint(input, output, out, |line| outln!("{line}")).map_err(|e| e.to_string())?;
    outln!(
        "wrote {}: {} {} tensors, {} tokens (pre-tokenizer {}), file type {}",
        output.display(),
        c.architecture,
        c.n_tensors,
        c.n_vocab,
        c.pre,
        c.file_type
    );
    Ok(())
}
