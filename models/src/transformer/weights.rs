//! A model's tensors by llama.cpp's names, each checked against the hyperparameters
//! before anything runs.

use rgml::{Context, Error, Result, TensorId, Weights};

use super::hparams::Hparams;

/// What an architecture's layers have beyond the common tensors.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Needs {
    /// RMS norms of the queries and keys (`attn_q_norm`, `attn_k_norm`): per head,
    /// or over the whole projection with `full_qk_norm`.
    pub qk_norm: bool,
    /// The query and key norms span the whole projection (OLMo 2, OLMoE), not a head.
    pub full_qk_norm: bool,
    /// Norms before attention and before the feed-forward (`attn_norm`,
    /// `ffn_norm`); OLMo 2 has none.
    pub pre_norms: bool,
    /// Norms after attention and after the feed-forward (`post_attention_norm`, `post_ffw_norm`).
    pub post_norms: bool,
    /// `ffn_up` holds the gate and up projections, `2·n_ff` rows, and there is no `ffn_gate`.
    pub fused_gate_up: bool,
    /// The name of the norm before the feed-forward (gpt-oss calls it
    /// `post_attention_norm`).
    pub ffn_norm_name: &'static str,
}

impl Needs {
    /// Llama's layers: pre-norms, nothing more.
    pub const LLAMA: Needs = Needs {
        qk_norm: false,
        full_qk_norm: false,
        pre_norms: true,
        post_norms: false,
        fused_gate_up: false,
        ffn_norm_name: "ffn_norm",
    };
}

/// The query, key and value projections: one fused matrix or three.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Qkv {
    Fused { w: TensorId, b: Option<TensorId> },
    Split { q: TensorId, k: TensorId, v: TensorId, bq: Option<TensorId>, bk: Option<TensorId>, bv: Option<TensorId> },
}

/// The feed-forward projections.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ffn {
    /// `down(act(gate·x) * up·x)`, optional biases.
    Gated {
        gate: TensorId,
        up: TensorId,
        down: TensorId,
        b_gate: Option<TensorId>,
        b_up: Option<TensorId>,
        b_down: Option<TensorId>,
    },
    /// `down(act(u[..n_ff]) * u[n_ff..])` with `u = up·x`.
    FusedGateUp { up: TensorId, down: TensorId },
    /// A mixture of experts.
    Experts(Experts),
}

/// A mixture-of-experts feed-forward layer: the router, the experts' stacked
/// matrices, and an optional shared expert every token goes through.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Experts {
    /// `ffn_gate_inp`: router logits `[n_embd, n_expert]`, and its bias.
    pub router: TensorId,
    pub router_b: Option<TensorId>,
    /// `ffn_{gate,up}_exps` `[n_embd, n_ff_exp, n_expert]`, `ffn_down_exps` `[n_ff_exp, n_embd, n_expert]`.
    pub gate: TensorId,
    pub up: TensorId,
    pub down: TensorId,
    /// Per-expert biases (`ffn_*_exps.bias`, `[width, n_expert]`).
    pub b_gate: Option<TensorId>,
    pub b_up: Option<TensorId>,
    pub b_down: Option<TensorId>,
    /// The shared expert (`ffn_*_shexp`), if the layer has one.
    pub shared: Option<SharedExpert>,
}

/// A shared expert: a gated feed-forward network, its output optionally scaled
/// by `sigmoid(gate_inp·x)` (Qwen2-MoE).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SharedExpert {
    pub gate: TensorId,
    pub up: TensorId,
    pub down: TensorId,
    pub gate_inp: Option<TensorId>,
}

/// One transformer block's tensors, and its KV cache.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layer {
    pub index: usize,
    pub attn_norm: Option<TensorId>,
    pub qkv: Qkv,
    pub q_norm: Option<TensorId>,
    pub k_norm: Option<TensorId>,
    /// The query and key norms span the whole projection, not a head.
    pub qk_norm_full: bool,
    pub wo: TensorId,
    pub wo_b: Option<TensorId>,
    pub attn_post_norm: Option<TensorId>,
    pub ffn_norm: Option<TensorId>,
    pub ffn: Ffn,
    pub ffn_post_norm: Option<TensorId>,
    /// Rope frequency factors (llama-3's `rope_freqs`, Phi-3's long or short factors).
    pub rope_factors: Option<TensorId>,
    /// Attention sinks, a logit per head (gpt-oss's `attn_sinks`).
    pub sinks: Option<TensorId>,
    pub k_cache: TensorId,
    pub v_cache: TensorId,
}

/// The model-wide tensors.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Globals {
    pub tok_embd: TensorId,
    pub output_norm: TensorId,
    /// The vocabulary projection (the token embeddings when the file ties them).
    pub output: TensorId,
    pub output_b: Option<TensorId>,
}

/// Looks tensors up by name and checks their shapes.
pub(crate) struct Loader<'a> {
    pub ctx: &'a Context,
    pub w: &'a Weights,
}

impl Loader<'_> {
    /// Tensor `name`, which must have shape `ne` (ggml order).
    pub fn get(&self, name: &str, ne: &[usize]) -> Result<TensorId> {
        let id = self.w.get(name)?;
        self.check(name, id, ne)?;
        Ok(id)
    }

    /// Tensor `name` if the file has it, with shape `ne`.
    pub fn opt(&self, name: &str, ne: &[usize]) -> Result<Option<TensorId>> {
        match self.w.find(name) {
            None => Ok(None),
            Some(id) => self.check(name, id, ne).map(|()| Some(id)),
        }
    }

    fn check(&self, name: &str, id: TensorId, ne: &[usize]) -> Result<()> {
        let l = self.ctx.layout(id)?;
        let mut want = [1i64; 4];
        for (w, &n) in want.iter_mut().zip(ne) {
            *w = n as i64;
        }
        if l.ne != want {
            let dims = l.ne.iter().rposition(|&x| x != 1).map_or(1, |p| p + 1).max(ne.len());
            let got: Vec<i64> = l.ne[..dims].to_vec();
            return Err(Error::Shape {
                op: "load",
                msg: format!("tensor {name} has shape {got:?}, but the hyperparameters need {ne:?}"),
            });
        }
        if ne.len() == 1 && !l.dtype.is_float() {
            return Err(Error::Unsupported { op: "load (norm or bias)", dtype: l.dtype });
        }
        Ok(())
    }
}

impl Hparams {
    /// The model-wide tensors of `hp`'s shapes.
    pub(crate) fn globals(&self, ld: &Loader) -> Result<Globals> {
        let (e, v) = (self.n_embd, self.n_vocab);
        let tok_embd = ld.get("token_embd.weight", &[e, v])?;
        Ok(Globals {
            tok_embd,
            output_norm: ld.get("output_norm.weight", &[e])?,
            output: ld.opt("output.weight", &[e, v])?.unwrap_or(tok_embd),
            output_b: ld.opt("output.bias", &[v])?,
        })
    }

    /// Layer `i`'s tensors (its caches given) for a context of `n_ctx` positions.
    pub(crate) fn layer(
        &self,
        ld: &Loader,
        needs: Needs,
        i: usize,
        caches: (TensorId, TensorId),
        n_ctx: usize,
    ) -> Result<Layer> {
        let n = |t: &str| format!("blk.{i}.{t}");
        let e = self.n_embd;
        let (nq, nk, nv) = (self.n_embd_q(), self.n_embd_k_gqa(), self.n_embd_v_gqa());
        let qkv = match ld.opt(&n("attn_qkv.weight"), &[e, nq + nk + nv])? {
            Some(w) => Qkv::Fused { w, b: ld.opt(&n("attn_qkv.bias"), &[nq + nk + nv])? },
            None => Qkv::Split {
                q: ld.get(&n("attn_q.weight"), &[e, nq])?,
                k: ld.get(&n("attn_k.weight"), &[e, nk])?,
                v: ld.get(&n("attn_v.weight"), &[e, nv])?,
                bq: ld.opt(&n("attn_q.bias"), &[nq])?,
                bk: ld.opt(&n("attn_k.bias"), &[nk])?,
                bv: ld.opt(&n("attn_v.bias"), &[nv])?,
            },
        };
        let ff = self.n_ff;
        let ffn = if let Some(x) = self.experts(ld, i)? {
            Ffn::Experts(x)
        } else if needs.fused_gate_up {
            Ffn::FusedGateUp {
                up: ld.get(&n("ffn_up.weight"), &[e, 2 * ff])?,
                down: ld.get(&n("ffn_down.weight"), &[ff, e])?,
            }
        } else {
            Ffn::Gated {
                gate: ld.get(&n("ffn_gate.weight"), &[e, ff])?,
                up: ld.get(&n("ffn_up.weight"), &[e, ff])?,
                down: ld.get(&n("ffn_down.weight"), &[ff, e])?,
                b_gate: ld.opt(&n("ffn_gate.bias"), &[ff])?,
                b_up: ld.opt(&n("ffn_up.bias"), &[ff])?,
                b_down: ld.opt(&n("ffn_down.bias"), &[e])?,
            }
        };
        let hd = self.head_dim;
        let need = |on: bool, name: &str, ne: &[usize]| if on { ld.get(name, ne).map(Some) } else { Ok(None) };
        let (q_width, k_width) = if needs.full_qk_norm { (nq, nk) } else { (hd, hd) };
        Ok(Layer {
            index: i,
            attn_norm: need(needs.pre_norms, &n("attn_norm.weight"), &[e])?,
            qkv,
            q_norm: need(needs.qk_norm, &n("attn_q_norm.weight"), &[q_width])?,
            k_norm: need(needs.qk_norm, &n("attn_k_norm.weight"), &[k_width])?,
            qk_norm_full: needs.full_qk_norm,
            wo: ld.get(&n("attn_output.weight"), &[self.head_dim_v * self.n_head, e])?,
            wo_b: ld.opt(&n("attn_output.bias"), &[e])?,
            attn_post_norm: need(needs.post_norms, &n("post_attention_norm.weight"), &[e])?,
            ffn_norm: need(needs.pre_norms, &n(&format!("{}.weight", needs.ffn_norm_name)), &[e])?,
            ffn,
            ffn_post_norm: need(needs.post_norms, &n("post_ffw_norm.weight"), &[e])?,
            rope_factors: self.rope_factors(ld, n_ctx)?,
            sinks: ld.opt(&n("attn_sinks.weight"), &[self.n_head])?,
            k_cache: caches.0,
            v_cache: caches.1,
        })
    }

    /// Layer `i`'s experts, if the model has experts and the layer its router.
    fn experts(&self, ld: &Loader, i: usize) -> Result<Option<Experts>> {
        let n = |t: &str| format!("blk.{i}.{t}");
        let Some(m) = &self.moe else { return Ok(None) };
        let (e, ff, ne) = (self.n_embd, m.n_ff_exp, m.n_expert);
        let Some(router) = ld.opt(&n("ffn_gate_inp.weight"), &[e, ne])? else { return Ok(None) };
        let shared = match ld.opt(&n("ffn_up_shexp.weight"), &[e, self.n_ff_shexp()])? {
            None => None,
            Some(up) => Some(SharedExpert {
                gate: ld.get(&n("ffn_gate_shexp.weight"), &[e, self.n_ff_shexp()])?,
                up,
                down: ld.get(&n("ffn_down_shexp.weight"), &[self.n_ff_shexp(), e])?,
                gate_inp: ld.opt(&n("ffn_gate_inp_shexp.weight"), &[e])?,
            }),
        };
        Ok(Some(Experts {
            router,
            router_b: ld.opt(&n("ffn_gate_inp.bias"), &[ne])?,
            gate: ld.get(&n("ffn_gate_exps.weight"), &[e, ff, ne])?,
            up: ld.get(&n("ffn_up_exps.weight"), &[e, ff, ne])?,
            down: ld.get(&n("ffn_down_exps.weight"), &[ff, e, ne])?,
            b_gate: ld.opt(&n("ffn_gate_exps.bias"), &[ff, ne])?,
            b_up: ld.opt(&n("ffn_up_exps.bias"), &[ff, ne])?,
            b_down: ld.opt(&n("ffn_down_exps.bias"), &[e, ne])?,
            shared,
        }))
    }

    /// The shared expert's width: `expert_shared_feed_forward_length`, else `n_ff`
    /// (as llama.cpp's Qwen2-MoE).
    fn n_ff_shexp(&self) -> usize {
        match self.moe {
            Some(m) if m.n_ff_shexp > 0 => m.n_ff_shexp,
            _ => self.n_ff,
        }
    }

    /// llama-3's `rope_freqs.weight`, or Phi-3's long factors when the context passes
    /// the original one and its short factors otherwise (as llama.cpp chooses them).
    fn rope_factors(&self, ld: &Loader, n_ctx: usize) -> Result<Option<TensorId>> {
        let half = [self.rope.n_rot / 2];
        if let Some(f) = ld.opt("rope_freqs.weight", &half)? {
            return Ok(Some(f));
        }
        let long = ld.opt("rope_factors_long.weight", &half)?;
        let short = ld.opt("rope_factors_short.weight", &half)?;
        Ok(if n_ctx > self.rope.n_ctx_orig { long } else { short })
    }
}
