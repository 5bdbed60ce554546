//! Unit tests on hand-built byte images: each validation rule, the accessors,
//! and the writer's checks. The fixture files are tested in `tests/gguf/`.

use super::*;
use crate::{DType, Error};

/// Builds a GGUF image field by field.
#[derive(Default)]
struct B(Vec<u8>);

impl B {
    fn header(version: u32, n_tensors: u64, n_kv: u64) -> B {
        let mut b = B(b"GGUF".to_vec());
        b.u32(version).u64(n_tensors).u64(n_kv);
        b
    }
    fn u8(&mut self, x: u8) -> &mut B {
        self.0.push(x);
        self
    }
    fn u32(&mut self, x: u32) -> &mut B {
        self.0.extend(x.to_le_bytes());
        self
    }
    fn u64(&mut self, x: u64) -> &mut B {
        self.0.extend(x.to_le_bytes());
        self
    }
    fn str(&mut self, s: &[u8]) -> &mut B {
        self.u64(s.len() as u64);
        self.0.extend(s);
        self
    }
    fn tensor(&mut self, name: &str, ne: &[u64], ty: u32, offset: u64) -> &mut B {
        self.str(name.as_bytes()).u32(ne.len() as u32);
        ne.iter().for_each(|&n| {
            self.u64(n);
        });
        self.u32(ty).u64(offset)
    }
    fn pad_to(&mut self, align: usize, extra: usize) -> Vec<u8> {
        let mut v = self.0.clone();
        v.resize(v.len().div_ceil(align) * align + extra, 0);
        v
    }
}

/// The error's offset and message, or a panic if parsing succeeded.
fn err(bytes: &[u8]) -> (u64, String) {
    match GgufHeader::parse(bytes) {
        Err(Error::Gguf { offset, msg }) => (offset, msg),
        other => panic!("expected a gguf error, got {other:?}"),
    }
}

#[test]
fn header_checks() {
    assert!(err(b"").1.contains("empty file"));
    assert!(err(b"GGU").1.contains("magic"));
    assert!(err(b"GGUX\x03\0\0\0").1.contains("bad magic 'GGUX'"));
    let (at, msg) = err(&B::header(0x0300_0000, 0, 0).0);
    assert_eq!(at, 4);
    assert!(msg.contains("byte-swapped"), "{msg}");
    assert!(err(&B::header(1, 0, 0).0).1.contains("version 1"));
    assert!(err(&B::header(4, 0, 0).0).1.contains("version 4"));
    // v2 and v3 share the layout
    for v in [2, 3] {
        let h = GgufHeader::parse(&B::header(v, 0, 0).0).unwrap();
        assert_eq!((h.version(), h.alignment(), h.data_offset(), h.tensors().len()), (v, 32, 24, 0));
    }
    // absurd counts fail at once, at the count's offset
    assert_eq!(err(&B::header(3, 0, 1 << 60).0).0, 16);
    assert_eq!(err(&B::header(3, u64::MAX, 0).0).0, 8);
    assert!(err(&B::header(3, 0, 1).0).1.contains("KV count is 1"));
}

#[test]
fn values_of_every_type_and_nested_arrays() {
    let mut b = B::header(3, 0, 5);
    b.str(b"a.u16").u32(2).0.extend(0xBEEFu16.to_le_bytes());
    b.str(b"a.nested").u32(9).u32(9).u64(2); // array of 2 arrays
    b.u32(5).u64(2).u32(7).u32((-3i32) as u32); // [7, -3] as i32
    b.u32(8).u64(1).str("é".as_bytes()); // ["é"]
    b.str(b"a.empty").u32(9).u32(12).u64(0);
    b.str(b"a.bools").u32(9).u32(7).u64(3).u8(1).u8(0).u8(1);
    b.str(b"a.f64").u32(12).0.extend(1.5f64.to_le_bytes());
    let h = GgufHeader::parse(&b.0).unwrap();
    assert_eq!(h.get("a.u16"), Some(&Value::U16(0xBEEF)));
    let nested = h.get_array("a.nested").unwrap();
    assert_eq!(nested.type_description(), "array of array of i32");
    assert_eq!(nested.depth(), 2);
    let inner = nested.as_arrays().unwrap();
    assert_eq!(inner[0].as_i32(), Some(&[7, -3][..]));
    assert_eq!(inner[1].as_strings(), Some(&["é".to_string()][..]));
    assert_eq!(h.get_array("a.empty").unwrap(), &Array::F64(vec![]));
    assert_eq!(h.get_array("a.bools").unwrap().as_bool(), Some(&[true, false, true][..]));
    assert_eq!(h.metadata().iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>()[..2], ["a.u16", "a.nested"]);
    // lossless widening only, by type
    assert_eq!(h.get_u32("a.u16").unwrap(), 0xBEEF);
    assert_eq!(h.get_i64("a.u16").unwrap(), 0xBEEF);
    assert_eq!(h.get_f64("a.f64").unwrap(), 1.5);
    for e in [h.get_i16("a.u16").unwrap_err(), h.get_f32("a.f64").unwrap_err(), h.get_str("a.nested").unwrap_err()] {
        let Error::Metadata { key, msg } = e else { panic!("{e:?}") };
        assert!(key.starts_with("a.") && msg.starts_with("expected ") && msg.contains("found"), "{msg}");
    }
    let Error::Metadata { msg, .. } = h.get_u32("nope").unwrap_err() else { panic!() };
    assert_eq!(msg, "not found");
}

#[test]
fn kv_checks() {
    let bad_value = |ty: u32, tail: &[u8]| {
        let mut b = B::header(3, 0, 1);
        b.str(b"k").u32(ty).0.extend(tail);
        err(&b.0)
    };
    assert!(bad_value(13, &[0; 8]).1.contains("invalid value type 13"));
    assert!(bad_value(7, &[2]).1.contains("bool byte is 2"));
    assert!(bad_value(8, &[2, 0, 0, 0, 0, 0, 0, 0, 0xC3, 0x28]).1.contains("not valid UTF-8"));
    assert!(bad_value(9, &[13, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).1.contains("array element type 13"));
    // array length larger than the file can hold
    let (at, msg) = bad_value(9, &[4, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]);
    assert!(msg.contains("array length"), "{msg}");
    assert_eq!(at, 24 + 9 + 4 + 4);
    // arrays nested beyond the limit
    let mut deep = Vec::new();
    for _ in 0..MAX_ARRAY_DEPTH + 1 {
        deep.extend([9, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
    }
    assert!(bad_value(9, &deep).1.contains("nested deeper"));
    let mut b = B::header(3, 0, 1);
    b.str(b"").u32(0).u8(0).u64(0);
    assert!(err(&b.0).1.contains("empty key"));
    let mut b = B::header(3, 0, 2);
    b.str(b"k").u32(0).u8(0).str(b"k").u32(0).u8(0);
    assert!(err(&b.0).1.contains("duplicate key 'k'"));
    for (ty, val, what) in [(4u32, 3u32, "non-zero power of two"), (5, 32, "must be a u32")] {
        let mut b = B::header(3, 0, 1);
        b.str(b"general.alignment").u32(ty).u32(val);
        let (at, msg) = err(&b.0);
        assert!(msg.contains(what), "{msg}");
        assert_eq!(at, 24 + 8 + 17 + 4);
    }
}

/// One f32 tensor "t" with the given shape and offset, alignment 32, then `data` bytes.
fn one_tensor(ne: &[u64], ty: u32, offset: u64, data: usize) -> Vec<u8> {
    B::header(3, 1, 0).tensor("t", ne, ty, offset).pad_to(32, data)
}

#[test]
fn tensor_checks() {
    let h = GgufHeader::parse(&one_tensor(&[3, 2], 0, 0, 24)).unwrap();
    let t = h.tensor("t").unwrap();
    assert_eq!((t.ne, t.n_dims, t.size, t.offset, t.n_elements()), ([3, 2, 1, 1], 2, 24, 0, 6));
    assert_eq!(t.nb(), [4, 12, 24, 24]);
    assert_eq!((h.data_offset(), h.tensor_range(t)), (96, 96..120));
    // zero-sized dims are accepted, as in ggml
    assert_eq!(GgufHeader::parse(&one_tensor(&[0, 5], 0, 0, 0)).unwrap().tensors()[0].size, 0);
    assert!(err(&one_tensor(&[1; 5], 0, 0, 4)).1.contains("5 dimensions"));
    assert!(err(&one_tensor(&[1 << 63], 0, 0, 4)).1.contains("negative"));
    assert!(err(&one_tensor(&[1 << 62, 4], 0, 0, 4)).1.contains("overflows int64"));
    assert!(err(&one_tensor(&[1 << 61, 2], 0, 0, 4)).1.contains("byte size"));
    assert!(err(&one_tensor(&[33], 8, 0, 34)).1.contains("not a multiple of the q8_0 block size 32"));
    // the types added with IQ4_NL are known: sizes from ggml's block structs
    let h = GgufHeader::parse(&one_tensor(&[512, 2], 16, 0, 264)).unwrap();
    assert_eq!((h.tensors()[0].dtype, h.tensors()[0].size), (DType::IQ2_XXS, 264));
    assert!(err(&one_tensor(&[16], 39, 0, 17)).1.contains("not a multiple of the mxfp4 block size 32"));
    assert!(err(&one_tensor(&[4], 0, 16, 32)).1.contains("not a multiple of the alignment 32"));
    assert!(err(&one_tensor(&[4], 0, 0, 15)).1.contains("past the end of the file"));
    assert!(err(&one_tensor(&[4], 0, u64::MAX - 31, 16)).1.contains("past the end of the file"));
    // data section start past the end of a file with tensors
    assert!(err(&B::header(3, 1, 0).tensor("t", &[0], 0, 0).0).1.contains("data section"));
    // names: 64 bytes accepted, 65 not; duplicates not
    let name64 = "n".repeat(64);
    assert!(GgufHeader::parse(&B::header(3, 1, 0).tensor(&name64, &[1], 0, 0).pad_to(32, 4)).is_ok());
    assert!(err(&B::header(3, 1, 0).tensor(&"n".repeat(65), &[1], 0, 0).pad_to(32, 4)).1.contains("65 bytes"));
    let dup = B::header(3, 2, 0).tensor("t", &[1], 0, 0).tensor("t", &[1], 0, 32).pad_to(32, 36);
    assert!(err(&dup).1.contains("duplicate tensor name 't'"));
    // out of order is fine, overlapping is not
    let ok = B::header(3, 2, 0).tensor("a", &[8], 0, 32).tensor("b", &[8], 0, 0).pad_to(32, 64);
    let h = GgufHeader::parse(&ok).unwrap();
    assert_eq!(h.tensors().iter().map(|t| t.offset).collect::<Vec<_>>(), [32, 0]);
    let overlap = B::header(3, 2, 0).tensor("a", &[16], 0, 32).tensor("b", &[16], 0, 0).pad_to(32, 96);
    assert!(err(&overlap).1.contains("overlaps"));
    // a missing trailing padding is accepted
    assert!(GgufHeader::parse(&one_tensor(&[3], 0, 0, 12)).is_ok());
}

/// Tensors of type ids rgml does not know: kept apart, bounded by the next
/// tensor or the end of the file, every other check still applied.
#[test]
fn unknown_type_ids_are_bounded_not_refused() {
    for (id, why) in [
        (4, "type id 4 (Q4_2) was removed from ggml"),
        (33, "type id 33 (Q4_0_8_8) was removed from ggml"),
        (38, "type id 38 (IQ4_NL_8_8) was removed from ggml"),
        (40, "type id 40 (NVFP4) is not supported by rgml"),
        (99, "type id 99 is unknown to rgml"),
        (u32::MAX, "type id 4294967295 is unknown to rgml"),
    ] {
        // "a" known (16 f32), then "u" of the unknown type, then "b" known, out of order in the file
        let img = B::header(3, 3, 0)
            .tensor("b", &[8], 0, 128)
            .tensor("u", &[7, 3], id, 64)
            .tensor("a", &[16], 0, 0)
            .pad_to(32, 160);
        let h = GgufHeader::parse(&img).unwrap();
        assert_eq!(h.n_tensors(), 3);
        assert_eq!(h.tensors().iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["b", "a"]);
        let u = h.unknown_tensor("u").unwrap();
        assert_eq!((u.type_id, u.ne, u.n_dims, u.offset, u.max_size), (id, [7, 3, 1, 1], 2, 64, 64));
        assert_eq!(u.why(), why);
        assert!(h.tensor("u").is_none() && h.unknown_tensor("a").is_none());
        let names: Vec<(&str, u32)> = h.entries().map(|e| (e.name(), e.type_id())).collect();
        assert_eq!(names, [("b", 0), ("u", id), ("a", 0)], "file order");
        // the last tensor: bounded by the end of the file (no trailing padding needed)
        let last = B::header(3, 1, 0).tensor("u", &[5], id, 0).pad_to(32, 3);
        assert_eq!(GgufHeader::parse(&last).unwrap().unknown_tensors()[0].max_size, 3);
        // an empty one has no bytes and may sit anywhere in the data section
        let empty = B::header(3, 2, 0).tensor("e", &[0], id, 0).tensor("a", &[4], 0, 0).pad_to(32, 16);
        assert_eq!(GgufHeader::parse(&empty).unwrap().unknown_tensors()[0].max_size, 0);
        // and the checks that still apply
        assert!(err(&B::header(3, 1, 0).tensor("u", &[5], id, 16).pad_to(32, 64)).1.contains("alignment 32"));
        assert!(err(&B::header(3, 1, 0).tensor("u", &[5], id, 64).pad_to(32, 32)).1.contains("past the end"));
        let no_room = B::header(3, 2, 0).tensor("u", &[5], id, 32).tensor("a", &[8], 0, 0).pad_to(32, 32);
        assert!(err(&no_room).1.contains("no bytes before the next tensor"), "{}", err(&no_room).1);
        let shared = B::header(3, 2, 0).tensor("u", &[5], id, 0).tensor("a", &[8], 0, 0).pad_to(32, 64);
        assert!(err(&shared).1.contains("overlaps"), "{}", err(&shared).1);
        let into = B::header(3, 2, 0).tensor("a", &[16], 0, 0).tensor("u", &[5], id, 32).pad_to(32, 96);
        assert!(err(&into).1.contains("overlaps"), "{}", err(&into).1);
        assert!(err(&B::header(3, 1, 0).tensor("u", &[1 << 62, 4], id, 0).pad_to(32, 4)).1.contains("overflows"));
        let dup = B::header(3, 2, 0).tensor("u", &[1], id, 0).tensor("u", &[1], 0, 32).pad_to(32, 36);
        assert!(err(&dup).1.contains("duplicate tensor name 'u'"));
    }
}

#[test]
fn writer_checks_and_round_trip() {
    let mut w = GgufWriter::new();
    assert!(matches!(w.set("", 1u8), Err(Error::Invalid(_))));
    assert!(w.set_alignment(48).is_err());
    assert!(w.set("general.alignment", 64u64).is_err());
    let mut deep = Array::U8(vec![1]);
    for _ in 0..MAX_ARRAY_DEPTH {
        deep = Array::Array(vec![deep]);
    }
    assert!(w.set("deep", deep).is_err());
    w.set_alignment(64).unwrap().set("x", 1u32).unwrap().set("x", "two").unwrap();
    assert_eq!(w.alignment(), 64);
    assert!(w.add_tensor("a".repeat(64), DType::F32, &[1], vec![0; 4]).is_err());
    assert!(w.add_tensor("q", DType::Q4_0, &[16], vec![0; 9]).is_err());
    assert!(w.add_tensor("neg", DType::F32, &[-1], vec![]).is_err());
    assert!(w.add_tensor("dims", DType::F32, &[1; 5], vec![0; 4]).is_err());
    assert!(matches!(
        w.add_tensor("f", DType::F32, &[3], vec![0; 11]),
        Err(Error::DataSize { expected: 12, found: 11, .. })
    ));
    w.add_tensor("f", DType::F32, &[3], vec![7; 12]).unwrap();
    assert!(w.add_tensor("f", DType::F32, &[3], vec![0; 12]).is_err());
    w.add_tensor_from_reader("g", DType::Q8_0, &[32, 2], &[9u8; 68][..]).unwrap();
    let mut out = Vec::new();
    w.write_to(&mut out).unwrap();
    assert_eq!(out.len() % 64, 0);
    let h = GgufHeader::parse(&out).unwrap();
    assert_eq!(h.metadata().len(), 2);
    assert_eq!(h.get_str("x").unwrap(), "two");
    let g = h.tensor("g").unwrap();
    assert_eq!((g.offset, g.size, g.dtype), (64, 68, DType::Q8_0));
    assert_eq!(&out[h.tensor_range(g)], &[9u8; 68][..]);
    // readers that yield the wrong number of bytes
    for len in [67, 69] {
        let mut w = GgufWriter::new();
        w.add_tensor_from_reader("g", DType::Q8_0, &[32, 2], std::io::Cursor::new(vec![1u8; len])).unwrap();
        assert!(w.write_to(Vec::new()).is_err());
    }
}

/// A fresh, empty scratch directory.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("rgml-gguf-unit-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn listing(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn failed_writes_leave_nothing_behind() {
    let dir = scratch("atomic");
    // the directory does not exist
    let missing = dir.join("nope/x.gguf");
    assert!(matches!(GgufWriter::new().write(&missing), Err(Error::Io(_))));
    assert!(!dir.join("nope").exists());
    // a streamed tensor 10 bytes short: fails midway, after the header is written
    let target = dir.join("model.gguf");
    std::fs::write(&target, b"old contents").unwrap();
    let mut w = GgufWriter::new();
    w.set("k", 1u32).unwrap().add_tensor("a", DType::F32, &[4], vec![0u8; 16]).unwrap();
    w.add_tensor_from_reader("b", DType::F32, &[1000], std::io::Cursor::new(vec![1u8; 3990])).unwrap();
    assert!(matches!(w.write(&target), Err(Error::DataSize { expected: 4000, found: 3990, .. })));
    assert_eq!(listing(&dir), ["model.gguf"]);
    assert_eq!(std::fs::read(&target).unwrap(), b"old contents");
    // a reader that fails
    struct Broken;
    impl std::io::Read for Broken {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk on fire"))
        }
    }
    let mut w = GgufWriter::new();
    w.add_tensor_from_reader("b", DType::F32, &[4], Broken).unwrap();
    assert!(matches!(w.write(&target), Err(Error::Io(_))));
    // the target is a directory: the rename fails
    std::fs::create_dir(dir.join("sub.gguf")).unwrap();
    assert!(GgufWriter::new().write(dir.join("sub.gguf")).is_err());
    assert_eq!(listing(&dir), ["model.gguf", "sub.gguf"]);
    assert_eq!(std::fs::read(&target).unwrap(), b"old contents");
    // and a successful write replaces the target
    GgufWriter::new().write(&target).unwrap();
    assert_eq!(GgufFile::open(&target).unwrap().metadata().len(), 0);
    assert_eq!(listing(&dir), ["model.gguf", "sub.gguf"]);
    std::fs::remove_dir_all(&dir).unwrap();
}
