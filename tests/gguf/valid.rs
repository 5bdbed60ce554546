//! The valid fixtures: every metadata value and tensor matches the manifest
//! bit for bit.

use rgml::gguf::{Array, GgufFile, TensorInfo, Value};
use rgml::Error;

use super::{array, fixtures, manifest, sha256_hex, uint, Json};

/// Flattens a value to comparable leaves: integers, float bits (as f64), bools, strings.
pub(crate) fn leaves(v: &Value, out: &mut Vec<Json>) {
    out.push(match v {
        Value::Array(a) => return array_leaves(a, out),
        Value::F32(x) => f64::from(*x).to_bits().into(),
        Value::F64(x) => x.to_bits().into(),
        Value::Bool(b) => (*b).into(),
        Value::String(s) => s.as_str().into(),
        Value::U8(x) => (*x).into(),
        Value::I8(x) => (*x).into(),
        Value::U16(x) => (*x).into(),
        Value::I16(x) => (*x).into(),
        Value::U32(x) => (*x).into(),
        Value::I32(x) => (*x).into(),
        Value::U64(x) => (*x).into(),
        Value::I64(x) => (*x).into(),
    })
}

fn array_leaves(a: &Array, out: &mut Vec<Json>) {
    macro_rules! each {
        ($v:expr, $var:ident) => {
            $v.iter().for_each(|x| leaves(&Value::$var(x.clone()), out))
        };
    }
    match a {
        Array::U8(v) => each!(v, U8),
        Array::I8(v) => each!(v, I8),
        Array::U16(v) => each!(v, U16),
        Array::I16(v) => each!(v, I16),
        Array::U32(v) => each!(v, U32),
        Array::I32(v) => each!(v, I32),
        Array::F32(v) => each!(v, F32),
        Array::Bool(v) => each!(v, Bool),
        Array::String(v) => each!(v, String),
        Array::Array(v) => v.iter().for_each(|a| array_leaves(a, out)),
        Array::U64(v) => each!(v, U64),
        Array::I64(v) => each!(v, I64),
        Array::F64(v) => each!(v, F64),
    }
}

/// gguf-py's name of a value type (GGUFValueType).
pub(crate) fn py_type(t: rgml::gguf::ValueType) -> &'static str {
    [
        "UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32", "BOOL", "STRING", "ARRAY", "UINT64", "INT64",
        "FLOAT64",
    ][t.id() as usize]
}

/// A manifest value as leaves; floats as f64 bits, from `value_bits_hex` where
/// given (the manifest gives bits for the first 16 elements of long arrays).
fn manifest_leaves(kv: &Json) -> Vec<Json> {
    let ty = kv.get("elem_type").unwrap_or(&kv["type"]).as_str().unwrap();
    let hex = |b: &Json| u64::from_str_radix(b.as_str().unwrap().strip_prefix("0x").unwrap(), 16).unwrap();
    let conv = |v: &Json, bits: Option<&Json>| {
        let f64_bits = match (ty, bits) {
            ("FLOAT32", Some(b)) => f64::from(f32::from_bits(u32::try_from(hex(b)).unwrap())).to_bits(),
            ("FLOAT64", Some(b)) => hex(b),
            // No bits: the decimal. The fixtures' are short (k / 2), which serde_json parses
            // exactly, and an f32's decimal parsed to f64 narrows back to that same f32.
            ("FLOAT32", None) => f64::from(v.as_f64().unwrap() as f32).to_bits(),
            ("FLOAT64", None) => v.as_f64().unwrap().to_bits(),
            _ => return v.clone(),
        };
        Json::from(f64_bits)
    };
    let bits =
        |i: usize| kv.get("value_bits_hex").and_then(|b| if let Json::Array(a) = b { a.get(i) } else { Some(b) });
    match &kv["value"] {
        Json::Array(vs) => vs.iter().enumerate().map(|(i, v)| conv(v, bits(i))).collect(),
        v => vec![conv(v, bits(0))],
    }
}

fn check_tensor(f: &GgufFile, t: &TensorInfo, m: &Json) {
    let ne = array(&m["ne"]);
    assert_eq!(t.name, m["name"]);
    assert_eq!(t.dtype.ggml_id(), m["ggml_type_id"]);
    assert!(t.dtype.name().eq_ignore_ascii_case(m["ggml_type"].as_str().unwrap()));
    assert_eq!(&t.ne[..ne.len()], ne, "{}", t.name);
    assert!(t.ne[ne.len()..].iter().all(|&n| n == 1));
    assert_eq!(t.n_dims, m["n_dims"]);
    assert_eq!(t.n_elements(), m["n_elements"]);
    assert_eq!(t.nb(), array(&m["nb_contiguous"]));
    assert_eq!(t.size, m["n_bytes"]);
    assert_eq!(t.offset, m["offset_in_data_section"]);
    assert_eq!(f.tensor_range(t).start, m["file_offset"]);
    assert_eq!(sha256_hex(f.tensor_bytes(t)), m["raw_sha256"], "{}", t.name);
}

#[test]
fn valid_fixtures_match_manifest() {
    let valid = array(&manifest()["valid"]);
    assert_eq!(valid.len(), 6);
    for entry in valid {
        let path = fixtures().join(entry["file"].as_str().unwrap());
        assert_eq!(sha256_hex(&std::fs::read(&path).unwrap()), entry["sha256"], "fixture copy differs");
        let f = GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let int = |k: &str| entry.get(k).map(uint);
        assert_eq!(int("gguf_version").unwrap_or(3), u64::from(f.version()));
        assert_eq!(int("alignment").unwrap_or(32), f.alignment() as u64);
        assert_eq!(int("size").unwrap(), f.file_size() as u64);
        if let Some(d) = int("data_section_offset") {
            assert_eq!(d, f.data_offset() as u64);
        }
        let kvs = array(&entry["kv"]);
        assert_eq!(f.metadata().len(), kvs.len());
        for ((key, value), m) in f.metadata().iter().zip(kvs) {
            assert_eq!(*key, m["key"]);
            assert_eq!(py_type(value.value_type()), m["type"], "{key}");
            if let Value::Array(a) = value {
                assert_eq!(py_type(a.elem_type()), m["elem_type"], "{key}");
                assert_eq!(a.len(), m["len"], "{key}");
            }
            let mut got = vec![];
            leaves(value, &mut got);
            assert_eq!(got, manifest_leaves(m), "{key}");
            if let Some(n) = m.get("utf8_len") {
                assert_eq!(f.get_str(key).unwrap().len(), *n);
            }
        }
        let ts = entry.get("tensors").map(array).unwrap_or(&[]);
        assert_eq!(f.tensors().len(), ts.len());
        for (t, m) in f.tensors().iter().zip(ts) {
            check_tensor(&f, t, m);
            assert_eq!(f.tensor(&t.name), Some(t));
        }
    }
    let f = GgufFile::open(fixtures().join("valid/mixed.gguf")).unwrap();
    assert_eq!(f.get_u32("test.u32").unwrap(), u32::MAX);
    assert_eq!(f.get_i64("test.i32").unwrap(), i32::MIN as i64);
    assert_eq!(f.get_f32("test.f32_neg_zero").unwrap().to_bits(), 0x8000_0000);
    assert_eq!(f.get_str_array("test.arr_string").unwrap()[2], "héllo");
    assert_eq!(f.get_str("test.string_with_nul").unwrap(), "a\0b");
    assert!(matches!(f.get_u32("test.i32"), Err(Error::Metadata { .. })));
}
