//! The functions and parameters ops take: [`UnaryOp`], [`BinaryOp`],
//! [`GluOp`] and [`RopeParams`].

/// Elementwise functions of one input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `max(x, 0)`.
    Relu,
    /// GELU, tanh approximation (ggml's `gelu`).
    Gelu,
    /// `x * sigmoid(x)`.
    Silu,
    /// `-x`.
    Neg,
    /// `x * x`.
    Sqr,
    /// `sqrt(x)`.
    Sqrt,
    /// `exp(x)`.
    Exp,
    /// `1 / (1 + exp(-x))`.
    Sigmoid,
}

impl UnaryOp {
    /// Every unary op.
    pub const ALL: [UnaryOp; 8] = [
        UnaryOp::Relu,
        UnaryOp::Gelu,
        UnaryOp::Silu,
        UnaryOp::Neg,
        UnaryOp::Sqr,
        UnaryOp::Sqrt,
        UnaryOp::Exp,
        UnaryOp::Sigmoid,
    ];

    /// ggml's name.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Relu => "relu",
            UnaryOp::Gelu => "gelu",
            UnaryOp::Silu => "silu",
            UnaryOp::Neg => "neg",
            UnaryOp::Sqr => "sqr",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Exp => "exp",
            UnaryOp::Sigmoid => "sigmoid",
        }
    }
}

/// Elementwise functions of two inputs (the second broadcast into the first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
}

impl BinaryOp {
    /// ggml's name.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
        }
    }
}

/// Parameters of the rotary embedding op: ggml's `rope_ext` arguments.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeParams {
    /// Number of leading values of each row that are rotated (even, at most `ne0`);
    /// the rest pass through unchanged.
    pub n_dims: i32,
    /// [`RopeParams::NORMAL`] (rotate adjacent pairs) or [`RopeParams::NEOX`]
    /// (rotate `x[i]` with `x[i + n_dims/2]`).
    pub mode: i32,
    /// The training context length YaRN's correction dims are computed for.
    pub n_ctx_orig: i32,
    /// Base of the frequencies: pair `i` turns at `freq_base^(-2i/n_dims)` per position.
    pub freq_base: f32,
    /// Position interpolation factor (1: none).
    pub freq_scale: f32,
    /// YaRN's extrapolation mix (0: plain interpolation, no YaRN).
    pub ext_factor: f32,
    /// Magnitude scale of the rotated values.
    pub attn_factor: f32,
    /// YaRN's fast correction boundary (in rotations).
    pub beta_fast: f32,
    /// YaRN's slow correction boundary (in rotations).
    pub beta_slow: f32,
}

impl RopeParams {
    /// Floating-point operations of rotating (or rotating back) into `out`: six
    /// per rotated pair of every row.
    pub fn flops(&self, out: &crate::layout::Layout) -> u64 {
        6 * (out.nrows() as u64) * (self.n_dims.max(0) as u64 / 2)
    }

    /// ggml's `GGML_ROPE_TYPE_NORMAL`: rotate `(x[2i], x[2i+1])`.
    pub const NORMAL: i32 = 0;
    /// ggml's `GGML_ROPE_TYPE_NEOX`: rotate `(x[i], x[i + n_dims/2])`.
    pub const NEOX: i32 = 2;

    /// `n_dims` and `mode` with the defaults of `ggml_rope`: `freq_base` 10000,
    /// `freq_scale` 1, `ext_factor` 0, `attn_factor` 1, `beta_fast` 32,
    /// `beta_slow` 1, `n_ctx_orig` 0 (the betas only matter when `ext_factor != 0`).
    pub fn new(n_dims: i32, mode: i32) -> RopeParams {
        RopeParams {
            n_dims,
            mode,
            n_ctx_orig: 0,
            freq_base: 10000.0,
            freq_scale: 1.0,
            ext_factor: 0.0,
            attn_factor: 1.0,
            beta_fast: 32.0,
            beta_slow: 1.0,
        }
    }
}

/// Gated linear units: `f(a) * b` elementwise (ggml's `glu` ops, split form).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GluOp {
    /// `silu(a) * b` (ggml's `swiglu`): the gated FFN of Llama-style models.
    Swiglu,
    /// `gelu(a) * b` (ggml's `geglu`, tanh GELU): Gemma's gated FFN.
    Geglu,
    /// ggml's `swiglu_oai` with gpt-oss's constants: `x = min(a, 7)`,
    /// `y = clamp(b, -7, 7)`, `x·sigmoid(1.702·x)·(y + 1)`.
    SwigluOai,
}

impl GluOp {
    /// [`GluOp::SwigluOai`]'s sigmoid factor (`alpha`).
    pub const OAI_ALPHA: f32 = 1.702;
    /// [`GluOp::SwigluOai`]'s clamp (`limit`).
    pub const OAI_LIMIT: f32 = 7.0;
}

impl GluOp {
    /// ggml's name.
    pub fn name(self) -> &'static str {
        match self {
            GluOp::Swiglu => "swiglu",
            GluOp::Geglu => "geglu",
            GluOp::SwigluOai => "swiglu_oai",
        }
    }
}
