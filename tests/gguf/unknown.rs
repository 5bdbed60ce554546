//! Files holding a tensor of a ggml type id rgml does not know open: the
//! tensor is listed apart, bounded by the next tensor, and left out by
//! `load_gguf`; asking for it is `Error::UnknownType`; the other tensors load
//! with their data.

use rgml::gguf::{GgufFile, GgufHeader, GgufWriter, TensorEntry};
use rgml::{load_gguf, Context, CpuBackend, DType, Error, Graph};

/// A file of three tensors written by rgml, with the middle one's type id
/// patched to `id` (its info is found by its name, followed by n_dims, ne, type).
fn file_with_unknown(id: u32) -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.set("general.architecture", "test").unwrap();
    let a: Vec<u8> = (0..8).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let c: Vec<u8> = (0..4).flat_map(|i| (10.0 + i as f32).to_le_bytes()).collect();
    w.add_tensor("a", DType::F32, &[8], a).unwrap();
    w.add_tensor("middle", DType::Q8_0, &[64], vec![7u8; 68]).unwrap();
    w.add_tensor("c", DType::F32, &[4], c).unwrap();
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).unwrap();
    let at = bytes.windows(6).position(|x| x == b"middle").unwrap() + 6 + 4 + 8;
    assert_eq!(u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()), DType::Q8_0.ggml_id());
    bytes[at..at + 4].copy_from_slice(&id.to_le_bytes());
    bytes
}

#[test]
fn unknown_types_are_bounded_and_left_out() {
    for id in [4u32, 5, 31, 32, 33, 36, 37, 38, 40, 41, 42, 43, 1000] {
        let bytes = file_with_unknown(id);
        let h = GgufHeader::parse(&bytes).unwrap();
        assert_eq!(h.n_tensors(), 3);
        let u = h.unknown_tensor("middle").unwrap();
        // 68 bytes, padded to the alignment before "c"
        assert_eq!((u.type_id, u.ne[0], u.max_size), (id, 64, 96), "{id}");
        let kinds: Vec<bool> = h.entries().map(|e| matches!(e, TensorEntry::Known(_))).collect();
        assert_eq!(kinds, [true, false, true]);

        let path = std::env::temp_dir().join(format!("rgml-unknown-{}-{id}.gguf", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let f = GgufFile::open(&path).unwrap();
        let mut ctx = Context::new();
        let w = load_gguf(&mut ctx, &f).unwrap();
        std::fs::remove_file(&path).ok();
        assert_eq!(w.len(), 2);
        assert!(w.find("middle").is_none());
        match w.get("middle") {
            Err(Error::UnknownType { name, type_id, why }) => {
                assert_eq!((name.as_str(), type_id), ("middle", id));
                assert!(why.contains(&format!("type id {id}")), "{why}");
            }
            r => panic!("expected UnknownType, got {r:?}"),
        }
        let e = w.get("middle").unwrap_err().to_string();
        assert!(e.contains("middle") && e.contains(&id.to_string()), "{e}");
        // the others load, with their data
        let (a, c) = (w.get("a").unwrap(), w.get("c").unwrap());
        let a4 = ctx.view_1d(a, 4, 0).unwrap();
        let s = ctx.add(a4, c).unwrap();
        let st = CpuBackend::new(1).unwrap().run(&ctx, &Graph::build(&ctx, &[s]).unwrap()).unwrap();
        assert_eq!(st.read_f32(&ctx, s).unwrap(), vec![10.0, 12.0, 14.0, 16.0]);
    }
}
