//! The synthetic llama writer: the shape it promises, a tokenizer copied whole from
//! a real file (so llama.cpp loads it), a model rgml runs, and bad shapes refused.

mod vocab_common;

use rgml::gguf::GgufFile;
use rgml::DType;
use rgml_models::model::Model;
use rgml_models::synthetic::{synthetic_llama, LlamaDims};
use rgml_models::tokenizer::Tokenizer;

const TINY: LlamaDims = LlamaDims {
    n_embd: 64,
    n_layer: 2,
    n_ff: 96,
    n_head: 4,
    n_head_kv: 2,
    n_vocab: 100,
    n_expert: 0,
    n_expert_used: 0,
};

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

#[test]
fn a_mixture_of_experts_runs_and_decodes_as_its_batch() {
    let path = out("moe.gguf");
    let dims = LlamaDims { n_expert: 4, n_expert_used: 2, ..TINY };
    synthetic_llama(&path, DType::Q8_0, dims, None).unwrap();
    let f = GgufFile::open(&path).unwrap();
    let h = f.header();
    assert_eq!(h.tensor("blk.1.ffn_up_exps.weight").unwrap().ne, [64, 96, 4, 1]);
    assert_eq!(h.tensor("blk.0.ffn_gate_inp.weight").unwrap().dtype, DType::F32);
    assert!(h.tensor("blk.0.ffn_up.weight").is_none());
    let hp = rgml_models::transformer::hparams::Hparams::from_gguf(&f).unwrap();
    let moe = hp.moe.expect("expert keys read");
    assert_eq!((moe.n_expert, moe.n_used, moe.n_ff_exp, moe.norm_weights), (4, 2, 96, true));
    // the whole prompt at once, then one token at a time: the same logits (each
    // token's experts see different batches of rows in the two runs)
    let tokens = [5u32, 17, 3, 99, 42, 8, 61];
    let batch = Model::load(&path, Some(16), 2).unwrap().eval(&tokens).unwrap();
    let mut m = Model::load(&path, Some(16), 2).unwrap();
    for (i, &t) in tokens.iter().enumerate() {
        let one = m.eval(&[t]).unwrap();
        let want = &batch[i * 100..(i + 1) * 100];
        let d = one.iter().zip(want).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(d < 1e-4, "token {i}: {d} from the batch's logits");
    }
    assert!(batch.chunks(100).all(|r| r.iter().all(|x| x.is_finite())));
    // a last-position graph routes only the last row through its last layer's experts
    let last = Model::load(&path, Some(16), 2).unwrap().eval_last(&tokens).unwrap();
    let d = last.iter().zip(&batch[6 * 100..]).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(d < 1e-4, "last position: {d} from the batch's");
    let bad = LlamaDims { n_expert_used: 5, ..dims };
    assert!(synthetic_llama(&out("bad-moe.gguf"), DType::Q8_0, bad, None).is_err());
}
