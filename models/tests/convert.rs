//! `convert`: the tiny Hugging Face llama checkpoints of tests/fixtures/convert (one file,
//! and tied embeddings in two shards) converted to GGUF, then run by rgml against the logits
//! llama.cpp computed on the converted files (made by scripts/fixtures/make_convert_fixtures.py,
//! which also checks llama.cpp's logits against a numpy forward pass in Hugging Face's
//! conventions). And every refusal: a clean error, nothing written.

use std::fs;
use std::path::{Path, PathBuf};

use rgml::gguf::{GgufFile, Value};
use rgml_models::convert::{convert, OutType};
use rgml_models::model::Model;
use rgml_models::tokenizer::Tokenizer;
use serde_json::Value as Json;

fn fixture(p: &str) -> PathBuf {
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/convert");
    let dir = if built.exists() { built } else { PathBuf::from("tests/fixtures/convert") };
    dir.join(p)
}

fn json(p: &Path) -> Json {
    serde_json::from_slice(&fs::read(p).unwrap()).unwrap()
}

/// A fresh, empty temporary folder for one test.
fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rgml-convert-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
    v.sort();
    v
}

/// Every file of `dir` with its bytes, to show the input untouched.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    listing(dir).into_iter().map(|n| (n.clone(), fs::read(dir.join(&n)).unwrap())).collect()
}

fn sha256_hex(path: &Path) -> String {
    // sha256sum is everywhere the fixtures are made; rgml has no hash of its own to call
    let out = std::process::Command::new("sha256sum").arg(path).output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).split_whitespace().next().unwrap().into(),
        _ => String::new(),
    }
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()))
}

/// rgml's logits for each fixture sequence (a fresh cache each), one after another.
fn rgml_logits(model: &Path) -> Vec<f32> {
    let seqs = json(&fixture("tokens.json"));
    let mut m = Model::load(model, Some(64), 2).unwrap();
    let mut all = Vec::new();
    for s in seqs.as_array().unwrap() {
        let toks: Vec<u32> = s.as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect();
        m.reset().unwrap();
        all.extend(m.eval(&toks).unwrap());
    }
    all
}

fn llamacpp_logits(case: &str) -> Vec<f32> {
    fs::read(fixture(&format!("logits_{case}_llamacpp.f32")))
        .unwrap()
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn converted_checkpoints_match_llama_cpp() {
    let manifest = json(&fixture("manifest.json"));
    let out_dir = temp_dir("ok");
    for (case, input, outtype) in [
        ("single", "single/model.safetensors", OutType::Keep),
        ("single_f16", "single/model.safetensors", OutType::F16),
        ("sharded", "sharded/model.safetensors.index.json", OutType::Keep),
    ] {
        let input = fixture(input);
        let before = snapshot(input.parent().unwrap());
        let out = out_dir.join(format!("{case}.gguf"));
        let c = convert(&input, &out, outtype, |_| {}).unwrap();
        assert_eq!((c.n_vocab, c.pre, c.architecture.as_str()), (304, "smollm", "LlamaForCausalLM"));
        // written atomically: the output and no temporary file beside it; the input as it was
        assert!(listing(&out_dir).iter().all(|n| !n.ends_with(".tmp")), "{:?}", listing(&out_dir));
        assert_eq!(snapshot(input.parent().unwrap()), before, "{case}: the input changed");
        // the very file llama.cpp's logits were computed on
        let sha = sha256_hex(&out);
        if !sha.is_empty() {
            assert_eq!(sha, manifest["converted"][case]["sha256"].as_str().unwrap(), "{case}");
        }
        let d = max_diff(&rgml_logits(&out), &llamacpp_logits(case));
        eprintln!("{case}: rgml vs llama.cpp max |diff| {d:.3e}");
        // F16 weights round each activation to f16 (their dot partner, as in ggml), so a
        // one-ulp f32 difference from a sum taken in another order flips that rounding
        // (2^-11 relative) and travels on: rgml sums as the AVX-512 build of llama.cpp that
        // made the fixture (0 apart there), and 1.0-1.2e-3 apart at the AVX2 and scalar levels
        let f16_elsewhere =
            case == "single_f16" && rgml::quant::dot::SimdLevel::detect() < rgml::quant::dot::SimdLevel::Avx512;
        let tol = if f16_elsewhere { 3e-3 } else { 1e-4 };
        assert!(d <= tol, "{case}: rgml vs llama.cpp max |diff| {d} (tolerance {tol})");
    }
    fs::remove_dir_all(&out_dir).unwrap();
}

/// The metadata llama.cpp reads, and rgml's tokenizer on the converted vocabulary
/// tokenizes as llama.cpp did.
#[test]
fn converted_metadata_and_vocabulary() {
    let out_dir = temp_dir("meta");
    let out = out_dir.join("m.gguf");
    convert(&fixture("sharded/model.safetensors.index.json"), &out, OutType::Q8_0, |_| {}).unwrap();
    let f = GgufFile::open(&out).unwrap();
    assert_eq!(f.get_str("general.architecture").unwrap(), "llama");
    let u32_of = |k: &str| match f.get(k) {
        Some(Value::U32(n)) => *n,
        v => panic!("{k}: {v:?}"),
    };
    assert_eq!(u32_of("llama.block_count"), 2);
    assert_eq!(u32_of("llama.attention.head_count_kv"), 2);
    assert_eq!(u32_of("llama.rope.dimension_count"), 16);
    assert_eq!(u32_of("general.file_type"), 7);
    assert_eq!(u32_of("tokenizer.ggml.bos_token_id"), 1);
    assert_eq!(u32_of("tokenizer.ggml.eos_token_id"), 2);
    assert_eq!(u32_of("tokenizer.ggml.padding_token_id"), 2);
    assert_eq!(u32_of("tokenizer.ggml.unknown_token_id"), 0);
    assert!(matches!(f.get("tokenizer.ggml.add_bos_token"), Some(Value::Bool(false))));
    assert!(matches!(f.get("tokenizer.ggml.add_space_prefix"), Some(Value::Bool(false))));
    assert!(f.get_str("tokenizer.chat_template").unwrap().contains("<|im_start|>"));
    let tokens = f.get_str_array("tokenizer.ggml.tokens").unwrap();
    assert_eq!((tokens.len(), tokens[300].as_str()), (304, "[PAD300]"));
    // tied: no output matrix; norms F32, matrices Q8_0
    assert!(f.tensors().iter().all(|t| t.name != "output.weight"));
    for t in f.tensors() {
        let want = if t.n_dims == 1 { rgml::DType::F32 } else { rgml::DType::Q8_0 };
        assert_eq!(t.dtype, want, "{}", t.name);
    }
    let tok = Tokenizer::from_gguf(&f).unwrap();
    let manifest = json(&fixture("manifest.json"));
    for case in manifest["tokenized_llamacpp"].as_array().unwrap() {
        let want: Vec<u32> = case["tokens"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect();
        let text = case["text"].as_str().unwrap();
        assert_eq!(tok.tokenize(text, false, true).unwrap(), want, "{text:?}");
    }
    fs::remove_dir_all(&out_dir).unwrap();
}

/// A copy of the single-file fixture in a temporary folder, for a test to break.
fn broken_copy(tag: &str) -> PathBuf {
    let d = temp_dir(tag);
    for n in ["config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"] {
        fs::copy(fixture(&format!("single/{n}")), d.join(n)).unwrap();
    }
    d
}

/// Edits the JSON file `name` of `dir`.
fn edit_json(dir: &Path, name: &str, f: impl FnOnce(&mut Json)) {
    let mut v = json(&dir.join(name));
    f(&mut v);
    fs::write(dir.join(name), serde_json::to_vec(&v).unwrap()).unwrap();
}

/// Rewrites `model.safetensors` of `dir` without the tensor `drop`.
fn drop_tensor(dir: &Path, drop: &str) {
    let bytes = fs::read(dir.join("model.safetensors")).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Map<String, Json> = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let (mut new_header, mut data) = (serde_json::Map::new(), Vec::new());
    for (name, entry) in header {
        if name == drop || name == "__metadata__" {
            continue;
        }
        let offs: Vec<usize> =
            entry["data_offsets"].as_array().unwrap().iter().map(|o| o.as_u64().unwrap() as usize).collect();
        let start = data.len();
        data.extend_from_slice(&bytes[8 + n + offs[0]..8 + n + offs[1]]);
        let mut e = entry.clone();
        e["data_offsets"] = serde_json::json!([start, data.len()]);
        new_header.insert(name, e);
    }
    let mut h = serde_json::to_vec(&new_header).unwrap();
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend(h);
    out.extend(data);
    fs::write(dir.join("model.safetensors"), out).unwrap();
}

/// Converting the broken copy fails with a message containing `want`, and nothing but the
/// input's files is in its folder.
fn refused(dir: &Path, want: &str) {
    let before = listing(dir);
    let out = dir.join("out.gguf");
    let err = convert(&dir.join("model.safetensors"), &out, OutType::Keep, |_| {}).unwrap_err().to_string();
    assert!(err.contains(want), "{err:?} does not say {want:?}");
    assert!(!out.exists());
    assert_eq!(listing(dir), before);
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn refusals_are_clean_errors() {
    let d = broken_copy("noconfig");
    fs::remove_file(d.join("config.json")).unwrap();
    refused(&d, "config.json: is missing");

    let d = broken_copy("arch");
    edit_json(&d, "config.json", |c| c["architectures"] = serde_json::json!(["GPTNeoXForCausalLM"]));
    refused(&d, "architecture [\"GPTNeoXForCausalLM\"] is not supported");

    let d = broken_copy("missing");
    drop_tensor(&d, "model.layers.1.mlp.up_proj.weight");
    refused(&d, "tensor \"model.layers.1.mlp.up_proj.weight\" (for blk.1.ffn_up.weight) is missing");

    // the config and the weights disagree: every ffn matrix is the wrong shape
    let d = broken_copy("shape");
    edit_json(&d, "config.json", |c| c["intermediate_size"] = 96.into());
    refused(&d, "has shape [128, 64], the config says [96, 64]");

    let d = broken_copy("json");
    fs::write(d.join("config.json"), b"{\"architectures\": [\"LlamaForCausalLM\"],").unwrap();
    refused(&d, "config.json: is not valid JSON");

    let d = broken_copy("absurd");
    edit_json(&d, "config.json", |c| c["num_hidden_layers"] = 1_000_000.into());
    refused(&d, "\"num_hidden_layers\" must be an integer from 1 to 4096");

    let d = broken_copy("heads");
    edit_json(&d, "config.json", |c| c["num_key_value_heads"] = 3.into());
    refused(&d, "the heads must divide hidden_size");

    let d = broken_copy("unigram");
    edit_json(&d, "tokenizer.json", |t| t["model"]["type"] = "Unigram".into());
    refused(&d, "model type Unigram is not supported");

    let d = broken_copy("pretok");
    edit_json(&d, "tokenizer.json", |t| t["pre_tokenizer"] = serde_json::json!({"type": "Whitespace"}));
    refused(&d, "is not one rgml convert recognizes");

    let d = broken_copy("notok");
    fs::remove_file(d.join("tokenizer.json")).unwrap();
    refused(&d, "tokenizer.json: is missing");

    let d = broken_copy("big");
    fs::write(d.join("tokenizer_config.json"), vec![b' '; (16 << 20) + 1]).unwrap();
    refused(&d, "more than the 16777216 this converter reads");

    // an output path that is the input
    let d = broken_copy("same");
    let input = d.join("model.safetensors");
    let before = fs::read(&input).unwrap();
    let err = convert(&input, &input, OutType::Keep, |_| {}).unwrap_err().to_string();
    assert!(err.contains("is an input of the conversion"), "{err}");
    assert_eq!(fs::read(&input).unwrap(), before);
    fs::remove_dir_all(&d).unwrap();

    // nor a shard of a sharded checkpoint
    let d = temp_dir("shard");
    for n in fs::read_dir(fixture("sharded")).unwrap() {
        let n = n.unwrap().path();
        fs::copy(&n, d.join(n.file_name().unwrap())).unwrap();
    }
    let shard = d.join("model-00002-of-00002.safetensors");
    let before = fs::read(&shard).unwrap();
    let err = convert(&d.join("model.safetensors.index.json"), &shard, OutType::Keep, |_| {}).unwrap_err().to_string();
    assert!(err.contains("is an input of the conversion"), "{err}");
    assert_eq!(fs::read(&shard).unwrap(), before);
    fs::remove_dir_all(&d).unwrap();
}
