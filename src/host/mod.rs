//! Host memory: 64-byte aligned byte buffers (safe code, via bytemuck), and the
//! `Element` trait that ties Rust scalar types to their `DType`.

use crate::dtype::DType;
use crate::error::{Error, Result};
use half::{bf16, f16};

/// Alignment of every host buffer rgml allocates, in bytes.
pub const HOST_ALIGN: usize = 64;

#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
struct Line([u8; HOST_ALIGN]);

#[cfg(target_os = "linux")]
mod huge;

/// Buffers at least this large are anonymous maps advised to use huge pages
/// (fewer TLB misses, and streams the hardware prefetchers follow across 4 KiB
/// boundaries); smaller ones are heap vectors. On Linux the map starts on a
/// huge-page boundary, so every whole 2 MiB of it can be one.
const MAP_MIN: usize = 2 << 20;

enum Bytes {
    Heap(Vec<Line>),
    #[cfg(not(target_os = "linux"))]
    Map(memmap2::MmapMut),
    #[cfg(target_os = "linux")]
    Map(huge::HugeMap),
}

/// A zero-initialised, 64-byte aligned byte buffer.
pub struct HostBuffer {
    bytes: Bytes,
    len: usize,
}

impl Clone for HostBuffer {
    /// Like `Vec::clone`, aborts when the memory is not there.
    fn clone(&self) -> Self {
        match HostBuffer::from_bytes(self.as_bytes()) {
            Ok(b) => b,
            Err(_) => std::alloc::handle_alloc_error(std::alloc::Layout::new::<Line>()),
        }
    }
}

impl HostBuffer {
    /// `len` zero bytes.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when the system refuses the memory.
    pub fn zeroed(len: usize) -> Result<HostBuffer> {
        if len >= MAP_MIN {
            #[cfg(target_os = "linux")]
            let map = huge::HugeMap::zeroed(len);
            #[cfg(not(target_os = "linux"))]
            let map = memmap2::MmapMut::map_anon(len).ok();
            if let Some(map) = map {
                return Ok(HostBuffer { bytes: Bytes::Map(map), len });
            }
        }
        let lines = len.div_ceil(HOST_ALIGN);
        let mut v: Vec<Line> = Vec::new();
        v.try_reserve_exact(lines).map_err(|_| Error::OutOfMemory { bytes: len })?;
        v.resize(lines, Line([0; HOST_ALIGN]));
        Ok(HostBuffer { bytes: Bytes::Heap(v), len })
    }
    /// A copy of `bytes`.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`].
    pub fn from_bytes(bytes: &[u8]) -> Result<HostBuffer> {
        let mut b = HostBuffer::zeroed(bytes.len())?;
        b.as_bytes_mut().copy_from_slice(bytes);
        Ok(b)
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Heap(v) => &bytemuck::cast_slice(v)[..self.len],
            Bytes::Map(m) => &m[..self.len],
        }
    }
    /// The bytes, writable.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.bytes {
            Bytes::Heap(v) => &mut bytemuck::cast_slice_mut(v)[..self.len],
            Bytes::Map(m) => &mut m[..self.len],
        }
    }
}

impl std::fmt::Debug for HostBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostBuffer({} bytes)", self.len)
    }
}

/// A Rust scalar type that is the element of a plain `DType`.
pub trait Element: bytemuck::Pod + Send + Sync {
    /// The matching element type.
    const DTYPE: DType;
}

macro_rules! elements {
    ($($t:ty => $d:ident),*) => {
        $(impl Element for $t {
            const DTYPE: DType = DType::$d;
        })*
    };
}

elements!(f32 => F32, f16 => F16, bf16 => BF16, i8 => I8, i16 => I16, i32 => I32);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        for len in [0, 1, 63, 64, 65, 1000, MAP_MIN, MAP_MIN + 3] {
            let b = HostBuffer::zeroed(len).unwrap();
            assert_eq!(b.len(), len);
            assert!(b.as_bytes().iter().all(|&x| x == 0));
            assert_eq!(b.as_bytes().as_ptr() as usize % HOST_ALIGN, 0);
        }
        let b = HostBuffer::from_bytes(&[1, 2, 3]).unwrap();
        assert_eq!(b.as_bytes(), &[1, 2, 3]);
    }

    #[test]
    fn too_large_is_an_error() {
        let e = HostBuffer::zeroed(usize::MAX / 2).unwrap_err();
        assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
    }
}
