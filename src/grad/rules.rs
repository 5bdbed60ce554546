//! One gradient rule per differentiable op: given a node and the gradient `g`
//! of its output, the gradients of the operands that need one, built from
//! forward ops and the gradient ops of [`crate::op::BackOp`].

use super::versions::Node;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::op::{BinaryOp, GluOp, Op, UnaryOp};
use crate::tensor::TensorId;

/// `(operand slot, its gradient)` for every slot `wants` names.
pub(crate) fn operand_grads(
    ctx: &Context,
    node: &Node,
    g: TensorId,
    wants: &dyn Fn(usize) -> bool,
) -> Result<Vec<(usize, TensorId)>> {
    let t = ctx.tensor(node.id)?;
    let (y, ops) = (node.id, &node.operands);
    let src = |slot: usize| ops[slot];
    let ne = |id: TensorId| ctx.layout(id).map(|l| l.ne);
    let mut out = Vec::new();
    let mut put = |slot: usize, f: &dyn Fn() -> Result<TensorId>| -> Result<()> {
        if wants(slot) {
            out.push((slot, f()?));
        }
        Ok(())
    };
    match t.op() {
        Op::Leaf => {}
        Op::Reshape { .. } => put(0, &|| ctx.reshape(contiguous(ctx, g)?, &ne(src(0))?))?,
        Op::View { .. } => put(0, &|| view_back(ctx, node.id, src(0), g))?,
        Op::Transpose { .. } => put(0, &|| ctx.transpose(g))?,
        Op::Permute { axes, .. } => {
            let mut inverse = [0; 4];
            for (i, &a) in axes.iter().enumerate() {
                inverse[a] = i;
            }
            put(0, &|| ctx.permute(g, inverse))?
        }
        Op::Expand { .. } | Op::Repeat { .. } => put(0, &|| ctx.repeat_back(g, ne(src(0))?))?,
        Op::Cont { .. } | Op::Dup { .. } | Op::Cpy { .. } => put(0, &|| Ok(g))?,
        Op::Binary { op, .. } => {
            let (a, b) = (src(0), src(1));
            let to_b = |d: TensorId| reduce_to(ctx, d, b);
            match op {
                BinaryOp::Add => {
                    put(0, &|| Ok(g))?;
                    put(1, &|| to_b(g))?
                }
                BinaryOp::Sub => {
                    put(0, &|| Ok(g))?;
                    put(1, &|| to_b(ctx.neg(g)?))?
                }
                BinaryOp::Mul => {
                    put(0, &|| ctx.mul(g, b))?;
                    put(1, &|| to_b(ctx.mul(g, a)?))?
                }
                BinaryOp::Div => {
                    put(0, &|| ctx.div(g, b))?;
                    put(1, &|| to_b(ctx.neg(ctx.div(ctx.mul(g, y)?, b)?)?))?
                }
            }
        }
        Op::Scale { s, .. } => put(0, &|| ctx.scale(g, s))?,
        Op::Unary { op, .. } => {
            let a = src(0);
            put(0, &|| match op {
                // relu' is 1 where the output is positive: read the output, so relu_inplace keeps a gradient
                UnaryOp::Relu => ctx.unary_back(op, y, g),
                UnaryOp::Gelu | UnaryOp::Silu | UnaryOp::Sqr => ctx.unary_back(op, a, g),
                UnaryOp::Neg => ctx.neg(g),
                UnaryOp::Sqrt => ctx.div(ctx.scale(g, 0.5)?, y),
                UnaryOp::Exp => ctx.mul(g, y),
            })?
        }
        Op::Glu { op, .. } => {
            let (a, b) = (src(0), src(1));
            let f = match op {
                GluOp::Swiglu => UnaryOp::Silu,
                GluOp::Geglu => UnaryOp::Gelu,
            };
            put(0, &|| ctx.unary_back(f, a, ctx.mul(g, b)?))?;
            put(1, &|| ctx.mul(g, ctx.unary(f, a, false)?))?
        }
        Op::SumRows { .. } | Op::Sum { .. } => put(0, &|| ctx.repeat(g, src(0)))?,
        Op::Mean { .. } => {
            let n = ctx.layout(src(0))?.ne[0].max(1) as f32;
            put(0, &|| ctx.scale(ctx.repeat(g, src(0))?, 1.0 / n))?
        }
        Op::MulMat { .. } => {
            let (a, b) = (src(0), src(1));
            // out[m, n] = Σ_k a[k, m] b[k, n]: ga[k, m] = Σ_n b[k, n] g[m, n], gb[k, n] = Σ_m a[k, m] g[m, n]
            put(0, &|| {
                let ga = ctx.mul_mat(ctx.cont(ctx.transpose(b)?)?, ctx.cont(ctx.transpose(g)?)?)?;
                reduce_to(ctx, ga, a)
            })?;
            put(1, &|| ctx.mul_mat(ctx.cont(ctx.transpose(a)?)?, g))?
        }
        Op::GetRows { .. } => {
            let table = ctx.layout(src(0))?;
            if table.ne[2] != 1 || table.ne[3] != 1 {
                return Err(no_rule(ctx, node.id, "a table of more than two dims"));
            }
            put(0, &|| ctx.get_rows_back(contiguous(ctx, g)?, src(1), table.ne[1]))?
        }
        Op::RmsNorm { eps, w, .. } => {
            let a = src(0);
            match w {
                None => put(0, &|| ctx.rms_norm_back(a, g, eps))?,
                Some(_) => {
                    let w = src(1);
                    put(0, &|| ctx.rms_norm_back(a, ctx.mul(g, w)?, eps))?;
                    put(1, &|| reduce_to(ctx, ctx.mul(g, ctx.rms_norm(a, eps)?)?, w))?
                }
            }
        }
        Op::SoftMax { scale, max_bias, .. } => {
            if max_bias != 0.0 {
                return Err(no_rule(ctx, node.id, "ALiBi (max_bias != 0)"));
            }
            if wants(1) {
                return Err(no_rule(ctx, node.id, "a mask that needs a gradient"));
            }
            // dx = scale · y ⊙ (g − Σ_row g ⊙ y)
            put(0, &|| {
                let dot = ctx.sum_rows(ctx.mul(g, y)?)?;
                ctx.scale(ctx.mul(y, ctx.sub(contiguous(ctx, g)?, dot)?)?, scale)
            })?
        }
        Op::CrossEntropyLoss { .. } => {
            if wants(1) {
                return Err(no_rule(ctx, node.id, "labels that need a gradient"));
            }
            let (logits, labels) = (src(0), src(1));
            let rows = ctx.layout(logits)?.nrows().max(1) as f32;
            // d/dlogits = (softmax(logits) − labels) · g / rows
            put(0, &|| ctx.mul(ctx.scale(ctx.sub(ctx.soft_max(logits)?, labels)?, 1.0 / rows)?, g))?
        }
        Op::Rope { p, freq, .. } => {
            let freq = freq.map(|_| src(2));
            put(0, &|| ctx.rope_back(g, src(1), freq, p))?
        }
        Op::Concat { dim, .. } => {
            let (la, lg) = (ctx.layout(src(0))?, ctx.layout(g)?);
            let nb = [lg.nb[1], lg.nb[2], lg.nb[3]];
            let mut ne_b = lg.ne;
            ne_b[dim] -= la.ne[dim];
            put(0, &|| ctx.view_4d(g, la.ne, nb, 0))?;
            put(1, &|| ctx.view_4d(g, ne_b, nb, la.ne[dim] as usize * lg.nb[dim]))?
        }
        Op::Argmax { .. }
        | Op::CountEqual { .. }
        | Op::SetRows { .. }
        | Op::Norm { .. }
        | Op::DiagMaskInf { .. }
        | Op::FlashAttn { .. }
        | Op::Back(_) => return Err(no_rule(ctx, node.id, "no gradient rule yet")),
    }
    Ok(out)
}

/// `d` (a gradient of `like`'s broadcast) summed into `like`'s shape, or `d`
/// itself when the shapes agree.
fn reduce_to(ctx: &Context, d: TensorId, like: TensorId) -> Result<TensorId> {
    let (ld, ll) = (ctx.layout(d)?, ctx.layout(like)?);
    if ld.ne == ll.ne {
        Ok(d)
    } else {
        ctx.repeat_back(d, ll.ne)
    }
}

/// `g`, copied into a packed tensor unless it is one.
fn contiguous(ctx: &Context, g: TensorId) -> Result<TensorId> {
    if ctx.layout(g)?.is_contiguous() {
        Ok(g)
    } else {
        ctx.cont(g)
    }
}

/// The gradient of `src` through the view `view` of it.
fn view_back(ctx: &Context, view: TensorId, src: TensorId, g: TensorId) -> Result<TensorId> {
    let (v, s) = (ctx.tensor(view)?, ctx.tensor(src)?);
    let offset =
        v.view_offs().checked_sub(s.view_offs()).ok_or_else(|| no_rule(ctx, view, "a view before its source"))?;
    if v.layout().ne == s.layout().ne && offset == 0 && v.layout().same_places(s.layout()) {
        return Ok(g);
    }
    if !s.layout().is_contiguous() {
        return Err(no_rule(ctx, view, "a view of a strided tensor"));
    }
    ctx.view_back(g, s.layout().ne, v.layout().nb, offset)
}

fn no_rule(ctx: &Context, id: TensorId, why: &str) -> Error {
    let op = ctx.tensor(id).map(|t| t.op().name()).unwrap_or("?");
    Error::Invalid(format!("backward: {op} ({}) has no gradient: {why}", ctx.label(id)))
}
