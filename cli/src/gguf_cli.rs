//! `rgml inspect` and `rgml dump`: GGUF files from the command line (`rgml quantize` is
//! [`rgml_models::quantize`]).

use std::fmt::Write as _;
use std::path::Path;

use rgml::gguf::{Array, GgufFile, TensorEntry, Value};

/// Elements of an array shown before "…".
const SHOWN: usize = 8;

/// A value as text; arrays show their length, type and first elements.
pub fn show_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Array(a) => show_array(a),
        Value::U8(x) => x.to_string(),
        Value::I8(x) => x.to_string(),
        Value::U16(x) => x.to_string(),
        Value::I16(x) => x.to_string(),
        Value::U32(x) => x.to_string(),
        Value::I32(x) => x.to_string(),
        Value::U64(x) => x.to_string(),
        Value::I64(x) => x.to_string(),
        Value::F32(x) => format!("{x:?}"),
        Value::F64(x) => format!("{x:?}"),
        Value::Bool(x) => x.to_string(),
    }
}

fn show_array(a: &Array) -> String {
    fn list<T: std::fmt::Debug>(v: &[T]) -> String {
        let items: Vec<String> = v.iter().take(SHOWN).map(|x| format!("{x:?}")).collect();
        format!("[{}{}]", items.join(", "), if v.len() > SHOWN { ", …" } else { "" })
    }
    let body = match a {
        Array::U8(v) => list(v),
        Array::I8(v) => list(v),
        Array::U16(v) => list(v),
        Array::I16(v) => list(v),
        Array::U32(v) => list(v),
        Array::I32(v) => list(v),
        Array::F32(v) => list(v),
        Array::Bool(v) => list(v),
        Array::String(v) => list(v),
        Array::U64(v) => list(v),
        Array::I64(v) => list(v),
        Array::F64(v) => list(v),
        Array::Array(v) => {
            let items: Vec<String> = v.iter().take(SHOWN).map(show_array).collect();
            format!("[{}{}]", items.join(", "), if v.len() > SHOWN { ", …" } else { "" })
        }
    };
    format!("{} [{}] {body}", a.type_description(), a.len())
}

/// The report `rgml inspect` prints. A tensor of a type id rgml does not know
/// is listed with its id (`id 4?`) and the most bytes it can have (`<=N`).
pub fn inspect(path: &Path) -> rgml::Result<String> {
    let f = GgufFile::open(path)?;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: GGUF v{}, alignment {}, {} metadata keys, {} tensors, data at byte {}",
        path.display(),
        f.version(),
        f.alignment(),
        f.metadata().len(),
        f.n_tensors(),
        f.data_offset()
    );
    let _ = writeln!(s, "\nmetadata:");
    for (k, v) in f.metadata() {
        let _ = writeln!(s, "  {k:<40} {:<8} {}", v.value_type().to_string(), show_value(v));
    }
    let _ = writeln!(s, "\ntensors:\n  {:<32} {:<8} {:<24} {:>12} {:>12}", "name", "type", "ne", "bytes", "offset");
    for e in f.entries() {
        let ne = e.ne();
        let ne = format!("{:?}", &ne[..(e.n_dims() as usize).clamp(1, 4)]);
        let (ty, bytes) = match e {
            TensorEntry::Known(t) => (t.dtype.name().to_string(), t.size.to_string()),
            TensorEntry::Unknown(t) => (format!("id {}?", t.type_id), format!("<={}", t.max_size)),
        };
        let at = f.data_offset().saturating_add(e.offset());
        let _ = writeln!(s, "  {:<32} {:<8} {:<24} {:>12} {:>12}", e.name(), ty, ne, bytes, at);
    }
    if !f.unknown_tensors().is_empty() {
        let _ = writeln!(s, "\n{} tensors of types rgml cannot read:", f.unknown_tensors().len());
        for t in f.unknown_tensors() {
            let _ = writeln!(s, "  {}: {}", t.name, t.why());
        }
    }
    Ok(s)
}

/// Writes tensor `name` of `path`, dequantized, as little-endian f32 in ggml order.
pub fn dump(path: &Path, name: &str, out: &Path) -> rgml::Result<usize> {
    let f = GgufFile::open(path)?;
    if let Some(t) = f.unknown_tensor(name) {
        return Err(rgml::Error::UnknownType { name: name.to_string(), type_id: t.type_id, why: t.why() });
    }
    let info = f
        .tensor(name)
        .ok_or_else(|| rgml::Error::Metadata { key: format!("tensor {name}"), msg: "not in the file".into() })?;
    let values = rgml_models::quantize::dequantize_rows(info.dtype, info.ne[0] as usize, f.tensor_bytes(info))?;
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(out, bytes)?;
    Ok(values.len())
}
