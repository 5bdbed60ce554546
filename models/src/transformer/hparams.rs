//! Hyperparameters from GGUF metadata, read as llama.cpp reads them (its
//! `llama_model_base::load_hparams`, the per-architecture `load_arch_hparams`, and the
//! rope settings `llama_context` derives), and checked before anything is allocated.

use rgml::gguf::{GgufFile, Value};
use rgml::{Error, Result, RopeParams};

/// The largest context length rgml accepts from a file (2^24 positions).
pub const MAX_CONTEXT: usize = 1 << 24;
/// The most layers a file may declare (llama.cpp's `LLAMA_MAX_LAYERS`).
pub const MAX_LAYERS: usize = 512;

/// How positions are stretched beyond the training context (`rope.scaling.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeScaling {
    /// No scaling (the factor is ignored).
    None,
    /// Position interpolation by the factor.
    Linear,
    /// YaRN: interpolation mixed with extrapolation per frequency, magnitude corrected.
    Yarn,
}

/// Rotary embedding settings for the layers that use the global ones.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rope {
    /// `RopeParams::NORMAL` or `RopeParams::NEOX`, by architecture.
    pub mode: i32,
    /// Rotated dims per head.
    pub n_rot: usize,
    /// Frequency base.
    pub freq_base: f32,
    /// 1 / scaling factor (1 without scaling).
    pub freq_scale: f32,
    /// The scaling type.
    pub scaling: RopeScaling,
    /// The context length the model was trained for before scaling (YaRN's reference).
    pub n_ctx_orig: usize,
    /// YaRN's extrapolation mix (1 with YaRN, else 0).
    pub ext_factor: f32,
    /// Magnitude scale of the rotated values (YaRN's correction is folded in as llama.cpp does).
    pub attn_factor: f32,
    /// YaRN's correction boundaries.
    pub beta_fast: f32,
    /// YaRN's correction boundaries.
    pub beta_slow: f32,
}

impl Rope {
    /// The rope op's parameters with these settings and `freq_base`/`freq_scale`.
    pub fn params(&self, freq_base: f32, freq_scale: f32) -> RopeParams {
        RopeParams {
            n_ctx_orig: self.n_ctx_orig as i32,
            freq_base,
            freq_scale,
            ext_factor: self.ext_factor,
            attn_factor: self.attn_factor,
            beta_fast: self.beta_fast,
            beta_slow: self.beta_slow,
            ..RopeParams::new(self.n_rot as i32, self.mode)
        }
    }
}

/// Sliding-window attention on some layers (Gemma 3's local layers).
#[derive(Clone, Debug, PartialEq)]
pub struct SlidingWindow {
    /// Positions a token sees, itself included.
    pub window: usize,
    /// Which layers use the window.
    pub layers: Vec<bool>,
    /// Rope frequency base of the windowed layers.
    pub freq_base: f32,
    /// Rope frequency scale of the windowed layers.
    pub freq_scale: f32,
}

/// How a mixture-of-experts layer turns its router's logits into expert weights
/// (llama.cpp's `llama_expert_gating_func_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gating {
    /// Softmax over every expert, then the top `n_used` picked.
    Softmax,
    /// A sigmoid per expert, then the top `n_used` picked.
    Sigmoid,
    /// The top `n_used` logits picked, then a softmax over them (gpt-oss).
    SoftmaxWeight,
}

/// Mixture-of-experts feed-forward layers: the `expert_*` keys.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Moe {
    /// Experts per layer (`expert_count`).
    pub n_expert: usize,
    /// Experts each token uses (`expert_used_count`).
    pub n_used: usize,
    /// An expert's feed-forward width (`expert_feed_forward_length`, else `feed_forward_length`).
    pub n_ff_exp: usize,
    /// The shared expert's width (`expert_shared_feed_forward_length`; 0: the
    /// width of the shared tensors, if any).
    pub n_ff_shexp: usize,
    /// How router logits become weights.
    pub gating: Gating,
    /// The picked weights divided by their sum (`expert_weights_norm`, or the
    /// architecture's fixed choice).
    pub norm_weights: bool,
    /// A factor on the picked weights (`expert_weights_scale`; 1: none).
    pub weights_scale: f32,
}

/// The most experts a layer may have (llama.cpp's `LLAMA_MAX_EXPERTS`).
pub const MAX_EXPERTS: usize = 512;

/// A model's hyperparameters, from the GGUF metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct Hparams {
    /// The architecture's GGUF name (`general.architecture`; [`crate::arch::ARCHS`] has
    /// its description).
    pub arch: &'static str,
    /// Vocabulary size.
    pub n_vocab: usize,
    /// Embedding width.
    pub n_embd: usize,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Attention heads.
    pub n_head: usize,
    /// Key/value heads (grouped-query attention when fewer than `n_head`).
    pub n_head_kv: usize,
    /// Width of a key (and query) head: `attention.key_length`, else `n_embd / n_head`.
    pub head_dim: usize,
    /// Width of a value head: `attention.value_length`, else `n_embd / n_head`.
    pub head_dim_v: usize,
    /// Feed-forward width.
    pub n_ff: usize,
    /// Training context length.
    pub n_ctx_train: usize,
    /// RMS norm epsilon.
    pub rms_eps: f32,
    /// Rotary embedding.
    pub rope: Rope,
    /// Sliding-window layers, if the model has them.
    pub swa: Option<SlidingWindow>,
    /// Scale of `q·k` in attention.
    pub kq_scale: f32,
    /// Scale of the token embeddings (Gemma: √n_embd).
    pub embd_scale: Option<f32>,
    /// Mixture-of-experts feed-forward layers, if the model has them.
    pub moe: Option<Moe>,
    /// A factor on each block's branches before they join the residual (Granite).
    pub residual_scale: Option<f32>,
    /// The logits divided by this (Granite's `logit_scale`).
    pub logit_scale: Option<f32>,
    /// Layers that skip the rotary embedding (SmolLM3's every fourth; every layer
    /// of a Granite file whose `rope.scaling.finetuned` is false); empty: none.
    pub no_rope: Vec<bool>,
}

impl Hparams {
    /// Width of all key heads together.
    pub fn n_embd_k_gqa(&self) -> usize {
        self.head_dim * self.n_head_kv
    }
    /// Width of all value heads together.
    pub fn n_embd_v_gqa(&self) -> usize {
        self.head_dim_v * self.n_head_kv
    }
    /// Width of all query heads together.
    pub fn n_embd_q(&self) -> usize {
        self.head_dim * self.n_head
    }
    /// Whether layer `il` rotates its queries and keys.
    pub fn has_rope(&self, il: usize) -> bool {
        !self.no_rope.get(il).copied().unwrap_or(false)
    }
    /// Whether layer `il` attends through the sliding window.
    pub fn is_swa(&self, il: usize) -> bool {
        self.swa.as_ref().is_some_and(|s| s.layers.get(il).copied().unwrap_or(false))
    }
    /// The rope op's parameters for layer `il`.
    pub fn rope_params(&self, il: usize) -> RopeParams {
        match &self.swa {
            Some(s) if self.is_swa(il) => self.rope.params(s.freq_base, s.freq_scale),
            _ => self.rope.params(self.rope.freq_base, self.rope.freq_scale),
        }
    }

    /// A summary for `rgml inspect`: what rgml derived from the file.
    pub fn describe(&self) -> String {
        let r = &self.rope;
        let mode = if r.mode == RopeParams::NEOX { "neox" } else { "normal" };
        let mut s = format!(
            "architecture {}: {} layers, n_embd {}, {} heads ({} kv) of {} (values {}), n_ff {}, vocab {}, \
             context {}, rms eps {:e}\nrope: {mode}, {} dims, base {}, scale {} ({:?}, original context {}, \
             ext {}, attn {}), attention scale {}",
            self.arch,
            self.n_layer,
            self.n_embd,
            self.n_head,
            self.n_head_kv,
            self.head_dim,
            self.head_dim_v,
            self.n_ff,
            self.n_vocab,
            self.n_ctx_train,
            self.rms_eps,
            r.n_rot,
            r.freq_base,
            r.freq_scale,
            r.scaling,
            r.n_ctx_orig,
            r.ext_factor,
            r.attn_factor,
            self.kq_scale,
        );
        if let Some(w) = &self.swa {
            let n = w.layers.iter().filter(|&&x| x).count();
            s +=
                &format!("\nsliding window {} on {n} of {} layers (rope base {})", w.window, self.n_layer, w.freq_base);
        }
        if let Some(e) = self.embd_scale {
            s += &format!("\nembeddings scaled by {e}");
        }
        if let Some(r) = self.residual_scale {
            s += &format!("\nresidual branches scaled by {r}");
        }
        if let Some(l) = self.logit_scale {
            s += &format!("\nlogits divided by {l}");
        }
        let plain = self.no_rope.iter().filter(|&&x| x).count();
        if plain > 0 {
            s += &format!("\n{plain} of {} layers without rotary embedding", self.n_layer);
        }
        if let Some(m) = &self.moe {
            s += &format!(
                "\nexperts: {} of {} per token, n_ff {} (shared {}), {:?} gating, weights normed {}, scaled by {}",
                m.n_used, m.n_expert, m.n_ff_exp, m.n_ff_shexp, m.gating, m.norm_weights, m.weights_scale
            );
        }
        s
    }

    /// Reads and checks the hyperparameters every architecture has from `f`, a file of the
    /// architecture named `arch` whose heads rotate as `rope_mode` says. The architecture's
    /// own keys come after (`Hparams::from_gguf` does both).
    ///
    /// # Errors
    /// [`Error::Metadata`] naming the key for a missing, mistyped or absurd value.
    pub fn read_common(f: &GgufFile, arch: &'static str, rope_mode: i32) -> Result<Hparams> {
        let k = Keys { f, prefix: arch };
        let (n_layer, n_embd, n_head, n_head_kv) = k.layers_and_heads()?;
        let default_dim = |what: &str| {
            if n_embd % n_head == 0 {
                Ok(n_embd / n_head)
            } else {
                Err(meta(&k.key(what), format!("absent, and n_embd {n_embd} is not divisible by the {n_head} heads")))
            }
        };
        let head_dim = match k.opt_count("attention.key_length", 1, 1 << 16)? {
            Some(d) => d,
            None => default_dim("attention.key_length")?,
        };
        let head_dim_v = match k.opt_count("attention.value_length", 1, 1 << 16)? {
            Some(d) => d,
            None => default_dim("attention.value_length")?,
        };
        let n_rot = k.opt_count("rope.dimension_count", 1, 1 << 16)?.unwrap_or(head_dim);
        if n_rot > head_dim || n_rot % 2 != 0 {
            return Err(meta(&k.key("rope.dimension_count"), format!("{n_rot} rotated dims for heads of {head_dim}")));
        }
        let (n_ctx_train, n_vocab) = (k.count("context_length", 1, MAX_CONTEXT)?, k.n_vocab()?);
        let rope = read_rope(&k, rope_mode, n_rot, n_ctx_train)?;
        // optional in llama.cpp: a model whose every layer is experts may lack it
        let n_ff = k.opt_count("feed_forward_length", 1, 1 << 24)?;
        let moe = read_moe(&k, n_ff)?;
        let n_ff = match (n_ff, &moe) {
            (Some(n), _) => n,
            (None, Some(m)) => m.n_ff_exp,
            (None, None) => return Err(meta(&k.key("feed_forward_length"), "not found")),
        };
        let hp = Hparams {
            arch,
            n_vocab,
            n_embd,
            n_layer,
            n_head,
            n_head_kv,
            head_dim,
            head_dim_v,
            n_ff,
            n_ctx_train,
            rms_eps: k.f32("attention.layer_norm_rms_epsilon")?,
            rope,
            swa: None,
            kq_scale: 1.0 / (head_dim as f32).sqrt(),
            embd_scale: None,
            moe,
            residual_scale: None,
            logit_scale: None,
            no_rope: Vec::new(),
        };
        if !(hp.rms_eps.is_finite() && hp.rms_eps >= 0.0) {
            return Err(meta(
                &k.key("attention.layer_norm_rms_epsilon"),
                format!("{} is not a usable epsilon", hp.rms_eps),
            ));
        }
        Ok(hp)
    }
}

/// A file's keys under its architecture's prefix.
pub(crate) struct Keys<'a> {
    pub f: &'a GgufFile,
    pub prefix: &'a str,
}

impl Keys<'_> {
    /// The counts every model has: layers, width, heads and KV heads (which must
    /// divide the heads).
    pub fn layers_and_heads(&self) -> Result<(usize, usize, usize, usize)> {
        let n_layer = self.count("block_count", 1, MAX_LAYERS)?;
        let n_embd = self.count("embedding_length", 1, 1 << 20)?;
        let n_head = self.count("attention.head_count", 1, 1 << 16)?;
        let n_head_kv = self.opt_count("attention.head_count_kv", 1, 1 << 16)?.unwrap_or(n_head);
        if n_head % n_head_kv != 0 {
            let why = format!("{n_head_kv} does not divide the {n_head} heads");
            return Err(meta(&self.key("attention.head_count_kv"), why));
        }
        Ok((n_layer, n_embd, n_head, n_head_kv))
    }
    /// The vocabulary size: `vocab_size`, else the rows of `token_embd.weight`.
    pub fn n_vocab(&self) -> Result<usize> {
        let n = match self.opt_count("vocab_size", 1, 1 << 24)? {
            Some(n) => n,
            None => self.f.tensor("token_embd.weight").map_or(0, |t| t.ne[1].max(0) as usize),
        };
        if n == 0 {
            return Err(meta(&self.key("vocab_size"), "absent, and there is no token_embd.weight to tell it"));
        }
        Ok(n)
    }
    pub fn key(&self, k: &str) -> String {
        format!("{}.{k}", self.prefix)
    }
    pub fn get(&self, k: &str) -> Option<&Value> {
        self.f.get(&self.key(k))
    }
    /// An unsigned count in `lo..=hi`, if present.
    pub fn opt_count(&self, k: &str, lo: usize, hi: usize) -> Result<Option<usize>> {
        let key = self.key(k);
        let Some(_) = self.f.get(&key) else { return Ok(None) };
        let v = self.f.get_u64(&key).or_else(|_| self.f.get_i64(&key).map(|v| v.max(-1) as u64))?;
        match usize::try_from(v) {
            Ok(v) if (lo..=hi).contains(&v) => Ok(Some(v)),
            _ => Err(meta(&key, format!("{v} is outside {lo}..={hi}"))),
        }
    }
    /// A required unsigned count in `lo..=hi`.
    pub fn count(&self, k: &str, lo: usize, hi: usize) -> Result<usize> {
        self.opt_count(k, lo, hi)?.ok_or_else(|| meta(&self.key(k), "not found"))
    }
    pub fn f32(&self, k: &str) -> Result<f32> {
        self.f.get_f64(&self.key(k)).map(|v| v as f32)
    }
    pub fn opt_f32(&self, k: &str) -> Result<Option<f32>> {
        self.get(k).map(|_| self.f32(k)).transpose()
    }
    pub fn opt_str(&self, k: &str) -> Result<Option<&str>> {
        self.get(k).map(|_| self.f.get_str(&self.key(k))).transpose()
    }
}

pub(crate) fn meta(key: &str, msg: impl Into<String>) -> Error {
    Error::Metadata { key: key.to_string(), msg: msg.into() }
}

/// The sliding window, if `attention.sliding_window` is there and not 0: the
/// layers that use it from `attention.sliding_window_pattern` (an array of flags,
/// or a period `p`: layer `il` is windowed when `il % p < p - 1`, every layer when
/// `p` is 0; `default_period` when absent), rotating with `freq_base` and
/// `freq_scale` (as llama.cpp's `load_swa_pattern`).
pub(crate) fn read_sliding_window(
    k: &Keys,
    n_layer: usize,
    default_period: usize,
    freq_base: f32,
    freq_scale: f32,
) -> Result<Option<SlidingWindow>> {
    let Some(window) = k.opt_count("attention.sliding_window", 0, usize::MAX)?.filter(|&w| w > 0) else {
        return Ok(None);
    };
    let layers = match k.get("attention.sliding_window_pattern") {
        Some(Value::Array(a)) => {
            let flags = a.as_bool().ok_or_else(|| {
                meta(&k.key("attention.sliding_window_pattern"), "expected an array of bool or a period")
            })?;
            (0..n_layer).map(|il| flags.get(il).copied().unwrap_or(false)).collect()
        }
        _ => {
            let period = k.opt_count("attention.sliding_window_pattern", 0, usize::MAX)?.unwrap_or(default_period);
            (0..n_layer).map(|il| period == 0 || il % period < period - 1).collect()
        }
    };
    Ok(Some(SlidingWindow { window, layers, freq_base, freq_scale }))
}

/// The expert keys, if `expert_count` is there and not 0: counts checked (an
/// expert's width from `expert_feed_forward_length`, else `feed_forward_length`), the
/// gating softmax and the weights neither normed nor scaled unless the file says
/// (`expert_gating_func` 1 softmax, 2 sigmoid, 3 softmax of the picked;
/// `expert_weights_norm`, `expert_weights_scale`); architectures with fixed
/// choices set them after.
fn read_moe(k: &Keys, n_ff: Option<usize>) -> Result<Option<Moe>> {
    let Some(n_expert) = k.opt_count("expert_count", 0, MAX_EXPERTS)?.filter(|&n| n > 0) else { return Ok(None) };
    let n_used = k.count("expert_used_count", 1, n_expert)?;
    let gating = match k.opt_count("expert_gating_func", 0, u32::MAX as usize)? {
        None | Some(0 | 1) => Gating::Softmax,
        Some(2) => Gating::Sigmoid,
        Some(3) => Gating::SoftmaxWeight,
        Some(g) => return Err(meta(&k.key("expert_gating_func"), format!("unknown gating function {g}"))),
    };
    let norm_weights = match k.get("expert_weights_norm") {
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(meta(&k.key("expert_weights_norm"), "expected a bool")),
        None => false,
    };
    let weights_scale = k.opt_f32("expert_weights_scale")?.filter(|&s| s != 0.0).unwrap_or(1.0);
    if !weights_scale.is_finite() {
        return Err(meta(&k.key("expert_weights_scale"), format!("{weights_scale} is not a scale")));
    }
    Ok(Some(Moe {
        n_expert,
        n_used,
        n_ff_exp: match k.opt_count("expert_feed_forward_length", 1, 1 << 24)? {
            Some(n) => n,
            None => n_ff.ok_or_else(|| meta(&k.key("expert_feed_forward_length"), "not found"))?,
        },
        n_ff_shexp: k.opt_count("expert_shared_feed_forward_length", 1, 1 << 24)?.unwrap_or(0),
        gating,
        norm_weights,
        weights_scale,
    }))
}

/// The rope settings as llama.cpp derives them for a context (`llama_context`'s
/// constructor): the scaling type (default linear), the factor, and YaRN's
/// extrapolation mix and magnitude correction.
pub(crate) fn read_rope(k: &Keys, mode: i32, n_rot: usize, n_ctx_train: usize) -> Result<Rope> {
    let freq_base = k.opt_f32("rope.freq_base")?.unwrap_or(10000.0);
    let scaling = match k.opt_str("rope.scaling.type")?.unwrap_or("linear") {
        "none" => RopeScaling::None,
        "linear" => RopeScaling::Linear,
        "yarn" => RopeScaling::Yarn,
        other => {
            return Err(meta(
                &k.key("rope.scaling.type"),
                format!("unsupported rope scaling type {other:?} (rgml knows none, linear and yarn; llama-3's frequency factors come as rope_freqs.weight)"),
            ))
        }
    };
    let factor = match k.opt_f32("rope.scaling.factor")? {
        Some(f) => f,
        None => k.opt_f32("rope.scale_linear")?.unwrap_or(0.0),
    };
    if !(factor.is_finite() && factor >= 0.0) {
        return Err(meta(&k.key("rope.scaling.factor"), format!("{factor} is not a scaling factor")));
    }
    let freq_scale = if scaling == RopeScaling::None || factor == 0.0 { 1.0 } else { 1.0 / factor };
    let n_ctx_orig = k.opt_count("rope.scaling.original_context_length", 1, MAX_CONTEXT)?.unwrap_or(n_ctx_train);
    let ext_factor = if scaling == RopeScaling::Yarn { 1.0f32 } else { 0.0 };
    let mut attn_factor = 1.0f32;
    if ext_factor != 0.0 {
        let f = 1.0 / freq_scale;
        let mscale = if f <= 1.0 { 1.0 } else { 0.1 * f.ln() + 1.0 };
        // ggml's rope applies YaRN's magnitude itself; llama.cpp cancels it here
        attn_factor = mscale * (1.0 / (1.0 + 0.1 * f.ln()));
    }
    attn_factor *= k.opt_f32("rope.scaling.attn_factor")?.unwrap_or(1.0);
    Ok(Rope {
        mode,
        n_rot,
        freq_base,
        freq_scale,
        scaling,
        n_ctx_orig,
        ext_factor,
        attn_factor,
        beta_fast: 32.0,
        beta_slow: 1.0,
    })
}
