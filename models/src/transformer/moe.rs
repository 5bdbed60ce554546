//! The mixture-of-experts feed-forward network, as llama.cpp's `build_moe_ffn`
//! builds it: router logits, gating, the top experts of each token, their
//! weights (normed and scaled where the model says), the experts' gated
//! networks by `mul_mat_id`, and the weighted sum of their outputs; plus the
//! shared expert where the layer has one.

use rgml::{GluOp, Result, TensorId};

use super::blocks::Block;
use super::hparams::{Gating, Moe};
use super::weights::{Experts, SharedExpert};

impl Block<'_> {
    /// The experts' output for the normed input `h` (`[n_embd, n_tokens]`).
    pub(crate) fn moe_ffn(&self, x: &Experts, h: TensorId, glu: GluOp) -> Result<TensorId> {
        let m = self.hp.moe.ok_or_else(|| rgml::Error::Invalid("a layer of experts without expert keys".into()))?;
        // the rows of `h`: fewer than the batch's in a last-position graph's last layer
        let (e, nt, n_used) = (self.hp.n_embd as i64, self.c.layout(h)?.ne[1], m.n_used as i64);
        let (picked, weights) = self.route(x, h, nt, &m)?;
        let h3 = self.c.reshape(h, &[e, 1, nt])?;
        // the picks as one packed row of ids, made once for every expert bias
        let has_bias = x.b_gate.is_some() || x.b_up.is_some() || x.b_down.is_some();
        let flat = if has_bias { Some(self.c.cont_reshape(picked, &[n_used * nt])?) } else { None };
        let gate = self.expert_bias(self.c.mul_mat_id(x.gate, h3, picked)?, x.b_gate, flat)?;
        let up = self.expert_bias(self.c.mul_mat_id(x.up, h3, picked)?, x.b_up, flat)?;
        let act = self.c.glu_split(glu, gate, up)?;
        let out = self.expert_bias(self.c.mul_mat_id(x.down, act, picked)?, x.b_down, flat)?;
        // [n_embd, n_used, n_tokens] weighted, then the slots summed in order
        let out = self.c.mul(out, weights)?;
        let l = self.c.layout(out)?;
        let slot = |i: i64| self.c.view_2d(out, e, nt, l.nb[2], i as usize * l.nb[1]);
        let mut sum = slot(0)?;
        for i in 1..n_used {
            sum = self.c.add(sum, slot(i)?)?;
        }
        if n_used == 1 {
            sum = self.c.cont(sum)?;
        }
        match &x.shared {
            Some(s) => self.c.add(sum, self.shared_expert(s, h, glu)?),
            None => Ok(sum),
        }
    }

    /// Each token's experts (I32 `[n_used, n_tokens]`, a view of the sorted router
    /// scores) and their weights (`[1, n_used, n_tokens]`).
    fn route(&self, x: &Experts, h: TensorId, nt: i64, m: &Moe) -> Result<(TensorId, TensorId)> {
        let (n_expert, n_used) = (m.n_expert as i64, m.n_used as i64);
        let logits = self.linear(x.router, h, x.router_b)?; // [n_expert, n_tokens]
        let probs = match m.gating {
            Gating::Softmax => self.c.soft_max(logits)?,
            Gating::Sigmoid => self.c.sigmoid(logits)?,
            Gating::SoftmaxWeight => logits,
        };
        let picked = self.c.top_k(probs, n_used)?;
        let mut weights = self.c.get_rows(self.c.reshape(probs, &[1, n_expert, nt])?, picked)?;
        if m.gating == Gating::SoftmaxWeight {
            weights = self.c.soft_max(self.c.reshape(weights, &[n_used, nt])?)?;
        }
        if m.norm_weights {
            let w2 = self.c.reshape(weights, &[n_used, nt])?;
            weights = self.c.div(w2, self.c.sum_rows(w2)?)?;
        }
        if m.weights_scale != 1.0 {
            weights = self.c.scale(weights, m.weights_scale)?;
        }
        Ok((picked, self.c.reshape(weights, &[1, n_used, nt])?))
    }

    /// `y` (`[width, n_used, n_tokens]`) plus each picked expert's bias row, if the
    /// experts have biases (`[width, n_expert]`); `flat` is the picks as one row.
    fn expert_bias(&self, y: TensorId, bias: Option<TensorId>, flat: Option<TensorId>) -> Result<TensorId> {
        let (Some(bias), Some(ids)) = (bias, flat) else { return Ok(y) };
        let ne = self.c.layout(y)?.ne;
        let rows = self.c.reshape(self.c.get_rows(bias, ids)?, &[ne[0], ne[1], ne[2]])?;
        self.c.add(y, rows)
    }

    /// The shared expert's gated network on `h`, scaled by the sigmoid of its gate
    /// where it has one.
    fn shared_expert(&self, s: &SharedExpert, h: TensorId, glu: GluOp) -> Result<TensorId> {
        let act = self.c.glu_split(glu, self.linear(s.gate, h, None)?, self.linear(s.up, h, None)?)?;
        let out = self.linear(s.down, act, None)?;
        match s.gate_inp {
            Some(g) => self.c.mul(out, self.c.sigmoid(self.linear(g, h, None)?)?),
            None => Ok(out),
        }
    }
}
