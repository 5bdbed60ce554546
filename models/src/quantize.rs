//! A model file's weights re-quantized to another type, as llama.cpp's quantize tool does
//! without an importance matrix (`rgml quantize` is its front end).

use std::path::Path;

use rgml::gguf::{GgufFile, GgufWriter};
use rgml::{quant, DType};

/// The values of `bytes`, rows of `ne0` values of type `dtype`, as f32.
///
/// # Errors
/// A type rgml cannot dequantize.
pub fn dequantize_rows(dtype: DType, ne0: usize, bytes: &[u8]) -> rgml::Result<Vec<f32>> {
    let row = dtype.row_size(ne0 as i64).unwrap_or(0);
    let rows = bytes.len().checked_div(row).unwrap_or(0);
    let mut out = vec![0f32; rows * ne0];
    for (src, dst) in bytes.chunks_exact(row.max(1)).zip(out.chunks_mut(ne0.max(1))) {
        quant::dequantize_row(dtype, src, dst)?;
    }
    Ok(out)
}

/// llama.cpp's `general.file_type` for a file whose weights are `t`.
fn file_type(t: DType) -> u32 {
    match t {
        DType::F32 => 0,
        DType::F16 => 1,
        DType::Q4_0 => 2,
        DType::Q4_1 => 3,
        DType::Q8_0 => 7,
        DType::Q5_0 => 8,
        DType::Q5_1 => 9,
        DType::Q2_K => 10,
        DType::Q3_K => 12,
        DType::Q4_K => 15,
        DType::Q5_K => 17,
        DType::Q6_K => 18,
        DType::BF16 => 32,
        DType::IQ4_NL => 25,
        DType::IQ4_XS => 30,
        DType::TQ1_0 => 36,
        DType::TQ2_0 => 37,
        DType::MXFP4 => 38,
        _ => 0,
    }
}

/// Why `rgml quantize` cannot write `to`, as the `op` of an
/// [`rgml::Error::Unsupported`]; `None` when it can.
fn refusal(to: DType) -> Option<&'static str> {
    match to {
        DType::IQ1_S | DType::IQ2_XXS | DType::IQ2_XS => Some(
            "quantize (ggml's quantizer for this type requires an importance matrix, which rgml does not take; \
             use llama-quantize --imatrix)",
        ),
        DType::IQ1_M | DType::IQ2_S | DType::IQ3_XXS | DType::IQ3_S => Some(
            "quantize (rgml has no quantizer for the i-quants: ggml's search grids built at start-up and want an \
             importance matrix; use llama-quantize --imatrix)",
        ),
        DType::Q8_1 | DType::Q8_K => Some("quantize (an activation type, not stored in model files)"),
        _ if to.is_quantized() || to.is_float() => None,
        _ => Some("quantize"),
    }
}

/// The matrices llama.cpp's quantize tool keeps as they are: tables read by row
/// (an encoder's learned positions and token types), never multiplied.
const KEPT: [&str; 2] = ["position_embd.weight", "token_types.weight"];

/// Re-quantizes the 2-D weight matrices of `input` to `to` (like llama.cpp's
/// quantize tool without an importance matrix, byte for byte: 1-D tensors such
/// as norms stay as they are, and so does a matrix whose rows are not whole
/// blocks, or one of the tables llama.cpp keeps), keeps the metadata, updates `general.file_type`, and writes
/// `output`. Calls `progress` per tensor. The i-quants IQ1_S … IQ3_S are
/// refused (their quantizers need an importance matrix), and so is a file
/// holding a tensor of a type id rgml does not know (it could not be written
/// back).
pub fn quantize(input: &Path, output: &Path, to: DType, mut progress: impl FnMut(&str)) -> rgml::Result<()> {
    if let Some(op) = refusal(to) {
        return Err(rgml::Error::Unsupported { op, dtype: to });
    }
    let f = GgufFile::open(input)?;
    if let Some(t) = f.unknown_tensors().first() {
        let why = format!("{}; rgml cannot write it to the quantized file", t.why());
        return Err(rgml::Error::UnknownType { name: t.name.clone(), type_id: t.type_id, why });
    }
    let mut w = GgufWriter::new();
    for (k, v) in f.metadata() {
        if k != "general.file_type" {
            w.set(k.clone(), v.clone())?;
        }
    }
    w.set("general.file_type", file_type(to))?;
    for (i, t) in f.tensors().iter().enumerate() {
        let dims = (t.n_dims as usize).clamp(1, 4);
        let ne0 = t.ne[0] as usize;
        let convert = dims == 2
            && !KEPT.contains(&t.name.as_str())
            && t.dtype != to
            && ne0.is_multiple_of(to.block_size())
            && (t.dtype.is_float() || t.dtype.is_quantized());
        if convert {
            let values = dequantize_rows(t.dtype, ne0, f.tensor_bytes(t))?;
            let row = to.row_size(ne0 as i64).unwrap_or(0);
            let mut bytes = vec![0u8; row * values.len() / ne0.max(1)];
            for (src, dst) in values.chunks(ne0.max(1)).zip(bytes.chunks_mut(row.max(1))) {
                quant::quantize_chunk(to, src, dst)?;
            }
            progress(&format!(
                "[{}/{}] {:<32} {} -> {} ({} -> {} bytes)",
                i + 1,
                f.tensors().len(),
                t.name,
                t.dtype,
                to,
                t.size,
                bytes.len()
            ));
            w.add_tensor(t.name.clone(), to, &t.ne[..dims], bytes)?;
        } else {
            progress(&format!("[{}/{}] {:<32} {} kept", i + 1, f.tensors().len(), t.name, t.dtype));
            w.add_tensor(t.name.clone(), t.dtype, &t.ne[..dims], f.tensor_bytes(t).to_vec())?;
        }
    }
    w.write(output)
}
