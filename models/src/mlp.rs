//! A two-layer MLP built from code: `y = W2 · gelu(W1 · x + b1) + b2`, with
//! ggml's `mul_mat` convention (weights stored as `[n_in, n_out]` rows).

use rgml::{Context, DType, Graph, Result, TensorId};

/// The MLP's tensors and its forward graph.
pub struct Mlp {
    /// All tensors.
    pub ctx: Context,
    /// Input `[n_embd, n_tokens]` (flagged input; data set in the context).
    pub x: TensorId,
    /// First layer weights `[n_embd, n_hidden]` and bias `[n_hidden]`.
    pub w1: TensorId,
    /// First layer bias.
    pub b1: TensorId,
    /// Second layer weights `[n_hidden, n_embd]`.
    pub w2: TensorId,
    /// Second layer bias.
    pub b2: TensorId,
    /// Output `[n_embd, n_tokens]`.
    pub out: TensorId,
    /// The forward graph.
    pub graph: Graph,
}

impl Mlp {
    /// Builds the MLP for `n_tokens` tokens. Weights and input are zero until set
    /// (large ones are lazily mapped, so shape-only use costs no memory).
    pub fn build(n_embd: i64, n_hidden: i64, n_tokens: i64) -> Result<Mlp> {
        let mut ctx = Context::new();
        let x = ctx.new_tensor_2d(DType::F32, n_embd, n_tokens)?;
        ctx.set_name(x, "x")?;
        ctx.set_input(x)?;
        let w1 = ctx.new_tensor_2d(DType::F32, n_embd, n_hidden)?;
        ctx.set_name(w1, "w1")?;
        let b1 = ctx.new_tensor_1d(DType::F32, n_hidden)?;
        ctx.set_name(b1, "b1")?;
        let w2 = ctx.new_tensor_2d(DType::F32, n_hidden, n_embd)?;
        ctx.set_name(w2, "w2")?;
        let b2 = ctx.new_tensor_1d(DType::F32, n_embd)?;
        ctx.set_name(b2, "b2")?;
        let h = ctx.mul_mat(w1, x)?;
        ctx.set_name(h, "h = w1 x")?;
        let h = ctx.add(h, b1)?;
        ctx.set_name(h, "h + b1")?;
        let h = ctx.gelu(h)?;
        ctx.set_name(h, "gelu")?;
        let y = ctx.mul_mat(w2, h)?;
        ctx.set_name(y, "y = w2 h")?;
        let out = ctx.add(y, b2)?;
        ctx.set_name(out, "out")?;
        ctx.set_output(out)?;
        let graph = Graph::build(&ctx, &[out])?;
        Ok(Mlp { ctx, x, w1, b1, w2, b2, out, graph })
    }
}
