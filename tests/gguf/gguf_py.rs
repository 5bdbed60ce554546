//! gguf-py reads rgml's files: its view of every field and tensor matches
//! rgml's (skipped when `import gguf, numpy` fails, unless
//! `RGML_REQUIRE_GGUF_PY` is set).

use rgml::gguf::{Array, GgufFile, Value};
use rgml::DType;

use super::valid::{leaves, py_type};
use super::writer::{everything, scratch, tensor_data};
use super::{array, sha256_hex, Json};

const PY_DUMP: &str = r#"
import sys, json, struct, hashlib
from gguf import GGUFReader
r = GGUFReader(sys.argv[1])
def enc(x):
    if isinstance(x, bool): return x
    if isinstance(x, float): return {"bits": str(struct.unpack('<Q', struct.pack('<d', x))[0])}
    if isinstance(x, list): return [enc(y) for y in x]
    return x
print(json.dumps({
    "alignment": int(r.alignment), "data_offset": int(r.data_offset),
    "fields": [{"name": k, "types": [t.name for t in f.types], "value": enc(f.contents())} for k, f in r.fields.items()],
    "tensors": [{"name": t.name, "type": int(t.tensor_type), "shape": [int(d) for d in t.shape], "n_bytes": int(t.n_bytes),
                 "offset": int(t.data_offset), "sha256": hashlib.sha256(t.data.tobytes()).hexdigest()} for t in r.tensors]}))
"#;

/// gguf-py's `types` of a field: the value's type, then for arrays the types of element 0, recursively.
fn py_types(v: &Value) -> Vec<&'static str> {
    fn arr(a: &Array) -> Vec<&'static str> {
        match a {
            _ if a.is_empty() => vec![],
            Array::Array(v) => [vec!["ARRAY"], arr(&v[0])].concat(),
            a => vec![py_type(a.elem_type())],
        }
    }
    match v {
        Value::Array(a) => [vec!["ARRAY"], arr(a)].concat(),
        v => vec![py_type(v.value_type())],
    }
}

/// gguf-py's flattened `contents()` as leaves, floats as f64 bits (which the
/// dump writes as decimal strings).
fn py_leaves(j: &Json) -> Vec<Json> {
    match j {
        Json::Array(items) => items.iter().flat_map(py_leaves).collect(),
        Json::Object(_) => vec![j["bits"].as_str().unwrap().parse::<u64>().unwrap().into()],
        j => vec![j.clone()],
    }
}

#[test]
fn gguf_py_reads_rgml_files() {
    let probe = std::process::Command::new("python3").args(["-c", "import gguf, numpy"]).output();
    if !matches!(&probe, Ok(o) if o.status.success()) {
        let why =
            probe.map(|o| String::from_utf8_lossy(&o.stderr).trim().to_string()).unwrap_or_else(|e| e.to_string());
        assert!(std::env::var_os("RGML_REQUIRE_GGUF_PY").is_none(), "RGML_REQUIRE_GGUF_PY is set but: {why}");
        println!(
            "SKIP gguf_py_reads_rgml_files: python3 cannot import gguf/numpy (pip install gguf==0.19.0 numpy): {why}"
        );
        return;
    }
    let data = tensor_data();
    let dir = scratch("gguf-py");
    for alignment in [1u32, 32, 256] {
        let path = dir.join(format!("all-{alignment}.gguf"));
        // gguf-py 0.19.0 sizes Q8_1 blocks as 40 bytes (ggml: 36), so it misreads Q8_1 tensors
        let types: Vec<DType> = DType::ALL.into_iter().filter(|&t| t != DType::Q8_1).collect();
        everything(&data, alignment, &types).write(&path).unwrap();
        let out = std::process::Command::new("python3").args(["-c", PY_DUMP]).arg(&path).output().unwrap();
        assert!(out.status.success(), "gguf-py failed: {}", String::from_utf8_lossy(&out.stderr));
        let py: Json = serde_json::from_slice(&out.stdout).unwrap();
        let f = GgufFile::open(&path).unwrap();
        assert_eq!(py["alignment"], alignment);
        assert_eq!(py["data_offset"], f.data_offset());
        let fields: Vec<&Json> =
            array(&py["fields"]).iter().filter(|j| !j["name"].as_str().unwrap().starts_with("GGUF.")).collect();
        assert_eq!(fields.len(), f.metadata().len());
        for (j, (key, value)) in fields.iter().zip(f.metadata()) {
            assert_eq!(j["name"], *key);
            assert_eq!(array(&j["types"]), py_types(value), "{key}");
            let mut ours = vec![];
            leaves(value, &mut ours);
            assert_eq!(py_leaves(&j["value"]), ours, "{key}");
        }
        let ts = array(&py["tensors"]);
        assert_eq!(ts.len(), f.tensors().len());
        for (j, t) in ts.iter().zip(f.tensors()) {
            assert_eq!(j["name"], t.name);
            assert_eq!(j["type"], t.dtype.ggml_id(), "{}", t.name);
            assert_eq!(array(&j["shape"]), &t.ne[..t.n_dims as usize], "{}", t.name);
            assert_eq!(j["n_bytes"], t.size, "{}", t.name);
            assert_eq!(j["offset"], f.tensor_range(t).start, "{}", t.name);
            assert_eq!(j["sha256"], sha256_hex(f.tensor_bytes(t)), "{}", t.name);
        }
    }
}
