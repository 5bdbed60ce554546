//! Constants of the format and its dtype names.

use crate::dtype::DType;

/// The largest JSON header accepted, in bytes (100 MiB; the reference
/// implementation's limit is 100 MB). A larger length is refused before
/// anything is read or allocated.
pub const MAX_HEADER_SIZE: usize = 100 << 20;

/// The most dimensions a shape may list (rgml loads at most 4; tensors of rank
/// 5 to 64 are validated and left out, a longer shape makes the header invalid).
pub const MAX_SHAPE_DIMS: usize = 64;

/// The key of the optional string-to-string metadata map in the header.
pub const METADATA_KEY: &str = "__metadata__";

/// A dtype name of the safetensors format: its size in bits and the rgml
/// [`DType`] it maps to, if rgml has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct StDtype {
    pub bits: u64,
    pub dtype: Option<DType>,
}

/// The format's dtype names (safetensors 0.8): those rgml has map to a
/// [`DType`]; the others (unsigned, boolean, 8/6/4-bit floats) are known so
/// their sizes can be checked, and their tensors are left out when loading.
pub(super) fn st_dtype(name: &str) -> Option<StDtype> {
    let (bits, dtype) = match name {
        "F64" => (64, Some(DType::F64)),
        "F32" => (32, Some(DType::F32)),
        "F16" => (16, Some(DType::F16)),
        "BF16" => (16, Some(DType::BF16)),
        "I64" => (64, Some(DType::I64)),
        "I32" => (32, Some(DType::I32)),
        "I16" => (16, Some(DType::I16)),
        "I8" => (8, Some(DType::I8)),
        "U64" | "C64" => (64, None),
        "U32" => (32, None),
        "U16" => (16, None),
        "U8" | "BOOL" | "F8_E5M2" | "F8_E4M3" | "F8_E8M0" => (8, None),
        "F6_E2M3" | "F6_E3M2" => (6, None),
        "F4" => (4, None),
        _ => return None,
    };
    Some(StDtype { bits, dtype })
}

/// The safetensors name of a [`DType`] the format can hold (`None` for the
/// block-quantized types, which safetensors has no name for).
pub fn dtype_name(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::F64 => "F64",
        DType::F32 => "F32",
        DType::F16 => "F16",
        DType::BF16 => "BF16",
        DType::I64 => "I64",
        DType::I32 => "I32",
        DType::I16 => "I16",
        DType::I8 => "I8",
        _ => return None,
    })
}
