//! Writing a fine-tuned model: the file's metadata and tensors, the trained ones
//! replaced by their F32 values (adapters merged into their weights).

use std::collections::HashMap;
use std::path::Path;

use rgml::gguf::{GgufFile, GgufWriter};
use rgml::{BackendStorage, Context, DType, Error, Result};

use super::params::Trained;
use crate::quantize::dequantize_rows;

/// Writes `file` with `trained`'s values (read from `st`) to `out`, atomically.
/// `general.file_type` becomes F32's when every tensor is F32.
pub(super) fn save<S: BackendStorage>(
    file: &GgufFile,
    ctx: &Context,
    st: &S,
    trained: &[Trained],
    out: &Path,
) -> Result<()> {
    if let Some(t) = file.unknown_tensors().first() {
        let why = format!("{}; rgml cannot write it back", t.why());
        return Err(Error::UnknownType { name: t.name.clone(), type_id: t.type_id, why });
    }
    let mut values: HashMap<&str, Vec<f32>> = HashMap::new();
    for t in trained {
        match t {
            Trained::Full { name, p } => values.insert(name, st.read_f32(ctx, *p)?),
            Trained::Lora { name, adapter } => {
                let info = file.tensor(name).ok_or_else(|| Error::Invalid(format!("finetune: no tensor {name}")))?;
                let mut w = dequantize_rows(info.dtype, info.ne[0] as usize, file.tensor_bytes(info))?;
                let (a, b) = (st.read_f32(ctx, adapter.a)?, st.read_f32(ctx, adapter.b)?);
                merge(&mut w, &a, &b, info.ne[0] as usize, adapter.scale);
                values.insert(name, w)
            }
        };
    }
    let all_f32 = file.tensors().iter().all(|t| t.dtype == DType::F32 || values.contains_key(t.name.as_str()));
    let mut w = GgufWriter::new();
    for (k, v) in file.metadata() {
        w.set(k.clone(), v.clone())?;
    }
    if all_f32 {
        w.set("general.file_type", 0u32)?;
    }
    for t in file.tensors() {
        let ne = &t.ne[..(t.n_dims as usize).clamp(1, 4)];
        match values.remove(t.name.as_str()) {
            Some(v) => w.add_tensor(
                t.name.clone(),
                DType::F32,
                ne,
                v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
            )?,
            None => w.add_tensor(t.name.clone(), t.dtype, ne, file.tensor_bytes(t))?,
        };
    }
    w.write(out)
}

/// `w += scale · (b·a)` for a weight `w` of rows of `n_in` (`w[o][i]`), `a`
/// `[n_in, rank]` (`a[j][i]`) and `b` `[rank, n_out]` (`b[o][j]`), summed in f64.
pub(super) fn merge(w: &mut [f32], a: &[f32], b: &[f32], n_in: usize, scale: f32) {
    let rank = a.len() / n_in.max(1);
    for (o, row) in w.chunks_mut(n_in).enumerate() {
        let bo = &b[o * rank..(o + 1) * rank];
        for (i, x) in row.iter_mut().enumerate() {
            let d: f64 = (0..rank).map(|j| bo[j] as f64 * a[j * n_in + i] as f64).sum();
            *x += (scale as f64 * d) as f32;
        }
    }
}
