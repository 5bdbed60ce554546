//! A safetensors file mapped into memory: the parsed header plus zero-copy tensor data.

use std::fs::File;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;

use super::header::{SafetensorsHeader, SafetensorsTensor};
use crate::error::Result;

/// A safetensors file, memory-mapped read-only and validated. Dereferences to
/// its [`SafetensorsHeader`]; tensor data are slices of the map (no copy).
/// Clone the [`Arc`] from [`SafetensorsFile::map`] to keep the mapping alive
/// independently of this value.
#[derive(Clone, Debug)]
pub struct SafetensorsFile {
    header: SafetensorsHeader,
    map: Arc<Mmap>,
    path: PathBuf,
}

impl SafetensorsFile {
    /// Maps the file at `path` read-only and validates its header.
    ///
    /// As for [`GgufFile::open`](crate::gguf::GgufFile::open), the mapping
    /// reflects the file on disk: keeping the file unchanged while it is
    /// mapped is the caller's responsibility.
    ///
    /// # Errors
    /// [`Error::Io`](crate::Error::Io) if the file cannot be opened or mapped,
    /// [`Error::Safetensors`](crate::Error::Safetensors) if it is not a valid
    /// safetensors file.
    pub fn open(path: impl AsRef<Path>) -> Result<SafetensorsFile> {
        let path = path.as_ref();
        let file = File::open(path)?;
        // SAFETY: the map is read-only (`Mmap`, PROT_READ) and never written
        // through; its bytes are sound to read as long as no one modifies or
        // truncates the file while it is mapped, documented above as the
        // caller's responsibility (the same contract as `GgufFile::open`).
        let map = unsafe { Mmap::map(&file)? };
        let header = SafetensorsHeader::parse(&map)?;
        Ok(SafetensorsFile { header, map: Arc::new(map), path: path.to_path_buf() })
    }

    /// The parsed header (also reachable through `Deref`).
    pub fn header(&self) -> &SafetensorsHeader {
        &self.header
    }

    /// The path the file was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The mapping, shared: holding a clone keeps the tensor bytes alive.
    pub fn map(&self) -> Arc<Mmap> {
        Arc::clone(&self.map)
    }

    /// The whole file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// A tensor's data: a slice of the map (not necessarily aligned for its
    /// type: safetensors does not align tensor data).
    ///
    /// # Panics
    /// If `t` comes from another file and its range lies outside this one.
    pub fn tensor_bytes(&self, t: &SafetensorsTensor) -> &[u8] {
        &self.map[t.range.clone()]
    }

    /// The data of the loadable tensor named `name`, if there is one.
    pub fn tensor_data(&self, name: &str) -> Option<&[u8]> {
        self.header.tensor(name).map(|t| self.tensor_bytes(t))
    }
}

impl Deref for SafetensorsFile {
    type Target = SafetensorsHeader;

    fn deref(&self) -> &SafetensorsHeader {
        &self.header
    }
}
