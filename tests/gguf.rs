//! GGUF reader and writer against the fixtures in tests/fixtures/gguf (made
//! with gguf-py 0.19.0; see manifest.json): valid files match the manifest bit
//! for bit, malformed ones are rejected for the right reason, rgml rewrites
//! gguf-py's files byte for byte and round-trips every type, gguf-py reads
//! rgml's files (when `import gguf` works), and mutated files never panic the
//! parser. (The writer's atomicity is tested in src/gguf/tests.rs.)

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;
use rgml::gguf::{Array, GgufFile, GgufHeader, GgufWriter, TensorInfo, Value};
use rgml::{DType, Error};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf")
}

// ---------- a minimal JSON reader (numbers kept as text) and SHA-256 ----------

#[derive(Clone, Debug, PartialEq)]
enum J {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

impl J {
    fn parse(s: &str) -> J {
        let (v, rest) = J::value(s.trim_start());
        assert!(rest.trim().is_empty(), "trailing JSON: {:.40}", rest);
        v
    }
    fn value(s: &str) -> (J, &str) {
        let s = s.trim_start();
        let lit = |w: &str, v: J| (v, &s[w.len()..]);
        match s.as_bytes()[0] {
            b'n' => lit("null", J::Null),
            b't' => lit("true", J::Bool(true)),
            b'f' => lit("false", J::Bool(false)),
            b'"' => {
                let (st, rest) = J::string(&s[1..]);
                (J::Str(st), rest)
            }
            open @ (b'[' | b'{') => {
                let (mut items, mut fields, mut s) = (vec![], vec![], s[1..].trim_start());
                let close = if open == b'[' { ']' } else { '}' };
                while !s.starts_with(close) {
                    if open == b'[' {
                        let (v, r) = J::value(s);
                        items.push(v);
                        s = r.trim_start();
                    } else {
                        let (k, r) = J::string(&s.trim_start()[1..]);
                        let (v, r) = J::value(r.trim_start().strip_prefix(':').unwrap());
                        fields.push((k, v));
                        s = r.trim_start();
                    }
                    s = s.strip_prefix(',').unwrap_or(s).trim_start();
                }
                (if open == b'[' { J::Arr(items) } else { J::Obj(fields) }, &s[1..])
            }
            _ => {
                let end = s.find(|c: char| !"+-.eE0123456789".contains(c)).unwrap_or(s.len());
                (J::Num(s[..end].to_string()), &s[end..])
            }
        }
    }
    /// A string body after its opening quote; returns the rest after the closing quote.
    fn string(s: &str) -> (String, &str) {
        let (mut out, mut it) = (String::new(), s.char_indices());
        let mut pending_high: Option<u32> = None;
        while let Some((i, c)) = it.next() {
            match c {
                '"' => return (out, &s[i + 1..]),
                '\\' => {
                    let e = it.next().unwrap().1;
                    let simple = match e {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        'b' => '\u{8}',
                        'f' => '\u{c}',
                        'u' => {
                            let hex: String = (0..4).map(|_| it.next().unwrap().1).collect();
                            let u = u32::from_str_radix(&hex, 16).unwrap();
                            if (0xD800..0xDC00).contains(&u) {
                                pending_high = Some(u);
                                continue;
                            }
                            let u = match pending_high.take() {
                                Some(h) => 0x10000 + ((h - 0xD800) << 10) + (u - 0xDC00),
                                None => u,
                            };
                            char::from_u32(u).unwrap()
                        }
                        other => other,
                    };
                    out.push(simple);
                }
                c => out.push(c),
            }
        }
        panic!("unterminated JSON string")
    }
    fn get(&self, key: &str) -> Option<&J> {
        match self {
            J::Obj(f) => f.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    fn at(&self, key: &str) -> &J {
        self.get(key).unwrap_or_else(|| panic!("no key {key}"))
    }
    fn str(&self) -> &str {
        match self {
            J::Str(s) => s,
            j => panic!("not a string: {j:?}"),
        }
    }
    fn arr(&self) -> &[J] {
        match self {
            J::Arr(a) => a,
            j => panic!("not an array: {j:?}"),
        }
    }
    fn int(&self) -> i128 {
        match self {
            J::Num(n) => n.parse().unwrap_or_else(|_| panic!("not an integer: {n}")),
            j => panic!("not a number: {j:?}"),
        }
    }
}

fn sha256_hex(data: &[u8]) -> String {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
        0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
        0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
        0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
        0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
        0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
        0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] =
        [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
    let mut msg = data.to_vec();
    msg.push(0x80);
    msg.resize((data.len() + 9).div_ceil(64) * 64, 0);
    let n = msg.len();
    msg[n - 8..].copy_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in msg.chunks(64) {
        let mut w = [0u32; 64];
        for i in 0..64 {
            w[i] = if i < 16 {
                u32::from_be_bytes(block[4 * i..4 * i + 4].try_into().unwrap())
            } else {
                let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
                let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
                w[i - 16].wrapping_add(s0).wrapping_add(w[i - 7]).wrapping_add(s1)
            };
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7].wrapping_add(s1).wrapping_add(ch).wrapping_add(K[i]).wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let t2 = s0.wrapping_add((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
            v = [t1.wrapping_add(t2), v[0], v[1], v[2], v[3].wrapping_add(t1), v[4], v[5], v[6]];
        }
        h.iter_mut().zip(v).for_each(|(a, b)| *a = a.wrapping_add(b));
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

#[test]
fn sha256_known_answers() {
    assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    let long = sha256_hex(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq");
    assert_eq!(long, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    assert_eq!(sha256_hex(&[b'a'; 63]), "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34");
}

fn manifest() -> &'static J {
    static M: OnceLock<J> = OnceLock::new();
    M.get_or_init(|| J::parse(&std::fs::read_to_string(fixtures().join("manifest.json")).unwrap()))
}

// ---------- valid fixtures ----------

/// Flattens a value to comparable leaves: integers, float bits (as f64), bools, strings.
fn leaves(v: &Value, out: &mut Vec<J>) {
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
fn py_type(t: rgml::gguf::ValueType) -> &'static str {
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

// ---------- malformed fixtures ----------

/// Why each `reject` file must be rejected (a fragment of rgml's message), and
/// what rgml does with each `edge` file (`None`: accepted).
const MALFORMED: [(&str, Option<&str>); 22] = [
    ("absurd_kv_count", Some("KV count is 9223372036854775807")),
    ("alignment_not_pow2", Some("general.alignment is 3")),
    ("alignment_zero", Some("general.alignment is 0")),
    ("bad_magic", Some("bad magic 'GGUX'")),
    ("bad_version_1", Some("version 1 is not supported")),
    ("bad_version_4", Some("version 4 is not supported")),
    ("duplicate_kv_keys", Some("duplicate key 'test.u32'")),
    ("empty_file", Some("empty file")),
    ("invalid_kv_type", Some("invalid value type 13")),
    ("misaligned_offset", Some("offset 49 is not a multiple of the alignment 32")),
    ("ne_negative", Some("ne[0] = 9223372036854775808 is negative")),
    ("negative_tensor_count", Some("tensor count is 18446744073709551615")),
    // edge: the spec allows 64-byte names (ggml needs < 64): rgml reads them, its writer refuses them
    ("tensor_name_64_bytes", None),
    // edge: the last tensor's padding is missing; its bytes are all there: accepted like llama.cpp's mmap loader
    ("no_trailing_padding", None),
    ("row_not_block_multiple", Some("ne[0] = 33 is not a multiple of the q8_0 block size 32")),
    ("string_length_overflow", Some("key length is 18446744073709551615")),
    ("tensor_count_too_big", Some("tensor info 3")),
    ("tensor_offset_overflow", Some("past the end of the file")),
    ("tensor_type_removed_q4_2", Some("(Q4_2) was removed")),
    ("truncated_before_data", Some("tensor 'a': data at offset 0 + 48 bytes")),
    ("truncated_in_kv", Some("KV count is 4")),
    ("truncated_tensor_data", Some("tensor 'c': data at offset 160 + 10 bytes")),
];

#[test]
fn malformed_fixtures() {
    let entries = manifest().at("malformed").arr();
    assert_eq!(entries.len(), MALFORMED.len());
    for m in entries {
        let file = m.at("file").str();
        let stem = file.trim_start_matches("malformed/").trim_end_matches(".gguf");
        let (_, expect) =
            MALFORMED.iter().find(|(n, _)| *n == stem).unwrap_or_else(|| panic!("no decision for {stem}"));
        let bytes = std::fs::read(fixtures().join(file)).unwrap();
        assert_eq!(sha256_hex(&bytes), m.at("sha256").str());
        assert_eq!(m.at("expect").str() == "reject", expect.is_some(), "{stem}");
        match (GgufFile::open(fixtures().join(file)), expect) {
            (Err(Error::Gguf { offset, msg }), Some(want)) => {
                eprintln!("{stem}: rejected at byte {offset}: {msg}");
                assert!(msg.contains(want), "{stem}: {msg}");
                assert!(offset <= bytes.len() as u64);
            }
            (Ok(f), None) => eprintln!("{stem}: accepted, {} tensors", f.tensors().len()),
            (r, _) => panic!("{stem}: unexpected {:?}", r.map(|f| f.tensors().len())),
        }
    }
}

// ---------- writer ----------

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

fn scratch(name: &str) -> PathBuf {
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
fn everything<'a>(data: &'a [Vec<u8>], alignment: u32, types: &[DType]) -> GgufWriter<'a> {
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

fn tensor_data() -> Vec<Vec<u8>> {
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

// ---------- gguf-py reads rgml's files ----------

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

/// gguf-py's flattened `contents()` as leaves, floats as f64 bits.
fn py_leaves(j: &J) -> Vec<J> {
    match j {
        J::Arr(items) => items.iter().flat_map(py_leaves).collect(),
        J::Obj(_) => vec![J::Num(j.at("bits").str().to_string())],
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
        let py = J::parse(&String::from_utf8(out.stdout).unwrap());
        let f = GgufFile::open(&path).unwrap();
        assert_eq!(py.at("alignment").int(), alignment as i128);
        assert_eq!(py.at("data_offset").int(), f.data_offset() as i128);
        let fields: Vec<&J> =
            py.at("fields").arr().iter().filter(|j| !j.at("name").str().starts_with("GGUF.")).collect();
        assert_eq!(fields.len(), f.metadata().len());
        for (j, (key, value)) in fields.iter().zip(f.metadata()) {
            assert_eq!(j.at("name").str(), key);
            let types: Vec<&str> = j.at("types").arr().iter().map(J::str).collect();
            assert_eq!(types, py_types(value), "{key}");
            let mut ours = vec![];
            leaves(value, &mut ours);
            assert_eq!(py_leaves(j.at("value")), ours, "{key}");
        }
        let ts = py.at("tensors").arr();
        assert_eq!(ts.len(), f.tensors().len());
        for (j, t) in ts.iter().zip(f.tensors()) {
            assert_eq!(j.at("name").str(), t.name);
            assert_eq!(j.at("type").int(), t.dtype.ggml_id() as i128, "{}", t.name);
            let shape: Vec<i64> = j.at("shape").arr().iter().map(|d| d.int() as i64).collect();
            assert_eq!(shape, &t.ne[..t.n_dims as usize], "{}", t.name);
            assert_eq!(j.at("n_bytes").int(), t.size as i128, "{}", t.name);
            assert_eq!(j.at("offset").int(), f.tensor_range(t).start as i128, "{}", t.name);
            assert_eq!(j.at("sha256").str(), sha256_hex(f.tensor_bytes(t)), "{}", t.name);
        }
    }
}

// ---------- mutated files: an error or a fully valid parse, never a panic ----------

/// Positions and widths of every count, length, type id, dim and offset in a valid file.
fn numeric_fields(b: &[u8]) -> Vec<(usize, usize)> {
    fn rd(b: &[u8], p: usize, w: usize) -> u64 {
        let mut a = [0u8; 8];
        a[..w].copy_from_slice(&b[p..p + w]);
        u64::from_le_bytes(a)
    }
    fn value(b: &[u8], p: &mut usize, ty: u64, out: &mut Vec<(usize, usize)>) {
        match ty {
            8 => {
                out.push((*p, 8));
                *p += 8 + rd(b, *p, 8) as usize;
            }
            9 => {
                out.extend([(*p, 4), (*p + 4, 8)]);
                let (et, n) = (rd(b, *p, 4), rd(b, *p + 4, 8));
                *p += 12;
                (0..n).for_each(|_| value(b, p, et, out));
            }
            ty => *p += [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8][ty as usize],
        }
    }
    let mut out = vec![(4, 4), (8, 8), (16, 8)];
    let mut p = 24;
    for _ in 0..rd(b, 16, 8) {
        value(b, &mut p, 8, &mut out);
        let ty = rd(b, p, 4);
        out.push((p, 4));
        p += 4;
        value(b, &mut p, ty, &mut out);
    }
    for _ in 0..rd(b, 8, 8) {
        value(b, &mut p, 8, &mut out);
        let n_dims = rd(b, p, 4) as usize;
        // n_dims, each ne, type, offset
        for w in [4].into_iter().chain(std::iter::repeat_n(8, n_dims)).chain([4, 8]) {
            out.push((p, w));
            p += w;
        }
    }
    out
}

/// A valid file's bytes and its numeric fields.
type Fixture = (Vec<u8>, Vec<(usize, usize)>);

fn valid_files() -> &'static [Fixture] {
    static V: OnceLock<Vec<Fixture>> = OnceLock::new();
    V.get_or_init(|| {
        let names = ["baseline", "mixed", "align1", "align64", "kv_only", "empty"];
        names
            .iter()
            .map(|n| {
                let b = std::fs::read(fixtures().join(format!("valid/{n}.gguf"))).unwrap();
                let f = numeric_fields(&b);
                (b, f)
            })
            .collect()
    })
}

#[derive(Clone, Debug)]
enum Mutation {
    Truncate(prop::sample::Index),
    Flip(prop::sample::Index, u8),
    Field(prop::sample::Index, u64),
    Splat(prop::sample::Index, u64),
}

fn interesting() -> impl Strategy<Value = u64> {
    prop_oneof![
        prop::sample::select(vec![0, 1, 2, 3, 4, 5, 9, 13, 31, 32, 33, 63, 64, 65, 255, 256, 1 << 31, 1 << 32]),
        prop::sample::select(vec![1 << 60, 1 << 62, 1 << 63, u64::MAX, u64::MAX - 31, u32::MAX as u64]),
        0..600u64,
        any::<u64>(),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<prop::sample::Index>().prop_map(Mutation::Truncate),
        (any::<prop::sample::Index>(), 1..=255u8).prop_map(|(i, x)| Mutation::Flip(i, x)),
        (any::<prop::sample::Index>(), interesting()).prop_map(|(i, v)| Mutation::Field(i, v)),
        (any::<prop::sample::Index>(), interesting()).prop_map(|(i, v)| Mutation::Splat(i, v)),
    ]
}

fn apply(bytes: &mut Vec<u8>, fields: &[(usize, usize)], m: &Mutation) {
    let put = |bytes: &mut Vec<u8>, p: usize, w: usize, v: u64| {
        let end = (p + w).min(bytes.len());
        if p < end {
            bytes[p..end].copy_from_slice(&v.to_le_bytes()[..end - p]);
        }
    };
    match m {
        Mutation::Truncate(i) => bytes.truncate(i.index(bytes.len() + 1)),
        Mutation::Flip(i, x) if !bytes.is_empty() => {
            let p = i.index(bytes.len());
            bytes[p] ^= x;
        }
        Mutation::Field(i, v) => {
            let (p, w) = fields[i.index(fields.len())];
            put(bytes, p, w, *v);
        }
        Mutation::Splat(i, v) if !bytes.is_empty() => put(bytes, i.index(bytes.len()), 8, *v),
        _ => {}
    }
}

/// Everything a successful parse promises.
fn check_parse(bytes: &[u8]) -> Result<(), TestCaseError> {
    let h = match GgufHeader::parse(bytes) {
        Err(Error::Gguf { offset, msg }) => {
            prop_assert!(offset <= bytes.len() as u64 && !msg.is_empty());
            return Ok(());
        }
        Err(e) => return Err(TestCaseError::fail(format!("not a gguf error: {e}"))),
        Ok(h) => h,
    };
    prop_assert!(h.alignment().is_power_of_two() && h.data_offset() <= bytes.len());
    prop_assert_eq!(h.file_size(), bytes.len());
    let ts = h.tensors();
    for (i, t) in ts.iter().enumerate() {
        let r = h.tensor_range(t);
        prop_assert!(r.end <= bytes.len() && t.offset % h.alignment() == 0);
        let size = t.dtype.row_size(t.ne[0]).unwrap() * t.ne[1..].iter().product::<i64>() as usize;
        prop_assert_eq!(size, t.size);
        prop_assert!(ts[..i]
            .iter()
            .all(|u| u.size == 0 || t.size == 0 || u.offset + u.size <= t.offset || t.offset + t.size <= u.offset));
        prop_assert_eq!(h.tensor(&t.name), Some(t));
    }
    for (k, v) in h.metadata() {
        prop_assert!(h.get(k).is_some_and(|g| std::ptr::eq(g, v)));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(512),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Valid fixture files with 1 to 4 mutations: truncation, byte flips, and
    /// counts/lengths/type ids/dims/offsets patched with huge or random values.
    #[test]
    fn mutated_files_never_panic(file in any::<prop::sample::Index>(), ms in prop::collection::vec(mutation(), 1..=4)) {
        let files = valid_files();
        let (orig, fields) = &files[file.index(files.len())];
        let mut bytes = orig.clone();
        for m in &ms {
            apply(&mut bytes, fields, m);
        }
        check_parse(&bytes)?;
    }
}

#[test]
fn numeric_fields_are_found() {
    let (b, f) = &valid_files()[0];
    // baseline: 3 header fields, 4 KVs (key len + type, plus string len / array type+len), 3 tensors
    let h = GgufHeader::parse(b).unwrap();
    assert_eq!(f.len(), 3 + 4 * 2 + 2 + 2 + 3 * 4 + h.tensors().iter().map(|t| t.n_dims as usize).sum::<usize>());
    let last = f.last().unwrap();
    assert_eq!(u64::from_le_bytes(b[last.0..last.0 + 8].try_into().unwrap()), h.tensors()[2].offset as u64);
}
