//! Synthetic llama GGUF files: random weights of one type, ones for the norms, in
//! the layout llama.cpp writes. With a tokenizer copied from a real file they load
//! in llama.cpp too, so the two engines can be timed on the same file (a model
//! without `tokenizer.ggml.model` is refused there).

use rgml::gguf::{GgufHeader, GgufWriter, Value};
use rgml::{DType, Error, Result};

/// The shape of a synthetic llama ([`synthetic_llama`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LlamaDims {
    /// Embedding width.
    pub n_embd: usize,
    /// Blocks.
    pub n_layer: usize,
    /// Feed-forward width.
    pub n_ff: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads (grouped-query attention when fewer than `n_head`).
    pub n_head_kv: usize,
    /// Vocabulary size (replaced by the tokenizer's when one is copied).
    pub n_vocab: usize,
    /// Experts per layer (0: a dense feed-forward); each of width `n_ff`.
    pub n_expert: usize,
    /// Experts each token uses (with `n_expert > 0`).
    pub n_expert_used: usize,
}

impl LlamaDims {
    /// `rgml bench --llama`'s model: n_embd 2048, 4 layers, n_ff 5632, 16 heads, vocab 32000.
    pub const BENCH: LlamaDims = LlamaDims {
        n_embd: 2048,
        n_layer: 4,
        n_ff: 5632,
        n_head: 16,
        n_head_kv: 16,
        n_vocab: 32000,
        n_expert: 0,
        n_expert_used: 0,
    };

    /// A 1B-class llama: n_embd 2048, 16 layers, n_ff 5632, 32 heads with 8 KV heads.
    pub const ONE_B: LlamaDims =
        LlamaDims { n_embd: 2048, n_layer: 16, n_ff: 5632, n_head: 32, n_head_kv: 8, n_vocab: 32000, ..Self::DENSE };

    /// A Mixtral-style mixture of experts of about 1B parameters: n_embd 2048, 8
    /// layers of 8 experts of n_ff 2048, 2 used per token, 32 heads with 8 KV heads.
    pub const MOE_1B: LlamaDims = LlamaDims {
        n_embd: 2048,
        n_layer: 8,
        n_ff: 2048,
        n_head: 32,
        n_head_kv: 8,
        n_vocab: 32000,
        n_expert: 8,
        n_expert_used: 2,
    };

    /// A tiny llama (n_embd 256, 4 layers, n_ff 512, 4 heads with 2 KV heads,
    /// 1024 tokens): the GPU check's model under the CUDA emulator.
    pub const TINY: LlamaDims =
        LlamaDims { n_embd: 256, n_layer: 4, n_ff: 512, n_head: 4, n_head_kv: 2, n_vocab: 1024, ..Self::DENSE };

    /// No experts (the other fields are [`LlamaDims::BENCH`]'s).
    const DENSE: LlamaDims = LlamaDims::BENCH;

    fn check(&self) -> Result<()> {
        let ok = self.n_head > 0
            && self.n_head_kv > 0
            && self.n_embd.is_multiple_of(self.n_head)
            && self.n_head.is_multiple_of(self.n_head_kv)
            && (self.n_embd / self.n_head).is_multiple_of(2)
            && self.n_layer > 0
            && self.n_ff > 0
            && self.n_vocab > 0
            && (self.n_expert == 0 || (1..=self.n_expert).contains(&self.n_expert_used));
        if ok {
            Ok(())
        } else {
            Err(Error::Invalid(format!(
                "synthetic llama: {self:?} needs n_embd divisible into n_head heads of even width, \
                 n_head a multiple of n_head_kv, nothing zero, and 1..=n_expert experts used"
            )))
        }
    }
}

/// Writes a llama-architecture GGUF of random weights (`dtype` matrices, F32 norms
/// of ones; with experts, Mixtral's tensors and an F32 router) of shape `dims` to
/// `path`, atomically. With `tokenizer`, every
/// `tokenizer.*` key of that header is copied and the vocabulary is its token list's
/// length; without, the file has no tokenizer and `dims.n_vocab` tokens.
///
/// # Errors
/// [`Error::Invalid`] for inconsistent `dims`, a tokenizer without
/// `tokenizer.ggml.tokens`, or widths that are not whole `dtype` blocks; I/O errors.
pub fn synthetic_llama(
    path: &std::path::Path,
    dtype: DType,
    dims: LlamaDims,
    tokenizer: Option<&GgufHeader>,
) -> Result<()> {
    let mut dims = dims;
    let mut w = GgufWriter::new();
    if let Some(h) = tokenizer {
        dims.n_vocab = h.get_str_array("tokenizer.ggml.tokens")?.len();
        for (k, v) in h.metadata().iter().filter(|(k, _)| k.starts_with("tokenizer.")) {
            w.set(k.clone(), v.clone())?;
        }
    }
    dims.check()?;
    let LlamaDims { n_embd, n_layer, n_ff, n_head, n_head_kv, n_vocab, n_expert, n_expert_used } = dims;
    let n_embd_kv = n_embd / n_head * n_head_kv;
    w.set("general.architecture", "llama")?;
    w.set("general.name", "rgml synthetic llama")?;
    w.set("llama.context_length", 2048u32)?;
    w.set("llama.embedding_length", n_embd as u32)?;
    w.set("llama.block_count", n_layer as u32)?;
    w.set("llama.feed_forward_length", n_ff as u32)?;
    w.set("llama.attention.head_count", n_head as u32)?;
    w.set("llama.attention.head_count_kv", n_head_kv as u32)?;
    w.set("llama.rope.dimension_count", (n_embd / n_head) as u32)?;
    w.set("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5))?;
    w.set("llama.vocab_size", n_vocab as u32)?;
    if n_expert > 0 {
        w.set("llama.expert_count", n_expert as u32)?;
        w.set("llama.expert_used_count", n_expert_used as u32)?;
    }
    let mut rng = Lcg(1);
    // `stack` matrices of `rows` × `cols` (a stack of experts when more than one)
    let mut matrices = |name: String, cols: usize, rows: usize, stack: usize, dtype: DType| -> Result<()> {
        let bytes = random_matrix(&mut rng, dtype, rows * stack, cols)?;
        let ne: &[i64] =
            if stack > 1 { &[cols as i64, rows as i64, stack as i64] } else { &[cols as i64, rows as i64] };
        w.add_tensor(name, dtype, ne, bytes)?;
        Ok(())
    };
    let mut matrix = |name: String, cols: usize, rows: usize| matrices(name, cols, rows, 1, dtype);
    matrix("token_embd.weight".into(), n_embd, n_vocab)?;
    for l in 0..n_layer {
        let p = |n: &str| format!("blk.{l}.{n}.weight");
        matrix(p("attn_q"), n_embd, n_embd)?;
        matrix(p("attn_k"), n_embd, n_embd_kv)?;
        matrix(p("attn_v"), n_embd, n_embd_kv)?;
        matrix(p("attn_output"), n_embd, n_embd)?;
        if n_expert == 0 {
            matrix(p("ffn_gate"), n_embd, n_ff)?;
            matrix(p("ffn_up"), n_embd, n_ff)?;
            matrix(p("ffn_down"), n_ff, n_embd)?;
        }
    }
    matrix("output.weight".into(), n_embd, n_vocab)?;
    for l in (0..n_layer).filter(|_| n_expert > 0) {
        let p = |n: &str| format!("blk.{l}.{n}.weight");
        // the router stays F32, as llama.cpp's quantizer leaves it
        matrices(p("ffn_gate_inp"), n_embd, n_expert, 1, DType::F32)?;
        matrices(p("ffn_gate_exps"), n_embd, n_ff, n_expert, dtype)?;
        matrices(p("ffn_up_exps"), n_embd, n_ff, n_expert, dtype)?;
        matrices(p("ffn_down_exps"), n_ff, n_embd, n_expert, dtype)?;
    }
    let ones: Vec<u8> = (0..n_embd).flat_map(|_| 1f32.to_le_bytes()).collect();
    for l in 0..n_layer {
        for n in ["attn_norm", "ffn_norm"] {
            w.add_tensor(format!("blk.{l}.{n}.weight"), DType::F32, &[n_embd as i64], ones.clone())?;
        }
    }
    w.add_tensor("output_norm.weight", DType::F32, &[n_embd as i64], ones)?;
    w.write(path)
}

/// A 64-bit linear congruential generator (Knuth's MMIX constants): reproducible
/// weights without a dependency.
struct Lcg(u64);

impl Lcg {
    /// Uniform in [-1, 1).
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// `rows` rows of `cols` values uniform in ±1/√cols, quantized to `dtype`.
fn random_matrix(rng: &mut Lcg, dtype: DType, rows: usize, cols: usize) -> Result<Vec<u8>> {
    let row = dtype
        .row_size(cols as i64)
        .ok_or_else(|| Error::Invalid(format!("synthetic llama: width {cols} is not whole {dtype} blocks")))?;
    let mut bytes = vec![0u8; row * rows];
    let mut vals = vec![0f32; cols];
    let scale = 1.0 / (cols as f32).sqrt();
    for out in bytes.chunks_exact_mut(row) {
        vals.iter_mut().for_each(|v| *v = rng.next() * scale);
        rgml::quant::quantize_row(dtype, &vals, out)?;
    }
    Ok(bytes)
}
