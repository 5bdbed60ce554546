//! Element types and their traits table: block size, bytes per block, alignment,
//! and the ggml/GGUF type number. Quantized types are ggml's block formats.

use std::fmt;

pub mod promote;

/// An element type. Quantized types store `block_size()` values in
/// `type_size()` bytes; plain types have a block size of 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(non_camel_case_types)]
pub enum DType {
    /// IEEE binary32.
    F32,
    /// IEEE binary16.
    F16,
    /// bfloat16 (the top half of an f32).
    BF16,
    /// IEEE binary64 (converted to f32 where the kernels read it).
    F64,
    /// Signed 8-bit integer.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// 32 values: f16 scale + 16 bytes of 4-bit quants.
    Q4_0,
    /// 32 values: f16 scale, f16 min + 16 bytes of 4-bit quants.
    Q4_1,
    /// 32 values: f16 scale, 4 bytes of high bits, 16 bytes of low nibbles.
    Q5_0,
    /// 32 values: f16 scale, f16 min, 4 bytes of high bits, 16 bytes of low nibbles.
    Q5_1,
    /// 32 values: f16 scale + 32 signed bytes.
    Q8_0,
    /// 32 values: f16 scale, f16 scale*sum + 32 signed bytes.
    Q8_1,
    /// 256-value super-block, 2-bit quants.
    Q2_K,
    /// 256-value super-block, 3-bit quants.
    Q3_K,
    /// 256-value super-block, 4-bit quants.
    Q4_K,
    /// 256-value super-block, 5-bit quants.
    Q5_K,
    /// 256-value super-block, 6-bit quants.
    Q6_K,
    /// 256-value super-block, 8-bit quants with f32 scale and block sums.
    Q8_K,
    /// 32 values: f16 scale + 16 bytes of 4-bit indices into a fixed non-linear table.
    IQ4_NL,
    /// 256-value super-block: IQ4_NL's table with a 6-bit scale per 32 values.
    IQ4_XS,
    /// 32 values: an E8M0 (power of two) scale + 16 bytes of 4-bit E2M1 floats (OCP MX).
    MXFP4,
    /// 256-value super-block, 1.5625 bits per value: ternary grid points of 8 values.
    IQ1_S,
    /// 256-value super-block, 1.75 bits per value: IQ1_S's grid with 3-bit scales per 16.
    IQ1_M,
    /// 256-value super-block, 2.0625 bits per value: 8-value grid points and sign patterns.
    IQ2_XXS,
    /// 256-value super-block, 2.3125 bits per value: a 512-point grid, 4-bit scales per 16.
    IQ2_XS,
    /// 256-value super-block, 2.5625 bits per value: a 1024-point grid, explicit signs.
    IQ2_S,
    /// 256-value super-block, 3.0625 bits per value: 4-value grid points and sign patterns.
    IQ3_XXS,
    /// 256-value super-block, 3.4375 bits per value: a 512-point grid, explicit signs.
    IQ3_S,
    /// 256-value super-block of ternary values, 5 per byte (1.6875 bits per value).
    TQ1_0,
    /// 256-value super-block of ternary values, 2 bits each.
    TQ2_0,
}

/// One row of the traits table.
struct Traits {
    name: &'static str,
    ggml_id: u32,
    block_size: usize,
    type_size: usize,
    align: usize,
}

const fn t(name: &'static str, ggml_id: u32, block_size: usize, type_size: usize, align: usize) -> Traits {
    Traits { name, ggml_id, block_size, type_size, align }
}

impl DType {
    /// Every type, in table order.
    pub const ALL: [DType; 32] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q8_0,
        DType::Q8_1,
        DType::Q2_K,
        DType::Q3_K,
        DType::Q4_K,
        DType::Q5_K,
        DType::Q6_K,
        DType::Q8_K,
        DType::IQ4_NL,
        DType::IQ4_XS,
        DType::MXFP4,
        DType::IQ1_S,
        DType::IQ1_M,
        DType::IQ2_XXS,
        DType::IQ2_XS,
        DType::IQ2_S,
        DType::IQ3_XXS,
        DType::IQ3_S,
        DType::TQ1_0,
        DType::TQ2_0,
    ];

    /// The block-quantized types, in table order (those of [`DType::ALL`]
    /// after the eight plain types).
    pub const QUANTIZED: [DType; 24] = {
        let mut q = [DType::F32; 24];
        let mut i = 0;
        while i < q.len() {
            q[i] = DType::ALL[DType::ALL.len() - q.len() + i];
            i += 1;
        }
        q
    };

    const fn traits(self) -> Traits {
        // name, ggml/GGUF id, values per block, bytes per block, alignment of the block struct
        match self {
            DType::F32 => t("f32", 0, 1, 4, 4),
            DType::F16 => t("f16", 1, 1, 2, 2),
            DType::BF16 => t("bf16", 30, 1, 2, 2),
            DType::F64 => t("f64", 28, 1, 8, 8),
            DType::I8 => t("i8", 24, 1, 1, 1),
            DType::I16 => t("i16", 25, 1, 2, 2),
            DType::I32 => t("i32", 26, 1, 4, 4),
            DType::I64 => t("i64", 27, 1, 8, 8),
            DType::Q4_0 => t("q4_0", 2, 32, 18, 2),
            DType::Q4_1 => t("q4_1", 3, 32, 20, 2),
            DType::Q5_0 => t("q5_0", 6, 32, 22, 2),
            DType::Q5_1 => t("q5_1", 7, 32, 24, 2),
            DType::Q8_0 => t("q8_0", 8, 32, 34, 2),
            DType::Q8_1 => t("q8_1", 9, 32, 36, 2),
            DType::Q2_K => t("q2_K", 10, 256, 84, 2),
            DType::Q3_K => t("q3_K", 11, 256, 110, 2),
            DType::Q4_K => t("q4_K", 12, 256, 144, 2),
            DType::Q5_K => t("q5_K", 13, 256, 176, 2),
            DType::Q6_K => t("q6_K", 14, 256, 210, 2),
            DType::Q8_K => t("q8_K", 15, 256, 292, 4),
            DType::IQ4_NL => t("iq4_nl", 20, 32, 18, 2),
            DType::IQ4_XS => t("iq4_xs", 23, 256, 136, 2),
            DType::MXFP4 => t("mxfp4", 39, 32, 17, 1),
            DType::IQ1_S => t("iq1_s", 19, 256, 50, 2),
            DType::IQ1_M => t("iq1_m", 29, 256, 56, 1),
            DType::IQ2_XXS => t("iq2_xxs", 16, 256, 66, 2),
            DType::IQ2_XS => t("iq2_xs", 17, 256, 74, 2),
            DType::IQ2_S => t("iq2_s", 22, 256, 82, 2),
            DType::IQ3_XXS => t("iq3_xxs", 18, 256, 98, 2),
            DType::IQ3_S => t("iq3_s", 21, 256, 110, 2),
            DType::TQ1_0 => t("tq1_0", 34, 256, 54, 2),
            DType::TQ2_0 => t("tq2_0", 35, 256, 66, 2),
        }
    }

    /// ggml's name for the type (`"f32"`, `"q4_0"`, `"q4_K"`…).
    pub const fn name(self) -> &'static str {
        self.traits().name
    }
    /// Values per block (1 for plain types).
    pub const fn block_size(self) -> usize {
        self.traits().block_size
    }
    /// Bytes per block (per element for plain types).
    pub const fn type_size(self) -> usize {
        self.traits().type_size
    }
    /// Required byte alignment of an element or block (that of its `#[repr(C)]` struct).
    pub const fn align(self) -> usize {
        self.traits().align
    }
    /// ggml's `enum ggml_type` value, as stored in GGUF files.
    pub const fn ggml_id(self) -> u32 {
        self.traits().ggml_id
    }
    /// The type with this ggml/GGUF number, if rgml knows it.
    pub fn from_ggml_id(id: u32) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.ggml_id() == id)
    }
    /// Why a ggml type id is not a [`DType`]: removed from ggml, known to ggml but
    /// not implemented by rgml, or unknown.
    pub(crate) fn unknown_id_reason(id: u32) -> String {
        let removed = match id {
            4 => Some("Q4_2"),
            5 => Some("Q4_3"),
            31 => Some("Q4_0_4_4"),
            32 => Some("Q4_0_4_8"),
            33 => Some("Q4_0_8_8"),
            36 => Some("IQ4_NL_4_4"),
            37 => Some("IQ4_NL_4_8"),
            38 => Some("IQ4_NL_8_8"),
            _ => None,
        };
        let unimplemented = match id {
            40 => Some("NVFP4"),
            41 => Some("Q1_0"),
            42 => Some("Q2_0"),
            _ => None,
        };
        match (removed, unimplemented) {
            (Some(name), _) => format!("type id {id} ({name}) was removed from ggml"),
            (_, Some(name)) => format!("type id {id} ({name}) is not supported by rgml"),
            _ => format!("type id {id} is unknown to rgml"),
        }
    }
    /// The type with this ggml name (case-insensitive).
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name().eq_ignore_ascii_case(name))
    }
    /// True for the block-quantized types.
    pub const fn is_quantized(self) -> bool {
        self.block_size() > 1
    }
    /// True for F32, F16 and BF16.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16)
    }
    /// Bytes of a row of `ne` values, `None` if `ne` is not a whole number of
    /// blocks or the size overflows (ggml's `ggml_row_size`).
    pub fn row_size(self, ne: i64) -> Option<usize> {
        let ne = usize::try_from(ne).ok()?;
        if ne % self.block_size() != 0 {
            return None;
        }
        (ne / self.block_size()).checked_mul(self.type_size())
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_ggml() {
        // (type, block size, bytes per block, ggml id) as in ggml's type_traits
        let expect = [
            (DType::F32, 1, 4, 0),
            (DType::F16, 1, 2, 1),
            (DType::BF16, 1, 2, 30),
            (DType::F64, 1, 8, 28),
            (DType::I8, 1, 1, 24),
            (DType::I16, 1, 2, 25),
            (DType::I32, 1, 4, 26),
            (DType::I64, 1, 8, 27),
            (DType::Q4_0, 32, 2 + 16, 2),
            (DType::Q4_1, 32, 2 + 2 + 16, 3),
            (DType::Q5_0, 32, 2 + 4 + 16, 6),
            (DType::Q5_1, 32, 2 + 2 + 4 + 16, 7),
            (DType::Q8_0, 32, 2 + 32, 8),
            (DType::Q8_1, 32, 2 + 2 + 32, 9),
            (DType::Q2_K, 256, 16 + 64 + 2 + 2, 10),
            (DType::Q3_K, 256, 32 + 64 + 12 + 2, 11),
            (DType::Q4_K, 256, 2 + 2 + 12 + 128, 12),
            (DType::Q5_K, 256, 2 + 2 + 12 + 32 + 128, 13),
            (DType::Q6_K, 256, 128 + 64 + 16 + 2, 14),
            (DType::Q8_K, 256, 4 + 256 + 32, 15),
            // ggml-common.h's block structs
            (DType::IQ4_NL, 32, 2 + 16, 20),
            (DType::IQ4_XS, 256, 2 + 2 + 4 + 128, 23),
            (DType::MXFP4, 32, 1 + 16, 39),
            (DType::IQ1_S, 256, 2 + 32 + 16, 19),
            (DType::IQ1_M, 256, 32 + 16 + 8, 29),
            (DType::IQ2_XXS, 256, 2 + 64, 16),
            (DType::IQ2_XS, 256, 2 + 64 + 8, 17),
            (DType::IQ2_S, 256, 2 + 64 + 8 + 8, 22),
            (DType::IQ3_XXS, 256, 2 + 96, 18),
            (DType::IQ3_S, 256, 2 + 64 + 8 + 32 + 4, 21),
            (DType::TQ1_0, 256, 48 + 4 + 2, 34),
            (DType::TQ2_0, 256, 64 + 2, 35),
        ];
        for (d, bs, ts, id) in expect {
            assert_eq!((d.block_size(), d.type_size(), d.ggml_id()), (bs, ts, id), "{d}");
            assert_eq!(DType::from_ggml_id(id), Some(d));
            assert_eq!(DType::from_name(d.name()), Some(d));
            assert_eq!(d.type_size() % d.align(), 0, "{d}: block size not a multiple of its alignment");
        }
        assert_eq!(expect.len(), DType::ALL.len());
        for removed in [4, 5, 31, 32, 33, 36, 37, 38] {
            assert_eq!(DType::from_ggml_id(removed), None, "type id {removed} was removed from ggml");
        }
        // ggml types rgml does not implement (NVFP4, Q1_0, Q2_0) and ids past ggml's
        for unknown in [40, 41, 42, 43, 1000, u32::MAX] {
            assert_eq!(DType::from_ggml_id(unknown), None, "type id {unknown}");
        }
        let q: Vec<DType> = DType::ALL.into_iter().filter(|d| d.is_quantized()).collect();
        assert_eq!(q, DType::QUANTIZED);
    }

    #[test]
    fn row_size_is_block_aware() {
        assert_eq!(DType::F32.row_size(7), Some(28));
        assert_eq!(DType::Q4_0.row_size(64), Some(36));
        assert_eq!(DType::Q4_0.row_size(48), None);
        assert_eq!(DType::Q6_K.row_size(512), Some(420));
        assert_eq!(DType::Q8_0.row_size(0), Some(0));
        assert_eq!(DType::F32.row_size(-1), None);
        assert_eq!(DType::F32.row_size(i64::MAX), None);
    }
}
