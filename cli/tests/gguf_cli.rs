//! `rgml inspect`, `dump` and `quantize` on the reference files.

use std::path::PathBuf;
use std::process::Command;

use rgml::gguf::GgufFile;
use rgml::DType;

fn fixture(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures").join(p)
}
fn rgml(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rgml")).args(args).output().unwrap()
}
fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("rgml-cli-{}-{name}", std::process::id()))
}

#[test]
fn inspect_prints_metadata_and_tensors_and_fails_on_bad_files() {
    let out = rgml(&["inspect".as_ref(), fixture("gguf/valid/mixed.gguf").as_os_str()]);
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{s}");
    assert!(s.contains("GGUF v3, alignment 32, 34 metadata keys, 29 tensors"), "{s}");
    assert!(s.contains("test.u64") && s.contains("18446744073709551615"));
    assert!(s.contains("q4_K") && s.contains("[256, 3]"), "{s}");
    let bad = rgml(&["inspect".as_ref(), fixture("gguf/malformed/truncated_in_kv.gguf").as_os_str()]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("gguf:"));
}

#[test]
fn dump_writes_the_dequantized_values() {
    let out = tmp("q4_0.f32");
    let run = rgml(&[
        "dump".as_ref(),
        fixture("gguf/valid/mixed.gguf").as_os_str(),
        "q4_0.2d_8x128".as_ref(),
        "--f32".as_ref(),
        out.as_os_str(),
    ]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let got = std::fs::read(&out).unwrap();
    std::fs::remove_file(&out).ok();
    assert_eq!(got, std::fs::read(fixture("gguf/expected/mixed__q4_0.2d_8x128.f32")).unwrap());
    let missing = rgml(&[
        "dump".as_ref(),
        fixture("gguf/valid/mixed.gguf").as_os_str(),
        "nope".as_ref(),
        "--f32".as_ref(),
        out.as_os_str(),
    ]);
    assert!(!missing.status.success() && String::from_utf8_lossy(&missing.stderr).contains("nope"));
}

#[test]
fn quantize_converts_matrices_and_keeps_norms() {
    let src = fixture("tiny_llama/tiny_llama_f32.gguf");
    for (name, dt, ftype, tol) in [("q8_0", DType::Q8_0, 7u32, 0.01f32), ("q4_0", DType::Q4_0, 2, 0.15)] {
        let out = tmp(&format!("{name}.gguf"));
        let run = rgml(&["quantize".as_ref(), src.as_os_str(), out.as_os_str(), name.as_ref()]);
        let stdout = String::from_utf8_lossy(&run.stdout).to_string();
        assert!(run.status.success(), "{stdout}");
        assert_eq!(stdout.lines().count(), 21, "a progress line per tensor");
        let (a, b) = (GgufFile::open(&src).unwrap(), GgufFile::open(&out).unwrap());
        std::fs::remove_file(&out).ok();
        assert_eq!(b.get_u32("general.file_type").unwrap(), ftype);
        assert_eq!(b.get_u32("llama.block_count").unwrap(), 2, "metadata kept");
        assert_eq!(b.get_str_array("tokenizer.ggml.tokens").unwrap().len(), 288);
        for t in a.tensors() {
            let q = b.tensor(&t.name).unwrap();
            assert_eq!(q.ne, t.ne);
            if t.n_dims == 1 {
                assert_eq!((q.dtype, b.tensor_bytes(q)), (DType::F32, a.tensor_bytes(t)), "{} kept", t.name);
                continue;
            }
            assert_eq!(q.dtype, dt, "{}", t.name);
            let orig: Vec<f32> =
                a.tensor_bytes(t).chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
            let mut deq = vec![0f32; orig.len()];
            let row = dt.row_size(t.ne[0]).unwrap();
            for (s, d) in b.tensor_bytes(q).chunks(row).zip(deq.chunks_mut(t.ne[0] as usize)) {
                rgml::quant::dequantize_row(dt, s, d).unwrap();
            }
            let max = orig.iter().fold(0f32, |m, x| m.max(x.abs()));
            let err = orig.iter().zip(&deq).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
            assert!(err <= tol * max, "{} {name}: max error {err} of max {max}", t.name);
        }
    }
    let bad = rgml(&["quantize".as_ref(), src.as_os_str(), tmp("x").as_os_str(), "q9_9".as_ref()]);
    assert!(!bad.status.success());
}

#[test]
fn inspect_exits_with_an_error_status_on_every_malformed_file() {
    let dir = fixture("gguf/malformed");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("gguf") {
            continue;
        }
        let out = rgml(&["inspect".as_ref(), path.as_os_str()]);
        let code = out.status.code();
        // reject files fail with 2; edge files may parse (0); never a panic (101) or abort (signal)
        assert!(matches!(code, Some(0) | Some(2)), "{}: status {code:?}", path.display());
        if code == Some(2) {
            assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: "), "{}", path.display());
        }
        n += 1;
    }
    assert!(n >= 20, "only {n} malformed files found");
}

#[test]
fn loaded_weights_point_into_the_mapping() {
    let path = fixture("tiny_llama/tiny_llama_f32.gguf");
    let file = GgufFile::open(&path).unwrap();
    let mut ctx = rgml::Context::new();
    let w = rgml::load_gguf(&mut ctx, &file).unwrap();
    assert_eq!(w.len(), 21);
    let map = file.bytes().as_ptr_range();
    for (name, id) in w.iter() {
        assert!(ctx.is_mapped(id), "{name} was copied");
        let p = ctx.leaf_bytes(id).unwrap().as_ptr();
        assert!(map.contains(&p), "{name}: data is not inside the file mapping");
        assert_eq!(ctx.leaf_bytes(id).unwrap(), file.tensor_data(name).unwrap());
    }
    assert!(w.get("no.such.tensor").unwrap_err().to_string().contains("no.such.tensor"));
}

/// `quantize` to IQ4_NL, IQ4_XS, MXFP4, TQ1_0 and TQ2_0 writes llama-quantize's bytes
/// (`quant::quantize_chunk`) for the matrices whose rows are whole blocks,
/// keeps the rest, sets `general.file_type`; the i-quants are refused with a
/// message about the importance matrix.
#[test]
fn quantize_to_iq4_and_mxfp4() {
    // rows of 512 (whole IQ4_XS super-blocks), of 96 (32-value blocks only), a vector
    let src = tmp("iq-src.gguf");
    let mut w = rgml::gguf::GgufWriter::new();
    w.set("general.architecture", "test").unwrap();
    let vals = |n: usize| -> Vec<u8> {
        (0..n).flat_map(|i| ((((i * 2_654_435_761) % 2001) as f32 / 1000.0 - 1.0) * 0.1).to_le_bytes()).collect()
    };
    w.add_tensor("m", DType::F32, &[512, 4], vals(2048)).unwrap();
    w.add_tensor("odd", DType::F32, &[96, 3], vals(288)).unwrap();
    w.add_tensor("norm", DType::F32, &[512], vals(512)).unwrap();
    w.write(&src).unwrap();
    for (name, dt, ftype) in
        [("iq4_nl", DType::IQ4_NL, 25u32), ("iq4_xs", DType::IQ4_XS, 30), ("mxfp4", DType::MXFP4, 38)]
    {
        let out = tmp(&format!("{name}.gguf"));
        let run = rgml(&["quantize".as_ref(), src.as_os_str(), out.as_os_str(), name.as_ref()]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let (a, b) = (GgufFile::open(&src).unwrap(), GgufFile::open(&out).unwrap());
        std::fs::remove_file(&out).ok();
        assert_eq!(b.get_u32("general.file_type").unwrap(), ftype);
        let mut converted = 0;
        for t in a.tensors() {
            let q = b.tensor(&t.name).unwrap();
            let ne0 = t.ne[0] as usize;
            if t.n_dims != 2 || !ne0.is_multiple_of(dt.block_size()) {
                assert_eq!((q.dtype, b.tensor_bytes(q)), (t.dtype, a.tensor_bytes(t)), "{} kept", t.name);
                continue;
            }
            assert_eq!(q.dtype, dt, "{}", t.name);
            let x: Vec<f32> = a.tensor_bytes(t).chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
            let row = dt.row_size(t.ne[0]).unwrap();
            let mut want = vec![0u8; row * x.len() / ne0];
            for (s, d) in x.chunks(ne0).zip(want.chunks_mut(row)) {
                rgml::quant::quantize_chunk(dt, s, d).unwrap();
            }
            assert_eq!(b.tensor_bytes(q), &want[..], "{} {name}: llama-quantize's bytes", t.name);
            converted += 1;
        }
        assert_eq!(converted, if dt.block_size() == 256 { 1 } else { 2 }, "{name}");
    }
    for name in ["iq2_xxs", "iq1_s", "iq3_s"] {
        let run = rgml(&["quantize".as_ref(), src.as_os_str(), tmp("no").as_os_str(), name.as_ref()]);
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success() && err.contains("importance matrix") && err.contains(name), "{name}: {err}");
    }
    std::fs::remove_file(&src).ok();
}

/// A file with a tensor of a type id rgml does not know: `inspect` lists every
/// tensor (that one with its id), `dump` of it is an error naming it and the
/// id, `quantize` refuses the file, and loading leaves the tensor out.
#[test]
fn files_with_an_unknown_tensor_type_open() {
    let path = fixture("gguf/malformed/tensor_type_removed_q4_2.gguf");
    let out = rgml(&["inspect".as_ref(), path.as_os_str()]);
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let f = GgufFile::open(&path).unwrap();
    assert!(s.contains(&format!("{} tensors", f.n_tensors())), "{s}");
    for e in f.entries() {
        assert!(s.lines().any(|l| l.trim_start().starts_with(e.name())), "{} not listed:\n{s}", e.name());
    }
    assert!(s.contains("id 4?") && s.contains("(Q4_2) was removed from ggml"), "{s}");
    let dump = rgml(&["dump".as_ref(), path.as_os_str(), "a".as_ref(), "--f32".as_ref(), tmp("a.f32").as_os_str()]);
    let err = String::from_utf8_lossy(&dump.stderr);
    assert!(!dump.status.success() && err.contains("tensor a") && err.contains("type id 4"), "{err}");
    let q = rgml(&["quantize".as_ref(), path.as_os_str(), tmp("q.gguf").as_os_str(), "q8_0".as_ref()]);
    assert!(!q.status.success() && String::from_utf8_lossy(&q.stderr).contains("type id 4"));
    let mut ctx = rgml::Context::new();
    let w = rgml::load_gguf(&mut ctx, &f).unwrap();
    assert_eq!(w.len(), f.tensors().len());
    match w.get("a") {
        Err(rgml::Error::UnknownType { name, type_id, .. }) => assert_eq!((name.as_str(), type_id), ("a", 4)),
        r => panic!("expected UnknownType, got {r:?}"),
    }
    assert_eq!(w.unknown().collect::<Vec<_>>(), [("a", 4)]);
}

/// One GGUF file holding a tensor of every type added with IQ4_NL (the random blocks of
/// tests/fixtures/iquant) next to F32 and Q4_0 ones: `rgml dump` of each gives gguf-py's
/// dequantization bit for bit, and `inspect` lists them all.
#[test]
fn dump_of_a_file_mixing_every_new_type_is_gguf_py() {
    use rgml::DType;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/iquant/random");
    // the block types after Q8_K in DType's table, and F64
    let types: Vec<DType> = DType::QUANTIZED[12..].iter().copied().chain([DType::F64]).collect();
    assert_eq!(types[0], DType::IQ4_NL);
    let data: Vec<(DType, Vec<u8>, Vec<u8>)> = types
        .iter()
        .map(|&t| {
            let n = t.name();
            (
                t,
                std::fs::read(dir.join(format!("{n}.bin"))).unwrap(),
                std::fs::read(dir.join(format!("{n}.f32"))).unwrap(),
            )
        })
        .collect();
    let q4 = [0u8; 18 * 8];
    let mut w = rgml::gguf::GgufWriter::new();
    w.set("general.architecture", "llama").unwrap();
    w.add_tensor("plain", DType::F32, &[4], &[0u8; 16][..]).unwrap();
    w.add_tensor("q4", DType::Q4_0, &[256], &q4[..]).unwrap();
    for (t, bytes, want) in &data {
        w.add_tensor(format!("t_{}", t.name()), *t, &[(want.len() / 4) as i64], &bytes[..]).unwrap();
    }
    let path = tmp("mixed-new-types.gguf");
    w.write(&path).unwrap();
    let inspect = rgml(&["inspect".as_ref(), path.as_os_str()]);
    let listing = String::from_utf8_lossy(&inspect.stdout);
    for (t, _, want) in &data {
        assert!(listing.contains(&format!("t_{}", t.name())), "{listing}");
        let out = tmp(&format!("dump-{}.f32", t.name()));
        let o = rgml(&[
            "dump".as_ref(),
            path.as_os_str(),
            format!("t_{}", t.name()).as_ref(),
            "--f32".as_ref(),
            out.as_os_str(),
        ]);
        assert!(o.status.success(), "{t}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(std::fs::read(&out).unwrap() == *want, "{t}: rgml dump differs from gguf-py");
        std::fs::remove_file(&out).ok();
    }
    std::fs::remove_file(&path).ok();
}
