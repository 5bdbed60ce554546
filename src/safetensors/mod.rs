//! safetensors: reading (memory-mapped, zero-copy) Hugging Face's tensor file
//! format, single files and sharded checkpoints.
//!
//! A safetensors file is an 8-byte little-endian header length `N`, `N` bytes
//! of UTF-8 JSON — `{"name": {"dtype": "F32", "shape": [2, 3], "data_offsets":
//! [begin, end]}, ..., "__metadata__": {"key": "value"}}` — then the data
//! section; offsets are relative to its start.
//!
//! [`SafetensorsFile::open`] maps a file and validates it the way
//! [`gguf`](crate::gguf) does, before anything is allocated for it;
//! [`SafetensorsHeader::parse`] does the same on a byte slice:
//! - the header length is at most [`MAX_HEADER_SIZE`] and fits in the file;
//! - the header is valid UTF-8 JSON, an object (it must start with `{`) of
//!   tensor entries, each exactly the fields `dtype`, `shape` and
//!   `data_offsets`, plus an optional `__metadata__` object of strings;
//!   duplicate keys anywhere are refused (a plain JSON map would keep the
//!   last one), as are trailing bytes other than whitespace;
//! - dtypes are names of the format: an unknown name is an error naming the
//!   tensor and the dtype; shapes have at most [`MAX_SHAPE_DIMS`] dims, each a
//!   non-negative integer (`-1` is refused), with an element count that fits
//!   `i64` and a byte size that does not overflow;
//! - `data_offsets` are `[begin, end]` with `begin <= end <= ` the data
//!   section's length, and `end - begin` is exactly the shape's byte size;
//! - the non-empty ranges of two tensors do not overlap. The data section
//!   need not be covered entirely nor be in header order (the reference
//!   implementation is stricter there).
//!
//! **Tensors rgml cannot load.** A valid entry whose dtype rgml has no
//! [`DType`](crate::DType) for (`U8`, `U16`, `U32`, `U64`, `BOOL`, the 8-, 6-
//! and 4-bit floats, `C64`) or with more than 4 dims does not make the file
//! invalid: like GGUF's unknown types it is listed apart
//! ([`SafetensorsHeader::skipped`], with the reason), left out by
//! [`load_safetensors`](crate::load_safetensors), and asking
//! [`Weights::get`](crate::Weights::get) for it is an error naming it and why.
//!
//! **Shapes.** safetensors shapes are row-major, outermost dimension first;
//! ggml's `ne` is innermost first, so `ne` is the shape reversed: a `[3, 5,
//! 7]` tensor is `ne = [7, 5, 3, 1]` with the same bytes. A scalar (`[]`) is
//! `ne = [1]`.
//!
//! **Alignment.** safetensors does not align tensor data; a loaded leaf is
//! the mapping's bytes in place when they are aligned for the type, and only
//! a tensor stored misaligned is copied into an aligned owned buffer (as
//! [`Context::new_tensor_mapped`](crate::Context::new_tensor_mapped) does for
//! GGUF).
//!
//! Malformed files give [`Error::Safetensors`](crate::Error::Safetensors) with
//! the byte offset where the problem was found; the parser never panics.

mod file;
mod format;
mod header;
mod index;
mod json;

pub use file::SafetensorsFile;
pub use format::{dtype_name, MAX_HEADER_SIZE, MAX_SHAPE_DIMS, METADATA_KEY};
pub use header::{SafetensorsHeader, SafetensorsTensor, SkippedTensor};
pub use index::SafetensorsIndex;
