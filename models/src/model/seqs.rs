//! Several sequences in one model: each in its own stream of the KV cache
//! ([`LoadOptions::n_seq`](super::LoadOptions::n_seq)), run one at a time
//! ([`Model::eval_seq`]) or a token of each in one graph ([`Model::eval_seqs`],
//! what a server's decode step runs). A sequence's logits are the same bits
//! whichever others share its step: its keys are in its own stream, and every
//! product runs the same kernel per row at any batch size for the weight types
//! that keep their bits per row (see the README's serving section).

use rgml::{Backend, Error, Result};

use super::{Model, StepKey, KV_PAD};

/// Sequences a model holds at most.
pub const MAX_SEQ: usize = 256;

impl<B: Backend> Model<B> {
    /// Sequences the KV cache holds.
    pub fn n_seq(&self) -> usize {
        self.past.len()
    }

    /// Positions cached for sequence `seq`.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a sequence the model does not hold.
    pub fn seq_past(&self, seq: usize) -> Result<usize> {
        self.check_seq(seq)?;
        Ok(self.past[seq])
    }

    /// Empties sequence `seq`'s cache (its stream's cells are rewritten as it
    /// fills again; the mask never shows the old ones).
    ///
    /// # Errors
    /// [`Error::Invalid`] for a sequence the model does not hold.
    pub fn seq_reset(&mut self, seq: usize) -> Result<()> {
        self.check_seq(seq)?;
        self.past[seq] = 0;
        Ok(())
    }

    /// Runs `tokens` after sequence `seq`'s cached positions, alone in its graph;
    /// returns their logits, position-major ([`Model::eval`] is sequence 0's).
    pub fn eval_seq(&mut self, seq: usize, tokens: &[u32]) -> Result<Vec<f32>> {
        self.forward(seq, tokens, true)
    }

    /// One token for each sequence of `batch` (`(sequence, token)`, each sequence
    /// at most once) in one graph; returns each one's logits, in `batch`'s order.
    /// The graph holds a row for every stream (an idle one computes a row nobody
    /// reads and writes a cell no mask shows), so one graph serves any set of
    /// sequences; each row attends over its own stream.
    ///
    /// # Errors
    /// [`Error::Invalid`] for an empty batch, an unknown or repeated sequence, a
    /// token outside the vocabulary, or a sequence whose cache is full; a model
    /// with unfused attention cannot run it.
    pub fn eval_seqs(&mut self, batch: &[(usize, u32)]) -> Result<Vec<Vec<f32>>> {
        let n = self.n_seq();
        let mut token = vec![None; n];
        for &(seq, t) in batch {
            self.check_seq(seq)?;
            if token[seq].replace(t).is_some() {
                return Err(Error::Invalid(format!("sequence {seq} appears twice in one step")));
            }
            if self.past[seq] + 1 > self.n_ctx {
                return Err(Error::Invalid(format!("sequence {seq}'s {}-position cache is full", self.n_ctx)));
            }
        }
        if batch.is_empty() {
            return Err(Error::Invalid("a step of no sequences".into()));
        }
        self.check_tokens(&batch.iter().map(|&(_, t)| t).collect::<Vec<_>>())?;
        let n_kv = batch.iter().map(|&(s, _)| self.n_kv_of(s, 1)).max().unwrap_or(KV_PAD);
        let key = StepKey { n, n_kv, all_logits: true, seq: 0, every_stream: true };
        self.step(key)?;
        let cells = self.stream_cells;
        let ids: Vec<i32> = token.iter().map(|t| t.map_or(0, |t| t as i32)).collect();
        let pos: Vec<i32> = (0..n).map(|s| if token[s].is_some() { self.past[s] as i32 } else { 0 }).collect();
        // an idle stream writes its spare cell, past the positions any mask shows
        let spare = cells - 1;
        let cell: Vec<i32> =
            (0..n).map(|s| (s * cells + if token[s].is_some() { self.past[s] } else { spare }) as i32).collect();
        let mask = |window: Option<usize>| {
            let mut m = vec![f32::NEG_INFINITY; n_kv * n];
            for (s, row) in m.chunks_mut(n_kv).enumerate() {
                if token[s].is_some() {
                    let last = self.past[s];
                    row[window.map_or(0, |w| (last + 1).saturating_sub(w))..=last].fill(0.0);
                }
            }
            m
        };
        let (m, m_swa) = (mask(None), self.hp.swa.as_ref().map(|w| mask(Some(w.window))));
        let st = &self.steps[&key];
        let (t, p, c, mk, ms) = (st.tokens, st.pos, st.cells, st.mask, st.mask_swa);
        self.ctx.set_data(t, &ids)?;
        self.ctx.set_data(p, &pos)?;
        self.ctx.set_data(c, &cell)?;
        self.ctx.set_data(mk, &m)?;
        if let (Some(ms), Some(m_swa)) = (ms, m_swa) {
            self.ctx.set_data(ms, &m_swa)?;
        }
        let logits = self.run_step(key)?;
        let nv = self.hp.n_vocab;
        let mut out = Vec::with_capacity(batch.len());
        for &(seq, _) in batch {
            out.push(logits[seq * nv..(seq + 1) * nv].to_vec());
            self.past[seq] += 1;
        }
        Ok(out)
    }

    pub(super) fn check_seq(&self, seq: usize) -> Result<()> {
        if seq >= self.past.len() {
            return Err(Error::Invalid(format!("sequence {seq}: the model holds {}", self.past.len())));
        }
        Ok(())
    }
}
