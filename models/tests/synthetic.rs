//! The synthetic llama writer: the shape it promises, a tokenizer copied whole from
//! a real file (so llama.cpp loads it), a model rgml runs, and bad shapes refused.

mod vocab_common;

use rgml::gguf::GgufFile;
use rgml::DType;
use rgml_models::model::Model;
use rgml_models::synthetic::{synthetic_llama, LlamaDims};
use rgml_models::tokenizer::Tokenizer;

const TINY: LlamaDims = LlamaDims { n_embd: 64, n_layer: 2, n_ff: 96, n_head: 4, n_head_kv: 2, n_vocab: 100 };

fn out(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("synthetic");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn tokenizer_is_copied_and_the_model_runs() {
    let src_path = vocab_common::real_vocab_dir().join("smollm2-vocab.gguf");
    let src = GgufFile::open(&src_path).unwrap();
    let path = out("gqa-tok.gguf");
    synthetic_llama(&path, DType::Q4_0, TINY, Some(src.header())).unwrap();
    let f = GgufFile::open(&path).unwrap();
    let h = f.header();
    let tokens = src.header().get_str_array("tokenizer.ggml.tokens").unwrap();
    assert_eq!(h.get_str_array("tokenizer.ggml.tokens").unwrap(), tokens);
    let src_keys: Vec<_> = src.header().metadata().iter().filter(|(k, _)| k.starts_with("tokenizer.")).collect();
    assert!(src_keys.len() > 3);
    for (k, v) in src_keys {
        assert_eq!(h.get(k), Some(v), "{k}");
    }
    assert_eq!(h.get_u32("llama.attention.head_count_kv").unwrap(), 2);
    assert_eq!(h.get_u32("llama.vocab_size").unwrap() as usize, tokens.len());
    assert_eq!(h.tensor("blk.1.attn_k.weight").unwrap().ne, [64, 32, 1, 1]);
    assert_eq!(h.tensor("token_embd.weight").unwrap().ne, [64, tokens.len() as i64, 1, 1]);

    let ids = Tokenizer::from_gguf(h).unwrap().tokenize("Hello world", false, false).unwrap();
    let want = Tokenizer::from_gguf(src.header()).unwrap().tokenize("Hello world", false, false).unwrap();
    assert_eq!(ids, want);
    let mut m = Model::load(&path, Some(16), 1).unwrap();
    let logits = m.eval_last(&ids).unwrap();
    assert_eq!(logits.len(), tokens.len());
    assert!(logits.iter().all(|x| x.is_finite()));
    assert!(logits.iter().any(|&x| x != logits[0]));
}

#[test]
fn without_a_tokenizer_the_vocabulary_is_the_dims() {
    let path = out("plain.gguf");
    synthetic_llama(&path, DType::Q8_0, TINY, None).unwrap();
    let f = GgufFile::open(&path).unwrap();
    assert!(f.header().get("tokenizer.ggml.model").is_none());
    assert_eq!(f.header().tensor("output.weight").unwrap().ne, [64, 100, 1, 1]);
    assert_eq!(Model::load(&path, Some(8), 1).unwrap().eval_last(&[3, 7]).unwrap().len(), 100);
}

#[test]
fn bad_shapes_are_errors_and_write_nothing() {
    let bad = [
        LlamaDims { n_head_kv: 3, ..TINY },
        LlamaDims { n_head: 0, ..TINY },
        LlamaDims { n_head: 5, n_head_kv: 5, ..TINY },
        LlamaDims { n_layer: 0, ..TINY },
        LlamaDims { n_embd: 48, n_head: 2, n_head_kv: 2, ..TINY }, // 48 is not whole Q4_0 blocks
    ];
    for (i, dims) in bad.into_iter().enumerate() {
        let path = out(&format!("bad{i}.gguf"));
        let _ = std::fs::remove_file(&path);
        let err = synthetic_llama(&path, DType::Q4_0, dims, None).unwrap_err();
        assert!(matches!(err, rgml::Error::Invalid(_)), "{dims:?}: {err}");
        assert!(!path.exists());
    }
}
