//! The valid fixtures: every metadata value and tensor matches the manifest
//! bit for bit.

use rgml::gguf::{Array, GgufFile, TensorInfo, Value};
use rgml::Error;

use super::json::{sha256_hex, J};
use super::{fixtures, manifest};

/// Flattens a value to comparable leaves: integers, float bits (as f64), bools, strings.
pub(crate) fn leaves(v: &Value, out: &mut Vec<J>) {
    let bits = |b: u64| J::Num(format!("{b}"));
    let num = |n: i128| J::Num(n.to_string());
    match v {
        Value::Array(a) => array_leaves(a, out),
        Value::F32(x) => out.push(bits(f64::from(*x).to_bits())),
        Value::F64(x) => out.push(bits(x.to_bits())),
        Value::Bool(b) => out.push(J::Bool(*b)),
        Value::String(s) => out.push(J::Str(s.clone())),
        Value::U8(x) => out.push(num(i128::from(*x))),
        Value::I8(x) => out.push(num(i128::from(*x))),
        Value::U16(x) => out.push(num(i128::from(*x))),
        Value::I16(x) => out.push(num(i128::from(*x))),
        Value::U32(x) => out.push(num(i128::from(*x))),
        Value::I32(x) => out.push(num(i128::from(*x))),
        Value::U64(x) => out.push(num(i128::from(*x))),
        Value::I64(x) => out.push(num(i128::from(*x))),
    }
}

fn array_leaves(a: &Array, out: &mut Vec<J>) {
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
fn manifest_leaves(kv: &J) -> Vec<J> {
    let ty = kv.get("elem_type").unwrap_or(kv.at("type")).str();
    let conv = |v: &J, bits: Option<&J>| {
        let f64_bits = match (ty, bits, v) {
            ("FLOAT32", Some(b), _) => {
                f64::from(f32::from_bits(u32::from_str_radix(&b.str()[2..], 16).unwrap())).to_bits()
            }
            ("FLOAT64", Some(b), _) => u64::from_str_radix(&b.str()[2..], 16).unwrap(),
            ("FLOAT32", None, J::Num(n)) => f64::from(n.parse::<f32>().unwrap()).to_bits(),
            ("FLOAT64", None, J::Num(n)) => n.parse::<f64>().unwrap().to_bits(),
            _ => return v.clone(),
        };
        J::Num(f64_bits.to_string())
    };
    let bits = |i: usize| kv.get("value_bits_hex").and_then(|b| if let J::Arr(a) = b { a.get(i) } else { Some(b) });
    match kv.at("value") {
        J::Arr(vs) => vs.iter().enumerate().map(|(i, v)| conv(v, bits(i))).collect(),
        v => vec![conv(v, bits(0))],
    }
}

fn check_tensor(f: &GgufFile, t: &TensorInfo, m: &J) {
    let ne: Vec<i64> = m.at("ne").arr().iter().map(|n| n.int() as i64).collect();
    assert_eq!(t.name, m.at("name").str());
    assert_eq!(t.dtype.ggml_id() as i128, m.at("ggml_type_id").int());
    assert!(t.dtype.name().eq_ignore_ascii_case(m.at("ggml_type").str()));
    assert_eq!(&t.ne[..ne.len()], &ne[..], "{}", t.name);
    assert!(t.ne[ne.len()..].iter().all(|&n| n == 1));
    assert_eq!(t.n_dims as i128, m.at("n_dims").int());
    assert_eq!(t.n_elements() as i128, m.at("n_elements").int());
    assert_eq!(t.nb().map(|n| n as i128).to_vec(), m.at("nb_contiguous").arr().iter().map(J::int).collect::<Vec<_>>());
    assert_eq!(t.size as i128, m.at("n_bytes").int());
    assert_eq!(t.offset as i128, m.at("offset_in_data_section").int());
    assert_eq!(f.tensor_range(t).start as i128, m.at("file_offset").int());
    assert_eq!(sha256_hex(f.tensor_bytes(t)), m.at("raw_sha256").str(), "{}", t.name);
}

#[test]
fn valid_fixtures_match_manifest() {
    let valid = manifest().at("valid").arr();
    assert_eq!(valid.len(), 6);
    for entry in valid {
        let path = fixtures().join(entry.at("file").str());
        assert_eq!(sha256_hex(&std::fs::read(&path).unwrap()), entry.at("sha256").str(), "fixture copy differs");
        let f = GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let int = |k: &str| entry.get(k).map(J::int);
        assert_eq!(int("gguf_version").unwrap_or(3), f.version() as i128);
        assert_eq!(int("alignment").unwrap_or(32), f.alignment() as i128);
        assert_eq!(int("size").unwrap(), f.file_size() as i128);
        if let Some(d) = int("data_section_offset") {
            assert_eq!(d, f.data_offset() as i128);
        }
        let kvs = entry.at("kv").arr();
        assert_eq!(f.metadata().len(), kvs.len());
        for ((key, value), m) in f.metadata().iter().zip(kvs) {
            assert_eq!(key, m.at("key").str());
            assert_eq!(py_type(value.value_type()), m.at("type").str(), "{key}");
            if let Value::Array(a) = value {
                assert_eq!(py_type(a.elem_type()), m.at("elem_type").str(), "{key}");
                assert_eq!(a.len() as i128, m.at("len").int(), "{key}");
            }
            let mut got = vec![];
            leaves(value, &mut got);
            assert_eq!(got, manifest_leaves(m), "{key}");
            if let Some(n) = m.get("utf8_len") {
                assert_eq!(f.get_str(key).unwrap().len() as i128, n.int());
            }
        }
        let ts = entry.get("tensors").map(J::arr).unwrap_or(&[]);
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
