//! The forward graph of an embedding model for one input length: the network's final
//! hidden states (`[n_embd, n_tokens]`) without a KV cache. An encoder runs its layers
//! ([`crate::transformer::encoder_blocks`]); a decoder runs its architecture's block over
//! the input's own keys ([`Block`] uncached, as fine-tuning does) and its final norm,
//! the states llama.cpp pools (`t_embd`).

use rgml::{Backend, Context, DType, Graph, Plan, Result, TensorId};

use crate::model::kv::causal_mask;
use crate::transformer::blocks::{embed_tokens, Block};
use crate::transformer::encoder::{EncoderGlobals, EncoderHparams, EncoderLayer};
use crate::transformer::encoder_blocks::EncoderBlock;
use crate::transformer::hparams::Hparams;
use crate::transformer::weights::{Globals, Layer};
use crate::transformer::{Architecture, EncoderArchitecture};

/// The network of an embedding model, its tensors looked up and checked.
pub(super) enum Net {
    /// An encoder (BERT and kin).
    Encoder { arch: &'static EncoderArchitecture, hp: EncoderHparams, g: EncoderGlobals, layers: Vec<EncoderLayer> },
    /// A decoder of [`crate::arch::ARCHS`], causal unless its file says otherwise.
    Decoder { arch: &'static Architecture, hp: Box<Hparams>, g: Globals, layers: Vec<Layer>, causal: bool },
}

impl Net {
    /// Attention sees only earlier tokens.
    pub fn causal(&self) -> bool {
        match self {
            Net::Encoder { hp, .. } => hp.causal,
            Net::Decoder { causal, .. } => *causal,
        }
    }

    /// The sliding window of a decoder's windowed layers.
    fn window(&self) -> Option<usize> {
        match self {
            Net::Decoder { hp, .. } => hp.swa.as_ref().map(|w| w.window),
            Net::Encoder { .. } => None,
        }
    }
}

/// The graph for one input length, planned, and its inputs.
pub(super) struct Step {
    pub graph: Graph,
    pub plan: Plan,
    pub n: usize,
    tokens: TensorId,
    pos: TensorId,
    /// The tokens' types (an encoder's; all 0).
    types: Option<TensorId>,
    mask: TensorId,
    mask_swa: Option<TensorId>,
    /// The final hidden states, `[n_embd, n]`.
    pub hidden: TensorId,
}

impl Step {
    /// Builds and plans the graph of `net` for `n` tokens in `c`.
    pub fn build<B: Backend>(c: &mut Context, net: &Net, n: usize, backend: &B) -> Result<Step> {
        let nt = n as i64;
        let tokens = c.new_tensor_1d(DType::I32, nt)?;
        let pos = c.new_tensor_1d(DType::I32, nt)?;
        let mask = c.new_tensor_2d(DType::F32, nt, nt)?;
        let types = match net {
            Net::Encoder { .. } => Some(c.new_tensor_1d(DType::I32, nt)?),
            Net::Decoder { .. } => None,
        };
        let mask_swa = match net.window() {
            Some(_) => Some(c.new_tensor_2d(DType::F32, nt, nt)?),
            None => None,
        };
        // set anew before every run: a backend uploads inputs each time (weights once)
        for t in [tokens, pos, mask].into_iter().chain(types).chain(mask_swa) {
            c.set_input(t)?;
        }
        let hidden = match net {
            Net::Encoder { arch, hp, g, layers } => {
                let b = EncoderBlock { c: &*c, hp, pos, mask, n_tokens: nt };
                let mut x = b.embeddings(g, tokens, types.unwrap_or(tokens))?;
                for l in layers {
                    x = (arch.block)(&b, l, x)?;
                }
                x
            }
            Net::Decoder { arch, hp, g, layers, .. } => {
                let mut x = embed_tokens(c, hp, g, tokens)?;
                let mut b = Block::uncached(&mut *c, hp.as_ref(), pos, (mask, mask_swa), n, None);
                for l in layers {
                    x = (arch.block)(&mut b, l, x)?;
                }
                b.norm(x, g.output_norm)?
            }
        };
        c.set_name(hidden, "result_embd")?;
        c.set_output(hidden)?;
        let graph = Graph::build(c, &[hidden])?;
        let plan = backend.plan(c, &graph)?;
        Ok(Step { graph, plan, n, tokens, pos, types, mask, mask_swa, hidden })
    }

    /// The inputs of a run on `tokens` (as many as the step's length) into `c`.
    pub fn set_inputs(&self, c: &mut Context, net: &Net, tokens: &[u32]) -> Result<()> {
        let n = self.n;
        let ids: Vec<i32> = tokens.iter().map(|&t| t as i32).collect();
        let pos: Vec<i32> = (0..n as i32).collect();
        c.set_data(self.tokens, &ids)?;
        c.set_data(self.pos, &pos)?;
        if let Some(t) = self.types {
            c.set_data(t, &vec![0i32; n])?;
        }
        // causal: token i sees 0..=i (and with a window only the last `window` of them)
        let lasts: Vec<Option<usize>> = (0..n).map(|i| Some(if net.causal() { i } else { n - 1 })).collect();
        c.set_data(self.mask, &causal_mask(n, &lasts, None))?;
        if let (Some(m), Some(w)) = (self.mask_swa, net.window()) {
            c.set_data(m, &causal_mask(n, &lasts, Some(w)))?;
        }
        Ok(())
    }
}
