//! Embeddings against llama.cpp: tiny random-weight `bert` and `nomic-bert` models
//! (tests/fixtures/embed, provenance in its README) tokenized and embedded with every
//! pooling, raw and normalized, and three decoder fixtures (tests/fixtures/arch) pooled
//! over their final norm; the file's keys read as llama.cpp reads them, bad input refused.

use std::path::{Path, PathBuf};

mod common;

use rgml::gguf::Value;
use rgml::CpuBackend;
use rgml_models::embed::{EmbedLoadOptions, EmbedOptions, EmbeddingModel, Pooling};
use rgml_models::tokenizer::Tokenizer;
use serde_json::Value as Json;

fn dir() -> PathBuf {
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/embed");
    if built.exists() {
        built
    } else {
        PathBuf::from("tests/fixtures/embed")
    }
}

fn refs() -> Json {
    serde_json::from_str(&std::fs::read_to_string(dir().join("embeddings.json")).unwrap()).unwrap()
}

fn floats(v: &Json) -> Vec<f32> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()
}

fn load(path: &Path) -> EmbeddingModel {
    EmbeddingModel::load_with(path, EmbedLoadOptions::default(), CpuBackend::new(2).unwrap()).unwrap()
}

fn max_abs(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()))
}

/// 1 − cos(a, b), in f64.
fn cos_distance(a: &[f32], b: &[f32]) -> f64 {
    let dot = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(&p, &q)| f64::from(p) * f64::from(q)).sum::<f64>();
    1.0 - dot(a, b) / (dot(a, a).sqrt() * dot(b, b).sqrt())
}

const POOLINGS: [(&str, Pooling); 3] = [("mean", Pooling::Mean), ("cls", Pooling::Cls), ("last", Pooling::Last)];

/// Each (pooling, largest |raw − llama.cpp|, largest |normalized − llama.cpp|, largest
/// cosine distance) of `file` over the fixture's prompts; its tokenization is checked
/// against llama.cpp's on the way.
fn encoder_case(file: &str) -> Vec<(&'static str, f32, f32, f64)> {
    let r = refs();
    let want = &r["files"][file];
    let path = dir().join(file);
    let tok = Tokenizer::from_file(&path).unwrap();
    let mut m = load(&path);
    let mut out = Vec::new();
    for (name, pooling) in POOLINGS {
        let (mut raw_d, mut norm_d, mut cos_d) = (0f32, 0f32, 0f64);
        for (i, prompt) in r["prompts"].as_array().unwrap().iter().enumerate() {
            // llama-cpp-python's embed(): the special tokens added, special text not parsed
            let ids = tok.tokenize(prompt.as_str().unwrap(), true, false).unwrap();
            let want_ids: Vec<u32> =
                want["tokens"][i].as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect();
            assert_eq!(ids, want_ids, "{file}: the tokens of prompt {i}");
            let raw = m.embed(&ids, &EmbedOptions { pooling: Some(pooling), normalize: false }).unwrap();
            let normed = m.embed(&ids, &EmbedOptions { pooling: Some(pooling), normalize: true }).unwrap();
            let (w_raw, w_norm) =
                (floats(&want["pooled"][name]["raw"][i]), floats(&want["pooled"][name]["normalized"][i]));
            raw_d = raw_d.max(max_abs(&raw, &w_raw));
            norm_d = norm_d.max(max_abs(&normed, &w_norm));
            cos_d = cos_d.max(cos_distance(&normed, &w_norm)).max(cos_distance(&raw, &w_raw));
        }
        out.push((name, raw_d, norm_d, cos_d));
    }
    out
}

#[test]
fn f32_encoders_match_llama_cpp_within_1e_4() {
    for file in ["bert_f32.gguf", "nomic_f32.gguf"] {
        for (pooling, raw, norm, cos) in encoder_case(file) {
            eprintln!("{file} {pooling}: raw {raw:.2e}, normalized {norm:.2e}, 1-cos {cos:.2e}");
            assert!(raw <= 1e-4 && norm <= 1e-4 && cos <= 1e-4, "{file} {pooling}: {raw} {norm} {cos}");
        }
    }
}

#[test]
fn q8_0_encoders_match_llama_cpp_within_5e_3() {
    for file in ["bert_q8_0.gguf", "nomic_q8_0.gguf"] {
        for (pooling, raw, norm, cos) in encoder_case(file) {
            eprintln!("{file} {pooling}: raw {raw:.2e}, normalized {norm:.2e}, 1-cos {cos:.2e}");
            assert!(raw <= 5e-3 && norm <= 5e-3 && cos <= 5e-3, "{file} {pooling}: {raw} {norm} {cos}");
        }
    }
}

#[test]
fn pooling_none_gives_every_tokens_state_and_the_files_pooling_is_the_default() {
    let r = refs();
    for (file, default) in [("bert_f32.gguf", "cls"), ("nomic_f32.gguf", "mean")] {
        let want = &r["files"][file];
        let mut m = load(&dir().join(file));
        let n_embd = m.info().n_embd;
        for (i, toks) in want["tokens"].as_array().unwrap().iter().enumerate() {
            let ids: Vec<u32> = toks.as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect();
            let rows = m.embed(&ids, &EmbedOptions { pooling: Some(Pooling::None), normalize: false }).unwrap();
            let w: Vec<f32> = want["none"][i].as_array().unwrap().iter().flat_map(floats).collect();
            assert_eq!(rows.len(), ids.len() * n_embd);
            let d = max_abs(&rows, &w);
            assert!(d <= 1e-4, "{file} prompt {i}: per-token states {d} from llama.cpp's");
            // normalized per token, as llama-embedding does without pooling
            let normed = m.embed(&ids, &EmbedOptions { pooling: Some(Pooling::None), normalize: true }).unwrap();
            for row in normed.chunks(n_embd) {
                let len: f64 = row.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
                assert!((len - 1.0).abs() < 1e-5, "a normalized row has length {len}");
            }
            let by_default = m.embed(&ids, &EmbedOptions::default()).unwrap();
            let d = max_abs(&by_default, &floats(&want["pooled"][default]["raw"][i]));
            assert!(d <= 1e-4, "{file}: the default pooling is the file's {default} ({d})");
        }
        assert_eq!(m.info().pooling.name(), default);
    }
}

#[test]
fn decoders_give_llama_cpps_pooled_final_norm() {
    let r = refs();
    let dec = &r["decoders"];
    let ids: Vec<u32> = dec["tokens"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect();
    for file in ["llama3_f32.gguf", "qwen3_f32.gguf", "gemma3_f32.gguf"] {
        let mut m = load(&common::arch::dir().join(file));
        assert!(!m.info().encoder && m.info().causal && m.info().pooling == Pooling::None);
        for (name, pooling) in POOLINGS {
            let got = m.embed(&ids, &EmbedOptions { pooling: Some(pooling), normalize: false }).unwrap();
            let want = floats(&dec["files"][file][name]);
            let (d, cos) = (max_abs(&got, &want), cos_distance(&got, &want));
            eprintln!("{file} {name}: max abs {d:.2e}, 1-cos {cos:.2e}");
            // Gemma's GeGLU goes through the f16 GELU table (see tests/arch.rs): ~1e-3
            let tol = if file.starts_with("gemma3") { 2e-3 } else { 1e-4 };
            assert!(d <= tol && cos <= 1e-4, "{file} {name}: {d} {cos}");
        }
    }
}

#[test]
fn causal_attention_where_the_file_says_so() {
    let path = dir().join("bert_f32.gguf");
    let causal = common::gguf_with(&path, "bert-causal", &[("bert.attention.causal", Value::Bool(true))], &[]);
    let mut m = load(&causal);
    let mut plain = load(&path);
    let ids = [2, 5, 7, 9, 11, 3];
    let cls = EmbedOptions { pooling: Some(Pooling::Cls), normalize: false };
    // causal: the first token sees only itself, whatever follows it (the same values;
    // F32 products of other row counts may sum in another order)
    let first = m.embed(&ids, &cls).unwrap();
    let alone = max_abs(&first, &m.embed(&ids[..1], &cls).unwrap());
    assert!(alone <= 1e-5, "causal: the first token's state moves by {alone} with the tokens after it");
    assert!(m.info().causal && !plain.info().causal);
    let d = max_abs(&first, &plain.embed(&ids, &cls).unwrap());
    std::fs::remove_file(&causal).ok();
    assert!(d > 0.1, "causal and bidirectional CLS states differ by only {d}");
}

#[test]
fn graphs_dropped_and_built_again_give_the_same_bits() {
    let mut m = load(&dir().join("nomic_q8_0.gguf"));
    m.set_max_graphs(2);
    let inputs: Vec<Vec<u32>> = (3..8).map(|n| (0..n).map(|i| 2 + 5 * i).collect()).collect();
    let opts = EmbedOptions::default();
    let first: Vec<Vec<f32>> = inputs.iter().map(|ids| m.embed(ids, &opts).unwrap()).collect();
    assert!(m.graphs() <= 2);
    for (ids, want) in inputs.iter().zip(&first).rev() {
        assert_eq!(&m.embed(ids, &opts).unwrap(), want);
    }
}

#[test]
fn rgml_quantize_keeps_the_position_and_type_tables() {
    // llama-quantize keeps position_embd and token_types unquantized, and so does rgml:
    // the F32 file quantized by rgml embeds as the fixture quantized by gguf-py
    let out = std::env::temp_dir().join(format!("rgml-embed-q8-{}.gguf", std::process::id()));
    rgml_models::quantize::quantize(&dir().join("bert_f32.gguf"), &out, rgml::DType::Q8_0, |_| {}).unwrap();
    let f = rgml::gguf::GgufFile::open(&out).unwrap();
    for t in ["position_embd.weight", "token_types.weight"] {
        assert_eq!(f.tensor(t).unwrap().dtype, rgml::DType::F32, "{t}");
    }
    assert_eq!(f.tensor("blk.0.attn_q.weight").unwrap().dtype, rgml::DType::Q8_0);
    let ids = [2, 7, 8, 9, 3];
    let ours = load(&out).embed(&ids, &EmbedOptions::default()).unwrap();
    std::fs::remove_file(&out).ok();
    assert_eq!(ours, load(&dir().join("bert_q8_0.gguf")).embed(&ids, &EmbedOptions::default()).unwrap());
}

#[test]
fn bad_input_is_an_error() {
    let path = dir().join("bert_f32.gguf");
    let mut m = load(&path);
    let err = |r: rgml::Result<Vec<f32>>| r.unwrap_err().to_string();
    let opts = EmbedOptions::default();
    assert!(err(m.embed(&[], &opts)).contains("no tokens"));
    assert!(err(m.embed(&[2; 65], &opts)).contains("at most 64"));
    assert!(err(m.embed(&[2, 100_000, 3], &opts)).contains("outside the vocabulary"));
    // learned positions: no context past the table
    let e = EmbeddingModel::load_with(&path, EmbedLoadOptions { n_ctx: Some(65) }, CpuBackend::new(1).unwrap());
    assert!(e.err().unwrap().to_string().contains("position_embd"));
    // an encoder is no text model
    let e = rgml_models::model::Model::load(&path, None, 1).err().unwrap().to_string();
    assert!(e.contains("general.architecture") && e.contains("embedding model"), "{e}");
}

#[test]
fn bad_metadata_names_the_key() {
    let cases: [(&str, Value, &str); 7] = [
        // an architecture rgml does not run is named with those it does, encoders among them
        ("general.architecture", Value::from("jina-bert-v2"), "nomic-bert"),
        ("bert.pooling_type", Value::U32(4), "rank"),
        ("bert.pooling_type", Value::U32(9), "not a pooling type"),
        ("bert.attention.causal", Value::U32(0), "expected bool"),
        ("bert.attention.head_count", Value::U32(5), "do not divide"),
        ("bert.attention.layer_norm_epsilon", Value::F32(f32::NAN), "epsilon"),
        ("tokenizer.ggml.token_type_count", Value::U32(0), "at least one token type"),
    ];
    for (i, (key, value, what)) in cases.into_iter().enumerate() {
        let p = common::gguf_with(&dir().join("bert_f32.gguf"), &format!("bad-embed-{i}"), &[(key, value)], &[]);
        let e = EmbeddingModel::load_with(&p, EmbedLoadOptions::default(), CpuBackend::new(1).unwrap());
        std::fs::remove_file(&p).ok();
        let e = e.err().unwrap_or_else(|| panic!("{key} loaded"));
        assert!(matches!(e, rgml::Error::Metadata { .. }), "{key}: {e:?}");
        let msg = e.to_string();
        assert!(msg.contains(key) && msg.contains(what), "{key}: {msg}");
    }
}

#[test]
fn the_service_answers_from_its_thread() {
    use rgml_models::embed::service::{EmbedService, ServiceHealth};
    use rgml_models::engine::SubmitError;
    let path = dir().join("nomic_f32.gguf");
    let inputs = vec![vec![2, 7, 8, 3], vec![2, 9, 3]];
    let opts = EmbedOptions { pooling: Some(Pooling::Last), normalize: true };
    let want: Vec<Vec<f32>> = inputs.iter().map(|ids| load(&path).embed(ids, &opts).unwrap()).collect();
    let p = path.clone();
    let s = EmbedService::start(move || Ok(load(&p)), 2);
    while s.health() == ServiceHealth::Loading {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(matches!(s.health(), ServiceHealth::Ready(ref i) if i.arch == "nomic-bert"));
    let (tx, rx) = std::sync::mpsc::channel();
    s.submit(inputs.clone(), opts, Box::new(move |r| tx.send(r).unwrap())).unwrap();
    assert_eq!(rx.recv().unwrap().unwrap(), want);
    // an input the model refuses fails its job with the model's error
    let (tx, rx) = std::sync::mpsc::channel();
    s.submit(vec![vec![2, 3], vec![]], opts, Box::new(move |r| tx.send(r).unwrap())).unwrap();
    assert!(rx.recv().unwrap().unwrap_err().to_string().contains("no tokens"));
    // a model that does not load: every job is refused with why
    let bad = EmbedService::start(|| EmbeddingModel::load(Path::new("/nonexistent.gguf"), 1), 2);
    while bad.health() == ServiceHealth::Loading {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let e = bad.submit(inputs, opts, Box::new(|_| ())).unwrap_err();
    assert!(matches!(e, SubmitError::Down(ref why) if why.contains("loading the model failed")), "{e:?}");
}
