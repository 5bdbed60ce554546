//! A GGUF file mapped into memory: the parsed header plus zero-copy tensor data.

use std::fs::File;
use std::ops::{Deref, Range};
use std::path::Path;
use std::sync::Arc;

use memmap2::Mmap;

use super::header::{GgufHeader, TensorInfo};
use crate::error::Result;

/// A GGUF file, memory-mapped read-only and parsed. Dereferences to its
/// [`GgufHeader`] for metadata and tensor infos; tensor data are slices of the
/// map (no copy). Clone the [`Arc`] from [`GgufFile::map`] to keep the mapping
/// alive independently of this value (e.g. in a backend's storage).
#[derive(Clone, Debug)]
pub struct GgufFile {
    header: GgufHeader,
    map: Arc<Mmap>,
}

impl GgufFile {
    /// Maps the file at `path` read-only and parses its header.
    ///
    /// The mapping reflects the file on disk: if another process truncates or
    /// rewrites the file while it is mapped, reads may see the new bytes or
    /// fault (SIGBUS). Keeping the file unchanged while mapped is the caller's
    /// responsibility.
    ///
    /// # Errors
    /// [`Error::Io`](crate::Error::Io) if the file cannot be opened or mapped,
    /// [`Error::Gguf`](crate::Error::Gguf) if it is not a valid GGUF file.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        let file = File::open(path.as_ref())?;
        // SAFETY: the map is read-only (`Mmap`, PROT_READ) and we never write
        // through it. Its bytes are only sound to read as long as no one
        // modifies or truncates the file while it is mapped; that is documented
        // above as the caller's responsibility (the same contract as ggml's and
        // llama.cpp's mmap loaders). The map owns its own reference to the file,
        // so dropping `file` afterwards is fine.
        let map = unsafe { Mmap::map(&file)? };
        let header = GgufHeader::parse(&map)?;
        Ok(GgufFile { header, map: Arc::new(map) })
    }

    /// The parsed header (also reachable through `Deref`).
    pub fn header(&self) -> &GgufHeader {
        &self.header
    }

    /// The mapping, shared: holding a clone keeps the tensor bytes alive.
    pub fn map(&self) -> Arc<Mmap> {
        Arc::clone(&self.map)
    }

    /// The whole file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// A tensor's data: a slice of the map, `info.size` bytes (not necessarily
    /// aligned in memory beyond the file's alignment: with `general.alignment`
    /// 1 an f32 tensor may start at an odd address).
    ///
    /// # Panics
    /// If `info` comes from another file and its range lies outside this one.
    pub fn tensor_bytes(&self, info: &TensorInfo) -> &[u8] {
        &self.map[self.header.tensor_range(info)]
    }

    /// The data of the tensor named `name`, if there is one.
    pub fn tensor_data(&self, name: &str) -> Option<&[u8]> {
        self.header.tensor(name).map(|t| self.tensor_bytes(t))
    }

    /// Absolute byte range of a tensor's data in the file (and in [`GgufFile::map`]).
    pub fn tensor_range(&self, info: &TensorInfo) -> Range<usize> {
        self.header.tensor_range(info)
    }
}

impl Deref for GgufFile {
    type Target = GgufHeader;

    fn deref(&self) -> &GgufHeader {
        &self.header
    }
}

/// Drops this process's resident pages of bytes `range` of the file mapping
/// `map` (`madvise(MADV_DONTNEED)`; whole pages, so a neighbour's bytes on the
/// same first or last page go too): the bytes stay the file's, and reading
/// them again pages them back in. For weights the CPU has repacked, whose
/// mapped bytes it no longer reads. Advice only: a failure changes nothing.
pub(crate) fn release_pages(map: &Mmap, range: Range<usize>) {
    if range.is_empty() || range.end > map.len() {
        return;
    }
    #[cfg(unix)]
    // SAFETY: `Mmap` maps the file read-only and shared (PROT_READ, MAP_SHARED)
    // and nothing writes through it, so the dropped pages hold no change to
    // lose: a later read faults the file's same bytes back in.
    let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, range.start, range.len()) };
}
