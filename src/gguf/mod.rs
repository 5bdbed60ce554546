//! GGUF: reading (memory-mapped, zero-copy) and writing ggml's model file format.
//!
//! A GGUF file is a little-endian header — magic `GGUF`, version, tensor
//! count, KV count, the metadata KV pairs, the tensor infos — then padding to
//! the alignment (`general.alignment`, default 32) and the data section with
//! every tensor's bytes at an aligned offset. Versions 2 and 3 are read (they
//! differ only in that v3 may be big-endian, which rgml rejects); v3 is written.
//!
//! [`GgufFile::open`] maps a file and validates it; [`GgufHeader::parse`]
//! does the same on a byte slice. Validation, beyond the layout itself:
//! - every count and length is checked against the bytes left before
//!   anything is allocated for it (a KV count of 2^60 fails at once);
//! - keys are non-empty and unique; tensor names are unique and at most 64
//!   bytes (the GGUF limit; ggml itself needs < 64, which the writer enforces);
//! - strings (keys, values, names) must be valid UTF-8, and bools 0 or 1, as the
//!   spec says; arrays may nest up to [`MAX_ARRAY_DEPTH`] levels;
//! - `general.alignment`, if present, is a `u32` non-zero power of two;
//! - tensors have at most 4 dims, each in `0..=i64::MAX` (0 is accepted, as in
//!   ggml), an element count and byte size that do not overflow, and for a
//!   type rgml knows ([`DType`](crate::DType)) `ne[0]` a multiple of the
//!   type's block size;
//! - a tensor of a type id rgml does not know (removed ggml types such as Q4_2
//!   or Q4_0_4_4, types rgml does not implement such as NVFP4, future ids) does
//!   not make the file invalid: it is listed apart
//!   ([`GgufHeader::unknown_tensors`]), its byte size — which cannot be
//!   computed — is bounded by the next tensor's offset or the end of the file,
//!   and it must still have at least one byte if it has elements; loading
//!   ([`load_gguf`](crate::load_gguf)) leaves it out, and asking for it is
//!   [`Error::UnknownType`](crate::Error::UnknownType);
//! - tensor data lie inside the file, at offsets that are multiples of the
//!   alignment, and do not overlap. Unlike ggml, tensors need not be stored in
//!   order or back to back, and the last tensor's trailing padding may be
//!   missing (llama.cpp's mmap loader and gguf-py accept such files too).
//!
//! Malformed files give [`Error::Gguf`](crate::Error::Gguf) with the byte
//! offset where the problem was found; the parser never panics.

mod file;
mod format;
mod header;
mod reader;
mod value;
mod writer;

pub(crate) use file::release_pages;
pub use file::GgufFile;
pub use format::{DEFAULT_ALIGNMENT, MAGIC, MAX_ARRAY_DEPTH, MAX_TENSOR_NAME};
pub use header::{GgufHeader, TensorEntry, TensorInfo, UnknownTensor};
pub use value::{Array, Value, ValueType};
pub use writer::{GgufWriter, MAX_WRITE_NAME};

#[cfg(test)]
mod tests;
