//! The writer: rgml rewrites gguf-py's files byte for byte and round-trips
//! metadata of every type and tensors of every type at several alignments.

use std::path::{Path, PathBuf};

use rgml::gguf::{Array, GgufFile, GgufHeader, GgufWriter, Value};
use rgml::DType;

use super::fixtures;

/// A writer with the file's metadata and tensors (borrowed from its map).
fn rewrite(f: &GgufFile) -> GgufWriter<'_> {
    let mut w = GgufWriter::new();
    for (k, v) in f.metadata() {
        w.set(k, v.clone()).unwrap();
    }
    for t in f.tensors() {
        w.add_tensor(&t.name, t.dtype, &t.ne[..t.n_dims as usize], f.tensor_bytes(t)).unwrap();
    }
    w
}

#[test]
fn rewrites_gguf_py_files_byte_for_byte() {
    for name in ["baseline", "mixed", "align1", "align64", "kv_only"] {
        let f = GgufFile::open(fixtures().join(format!("valid/{name}.gguf"))).unwrap();
        let mut out = Vec::new();
        rewrite(&f).write_to(&mut out).unwrap();
        assert!(out == f.bytes(), "{name}: rgml's bytes differ from gguf-py's");
    }
}

pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("gguf-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// Deterministic pseudo-random bytes.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Metadata of every type (scalars, arrays of each type, nested and empty
/// arrays) and one tensor of each of `types`, with shapes of 1 to 4 dims.
pub(crate) fn everything<'a>(data: &'a [Vec<u8>], alignment: u32, types: &[DType]) -> GgufWriter<'a> {
    let mut w = GgufWriter::new();
    w.set("general.architecture", "rgml-test").unwrap().set_alignment(alignment).unwrap();
    let scalars: Vec<Value> = vec![
        Value::U8(255),
        Value::I8(-128),
        Value::U16(65535),
        Value::I16(-32768),
        Value::U32(u32::MAX),
        Value::I32(i32::MIN),
        Value::F32(-0.0),
        Value::Bool(true),
        Value::String("héllo ✓ 🦀 a\0b".into()),
        Value::U64(u64::MAX),
        Value::I64(i64::MIN),
        Value::F64(f64::MIN_POSITIVE / 2.0),
    ];
    for (i, v) in scalars.into_iter().enumerate() {
        w.set(format!("s.{i}.{}", v.value_type()), v).unwrap();
    }
    w.set("a.u8", vec![0u8, 1, 255]).unwrap().set("a.i8", vec![-1i8, 127]).unwrap();
    w.set("a.u16", vec![7u16]).unwrap().set("a.i16", vec![-7i16, 8]).unwrap();
    w.set("a.u32", vec![1u32, 2, 3]).unwrap().set("a.i32", vec![-1i32]).unwrap();
    w.set("a.f32", vec![0.5f32, f32::INFINITY, -1e-40]).unwrap().set("a.bool", vec![false, true]).unwrap();
    w.set("a.string", vec!["", "a", "é"]).unwrap().set("a.u64", vec![u64::MAX]).unwrap();
    w.set("a.i64", vec![i64::MAX, -1]).unwrap().set("a.f64", vec![1e300, -2.5]).unwrap();
    w.set("a.nested_i32", vec![Array::I32(vec![1, 2]), Array::I32(vec![3])]).unwrap();
    w.set("a.nested_str", vec![Array::String(vec!["x".into()]), Array::String(vec!["y".into(), "z".into()])]).unwrap();
    w.set("a.nested3", vec![Array::Array(vec![Array::U16(vec![4, 5])])]).unwrap();
    w.set("a.empty", Array::F64(vec![])).unwrap();
    for (t, d) in DType::ALL.iter().zip(data).filter(|(t, _)| types.contains(t)) {
        w.add_tensor(format!("t.{t}"), *t, &shape(*t), &d[..]).unwrap();
    }
    w
}

fn shape(t: DType) -> Vec<i64> {
    let bs = t.block_size() as i64;
    match t.ggml_id() % 4 {
        0 => vec![bs * 3],
        1 => vec![bs, 5],
        2 => vec![bs * 2, 3, 2],
        _ => vec![bs, 1, 2, 3],
    }
}

pub(crate) fn tensor_data() -> Vec<Vec<u8>> {
    DType::ALL
        .iter()
        .map(|t| {
            noise(
                t.row_size(shape(*t)[0]).unwrap() * shape(*t)[1..].iter().product::<i64>() as usize,
                t.ggml_id() as u64,
            )
        })
        .collect()
}

#[test]
fn round_trip_every_type_and_alignment() {
    let data = tensor_data();
    let dir = scratch("round-trip");
    for alignment in [1u32, 8, 32, 64, 4096] {
        let path = dir.join(format!("all-{alignment}.gguf"));
        let w = everything(&data, alignment, &DType::ALL);
        let mut expect_kv = Vec::new();
        let mut expect_bytes = Vec::new();
        everything(&data, alignment, &DType::ALL).write_to(&mut expect_bytes).unwrap();
        for (k, v) in GgufHeader::parse(&expect_bytes).unwrap().metadata() {
            expect_kv.push((k.clone(), v.clone()));
        }
        w.write(&path).unwrap();
        let f = GgufFile::open(&path).unwrap();
        assert_eq!(f.bytes(), &expect_bytes[..]);
        assert_eq!(f.alignment(), alignment as usize);
        assert_eq!(f.data_offset() % alignment as usize, 0);
        assert_eq!(f.metadata(), &expect_kv[..]);
        assert_eq!(f.get_f32("s.6.f32").unwrap().to_bits(), (-0.0f32).to_bits());
        assert_eq!(f.get_array("a.nested3").unwrap().depth(), 3);
        assert_eq!(f.tensors().len(), DType::ALL.len());
        for ((t, d), ty) in f.tensors().iter().zip(&data).zip(DType::ALL) {
            let ne = shape(ty);
            assert_eq!(
                (t.name.as_str(), t.dtype, &t.ne[..ne.len()], t.n_dims as usize),
                (&*format!("t.{ty}"), ty, &ne[..], ne.len())
            );
            assert_eq!(t.offset % alignment as usize, 0);
            assert_eq!(f.tensor_bytes(t), &d[..]);
        }
    }
    assert_eq!(listing(&dir).len(), 5, "no temporary files left behind");
}
