//! The DLPack C ABI (`dlpack.h`, v0.8: the unversioned `DLManagedTensor` that
//! the Python capsule `"dltensor"` carries), as `#[repr(C)]` Rust types, and
//! the mapping between rgml's element types and DLPack's.

use std::ffi::c_void;

use crate::dtype::DType;

/// `DLDeviceType::kDLCPU`: host memory.
pub const KDL_CPU: i32 = 1;
/// `DLDeviceType::kDLCUDA`: CUDA device memory.
pub const KDL_CUDA: i32 = 2;
/// `DLDeviceType::kDLCUDAHost`: pinned host memory (cudaMallocHost).
pub const KDL_CUDA_HOST: i32 = 3;

/// `DLDataTypeCode::kDLInt`: signed integers.
pub const KDL_INT: u8 = 0;
/// `DLDataTypeCode::kDLUInt`: unsigned integers (rgml has none).
pub const KDL_UINT: u8 = 1;
/// `DLDataTypeCode::kDLFloat`: IEEE floats.
pub const KDL_FLOAT: u8 = 2;
/// `DLDataTypeCode::kDLBfloat`: bfloat16.
pub const KDL_BFLOAT: u8 = 4;

/// `DLDevice`: where the data lives.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDevice {
    /// A `DLDeviceType` value ([`KDL_CPU`], [`KDL_CUDA`], …).
    pub device_type: i32,
    /// The device's ordinal (0 for the CPU).
    pub device_id: i32,
}

/// `DLDataType`: an element type as type code, bits and vector lanes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDataType {
    /// A `DLDataTypeCode` value ([`KDL_INT`], [`KDL_FLOAT`], …).
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Vector lanes (1 for scalars, the only value rgml uses).
    pub lanes: u16,
}

/// `DLTensor`: a strided view of memory, outermost dim first, strides in
/// elements (not bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLTensor {
    /// Base pointer of the memory (the first element is at `data + byte_offset`).
    pub data: *mut c_void,
    /// Where the memory lives.
    pub device: DLDevice,
    /// Number of dims.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// `ndim` sizes, outermost first.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or null for a compact row-major tensor.
    pub strides: *mut i64,
    /// Bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// `DLManagedTensor` (legacy, unversioned): a [`DLTensor`] with its owner's
/// context and the function that releases it.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// The producer's context (opaque to the consumer).
    pub manager_ctx: *mut c_void,
    /// Called once by the consumer when done with the tensor (may be null).
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLPackVersion`: the ABI version of a [`DLManagedTensorVersioned`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLPackVersion {
    /// Major version (1: the versioned ABI; a different major is incompatible).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// The version rgml's versioned exports declare (what numpy 2 asks for
/// with `max_version=(1, 0)`; the layout is that of every 1.x).
pub const DLPACK_VERSION: DLPackVersion = DLPackVersion { major: 1, minor: 0 };
/// `DLPACK_FLAG_BITMASK_READ_ONLY`: the consumer must not write the data.
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;
/// `DLPACK_FLAG_BITMASK_IS_COPIED`: the producer copied the data for this export.
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;

/// `DLManagedTensorVersioned` (DLPack ≥ 1.0, the `"dltensor_versioned"`
/// capsule): a [`DLManagedTensor`] with a version and flags (read-only…).
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The ABI version.
    pub version: DLPackVersion,
    /// The producer's context (opaque to the consumer).
    pub manager_ctx: *mut c_void,
    /// Called once by the consumer when done with the tensor (may be null).
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// `DLPACK_FLAG_BITMASK_*` bits.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

/// DLPack's `(code, bits, lanes)` of a plain rgml type; `None` for block types.
pub fn to_dl_dtype(dtype: DType) -> Option<DLDataType> {
    let (code, bits) = match dtype {
        DType::F32 => (KDL_FLOAT, 32),
        DType::F16 => (KDL_FLOAT, 16),
        DType::F64 => (KDL_FLOAT, 64),
        DType::BF16 => (KDL_BFLOAT, 16),
        DType::I8 => (KDL_INT, 8),
        DType::I16 => (KDL_INT, 16),
        DType::I32 => (KDL_INT, 32),
        DType::I64 => (KDL_INT, 64),
        _ => return None,
    };
    Some(DLDataType { code, bits, lanes: 1 })
}

/// The rgml type of a DLPack type; `None` for types rgml has no element type
/// for (unsigned, bool, complex, vector lanes, unknown codes).
pub fn from_dl_dtype(t: DLDataType) -> Option<DType> {
    if t.lanes != 1 {
        return None;
    }
    Some(match (t.code, t.bits) {
        (KDL_FLOAT, 32) => DType::F32,
        (KDL_FLOAT, 16) => DType::F16,
        (KDL_FLOAT, 64) => DType::F64,
        (KDL_BFLOAT, 16) => DType::BF16,
        (KDL_INT, 8) => DType::I8,
        (KDL_INT, 16) => DType::I16,
        (KDL_INT, 32) => DType::I32,
        (KDL_INT, 64) => DType::I64,
        _ => return None,
    })
}

/// A readable name of a device type, for errors.
pub(crate) fn device_name(device_type: i32) -> &'static str {
    match device_type {
        KDL_CPU => "CPU",
        KDL_CUDA => "CUDA",
        KDL_CUDA_HOST => "CUDA host (pinned)",
        4 => "OpenCL",
        7 => "Vulkan",
        8 => "Metal",
        10 => "ROCm",
        13 => "CUDA managed",
        14 => "oneAPI",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn abi_layout_matches_dlpack_h() {
        // sizes and offsets of dlpack.h's structs on a 64-bit target
        assert_eq!(std::mem::size_of::<DLDevice>(), 8);
        assert_eq!(std::mem::size_of::<DLDataType>(), 4);
        assert_eq!(std::mem::size_of::<DLTensor>(), 48);
        assert_eq!(std::mem::offset_of!(DLTensor, ndim), 16);
        assert_eq!(std::mem::offset_of!(DLTensor, dtype), 20);
        assert_eq!(std::mem::offset_of!(DLTensor, shape), 24);
        assert_eq!(std::mem::offset_of!(DLTensor, byte_offset), 40);
        assert_eq!(std::mem::size_of::<DLManagedTensor>(), 64);
        assert_eq!(std::mem::offset_of!(DLManagedTensorVersioned, flags), 24);
        assert_eq!(std::mem::offset_of!(DLManagedTensorVersioned, dl_tensor), 32);
        assert_eq!(std::mem::size_of::<DLManagedTensorVersioned>(), 80);
    }

    #[test]
    fn dtypes_round_trip() {
        for d in DType::ALL {
            match to_dl_dtype(d) {
                Some(t) => {
                    assert_eq!(t.bits as usize, d.type_size() * 8);
                    assert_eq!(from_dl_dtype(t), Some(d));
                }
                None => assert!(d.is_quantized(), "{d}"),
            }
        }
        assert_eq!(from_dl_dtype(DLDataType { code: KDL_UINT, bits: 8, lanes: 1 }), None);
        assert_eq!(from_dl_dtype(DLDataType { code: KDL_FLOAT, bits: 32, lanes: 4 }), None);
    }
}
