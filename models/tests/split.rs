//! A model across backends ([`rgml::SplitBackend`], as `--n-gpu-layers` makes
//! it with `offload::split`): on two CPUs (always), where a split must give the
//! single CPU's bits, and on CUDA and the CPU (a device, or `tools/cuda-emu`;
//! else `SKIP: …`), against llama.cpp's logits, with the ops and types the
//! device lacks sent to the CPU.

// without the cuda feature the CUDA tests are left out, and with them some imports
#![cfg_attr(not(feature = "cuda"), allow(unused_imports))]

use common::{cuda, fixture, max_diff, reference, tokens};
use rgml::{AnyBackend, AnyStorage, Backend, BackendStorage, Context, DType, Graph, SplitBackend};
use rgml_models::llama::Llama;
use rgml_models::model::kv::KvType;
use rgml_models::model::offload::{self, CPU, GPU};
use rgml_models::model::{Attention, LoadOptions};

mod common;

/// Every position's logits as one batch, then one token at a time after a reset.
fn logits<B: Backend>(m: &mut Llama<B>) -> (Vec<f32>, Vec<f32>) {
    let toks = tokens();
    let batch = m.eval(&toks).unwrap();
    m.reset().unwrap();
    let single = toks.iter().flat_map(|&t| m.eval(&[t]).unwrap()).collect();
    m.reset().unwrap();
    (batch, single)
}

/// The backend of each part of the model's last graph.
fn parts(m: &Llama<AnyBackend>) -> Vec<usize> {
    match m.storage() {
        Some(AnyStorage::Split(s)) => s.parts().iter().map(|p| p.0).collect(),
        other => panic!("not a split storage: {other:?}"),
    }
}

fn load(path: &std::path::Path, b: AnyBackend, attention: Attention) -> Llama<AnyBackend> {
    let opts = LoadOptions { n_ctx: Some(16), kv_type: KvType::F32, attention, n_seq: 1 };
    Llama::load_with(path, opts, b).unwrap()
}

#[test]
fn a_layer_split_on_two_cpus_gives_the_single_cpus_bits() {
    let path = fixture("tiny_llama_f32.gguf");
    let mut one = load(&path, AnyBackend::cpu(1).unwrap(), Attention::Auto);
    let n_layer = one.hp.n_layer;
    let want = logits(&mut one);
    assert!(max_diff(&want.0, &reference()) <= 1e-4);
    // (layers on "GPU", the parts of a decode graph)
    let cases = [(0, vec![CPU]), (1, vec![CPU, GPU, CPU]), (n_layer, vec![CPU, GPU, CPU]), (n_layer + 1, vec![GPU])];
    for (ngl, want_parts) in cases {
        let sb = offload::split(AnyBackend::cpu(1).unwrap(), AnyBackend::cpu(1).unwrap(), n_layer, Some(ngl)).unwrap();
        let mut m = load(&path, sb.into(), Attention::Auto);
        let got = logits(&mut m);
        m.eval(&tokens()[..1]).unwrap();
        assert_eq!(parts(&m), want_parts, "--n-gpu-layers {ngl}");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert!(bits(&got.0) == bits(&want.0), "--n-gpu-layers {ngl}: batch logits differ");
        assert!(bits(&got.1) == bits(&want.1), "--n-gpu-layers {ngl}: decode logits differ");
    }
}

#[test]
#[cfg(feature = "cuda")]
fn a_model_split_between_cuda_and_the_cpu_matches_llama_cpp() {
    let Some(gpu) = cuda() else { return };
    let path = fixture("tiny_llama_f32.gguf");
    let n_layer = load(&path, AnyBackend::cpu(1).unwrap(), Attention::Auto).hp.n_layer;
    for ngl in [None, Some(0), Some(1), Some(n_layer)] {
        let sb = offload::split(AnyBackend::Cuda(gpu.clone()), AnyBackend::cpu(2).unwrap(), n_layer, ngl).unwrap();
        let mut m = load(&path, sb.into(), Attention::Auto);
        let (batch, single) = logits(&mut m);
        let want = reference();
        let (db, ds) = (max_diff(&batch, &want), max_diff(&single, &want));
        assert!(db <= 1e-4 && ds <= 1e-4, "--n-gpu-layers {ngl:?}: max abs diff {db} (batch), {ds} (decode)");
        m.eval(&tokens()[..1]).unwrap();
        println!("ok: --n-gpu-layers {ngl:?}: parts {:?}, max abs diff {db} / {ds}", parts(&m));
    }
}

#[test]
#[cfg(feature = "cuda")]
fn fused_attention_runs_on_cuda_in_a_split() {
    let Some(gpu) = cuda() else { return };
    let path = fixture("tiny_llama_f32.gguf");
    let n_layer = load(&path, AnyBackend::cpu(1).unwrap(), Attention::Auto).hp.n_layer;
    for ngl in [None, Some(1)] {
        let sb = offload::split(AnyBackend::Cuda(gpu.clone()), AnyBackend::cpu(2).unwrap(), n_layer, ngl).unwrap();
        let mut m = load(&path, sb.into(), Attention::Fused);
        let (batch, single) = logits(&mut m);
        m.eval(&tokens()[..1]).unwrap();
        let p = parts(&m);
        assert_eq!(p.len(), if ngl.is_none() { 1 } else { 3 }, "{p:?}");
        let (db, ds) = (max_diff(&batch, &reference()), max_diff(&single, &reference()));
        assert!(db <= 1e-4 && ds <= 1e-4, "--n-gpu-layers {ngl:?}: max abs diff {db} (batch), {ds} (decode)");
        println!("ok: fused attention, --n-gpu-layers {ngl:?}: parts {p:?}, max abs diff {db} / {ds}");
    }
}

#[test]
#[cfg(feature = "cuda")]
fn a_node_cuda_cannot_run_goes_to_the_cpu() {
    let Some(gpu) = cuda() else { return };
    // Q4_K keys: the CUDA attention kernel lacks them, the CPU's has them; the
    // attention runs on the CPU, and the scale after it, which has no home,
    // stays where its operand is rather than copy it back to CUDA
    let mut ctx = Context::new();
    let mut rng = common::Rng(77);
    let (d, n_kv) = (256i64, 8i64);
    let kq = common::blocks::random_blocks(DType::Q4_K, (n_kv * 2) as usize, || rng.next());
    let k = ctx.new_tensor(DType::Q4_K, &[d, n_kv, 2, 1]).unwrap();
    ctx.set_bytes(k, &kq).unwrap();
    let vals = |n: i64, rng: &mut common::Rng| (0..n).map(|_| rng.f(1.0)).collect::<Vec<f32>>();
    let q = ctx.new_f32(&[d, 3, 4, 1], &vals(d * 12, &mut rng)).unwrap();
    let v = ctx.new_f32(&[64, n_kv, 2, 1], &vals(64 * n_kv * 2, &mut rng)).unwrap();
    let o = ctx.flash_attn_ext(q, k, v, None, 0.0625, 0.0).unwrap();
    let z = ctx.scale(o, 0.5).unwrap();
    let g = Graph::build(&ctx, &[z]).unwrap();
    let want = rgml::CpuBackend::new(1).unwrap().run(&ctx, &g).unwrap().read_f32(&ctx, z).unwrap();
    let sb = SplitBackend::new(vec![AnyBackend::Cuda(gpu), AnyBackend::cpu(1).unwrap()]).unwrap();
    let st = sb.run(&ctx, &g).unwrap();
    assert_eq!(st.parts().iter().map(|p| p.0).collect::<Vec<_>>(), [1]);
    assert_eq!(st.crossing_bytes(), 0);
    assert_eq!(st.read_f32(&ctx, z).unwrap(), want);
}
