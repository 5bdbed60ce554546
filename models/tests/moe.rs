//! Mixture-of-experts models beyond the llama.cpp fixtures (`arch.rs`): the
//! expert keys checked as they are read (each bad value an error naming its
//! key), expert tensors of the wrong shape named, and a sequence's logits the
//! same bits alone or in a decode step with others (the experts group the rows
//! of every sequence, and each row keeps its bits whatever the group; the F32
//! router makes the model run a row per stream, `Model::rows_invariant` false).

mod common;

use rgml::gguf::Value;
use rgml::{CpuBackend, DType};
use rgml_models::model::kv::KvType;
use rgml_models::model::{argmax, Attention, LoadOptions, Model};
use rgml_models::synthetic::{synthetic_llama, LlamaDims};

const DIMS: LlamaDims = LlamaDims {
    n_embd: 64,
    n_layer: 2,
    n_ff: 96,
    n_head: 4,
    n_head_kv: 2,
    n_vocab: 100,
    n_expert: 6,
    n_expert_used: 2,
};

fn moe_file(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("moe");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    synthetic_llama(&path, DType::Q8_0, DIMS, None).unwrap();
    path
}

#[test]
fn bad_expert_keys_name_the_key() {
    let src = moe_file("keys.gguf");
    let cases: [(&str, Value, &str); 5] = [
        ("llama.expert_used_count", Value::U32(7), "outside 1..=6"),
        ("llama.expert_used_count", Value::U32(0), "outside 1..=6"),
        ("llama.expert_count", Value::U32(513), "outside 0..=512"),
        ("llama.expert_gating_func", Value::U32(9), "unknown gating function"),
        ("llama.expert_weights_scale", Value::F32(f32::INFINITY), "not a scale"),
    ];
    for (i, (key, value, what)) in cases.into_iter().enumerate() {
        let p = common::gguf_with(&src, &format!("bad-moe-{i}"), &[(key, value)], &[]);
        let e = Model::load(&p, Some(16), 1).err();
        std::fs::remove_file(&p).ok();
        let e = e.unwrap_or_else(|| panic!("{key} loaded"));
        assert!(matches!(e, rgml::Error::Metadata { .. }), "{key}: {e:?}");
        assert!(e.to_string().contains(key) && e.to_string().contains(what), "{key}: {e}");
    }
    // fewer experts in the keys than in the tensors: the tensor is named with both shapes
    let p = common::gguf_with(&src, "bad-moe-shape", &[("llama.expert_count", Value::U32(4))], &[]);
    let e = Model::load(&p, Some(16), 1).err().expect("4 experts in the keys, 6 in the tensors").to_string();
    std::fs::remove_file(&p).ok();
    assert!(e.contains("ffn_gate_inp") && e.contains("[64, 6]"), "{e}");
}

#[test]
fn a_sequence_of_a_mixture_gets_the_same_bits_alone_and_in_company() {
    let path = moe_file("seqs.gguf");
    let load = |n_seq| {
        let opts = LoadOptions { n_ctx: Some(32), kv_type: KvType::F32, attention: Attention::Fused, n_seq };
        Model::load_with(&path, opts, CpuBackend::new(2).unwrap().with_row_invariant_products(true)).unwrap()
    };
    let prompts: [&[u32]; 3] = [&[5, 17, 3], &[99, 42, 8, 61, 7], &[11, 12]];
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    // each alone: 4 greedy steps
    let alone: Vec<Vec<Vec<u32>>> = prompts
        .iter()
        .map(|p| {
            let mut m = load(1);
            let mut next = argmax(&m.eval_last(p).unwrap());
            (0..4)
                .map(|_| {
                    let l = m.eval(&[next]).unwrap();
                    next = argmax(&l);
                    bits(&l)
                })
                .collect()
        })
        .collect();
    let mut m = load(3);
    let mut next: Vec<u32> = prompts.iter().enumerate().map(|(s, p)| argmax(&m.eval_seq_last(s, p).unwrap())).collect();
    for (step, _) in alone[0].iter().enumerate() {
        let batch: Vec<(usize, u32)> = next.iter().enumerate().map(|(s, &t)| (s, t)).collect();
        for (s, l) in m.eval_seqs(&batch).unwrap().iter().enumerate() {
            assert_eq!(bits(l), alone[s][step], "sequence {s}, step {step}");
            next[s] = argmax(l);
        }
    }
}
