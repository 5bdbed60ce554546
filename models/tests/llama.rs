//! The tiny llama-architecture model against llama.cpp's logits (F32 KV
//! cache): all 16 positions, as one batch and one token at a time.

use common::{fixture, llamacpp_logits, max_diff, quantized_model, reference, tokens};
use rgml_models::llama::Llama;

mod common;

#[test]
fn f32_logits_match_llama_cpp_batched_and_one_at_a_time() {
    let (toks, want) = (tokens(), reference());
    for threads in [1, 2] {
        let mut m = Llama::load(&fixture("tiny_llama_f32.gguf"), None, threads).unwrap();
        assert_eq!((m.hp.n_vocab, m.hp.n_embd, m.hp.n_head, m.hp.n_head_kv), (288, 64, 4, 2));
        let batch = m.eval(&toks).unwrap();
        let d = max_diff(&batch, &want);
        assert!(d <= 1e-4, "batch: max abs diff {d}");
        m.reset().unwrap();
        let mut single = Vec::new();
        for &t in &toks {
            single.extend(m.eval(&[t]).unwrap());
        }
        let d = max_diff(&single, &want);
        assert!(d <= 1e-4, "one at a time: max abs diff {d}");
        // a prompt in two batches continues the cache
        m.reset().unwrap();
        let mut split = m.eval(&toks[..5]).unwrap();
        split.extend(m.eval(&toks[5..]).unwrap());
        assert!(max_diff(&split, &want) <= 1e-4);
        assert_eq!(m.n_past(), 16);
    }
}

/// The attended cache length grows in steps of `KV_PAD`: a long sequence fed
/// across the 256 boundary, in any split, gives the logits of one batch over
/// the whole cache; and the fixture's 16 positions match llama.cpp with a
/// cache far larger than the attended part.
#[test]
fn attended_cache_grows_in_kv_pad_steps() {
    use rgml_models::llama::KV_PAD;
    let (toks, want) = (tokens(), reference());
    let mut m = Llama::load(&fixture("tiny_llama_f32.gguf"), Some(3 * KV_PAD), 2).unwrap();
    assert_eq!(m.n_kv(toks.len()), KV_PAD);
    assert!(max_diff(&m.eval(&toks).unwrap(), &want) <= 1e-4);
    m.reset().unwrap();
    let long: Vec<u32> = (0..KV_PAD + 40).map(|i| toks[i % toks.len()] ^ (i as u32 / 16 % 4)).collect();
    let nv = m.hp.n_vocab;
    // reference: one batch over 2 * KV_PAD positions
    let whole = m.eval(&long).unwrap();
    m.reset().unwrap();
    // the same tokens across the boundary: a batch that fills 250 positions, then
    // singles, then a batch that crosses into the second step
    let mut split = m.eval(&long[..250]).unwrap();
    assert_eq!(m.n_kv(1), KV_PAD);
    for &t in &long[250..254] {
        split.extend(m.eval(&[t]).unwrap());
    }
    assert_eq!(m.n_kv(10), 2 * KV_PAD);
    split.extend(m.eval(&long[254..]).unwrap());
    assert_eq!(split.len(), long.len() * nv);
    let d = max_diff(&split, &whole);
    assert!(d <= 1e-4, "split vs one batch: max abs diff {d}");
}

/// Many batch sizes: the model keeps at most its maximum of planned graphs
/// (dropping them all and truncating its context when full: the context does
/// not grow), and the logits stay llama.cpp's throughout.
#[test]
fn graphs_are_bounded_across_many_batch_sizes() {
    let (toks, want) = (tokens(), reference());
    let mut m = Llama::load(&fixture("tiny_llama_f32.gguf"), None, 2).unwrap();
    m.set_max_graphs(3);
    let mut largest = 0;
    let nv = m.hp.n_vocab;
    // prompts of 1..=16 tokens then the rest one at a time: 17 distinct batch sizes
    for split in 1..=toks.len() {
        m.reset().unwrap();
        let mut got = m.eval(&toks[..split]).unwrap();
        for &t in &toks[split..] {
            got.extend(m.eval(&[t]).unwrap());
        }
        assert!(m.graphs() <= 3, "{} graphs", m.graphs());
        largest = largest.max(m.context_len());
        let d = max_diff(&got, &want[..toks.len() * nv]);
        assert!(d <= 1e-4, "prompt of {split}: max abs diff {d}");
    }
    // at most 3 graphs' headers beyond the weights at any time (every graph has
    // the same number of headers, whatever its batch size)
    let mut fresh = Llama::load(&fixture("tiny_llama_f32.gguf"), None, 2).unwrap();
    let weights = fresh.context_len();
    fresh.eval(&toks[..7]).unwrap();
    let one_graph = fresh.context_len() - weights;
    assert!(one_graph > 0 && largest <= weights + 3 * one_graph, "{largest} vs {weights} + 3 x {one_graph}");
}

/// A graph built after another one ran reads the KV cache as state: it does
/// not pull in (and run again) the earlier graph's cache writes.
#[test]
fn later_graphs_do_not_rerun_earlier_cache_writes() {
    let toks = tokens();
    let nodes = |dot: String| dot.lines().filter(|l| l.contains("[label=")).count();
    let mut fresh = Llama::load(&fixture("tiny_llama_f32.gguf"), None, 1).unwrap();
    let alone = nodes(fresh.dot(1).unwrap());
    let mut m = Llama::load(&fixture("tiny_llama_f32.gguf"), None, 1).unwrap();
    m.eval(&toks[..5]).unwrap();
    assert_eq!(nodes(m.dot(1).unwrap()), alone);
}

/// Q8_0 and Q4_0 versions (quantized by rgml, byte-identical to gguf-py) match
/// llama.cpp's own logits for those files (activations rounded through Q8_0 as
/// ggml does), batched and one token at a time; and differ from the F32 logits
/// by their quantization error.
#[test]
fn quantized_models_match_llama_cpp() {
    let toks = tokens();
    let f32_logits = reference();
    for (name, dt) in [("q8_0", rgml::DType::Q8_0), ("q4_0", rgml::DType::Q4_0)] {
        let want = llamacpp_logits(name);
        let path = quantized_model(dt, "cpu");
        let mut m = Llama::load(&path, None, 2).unwrap();
        let batch = m.eval(&toks).unwrap();
        m.reset().unwrap();
        let single: Vec<f32> = toks.iter().flat_map(|&t| m.eval(&[t]).unwrap()).collect();
        std::fs::remove_file(&path).ok();
        let d = max_diff(&batch, &want);
        assert!(d <= 1e-4, "{name}: batch max abs diff {d} vs llama.cpp");
        let d = max_diff(&single, &want);
        assert!(d <= 1e-4, "{name}: one at a time max abs diff {d} vs llama.cpp");
        // the quantization error itself (llama.cpp: 0.071 for Q8_0, 0.88 for Q4_0)
        let q = max_diff(&batch, &f32_logits);
        assert!(q > 1e-3 && q < 1.5, "{name}: {q} from the F32 logits");
    }
}

/// `eval_last` gives the last position's logits of `eval` (llama.cpp's, to
/// 1e-4) from a graph of its own that projects only that position, and
/// writes the cache the same: later batches continue after it as after `eval`.
#[test]
fn last_position_logits_match_and_continue_the_cache() {
    let (toks, want) = (tokens(), reference());
    let nv = 288;
    let mut m = Llama::load(&fixture("tiny_llama_f32.gguf"), None, 2).unwrap();
    // 9 tokens, then 4, then 3 one at a time: each call's last position
    let mut got = Vec::new();
    let mut at = 0;
    for len in [9, 4, 1, 1, 1] {
        let last = m.eval_last(&toks[at..at + len]).unwrap();
        assert_eq!(last.len(), nv);
        at += len;
        got.push((at - 1, last));
    }
    assert_eq!(m.n_past(), 16);
    for (pos, last) in &got {
        let d = max_diff(last, &want[pos * nv..(pos + 1) * nv]);
        assert!(d <= 1e-4, "position {pos}: max abs diff {d} vs llama.cpp");
    }
    // a batch size's two graphs are separate: the last-position one is not reused for `eval`
    m.reset().unwrap();
    let before = m.graphs();
    let all = m.eval(&toks[..9]).unwrap();
    assert_eq!(m.graphs(), before + 1);
    assert!(max_diff(&all[8 * nv..], &got[0].1) <= 1e-5);
    assert!(m.eval_last(&[]).unwrap().is_empty());
}

/// With repacked weights (`CpuBackend::with_repacked_weights`) the Q4_0 model
/// gives the bits of in-place weights run by the same tile (at every row count:
/// in place, AMD takes one row through the dot kernels), so llama.cpp's logits
/// to 1e-4 as well, batched and one token at a time.
#[test]
fn repacked_q4_0_weights_give_the_same_logits() {
    let toks = tokens();
    let want = llamacpp_logits("q4_0");
    let path = quantized_model(rgml::DType::Q4_0, "repack");
    let mut plain =
        Llama::load_on(&path, None, rgml::CpuBackend::new(2).unwrap().with_row_invariant_products(true)).unwrap();
    let repacking = rgml::CpuBackend::new(2).unwrap().with_repacked_weights(true);
    let mut packed = Llama::load_on(&path, None, repacking).unwrap();
    std::fs::remove_file(&path).ok();
    let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
    let batch = packed.eval(&toks).unwrap();
    assert!(max_diff(&batch, &want) <= 1e-4);
    assert_eq!(bits(batch), bits(plain.eval(&toks).unwrap()));
    packed.reset().unwrap();
    plain.reset().unwrap();
    for &t in &toks {
        assert_eq!(bits(packed.eval(&[t]).unwrap()), bits(plain.eval(&[t]).unwrap()));
    }
}
