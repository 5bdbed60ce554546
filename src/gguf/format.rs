//! The GGUF format's constants and arithmetic shared by the reader and the writer.

/// The four bytes every GGUF file starts with.
pub const MAGIC: [u8; 4] = *b"GGUF";
/// Alignment of the data section and of tensor offsets when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: usize = 32;
/// Longest tensor name the reader accepts, in bytes (the GGUF spec's limit).
pub const MAX_TENSOR_NAME: usize = 64;
/// Deepest nesting of arrays the reader and writer accept (an array of
/// scalars is 1 level). Real files use at most 2; the bound keeps parsing a
/// hostile file from recursing without limit.
pub const MAX_ARRAY_DEPTH: usize = 16;

/// `x` rounded up to a multiple of `align` (a power of two), `None` on overflow.
pub(crate) fn align_up(x: u64, align: u64) -> Option<u64> {
    Some(x.checked_add(align - 1)? & !(align - 1))
}
