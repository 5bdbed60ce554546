//! The CUDA C sources (`kernels/*.cu`, embedded at build time) and the
//! `#[repr(C)]` argument structs the kernels take by value.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;

/// The prelude every kernel source is compiled with (prepended): type codes,
/// f16/bf16 conversions, typed loads and stores, index helpers, block reductions.
pub const PRELUDE: &str = include_str!("../../../kernels/prelude.cuh");

/// The block-type header (`kernels/quant.cuh`): block structs, per-value
/// dequantization, the 32-value quantizers.
pub const QUANT: &str = include_str!("../../../kernels/quant.cuh");

/// The i-quant grids (`kernels/iq_grids.cuh`, generated from the CPU's tables:
/// see `grids.rs`), in front of `quant.cuh`.
pub const IQ_GRIDS: &str = include_str!("../../../kernels/iq_grids.cuh");

/// A header compiled in front of some modules (after the prelude).
#[derive(Clone, Copy, Debug)]
pub struct Header {
    /// Its file under `kernels/`.
    pub file: &'static str,
    /// Its text.
    pub source: &'static str,
    /// The modules it goes to (a module's own names must not clash with it).
    pub modules: &'static [&'static str],
}

/// The headers, in the order they are prepended.
pub const HEADERS: &[Header] = &[
    Header { file: "iq_grids.cuh", source: IQ_GRIDS, modules: &["copy", "rows", "attention", "moe"] },
    Header { file: "quant.cuh", source: QUANT, modules: &["copy", "rows", "attention", "moe"] },
    Header { file: "mmvq_blocks.cuh", source: include_str!("../../../kernels/mmvq_blocks.cuh"), modules: &["mmvq"] },
    Header { file: "moe.cuh", source: include_str!("../../../kernels/moe.cuh"), modules: &["mmvq", "moe"] },
];

/// Every kernel module: `(name, source)`, one per op family. The name is the
/// file stem under `kernels/`.
pub const MODULES: &[(&str, &str)] = &[
    ("binary", include_str!("../../../kernels/binary.cu")),
    ("unary", include_str!("../../../kernels/unary.cu")),
    ("copy", include_str!("../../../kernels/copy.cu")),
    ("reduce", include_str!("../../../kernels/reduce.cu")),
    ("back", include_str!("../../../kernels/back.cu")),
    ("norm", include_str!("../../../kernels/norm.cu")),
    ("softmax", include_str!("../../../kernels/softmax.cu")),
    ("attention", include_str!("../../../kernels/attention.cu")),
    ("rope", include_str!("../../../kernels/rope.cu")),
    ("rows", include_str!("../../../kernels/rows.cu")),
    ("shape", include_str!("../../../kernels/shape.cu")),
    ("quantize_act", include_str!("../../../kernels/quantize_act.cu")),
    ("mmvq", include_str!("../../../kernels/mmvq.cu")),
    ("sort", include_str!("../../../kernels/sort.cu")),
    ("moe", include_str!("../../../kernels/moe.cu")),
];

/// Modules compiled from another module's file with a define in front:
/// `(name, file module, define)`. The dot kernels come one weight type per
/// module, and those of `mul_mat_id` in modules of their own, so a model
/// compiles only the types and ops it has.
pub const VARIANTS: &[(&str, &str, &str)] = &[
    ("mmvq_q4_0", "mmvq", "#define RG_MMVQ_TYPE RG_Q4_0"),
    ("mmvq_q4_1", "mmvq", "#define RG_MMVQ_TYPE RG_Q4_1"),
    ("mmvq_q5_0", "mmvq", "#define RG_MMVQ_TYPE RG_Q5_0"),
    ("mmvq_q5_1", "mmvq", "#define RG_MMVQ_TYPE RG_Q5_1"),
    ("mmvq_q8_0", "mmvq", "#define RG_MMVQ_TYPE RG_Q8_0"),
    ("mmvq_q2_k", "mmvq", "#define RG_MMVQ_TYPE RG_Q2_K"),
    ("mmvq_q3_k", "mmvq", "#define RG_MMVQ_TYPE RG_Q3_K"),
    ("mmvq_q4_k", "mmvq", "#define RG_MMVQ_TYPE RG_Q4_K"),
    ("mmvq_q5_k", "mmvq", "#define RG_MMVQ_TYPE RG_Q5_K"),
    ("mmvq_q6_k", "mmvq", "#define RG_MMVQ_TYPE RG_Q6_K"),
    ("mmvq_id_q4_0", "mmvq", "#define RG_MMVQ_TYPE RG_Q4_0\n#define RG_MMVQ_ID"),
    ("mmvq_id_q4_1", "mmvq", "#define RG_MMVQ_TYPE RG_Q4_1\n#define RG_MMVQ_ID"),
    ("mmvq_id_q5_0", "mmvq", "#define RG_MMVQ_TYPE RG_Q5_0\n#define RG_MMVQ_ID"),
    ("mmvq_id_q5_1", "mmvq", "#define RG_MMVQ_TYPE RG_Q5_1\n#define RG_MMVQ_ID"),
    ("mmvq_id_q8_0", "mmvq", "#define RG_MMVQ_TYPE RG_Q8_0\n#define RG_MMVQ_ID"),
    ("mmvq_id_q2_k", "mmvq", "#define RG_MMVQ_TYPE RG_Q2_K\n#define RG_MMVQ_ID"),
    ("mmvq_id_q3_k", "mmvq", "#define RG_MMVQ_TYPE RG_Q3_K\n#define RG_MMVQ_ID"),
    ("mmvq_id_q4_k", "mmvq", "#define RG_MMVQ_TYPE RG_Q4_K\n#define RG_MMVQ_ID"),
    ("mmvq_id_q5_k", "mmvq", "#define RG_MMVQ_TYPE RG_Q5_K\n#define RG_MMVQ_ID"),
    ("mmvq_id_q6_k", "mmvq", "#define RG_MMVQ_TYPE RG_Q6_K\n#define RG_MMVQ_ID"),
];

/// The source of module `name` as NVRTC compiles it: the prelude, then (for
/// one of the [`VARIANTS`]) its define, then the [`HEADERS`] listed for its
/// file, then the file.
pub fn module_source(name: &str) -> Result<String> {
    let (file, define) = match VARIANTS.iter().find(|(n, _, _)| *n == name) {
        Some(&(_, file, define)) => (file, define),
        None => (name, ""),
    };
    let (_, src) = MODULES
        .iter()
        .find(|(n, _)| *n == file)
        .ok_or_else(|| Error::internal(format!("no CUDA kernel module named {name:?}")))?;
    let headers: String = HEADERS
        .iter()
        .filter(|h| h.modules.contains(&file))
        .map(|h| format!("\n#line 1 \"{}\"\n{}", h.file, h.source))
        .collect();
    Ok(format!("{PRELUDE}\n{define}{headers}\n#line 1 \"{file}.cu\"\n{src}"))
}

/// Binary op codes of `rg_binary*` (`kernels/binary.cu`).
pub const BINARY_ADD: i32 = 0;
/// Subtraction.
pub const BINARY_SUB: i32 = 1;
/// Multiplication.
pub const BINARY_MUL: i32 = 2;
/// Division.
pub const BINARY_DIV: i32 = 3;

/// Op code of `rg_unary*` (`kernels/unary.cu`) for a unary op.
pub fn unary_code(op: crate::tensor::UnaryOp) -> i32 {
    use crate::tensor::UnaryOp::*;
    match op {
        Relu => 0,
        Gelu => 1,
        Silu => 2,
        Neg => 3,
        Sqr => 4,
        Sqrt => 5,
        Exp => 6,
        Sigmoid => 8,
    }
}
/// Op code of `rg_unary*` for `scale` (the factor is the `param` argument).
pub const UNARY_SCALE: i32 = 7;

/// Op code of `rg_glu` (`kernels/unary.cu`) for a gated linear unit.
pub fn glu_code(op: crate::op::GluOp) -> i32 {
    match op {
        crate::op::GluOp::Swiglu => 0,
        crate::op::GluOp::Geglu => 1,
        crate::op::GluOp::SwigluOai => 2,
    }
}

/// Whether the CUDA backend handles `dtype` at all: false for F64, which no
/// kernel reads or writes. I8, I16 and I64 have no type code either but are
/// left to each op (a same-type contiguous copy moves them; `count_equal`
/// writes its I64 count).
pub fn handles(dtype: DType) -> bool {
    type_code("", dtype).is_ok() || matches!(dtype, DType::I8 | DType::I16 | DType::I64)
}

/// The prelude's type code (`RG_F32`…) of a type the kernels read, or an
/// `Unsupported` error naming `op`.
pub fn type_code(op: &'static str, dtype: DType) -> Result<i32> {
    Ok(match dtype {
        DType::F32 => 0,
        DType::F16 => 1,
        DType::BF16 => 2,
        DType::I32 => 3,
        DType::Q4_0 => 4,
        DType::Q8_0 => 5,
        DType::Q4_1 => 6,
        DType::Q5_0 => 7,
        DType::Q5_1 => 8,
        DType::Q8_1 => 9,
        DType::Q2_K => 10,
        DType::Q3_K => 11,
        DType::Q4_K => 12,
        DType::Q5_K => 13,
        DType::Q6_K => 14,
        DType::Q8_K => 15,
        DType::IQ4_NL => 16,
        DType::IQ4_XS => 17,
        DType::MXFP4 => 18,
        DType::IQ1_S => 19,
        DType::IQ1_M => 20,
        DType::IQ2_XXS => 21,
        DType::IQ2_XS => 22,
        DType::IQ2_S => 23,
        DType::IQ3_XXS => 24,
        DType::IQ3_S => 25,
        DType::TQ1_0 => 26,
        DType::TQ2_0 => 27,
        // no CUDA kernels read these types: graphs using them are refused up
        // front (`exec::check_types`, see `handles`)
        DType::I8 | DType::I16 | DType::I64 | DType::F64 => return Err(Error::Unsupported { op, dtype }),
    })
}

/// One operand's shape and byte strides, as the kernels' `RgT` (72 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KTensor {
    /// Element counts.
    pub ne: [i64; 4],
    /// Byte strides.
    pub nb: [i64; 4],
    /// Type code ([`type_code`]).
    pub dtype: i32,
    /// For block types, the dim whose values are stored in blocks
    /// ([`Layout::block_dim`]); 0 for plain types.
    pub block_dim: i32,
}

impl KTensor {
    /// The kernel view of `l`; errors on a type the kernels do not read, or on
    /// a block type whose values are not blocked along dim 0.
    pub fn of(op: &'static str, l: &Layout) -> Result<KTensor> {
        let dtype = type_code(op, l.dtype)?;
        if l.dtype.block_size() > 1 && l.block_dim != 0 {
            return Err(Error::Unsupported { op, dtype: l.dtype });
        }
        Ok(KTensor { ne: l.ne, nb: l.nb.map(|n| n as i64), dtype, block_dim: 0 })
    }
    /// The kernel view of `l` for the kernels that read block types blocked
    /// along any dim (`rgq_get` in `kernels/quant.cuh`).
    pub fn of_blocked(op: &'static str, l: &Layout) -> Result<KTensor> {
        let dtype = type_code(op, l.dtype)?;
        let block_dim = if l.dtype.is_quantized() { l.block_dim } else { 0 };
        if block_dim > 3 {
            return Err(Error::internal(format!("block_dim {block_dim} of a {} layout", l.dtype)));
        }
        Ok(KTensor { ne: l.ne, nb: l.nb.map(|n| n as i64), dtype, block_dim: block_dim as i32 })
    }
}

/// Rope parameters as the kernels' `RgRope` (32 bytes), computed on the host
/// exactly as the CPU kernel computes them.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KRope {
    /// Rotated values per row.
    pub n_dims: i32,
    /// 1 for NeoX pairing.
    pub neox: i32,
    /// `freq_base^(-2/n_dims)`.
    pub theta_scale: f32,
    /// Position interpolation factor.
    pub freq_scale: f32,
    /// YaRN extrapolation mix.
    pub ext_factor: f32,
    /// Magnitude scale.
    pub attn_factor: f32,
    /// YaRN correction dims, low.
    pub corr0: f32,
    /// YaRN correction dims, high.
    pub corr1: f32,
    /// 1, or -1 for `rope_back` (the angles of the negated positions).
    pub pos_sign: i32,
}

impl KRope {
    /// The kernel parameters of `p` (as `src/backend/cpu/rope.rs` derives them).
    pub fn of(p: &crate::tensor::RopeParams) -> KRope {
        let corr_dim = |n_rot: f32| {
            p.n_dims as f32 * (p.n_ctx_orig as f32 / (n_rot * 2.0 * std::f32::consts::PI)).ln()
                / (2.0 * p.freq_base.ln())
        };
        let start = corr_dim(p.beta_fast).floor();
        let end = corr_dim(p.beta_slow).ceil();
        let top = (p.n_dims - 1) as f32;
        KRope {
            n_dims: p.n_dims,
            neox: i32::from(p.mode == crate::tensor::RopeParams::NEOX),
            theta_scale: p.freq_base.powf(-2.0 / p.n_dims as f32),
            freq_scale: p.freq_scale,
            ext_factor: p.ext_factor,
            attn_factor: p.attn_factor,
            corr0: if 0.0 > start { 0.0 } else { start },
            corr1: if top < end { top } else { end },
            pos_sign: 1,
        }
    }
    /// These parameters rotating the other way when `back` (`rope_back`).
    pub fn back(self, back: bool) -> KRope {
        KRope { pos_sign: if back { -1 } else { 1 }, ..self }
    }
}

/// ALiBi parameters `(n_head_log2, m0, m1)` for `rg_soft_max`, as ggml
/// computes them; `n_head_log2 == 0` means no ALiBi (every slope 1).
pub fn alibi_params(n_head: i64, max_bias: f32) -> (i32, f32, f32) {
    let n_head = u32::try_from(n_head).unwrap_or(u32::MAX);
    if max_bias <= 0.0 || n_head == 0 {
        return (0, 1.0, 1.0);
    }
    let n_head_log2 = 1u32 << (f64::from(n_head).log2().floor() as u32);
    let m0 = 2.0f32.powf(-max_bias / n_head_log2 as f32);
    let m1 = 2.0f32.powf(-(max_bias / 2.0) / n_head_log2 as f32);
    (n_head_log2 as i32, m0, m1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_sizes_match_the_prelude() {
        assert_eq!(std::mem::size_of::<KTensor>(), 72);
        assert_eq!(std::mem::size_of::<KRope>(), 36);
    }

    #[test]
    fn type_codes_match_the_prelude() {
        use DType::*;
        let all = [F32, F16, BF16, I32, Q4_0, Q8_0, Q4_1, Q5_0, Q5_1, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K];
        for d in all {
            let name = format!("{d:?}").to_uppercase();
            let line = format!("#define RG_{name} {}", type_code("test", d).unwrap());
            assert!(PRELUDE.lines().any(|l| l.trim() == line), "prelude lacks {line:?}");
            // quant.cuh's range checks: the block types are exactly 4..=15, the k-quants 10..=15
            let code = type_code("test", d).unwrap();
            assert_eq!(d.is_quantized(), (4..=15).contains(&code), "{d:?}");
            assert_eq!(d.block_size() == 256, (10..=15).contains(&code), "{d:?}");
        }
        assert!(type_code("test", I8).is_err() && type_code("test", I16).is_err());
    }

    #[test]
    fn headers_go_to_the_listed_modules_only() {
        for (n, _) in MODULES {
            let src = module_source(n).unwrap();
            for h in HEADERS {
                assert_eq!(src.contains(h.source), h.modules.contains(n), "{n} and {}", h.file);
            }
        }
        let t = Layout::contiguous(DType::Q4_K, [256, 2, 1, 1]).unwrap();
        let t = Layout { ne: [2, 256, 1, 1], nb: [t.nb[1], t.nb[0], t.nb[2], t.nb[3]], block_dim: 1, ..t };
        assert!(KTensor::of("x", &t).is_err());
        assert_eq!(KTensor::of_blocked("x", &t).unwrap().block_dim, 1);
    }

    #[test]
    fn every_kernel_file_is_listed() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| {
                let p = e.ok()?.path();
                (p.extension()? == "cu").then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
            })
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> = MODULES.iter().map(|(n, _)| n.to_string()).collect();
        listed.sort();
        assert_eq!(on_disk, listed);
        for (n, _) in MODULES {
            assert!(module_source(n).unwrap().starts_with(PRELUDE));
        }
        assert!(module_source("nope").is_err());
        // every header but the prelude is in HEADERS, for modules that exist
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        let mut headers: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| {
                let p = e.ok()?.path();
                (p.extension()? == "cuh").then(|| p.file_name().unwrap().to_string_lossy().into_owned())
            })
            .filter(|f| f != "prelude.cuh")
            .collect();
        headers.sort();
        let mut listed: Vec<String> = HEADERS.iter().map(|h| h.file.to_string()).collect();
        listed.sort();
        assert_eq!(headers, listed);
        assert!(HEADERS.iter().all(|h| h.modules.iter().all(|m| MODULES.iter().any(|(n, _)| n == m))));
    }
}

/// A host-side check of every kernel launch against the CUDA C it calls
/// (no GPU needed): the kernel exists in its module, and the arguments the
/// Rust side pushes match its parameters in number and kind. A missing entry
/// point would only fail at `cuModuleGetFunction` on a GPU, and a mismatched
/// argument list would silently read garbage there.
#[cfg(test)]
mod signature_tests {
    use super::*;

    /// What one argument or parameter is, as far as the launch ABI cares.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Kind {
        /// A device address (8 bytes).
        Ptr,
        /// `RgT` / [`KTensor`] by value.
        Tensor,
        /// A 4-byte scalar (`int`, `unsigned int`, `float`).
        S4,
        /// An 8-byte scalar (`i64`).
        S8,
        /// Another struct by value (`RgRope`, `RgMmvq`).
        Struct,
    }

    /// The text from `open` (an opening bracket) to its matching close, exclusive.
    fn balanced(s: &str, open: usize) -> &str {
        let mut depth = 0;
        let mut in_str = false;
        for (i, c) in s[open..].char_indices() {
            match c {
                '"' => in_str = !in_str,
                '(' | '[' | '{' if !in_str => depth += 1,
                ')' | ']' | '}' if !in_str => {
                    depth -= 1;
                    if depth == 0 {
                        return &s[open + 1..open + i];
                    }
                }
                _ => {}
            }
        }
        panic!("unbalanced brackets after byte {open}");
    }

    /// `s` split at `sep` outside brackets, trimmed, empty pieces dropped.
    fn split_top(s: &str, sep: char) -> Vec<&str> {
        let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
        for (i, c) in s.char_indices() {
            match c {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => depth -= 1,
                c if c == sep && depth == 0 => {
                    out.push(s[start..i].trim());
                    start = i + 1;
                }
                _ => {}
            }
        }
        out.push(s[start..].trim());
        out.retain(|p| !p.is_empty());
        out
    }

    /// Every `extern "C" __global__` kernel of a module source: name and parameter kinds.
    fn kernels_of(src: &str) -> Vec<(String, Vec<Kind>)> {
        let mut out = Vec::new();
        for (at, _) in src.match_indices("__global__ void") {
            let mut rest = &src[at + "__global__ void".len()..];
            if let Some(r) = rest.trim_start().strip_prefix("__launch_bounds__") {
                let open = r.find('(').unwrap();
                rest = &r[open + balanced(r, open).len() + 2..];
            }
            let open = rest.find('(').unwrap();
            let name = rest[..open].trim().to_string();
            let params: Vec<Kind> = split_top(balanced(rest, open), ',').into_iter().map(param_kind).collect();
            out.push((name, params));
        }
        // the mmvq entry points are instances of macros (the parameters of their `name`)
        for (macro_name, params) in entry_macros(src, &out) {
            let call = format!("\n{macro_name}(");
            for (at, _) in src.match_indices(&call) {
                let args = balanced(src, at + call.len() - 1);
                out.push((split_top(args, ',')[0].to_string(), params.clone()));
            }
        }
        out
    }

    /// The macros defining a kernel called `name` (`RG_MMVQ_ENTRY`…), each
    /// with that kernel's parameters: the `#define` before each `name` kernel.
    fn entry_macros(src: &str, kernels: &[(String, Vec<Kind>)]) -> Vec<(String, Vec<Kind>)> {
        let defines = src.match_indices("\n#define ").map(|(at, _)| at);
        let named = src.match_indices("__global__ void").map(|(at, _)| at);
        let named: Vec<usize> = named.zip(kernels).filter(|(_, (n, _))| n == "name").map(|(at, _)| at).collect();
        let params = kernels.iter().filter(|(n, _)| n == "name").map(|(_, p)| p.clone());
        named
            .iter()
            .zip(params)
            .map(|(&at, p)| {
                let def = defines.clone().filter(|&d| d < at).last().expect("a #define before the kernel");
                let name = src[def + "\n#define ".len()..].split('(').next().unwrap().to_string();
                (name, p)
            })
            .collect()
    }

    fn param_kind(p: &str) -> Kind {
        if p.contains('*') {
            Kind::Ptr
        } else if p.starts_with("RgT ") {
            Kind::Tensor
        } else if p.starts_with("i64 ") || p.starts_with("double ") {
            // 8-byte scalars
            Kind::S8
        } else if ["int ", "unsigned int ", "float "].iter().any(|t| p.starts_with(t)) {
            Kind::S4
        } else if ["RgRope ", "RgMmvq ", "RgMoe "].iter().any(|t| p.starts_with(t)) {
            Kind::Struct
        } else {
            panic!("unknown kernel parameter type in {p:?}")
        }
    }

    /// The kind of a Rust launch argument, from the names the launch sites use.
    fn arg_kind(a: &str) -> Kind {
        const PTRS: &[&str] = &["p", "dst", "err_ptr", "claims_ptr", "mp", "fp", "ap", "wp", "work", "route", "sp"];
        const TENSORS: &[&str] = &["dk", "sk", "xk", "ik", "kd", "ka", "kb", "mk", "fk", "kt", "wk"];
        const S4: &[&str] = &[
            "code", "param", "eps", "scale", "nhl2", "m0", "m1", "n_past", "size", "rp.rows", "q_round", "n_expert",
            "round",
        ];
        const S8: &[&str] = &[
            "n", "nrows", "nbytes", "head", "nvec", "nblocks", "rp.chunk", "bpr", "total", "nb0", "nb1", "nb2", "nb3",
            "off", "row0", "n_tiles", "d_nb1", "d_nb2",
        ];
        if a.ends_with(".ptr") || PTRS.contains(&a) {
            Kind::Ptr
        } else if TENSORS.contains(&a) || [".p(", ".k(", ".q(", "rows_view("].iter().any(|m| a.contains(m)) {
            Kind::Tensor
        } else if S8.contains(&a) || [".nelements()", ".nrows()", " as f64", "f64"].iter().any(|e| a.ends_with(e)) {
            Kind::S8
        } else if S4.contains(&a) || a.ends_with(" as i32") || a.starts_with("i32::from(") {
            Kind::S4
        } else if a.starts_with("KRope::of(") || a == "moe" {
            Kind::Struct
        } else {
            panic!("launch argument {a:?}: add its kind to arg_kind")
        }
    }

    /// Every `launch!(dev, "module", "func", cfg; args…)` of a Rust source.
    fn launches_of(src: &str) -> Vec<(String, String, Vec<&str>)> {
        let mut out = Vec::new();
        for (at, _) in src.match_indices("launch!(") {
            let body = balanced(src, at + "launch!".len());
            let parts = split_top(body, ';');
            assert_eq!(parts.len(), 2, "launch!({body})");
            let head = split_top(parts[0], ',');
            let unquote = |s: &str| s.trim_matches('"').to_string();
            out.push((unquote(head[1]), unquote(head[2]), split_top(parts[1], ',')));
        }
        out
    }

    fn kernel(module: &str, func: &str) -> Vec<Kind> {
        let src = module_source(module).unwrap();
        let all = kernels_of(&src);
        match all.iter().find(|(n, _)| n == func) {
            Some((_, params)) => params.clone(),
            None => panic!(
                "kernels/{module}.cu has no kernel {func:?} (it has {:?})",
                all.iter().map(|k| &k.0).collect::<Vec<_>>()
            ),
        }
    }

    #[test]
    fn every_launch_matches_its_kernel_signature() {
        // every file of the backend that launches kernels with `launch!` (this
        // one and the macro's own only mention it)
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/backend/cuda");
        let mut sources = Vec::new();
        for sub in [dir.clone(), dir.join("matmul")] {
            for e in std::fs::read_dir(&sub).unwrap() {
                let p = e.unwrap().path();
                let skip = p.file_name().is_some_and(|n| n == "kernels.rs" || n == "launch.rs");
                if p.extension().is_some_and(|x| x == "rs") && !skip {
                    sources.push((p.display().to_string(), std::fs::read_to_string(&p).unwrap()));
                }
            }
        }
        let mut checked = 0;
        for (file, src) in &sources {
            for (module, func, args) in launches_of(src) {
                let params = kernel(&module, &func);
                let kinds: Vec<Kind> = args.iter().map(|a| arg_kind(a)).collect();
                assert_eq!(kinds, params, "{file}: launch of {module}/{func} with ({})", args.join(", "));
                checked += 1;
            }
        }
        assert!(checked >= 30, "only {checked} launches found");
        // matmul/mmvq.rs pushes its arguments by hand: (dst, x, tx, bpr, nblocks) and (dst, w, act, p)
        use crate::dtype::DType;
        let quantize = [Kind::Ptr, Kind::Ptr, Kind::Tensor, Kind::S8, Kind::S8];
        let dot = [Kind::Ptr, Kind::Ptr, Kind::Ptr, Kind::Struct];
        let mmvq_rs = include_str!("matmul/mmvq.rs");
        assert!(mmvq_rs.contains("lb.arg(&dst).arg(&b.ptr).arg(&kt).arg(&bpr).arg(&total);"));
        assert!(mmvq_rs.contains("lb.arg(&dst.ptr).arg(&a.ptr).arg(&acts).arg(&p);"));
        // matmul/moe.rs too: (dst, w, act, p, q) for the mul_mat_id dot kernels
        let dot_id = [Kind::Ptr, Kind::Ptr, Kind::Ptr, Kind::Struct, Kind::Struct];
        let moe_rs = include_str!("matmul/moe.rs");
        assert!(moe_rs.contains("lb.arg(&dst.ptr).arg(&a.ptr).arg(&acts).arg(&p).arg(&moe);"));
        for w in DType::QUANTIZED {
            if let Some(spec) = super::super::matmul::mmvq::QSpec::of(w) {
                for k in spec.id_kernels {
                    assert_eq!(kernel("mmvq", k), dot_id, "{w:?}");
                }
                assert_eq!(kernel("mmvq", spec.kernel), dot, "{w:?}");
                let (func, _, _) = super::super::matmul::mmvq::act_format(w).unwrap();
                assert_eq!(kernel("quantize_act", func), quantize, "{w:?}");
            }
        }
    }
}
