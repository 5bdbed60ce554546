//! The malformed fixtures: each is rejected for the right reason, or (the
//! edge cases) accepted.

use rgml::gguf::GgufFile;
use rgml::Error;

use super::{array, fixtures, manifest, sha256_hex};

/// Why each `reject` file must be rejected (a fragment of rgml's message), and
/// what rgml does with each `edge` file (`None`: accepted). The manifest's
/// `tensor_type_removed_q4_2` (ggml and gguf-py refuse it) opens in rgml: the
/// tensor of the removed type is listed apart (see [`UNKNOWN_TYPE_OPENS`]).
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
    ("tensor_type_removed_q4_2", None),
    ("truncated_before_data", Some("tensor 'a': data at offset 0 + 48 bytes")),
    ("truncated_in_kv", Some("KV count is 4")),
    ("truncated_tensor_data", Some("tensor 'c': data at offset 160 + 10 bytes")),
];

/// Fixtures the manifest rejects for a tensor type id ggml no longer has,
/// which rgml opens (the tensor is bounded by its neighbours and left out).
const UNKNOWN_TYPE_OPENS: [&str; 1] = ["tensor_type_removed_q4_2"];

#[test]
fn malformed_fixtures() {
    let entries = array(&manifest()["malformed"]);
    assert_eq!(entries.len(), MALFORMED.len());
    for m in entries {
        let file = m["file"].as_str().unwrap();
        let stem = file.trim_start_matches("malformed/").trim_end_matches(".gguf");
        let (_, expect) =
            MALFORMED.iter().find(|(n, _)| *n == stem).unwrap_or_else(|| panic!("no decision for {stem}"));
        let bytes = std::fs::read(fixtures().join(file)).unwrap();
        assert_eq!(sha256_hex(&bytes), m["sha256"]);
        let opens_here = UNKNOWN_TYPE_OPENS.contains(&stem);
        assert_eq!(m["expect"].as_str().unwrap() == "reject", expect.is_some() || opens_here, "{stem}");
        match (GgufFile::open(fixtures().join(file)), expect) {
            (Err(Error::Gguf { offset, msg }), Some(want)) => {
                eprintln!("{stem}: rejected at byte {offset}: {msg}");
                assert!(msg.contains(want), "{stem}: {msg}");
                assert!(offset <= bytes.len() as u64);
            }
            (Ok(f), None) => {
                eprintln!("{stem}: accepted, {} tensors", f.n_tensors());
                if opens_here {
                    let u = f.unknown_tensors();
                    assert_eq!(u.len(), 1, "{stem}");
                    assert_eq!((u[0].name.as_str(), u[0].type_id), ("a", 4), "{stem}");
                    assert!(u[0].why().contains("(Q4_2) was removed from ggml"), "{}", u[0].why());
                    assert!(u[0].max_size > 0 && f.n_tensors() == f.tensors().len() + 1);
                }
            }
            (r, _) => panic!("{stem}: unexpected {:?}", r.map(|f| f.tensors().len())),
        }
    }
}
