//! The crate's error type. Every bad input is reported here, never by a panic.

use crate::dtype::DType;

/// Result alias used throughout rgml.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong when building, planning or running a graph.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Shapes that do not fit the op's rule (broadcast, matmul, element counts…).
    #[error("{op}: {msg}")]
    Shape {
        /// The op that refused its inputs.
        op: &'static str,
        /// What was wrong, with the shapes involved.
        msg: String,
    },
    /// An op that needs a contiguous input (reshape) got a strided one.
    #[error("{op}: input must be contiguous, got ne={ne:?} nb={nb:?} ({dtype})")]
    NotContiguous {
        /// The op.
        op: &'static str,
        /// Shape of the input.
        ne: [i64; 4],
        /// Strides of the input, in bytes.
        nb: [usize; 4],
        /// Element type of the input.
        dtype: DType,
    },
    /// A view whose bytes would fall outside its storage, or that is misaligned.
    #[error("{op}: invalid view: {msg}")]
    InvalidView {
        /// The view op.
        op: &'static str,
        /// What was wrong, with the numbers.
        msg: String,
    },
    /// A write into a layout that maps several elements to the same bytes, or
    /// that partly overlaps one of the op's own inputs.
    #[error("{op}: overlapping write: {msg}")]
    OverlappingWrite {
        /// The writing op.
        op: &'static str,
        /// Which tensors overlap, and how.
        msg: String,
    },
    /// The op does not accept this element type.
    #[error("{op}: unsupported type {dtype}")]
    Unsupported {
        /// The op.
        op: &'static str,
        /// The type it does not accept.
        dtype: DType,
    },
    /// Two element types that must agree do not.
    #[error("{what}: expected {expected}, found {found}")]
    DTypeMismatch {
        /// Where the mismatch was found.
        what: String,
        /// The type that was needed.
        expected: DType,
        /// The type that was given.
        found: DType,
    },
    /// A tensor id that does not belong to this context or graph.
    #[error("unknown tensor {0}")]
    UnknownTensor(String),
    /// A leaf was read or written but holds no data (no_alloc context, or not set).
    #[error("tensor {0} has no data")]
    NoData(String),
    /// A write into a read-only tensor (a leaf mapped from a file, or one
    /// imported through DLPack).
    #[error("tensor {0} is read-only (its bytes are a file mapping or an imported DLPack tensor)")]
    ReadOnly(String),
    /// A data buffer whose length does not match the tensor.
    #[error("tensor {name}: expected {expected} bytes of data, got {found}")]
    DataSize {
        /// The tensor's name.
        name: String,
        /// Bytes the tensor holds.
        expected: usize,
        /// Bytes that were given.
        found: usize,
    },
    /// A graph, plan or buffer used with a context or graph it was not made for.
    #[error("mismatch: {0}")]
    Mismatch(String),
    /// Invalid argument to an API call.
    #[error("{0}")]
    Invalid(String),
    /// A graph whose backward pass would read a value an in-place op
    /// overwrote, or that writes a parameter in place (refused when the
    /// backward graph is built, see `rgml::grad`): the op, the tensor, why.
    #[error("in-place hazard: {0}")]
    InPlaceHazard(String),
    /// A broken invariant of rgml itself (a bug, not bad input): what failed
    /// and the source location that found it.
    #[error("rgml bug at {location}: {msg}")]
    Internal {
        /// What failed.
        msg: String,
        /// Where it was found.
        location: &'static std::panic::Location<'static>,
    },
    /// A CUDA driver or cuBLAS call failed during a run; the library's own
    /// error (`cudarc`'s `DriverError` or `CublasError`) is the source.
    #[error("CUDA {what}: {source}")]
    Cuda {
        /// The call that failed.
        what: String,
        /// The driver's or library's error, of its own type.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A backend or library that is not present on this machine.
    #[error("{what} is not available: {why}")]
    Unavailable {
        /// The backend or library.
        what: String,
        /// Why, and what to do about it.
        why: String,
    },
    /// A malformed GGUF file: what was wrong and at which byte.
    #[error("gguf: {msg} (at byte {offset})")]
    Gguf {
        /// Byte offset in the file where the problem was found.
        offset: u64,
        /// What was wrong.
        msg: String,
    },
    /// A malformed safetensors file or shard index: what was wrong and at
    /// which byte of the file (0 for a problem of an index or a whole file).
    #[error("safetensors: {msg} (at byte {offset})")]
    Safetensors {
        /// Byte offset in the file where the problem was found.
        offset: u64,
        /// What was wrong.
        msg: String,
    },
    /// A metadata key that is missing or holds another type than asked for.
    #[error("metadata key {key}: {msg}")]
    Metadata {
        /// The key.
        key: String,
        /// What was wrong (e.g. "expected u32, found string").
        msg: String,
    },
    /// The system refused memory rgml asked for.
    #[error("out of memory: {bytes} bytes could not be allocated")]
    OutOfMemory {
        /// The allocation's size.
        bytes: usize,
    },
    /// I/O error (files, maps).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A tensor of a GGUF file whose ggml type id rgml does not know (a type
    /// removed from ggml, one rgml does not implement, or a newer one): the
    /// file opens, but the tensor cannot be used.
    #[error("tensor {name}: {why}")]
    UnknownType {
        /// The tensor's name.
        name: String,
        /// Its ggml type id.
        type_id: u32,
        /// The id and what is known of it (e.g. "type id 4 (Q4_2) was removed from ggml").
        why: String,
    },
}

impl Error {
    /// An [`Error::Internal`] at the caller's source location.
    #[track_caller]
    pub(crate) fn internal(msg: impl Into<String>) -> Self {
        Error::Internal { msg: msg.into(), location: std::panic::Location::caller() }
    }
    pub(crate) fn shape(op: &'static str, msg: impl Into<String>) -> Self {
        Error::Shape { op, msg: msg.into() }
    }
    pub(crate) fn view(op: &'static str, msg: impl Into<String>) -> Self {
        Error::InvalidView { op, msg: msg.into() }
    }
    pub(crate) fn overlap(op: &'static str, msg: impl Into<String>) -> Self {
        Error::OverlappingWrite { op, msg: msg.into() }
    }
}
