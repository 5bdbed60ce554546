//! [`Graph::lint`]: what a graph computes that its author may not have meant.
//! For now one finding: a mixed-type elementwise op built without type
//! promotion whose result type rounds an operand (ggml's rule: `add(f16, f32)`
//! is F16, `add(f32, f16)` F32, so the answer depends on operand order).

use std::fmt;

use super::Graph;
use crate::context::Context;
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::TensorId;

/// A finding of [`Graph::lint`]: node `node` (op `op`) writes `result`, a
/// type that rounds its operand `operand` of type `operand_type` (one the
/// promoted type would hold, [`DType::holds`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LintWarning {
    /// The node.
    pub node: TensorId,
    /// Its label (name or id).
    pub label: String,
    /// Its op's name.
    pub op: &'static str,
    /// The rounded operand.
    pub operand: TensorId,
    /// The operand's type.
    pub operand_type: DType,
    /// The node's result type.
    pub result: DType,
}

impl fmt::Display for LintWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): operand {} of type {} is rounded to the result's {}; with the operands swapped the result \
             would be {} (cast explicitly, or build with Context::promote(true) for {})",
            self.label,
            self.op,
            self.operand,
            self.operand_type,
            self.result,
            self.operand_type,
            self.result.promote(self.operand_type),
        )
    }
}

impl Graph {
    /// The graph's mixed-type elementwise nodes whose result type rounds an
    /// operand (see [`LintWarning`]), in execution order. Nodes built with
    /// [`Context::promote`] on appear only when in place (their destination
    /// keeps its type, as PyTorch's `a += b`); the others' operands were cast first.
    ///
    /// # Errors
    /// A graph of another context.
    pub fn lint(&self, ctx: &Context) -> Result<Vec<LintWarning>> {
        self.check_context(ctx)?;
        let mut out = Vec::new();
        for &node in &self.nodes {
            let t = ctx.tensor(node)?;
            let result = t.layout.dtype;
            for operand in t.op().elementwise_operands() {
                let operand_type = ctx.layout(operand)?.dtype;
                if !result.holds(operand_type) {
                    let (label, op) = (ctx.label(node), t.op().name());
                    out.push(LintWarning { node, label, op, operand, operand_type, result });
                }
            }
        }
        Ok(out)
    }
}
