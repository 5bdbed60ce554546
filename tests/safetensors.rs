//! `rgml::safetensors`: fixtures written by the Python `safetensors` package
//! (and one by hand) read bit for bit, as mapped leaves that compute; sharded
//! checkpoints; hostile headers and indexes give `Error::Safetensors` (or
//! `Error::Io` for a missing file), never a panic.
//! Fixtures: tests/fixtures/safetensors/README.md.

use std::path::{Path, PathBuf};

use half::{bf16, f16};
use rgml::safetensors::{SafetensorsFile, SafetensorsHeader, SafetensorsIndex};
use rgml::{load_safetensors, load_safetensors_index, Context, CpuBackend, DType, Error, Graph};
use sha2::{Digest, Sha256};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/safetensors")
}

/// The script's `floats`: `(((i*37 + salt*11) % 101) - 50) / 8`, exact in every float type.
fn floats(n: usize, salt: i64) -> Vec<f64> {
    (0..n as i64).map(|i| (((i * 37 + salt * 11) % 101) - 50) as f64 / 8.0).collect()
}

/// The script's `ints`: `(i*7919 + salt) % span + lo`.
fn ints(n: usize, salt: i64, lo: i64, span: i64) -> Vec<i64> {
    (0..n as i64).map(|i| (i * 7919 + salt) % span + lo).collect()
}

/// The little-endian bytes a tensor of `dtype` holding `v` has.
fn float_bytes(dtype: &str, v: &[f64]) -> Vec<u8> {
    v.iter()
        .flat_map(|&x| match dtype {
            "F64" => x.to_le_bytes().to_vec(),
            "F32" => (x as f32).to_le_bytes().to_vec(),
            "F16" => f16::from_f64(x).to_le_bytes().to_vec(),
            "BF16" => bf16::from_f64(x).to_le_bytes().to_vec(),
            _ => unreachable!(),
        })
        .collect()
}

fn int_bytes(dtype: &str, v: &[i64]) -> Vec<u8> {
    v.iter()
        .flat_map(|&x| match dtype {
            "I64" => x.to_le_bytes().to_vec(),
            "I32" => (x as i32).to_le_bytes().to_vec(),
            "I16" => (x as i16).to_le_bytes().to_vec(),
            "I8" => (x as i8).to_le_bytes().to_vec(),
            _ => unreachable!(),
        })
        .collect()
}

fn manifest() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir().join("manifest.json")).unwrap()).unwrap()
}

fn sha256(b: &[u8]) -> String {
    Sha256::digest(b).iter().map(|x| format!("{x:02x}")).collect()
}

/// The fixture files are those the manifest lists.
#[test]
fn fixture_files_match_the_manifest() {
    let m = manifest();
    let files = m["files"].as_object().unwrap();
    assert_eq!(files.len(), 5);
    for (name, digest) in files {
        assert_eq!(sha256(&std::fs::read(dir().join(name)).unwrap()), digest.as_str().unwrap(), "{name}");
    }
}

/// basic.safetensors (written by the package): every loadable tensor is a
/// mapped leaf with the expected bytes, shape reversed into `ne`; U8, BOOL
/// and rank 5 are left out with their reasons.
#[test]
fn basic_file_reads_bit_for_bit() {
    let file = SafetensorsFile::open(dir().join("basic.safetensors")).unwrap();
    assert_eq!(file.metadata_value("format"), Some("pt"));
    assert_eq!(file.metadata().len(), 2);
    assert_eq!(file.tensors().len(), 10);
    let mut skipped: Vec<_> = file.skipped().iter().map(|s| (s.name.as_str(), s.why.as_str())).collect();
    skipped.sort();
    assert_eq!(
        skipped,
        [
            ("bool.flags", "dtype BOOL has no rgml type"),
            ("f32.rank5", "5 dims (shape [2, 1, 2, 1, 3]); rgml tensors have at most 4"),
            ("u8.mask", "dtype U8 has no rgml type"),
        ]
    );
    let odd = file.tensor("f16.odd").unwrap();
    assert_eq!((odd.shape.as_slice(), odd.ne, odd.dims()), (&[3u64, 5, 7][..], [7, 5, 3, 1], &[7i64, 5, 3][..]));
    let scalar = file.tensor("f32.scalar").unwrap();
    assert_eq!((scalar.ne, scalar.dims()), ([1, 1, 1, 1], &[1i64][..]));
    assert_eq!(file.tensor("f32.empty").unwrap().ne, [3, 0, 1, 1]);

    let floats_of = [
        ("f32.matrix", "F32", 12, 1),
        ("f16.matrix", "F16", 12, 2),
        ("f16.odd", "F16", 105, 3),
        ("f64.vec", "F64", 6, 4),
        ("f32.scalar", "F32", 1, 5),
        ("f32.empty", "F32", 0, 0),
    ];
    let ints_of = [
        ("i64.vec", "I64", 5, 6, -(1i64 << 40), 1i64 << 41),
        ("i32.vec", "I32", 10, 7, -100000, 200001),
        ("i16.matrix", "I16", 6, 8, -30000, 60001),
        ("i8.matrix", "I8", 12, 9, -128, 256),
    ];
    let mut ctx = Context::new();
    let w = load_safetensors(&mut ctx, &file).unwrap();
    assert_eq!(w.len(), 10);
    let tensors = &manifest()["tensors"]["basic.safetensors"];
    let check = |name: &str, dtype: &str, want: Vec<u8>| {
        let id = w.get(name).unwrap();
        let got = ctx.leaf_bytes(id).unwrap();
        assert_eq!(got, &want[..], "{name}");
        assert_eq!(tensors[name]["sha256"].as_str().unwrap(), sha256(got), "{name}");
        assert_eq!(tensors[name]["dtype"].as_str().unwrap(), dtype);
        assert!(ctx.is_mapped(id), "{name}: the package aligns tensors, so no copy");
        assert_eq!(ctx.tensor(id).unwrap().name(), name);
        let l = ctx.layout(id).unwrap();
        assert_eq!(l.ne, file.tensor(name).unwrap().ne);
        assert_eq!(l.dtype.name().to_uppercase(), dtype);
    };
    for (name, dtype, n, salt) in floats_of {
        check(name, dtype, float_bytes(dtype, &floats(n, salt)));
    }
    for (name, dtype, n, salt, lo, span) in ints_of {
        check(name, dtype, int_bytes(dtype, &ints(n, salt, lo, span)));
    }
    // file order is header order
    assert_eq!(w.iter().next().unwrap().0, file.tensors()[0].name);
    // the left-out tensors: named errors
    let e = w.get("u8.mask").unwrap_err();
    assert!(matches!(e, Error::Safetensors { .. }), "{e:?}");
    assert!(e.to_string().contains("\"u8.mask\": dtype U8 has no rgml type; it was not loaded"), "{e}");
    assert!(w.get("f32.rank5").unwrap_err().to_string().contains("5 dims"));
    assert!(matches!(w.get("nope"), Err(Error::Metadata { .. })));
    assert_eq!(w.skipped().count(), 3);
    assert!(w.find("bool.flags").is_none());
}

/// handmade.safetensors: BF16, and an F32 the file stores at 3 mod 4, which is
/// copied into an aligned buffer (the only case that copies).
#[test]
fn handmade_bf16_and_unaligned_f32() {
    let file = SafetensorsFile::open(dir().join("handmade.safetensors")).unwrap();
    assert_eq!(file.metadata_value("writer"), Some("by hand"));
    assert_eq!(file.data_start() % 8, 0);
    let t = file.tensor("f32.unaligned").unwrap();
    assert_eq!(t.range.start % 4, 3, "the fixture puts it misaligned");
    let mut ctx = Context::new();
    let w = load_safetensors(&mut ctx, &file).unwrap();
    let bf = w.get("bf16.matrix").unwrap();
    assert_eq!(ctx.leaf_bytes(bf).unwrap(), &float_bytes("BF16", &floats(20, 12))[..]);
    assert!(ctx.is_mapped(bf));
    assert_eq!(ctx.layout(bf).unwrap().ne, [5, 4, 1, 1]);
    let i8s = w.get("i8.head").unwrap();
    assert_eq!(ctx.leaf_bytes(i8s).unwrap(), &int_bytes("I8", &ints(3, 13, -128, 256))[..]);
    let u = w.get("f32.unaligned").unwrap();
    assert!(!ctx.is_mapped(u), "a misaligned tensor is copied");
    let want: Vec<f32> = floats(6, 14).iter().map(|&x| x as f32).collect();
    assert_eq!(ctx.data::<f32>(u).unwrap(), &want[..]);
    assert_eq!(file.tensor_data("f32.unaligned").unwrap(), ctx.leaf_bytes(u).unwrap());
    let tensors = &manifest()["tensors"]["handmade.safetensors"];
    for (name, id) in w.iter() {
        assert_eq!(tensors[name]["sha256"].as_str().unwrap(), sha256(ctx.leaf_bytes(id).unwrap()), "{name}");
    }
}

/// Mapped F32 and F16 leaves (and the copied misaligned one) go through a graph on the CPU backend.
#[test]
fn mapped_leaves_compute() {
    let file = SafetensorsFile::open(dir().join("basic.safetensors")).unwrap();
    let hand = SafetensorsFile::open(dir().join("handmade.safetensors")).unwrap();
    let mut ctx = Context::new();
    let w = load_safetensors(&mut ctx, &file).unwrap();
    let h = load_safetensors(&mut ctx, &hand).unwrap();
    let a = w.get("f32.matrix").unwrap();
    let b = w.get("f16.matrix").unwrap();
    let sum = ctx.add(a, b).unwrap();
    let u = h.get("f32.unaligned").unwrap();
    let doubled = ctx.scale(u, 2.0).unwrap();
    let g = Graph::build(&ctx, &[sum, doubled]).unwrap();
    let st = CpuBackend::new(2).unwrap().run(&ctx, &g).unwrap();
    let want: Vec<f32> = floats(12, 1).iter().zip(floats(12, 2)).map(|(x, y)| (x + y) as f32).collect();
    assert_eq!(st.read_f32(&ctx, sum).unwrap(), want);
    let want: Vec<f32> = floats(6, 14).iter().map(|&x| (2.0 * x) as f32).collect();
    assert_eq!(st.read_f32(&ctx, doubled).unwrap(), want);
    assert_eq!(ctx.layout(sum).unwrap().dtype, DType::F32);
}

/// A sharded checkpoint: the index's shards opened once, all tensors in one context.
#[test]
fn sharded_checkpoint_loads_into_one_context() {
    let index = SafetensorsIndex::open(dir().join("sharded/model.safetensors.index.json")).unwrap();
    assert_eq!(index.shards().len(), 2);
    assert_eq!(index.names().collect::<Vec<_>>(), ["a.weight", "b.bias", "c.ids", "d.weight"]);
    assert!(index.shard_of("c.ids").unwrap().path().ends_with("model-00002-of-00002.safetensors"));
    assert!(index.shard_of("zz").is_none());
    let mut ctx = Context::new();
    let w = load_safetensors_index(&mut ctx, &index).unwrap();
    assert_eq!(w.len(), 4);
    let bytes = |n: &str| ctx.leaf_bytes(w.get(n).unwrap()).unwrap().to_vec();
    assert_eq!(bytes("a.weight"), float_bytes("F32", &floats(6, 15)));
    assert_eq!(bytes("b.bias"), float_bytes("F16", &floats(3, 16)));
    assert_eq!(bytes("c.ids"), int_bytes("I32", &ints(4, 17, -1000, 2001)));
    assert_eq!(bytes("d.weight"), float_bytes("F32", &floats(6, 18)));
    assert_eq!(ctx.layout(w.get("d.weight").unwrap()).unwrap().ne, [2, 3, 1, 1]);
}

// ---- hostile input ----

/// A file: the header length, `json`, then `data` zero bytes.
fn st(json: &str, data: usize) -> Vec<u8> {
    let mut b = (json.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(json.as_bytes());
    b.resize(b.len() + data, 0);
    b
}

/// Parses `bytes`, expecting `Error::Safetensors` whose message contains `want`.
#[track_caller]
fn refused(bytes: &[u8], want: &str) -> String {
    match SafetensorsHeader::parse(bytes) {
        Err(e @ Error::Safetensors { .. }) => {
            let m = e.to_string();
            assert!(m.contains(want), "{m:?} does not contain {want:?}");
            m
        }
        other => panic!("expected Error::Safetensors containing {want:?}, got {other:?}"),
    }
}

#[test]
fn hostile_lengths_and_json() {
    refused(&[1, 2, 3], "shorter than the 8-byte header length");
    refused(&u64::MAX.to_le_bytes(), "exceeds the limit");
    let mut huge = (200u64 << 20).to_le_bytes().to_vec();
    huge.extend_from_slice(b"{}");
    refused(&huge, "exceeds the limit");
    let mut past = 100u64.to_le_bytes().to_vec();
    past.extend_from_slice(b"{}");
    refused(&past, "runs past the end of the file (2 bytes follow it)");
    refused(&st(r#"{"a":{"dtype":"F32","shape":[1],"data_of"#, 4), "invalid JSON header");
    refused(&st("[1, 2]", 0), "does not start with '{'");
    refused(&st("", 0), "does not start with '{'");
    refused(&st(r#"{"a": 5}"#, 0), "entry \"a\": invalid type: integer `5`");
    refused(&st(r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}} x"#, 4), "trailing characters");
    // invalid UTF-8 inside a name
    let mut bad = st(r#"{"aX":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#, 4);
    bad[11] = 0xff;
    refused(&bad, "invalid JSON header");
    refused(&st(r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1}}"#, 4), "unknown field \"extra\"");
    refused(&st(r#"{"a":{"dtype":"F32","shape":[1]}}"#, 4), "missing field `data_offsets`");
    refused(&st(r#"{"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#, 4), "duplicate field");
    refused(&st(r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}"#, 8), "invalid JSON header");
    refused(&st(r#"{"__metadata__":{"k":1}}"#, 0), "entry \"__metadata__\": invalid type: integer `1`");
    refused(&st(r#"{"__metadata__":{"k":"a","k":"b"}}"#, 0), "duplicate __metadata__ key \"k\"");
    // an empty header and trailing spaces (the package pads with them) are fine
    assert!(SafetensorsHeader::parse(&st("{}", 0)).unwrap().tensors().is_empty());
    assert_eq!(SafetensorsHeader::parse(&st("{}    ", 3)).unwrap().data_start(), 14);
}

#[test]
fn hostile_entries() {
    let one = |dtype: &str, shape: &str, offsets: &str, data: usize| {
        st(&format!(r#"{{"w":{{"dtype":"{dtype}","shape":{shape},"data_offsets":{offsets}}}}}"#), data)
    };
    refused(&one("F32", "[2]", "[0,12]", 8), "run past the data section (8 bytes)");
    refused(&one("F32", "[2]", "[4,2]", 8), "end before they begin");
    refused(&one("F32", "[18446744073709551615]", "[0,8]", 8), "exceeds i64");
    // a zero dim does not let another one past i64
    refused(
        &one("F32", "[0,9223372036854775808]", "[0,0]", 0),
        "dim 9223372036854775808 of shape [0, 9223372036854775808] exceeds i64",
    );
    let h = SafetensorsHeader::parse(&one("F32", "[0,9223372036854775807]", "[0,0]", 0)).unwrap();
    assert_eq!(h.tensors()[0].ne, [i64::MAX, 0, 1, 1]);
    refused(&one("F32", "[4294967296,4294967296,4]", "[0,8]", 8), "too many elements");
    refused(&one("F64", "[4611686018427387903]", "[0,8]", 8), "too large in bytes");
    refused(&one("F32", "[-1]", "[0,4]", 4), "invalid value: integer `-1`");
    refused(&one("F32", "[1.5]", "[0,4]", 4), "invalid");
    refused(&one("F32", &format!("[{}]", ["1"; 65].join(",")), "[0,4]", 4), "more than 64 dims");
    let m =
        refused(&one("F32", "[2,3]", "[0,20]", 24), "F32 of shape [2, 3] needs 24 bytes, data_offsets [0, 20] hold 20");
    assert!(m.contains("\"w\""), "{m}");
    let m = refused(&one("F33", "[1]", "[0,4]", 4), "tensor \"w\": unknown dtype \"F33\"");
    assert!(m.contains("at byte"), "{m}");
    refused(&one("F4", "[3]", "[0,2]", 2), "do not fill whole bytes");
    refused(one("F32", "[1]", "[0,4]", 4).split_at(20).0, "runs past the end of the file");
    // the offset is the data's, for a size error
    let bytes = one("F32", "[2]", "[4,8]", 8);
    let data_start = bytes.len() as u64 - 8;
    let e = SafetensorsHeader::parse(&bytes).unwrap_err();
    assert!(matches!(e, Error::Safetensors { offset, .. } if offset == data_start + 4), "{e:?}");
    // duplicates and overlaps
    let two = |b: &str| st(&format!(r#"{{"a":{{"dtype":"F32","shape":[2],"data_offsets":[0,8]}},{b}}}"#), 16);
    refused(&two(r#""a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}"#), "duplicate key \"a\"");
    let m = refused(&two(r#""b":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}"#), "overlap");
    assert!(m.contains("\"a\"") && m.contains("\"b\""), "{m}");
    refused(&two(r#""b":{"dtype":"U8","shape":[3],"data_offsets":[7,10]}"#), "overlap");
    // an empty tensor overlaps nothing; gaps and any order are fine
    assert!(SafetensorsHeader::parse(&two(r#""b":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}"#)).is_ok());
    let h = SafetensorsHeader::parse(&two(r#""b":{"dtype":"I8","shape":[2],"data_offsets":[12,14]}"#)).unwrap();
    assert_eq!(h.tensor("b").unwrap().range, h.data_start() + 12..h.data_start() + 14);
    // a valid dtype rgml has no type for: left out, with its size still checked
    refused(&one("U16", "[3]", "[0,4]", 4), "U16 of shape [3] needs 6 bytes");
    let h = SafetensorsHeader::parse(&one("F8_E4M3", "[4]", "[0,4]", 4)).unwrap();
    assert_eq!(h.skipped()[0].why, "dtype F8_E4M3 has no rgml type");
}

/// No prefix, and no single corrupted header byte, of a real file panics.
#[test]
fn truncations_and_byte_flips_never_panic() {
    let bytes = std::fs::read(dir().join("basic.safetensors")).unwrap();
    for n in 0..bytes.len() {
        let r = SafetensorsHeader::parse(&bytes[..n]);
        assert!(matches!(r, Err(Error::Safetensors { .. })), "prefix {n}: {r:?}");
    }
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut b = bytes.clone();
    for i in 0..8 + n {
        for x in [0u8, b'"', b'9', b'}', 0xff] {
            let keep = b[i];
            b[i] = x;
            let _ = SafetensorsHeader::parse(&b);
            b[i] = keep;
        }
    }
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rgml-st-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn hostile_files_and_indexes() {
    let d = temp_dir("idx");
    // a file that is not safetensors, through open
    std::fs::write(d.join("bad.safetensors"), b"GGUF\x03\0\0\0\0\0\0\0").unwrap();
    assert!(matches!(SafetensorsFile::open(d.join("bad.safetensors")), Err(Error::Safetensors { .. })));
    assert!(matches!(SafetensorsFile::open(d.join("none.safetensors")), Err(Error::Io(_))));
    let shard = st(r#"{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#, 4);
    std::fs::write(d.join("s1.safetensors"), &shard).unwrap();
    std::fs::write(d.join("s2.safetensors"), &shard).unwrap();
    let index = |body: &str| {
        let p = d.join("model.safetensors.index.json");
        std::fs::write(&p, body).unwrap();
        SafetensorsIndex::open(&p)
    };
    let e = index(r#"{"weight_map":{"x":"missing.safetensors"}}"#).unwrap_err();
    assert!(matches!(e, Error::Io(_)) && e.to_string().contains("missing.safetensors"), "{e:?}");
    let e = index(r#"{"weight_map":{"y":"s1.safetensors"}}"#).unwrap_err();
    assert!(e.to_string().contains("tensor \"y\" is not in its shard s1.safetensors"), "{e}");
    let e = index(r#"{"weight_map":{"x":"s1.safetensors","x2":"s2.safetensors"}}"#).unwrap_err();
    assert!(matches!(e, Error::Safetensors { .. }), "{e:?}");
    assert!(e.to_string().contains("tensor \"x2\" is not in its shard"), "{e}");
    std::fs::write(d.join("s3.safetensors"), st(r#"{"z":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#, 8)).unwrap();
    let e = index(r#"{"weight_map":{"x":"s1.safetensors","z":"s3.safetensors"}}"#).unwrap_err();
    assert!(e.to_string().contains("tensor \"x\" is in two shards"), "{e}");
    let e = index(r#"{"weight_map":{"x":"s1.safetensors","x":"s1.safetensors"}}"#).unwrap_err();
    assert!(e.to_string().contains("named twice"), "{e}");
    let e = index(r#"{"weight_map":{"x":"../s1.safetensors"}}"#).unwrap_err();
    assert!(e.to_string().contains("not a plain file name"), "{e}");
    assert!(index(r#"{"metadata":{}}"#).unwrap_err().to_string().contains("missing field `weight_map`"));
    assert!(matches!(index("[]"), Err(Error::Safetensors { .. })));
    assert!(matches!(index(r#"{"weight_map":{"x":5}}"#), Err(Error::Safetensors { .. })));
    let e = index(r#"{"weight_map":{"x":"bad.safetensors"}}"#).unwrap_err();
    assert!(matches!(e, Error::Safetensors { .. }) && e.to_string().contains("shard "), "{e:?}");
    // an empty tensor with an absurd dim: the file is valid, the layout's strides overflow, so loading it is an error
    std::fs::write(
        d.join("wide.safetensors"),
        st(r#"{"w":{"dtype":"F32","shape":[0,9223372036854775807],"data_offsets":[0,0]}}"#, 0),
    )
    .unwrap();
    let wide = SafetensorsFile::open(d.join("wide.safetensors")).unwrap();
    assert!(matches!(load_safetensors(&mut Context::new(), &wide), Err(Error::Shape { .. })));
    // and a good one, with an ignored metadata key
    let i = index(r#"{"metadata":{"total_size":4},"weight_map":{"x":"s1.safetensors"}}"#).unwrap();
    let mut ctx = Context::new();
    assert_eq!(load_safetensors_index(&mut ctx, &i).unwrap().len(), 1);
    std::fs::remove_dir_all(&d).ok();
}
