//! PyTorch's type promotion for rgml's types, the rule [`Context::promote`]
//! turns on (ggml's rule, the result takes the first operand's type, stays
//! the default because llama.cpp's graphs rely on it).
//!
//! Categories run int < float (rgml has no bool or complex); across
//! categories the higher wins (`I64 + F16 → F16`), within one the wider
//! (`I8 + I32 → I32`, `F16 + F32 → F32`), and F16 with BF16, neither of which
//! holds the other, meet at F32. A block-quantized type takes part as the F32
//! it computes as. A scalar (`scale`'s `s`) never raises a tensor's type.
//!
//! [`Context::promote`]: crate::Context::promote

use super::DType;

/// The promotion category of a type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Category {
    /// Signed integers (I8 … I64).
    Int,
    /// Floating point, the quantized types included (they compute as F32).
    Float,
}

impl DType {
    /// The type an op computes this one as: F32 for a block-quantized type,
    /// the type itself otherwise.
    pub const fn compute_type(self) -> DType {
        if self.is_quantized() {
            DType::F32
        } else {
            self
        }
    }

    /// The promotion category of the type.
    pub const fn category(self) -> Category {
        match self.compute_type() {
            DType::I8 | DType::I16 | DType::I32 | DType::I64 => Category::Int,
            _ => Category::Float,
        }
    }

    /// The result type of a binary op on `self` and `other` under PyTorch's
    /// category rule (`torch.promote_types`); symmetric. See the module docs.
    pub const fn promote(self, other: DType) -> DType {
        let (a, b) = (self.compute_type(), other.compute_type());
        if a as u8 == b as u8 {
            return a;
        }
        match (a.category(), b.category()) {
            (Category::Int, Category::Float) => b,
            (Category::Float, Category::Int) => a,
            // two ints: the wider (all signed)
            (Category::Int, Category::Int) => {
                if a.type_size() >= b.type_size() {
                    a
                } else {
                    b
                }
            }
            (Category::Float, Category::Float) => match (a, b) {
                (DType::F64, _) | (_, DType::F64) => DType::F64,
                // F32 beside a 16-bit float, or F16 beside BF16
                _ => DType::F32,
            },
        }
    }

    /// True when a value of `other` becomes one of `self` as promotion would
    /// have it, i.e. `self` is already the promoted type of the two: false
    /// where a mixed op writing `self` rounds `other` (F32 into F16, F16 into
    /// BF16, F64 into F32).
    pub const fn holds(self, other: DType) -> bool {
        self.promote(other) as u8 == self as u8
    }
}
