//! Writing GGUF v3 files: metadata of every type, tensors of every [`DType`],
//! configurable alignment, atomically (temporary file + rename).

use std::borrow::Cow;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::format::{align_up, DEFAULT_ALIGNMENT, MAGIC, MAX_ARRAY_DEPTH};
use super::value::{Array, Value};
use crate::dtype::DType;
use crate::error::{Error, Result};

/// Longest tensor name the writer accepts: ggml needs the name and a NUL in 64 bytes.
pub const MAX_WRITE_NAME: usize = 63;

/// Where a tensor's bytes come from when the file is written.
enum Source<'a> {
    Bytes(Cow<'a, [u8]>),
    Reader(Box<dyn Read + 'a>),
}

struct PendingTensor<'a> {
    name: String,
    dtype: DType,
    ne: Vec<i64>,
    size: usize,
    data: Source<'a>,
}

/// Builds a GGUF v3 file: metadata in insertion order, then tensor infos and
/// data in insertion order, each tensor's data padded to the alignment (the
/// layout ggml and gguf-py write: for the same content the bytes are identical
/// to gguf-py's). The bytes of a tensor may be borrowed (`&'a [u8]`), owned,
/// or streamed from a reader when the file is written.
///
/// Compatibility: gguf-py reads everything this writes; ggml and llama.cpp
/// read everything except arrays of arrays (ggml's `gguf.cpp` rejects them), so
/// avoid nested arrays in files meant for llama.cpp.
///
/// ```
/// use rgml::gguf::{GgufFile, GgufWriter};
/// use rgml::DType;
/// let dir = std::env::temp_dir().join(format!("rgml-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("tiny.gguf");
/// let data: Vec<u8> = [1.0f32, 2.0, 3.0].iter().flat_map(|x| x.to_le_bytes()).collect();
/// let mut w = GgufWriter::new();
/// w.set("general.architecture", "tiny").unwrap().set("tiny.layers", 2u32).unwrap();
/// w.add_tensor("w", DType::F32, &[3], &data[..]).unwrap();
/// w.write(&path).unwrap();
/// let f = GgufFile::open(&path).unwrap();
/// assert_eq!(f.get_u32("tiny.layers").unwrap(), 2);
/// assert_eq!(f.tensor_data("w").unwrap(), &data[..]);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
#[derive(Default)]
pub struct GgufWriter<'a> {
    metadata: Vec<(String, Value)>,
    tensors: Vec<PendingTensor<'a>>,
}

impl<'a> GgufWriter<'a> {
    /// An empty writer (alignment 32, no metadata, no tensors).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` to `value`, replacing (in place) any earlier value of `key`.
    /// `general.alignment` must be a `u32` power of two; it sets the alignment.
    ///
    /// # Errors
    /// [`Error::Invalid`] for an empty key, a bad `general.alignment`, or
    /// arrays nested deeper than the reader accepts.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<Value>) -> Result<&mut Self> {
        let (key, value) = (key.into(), value.into());
        if key.is_empty() {
            return Err(Error::Invalid("gguf: metadata keys must not be empty".into()));
        }
        if key == "general.alignment" {
            match value {
                Value::U32(a) if a.is_power_of_two() => {}
                ref v => {
                    let msg = format!("gguf: general.alignment must be a u32 power of two, got {v:?}");
                    return Err(Error::Invalid(msg));
                }
            }
        }
        if let Value::Array(a) = &value {
            if a.depth() > MAX_ARRAY_DEPTH {
                let msg = format!("gguf: {key}: arrays nested deeper than {MAX_ARRAY_DEPTH} levels");
                return Err(Error::Invalid(msg));
            }
        }
        match self.metadata.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.metadata.push((key, value)),
        }
        Ok(self)
    }

    /// Sets the data alignment (stored as `general.alignment`, a `u32`).
    ///
    /// # Errors
    /// [`Error::Invalid`] unless `alignment` is a power of two.
    pub fn set_alignment(&mut self, alignment: u32) -> Result<&mut Self> {
        self.set("general.alignment", alignment)
    }

    /// The alignment the file will use.
    pub fn alignment(&self) -> usize {
        match self.metadata.iter().find(|(k, _)| k == "general.alignment") {
            Some((_, Value::U32(a))) => *a as usize,
            _ => DEFAULT_ALIGNMENT,
        }
    }

    /// Checks a tensor's name and shape and returns its size in bytes.
    fn check_tensor(&self, name: &str, dtype: DType, ne: &[i64]) -> Result<usize> {
        let bad = |msg: String| Err(Error::Invalid(format!("gguf: tensor '{name}': {msg}")));
        if name.len() > MAX_WRITE_NAME {
            return bad(format!("name is {} bytes, ggml accepts at most {MAX_WRITE_NAME}", name.len()));
        }
        if self.tensors.iter().any(|t| t.name == name) {
            return bad("duplicate tensor name".into());
        }
        if ne.is_empty() || ne.len() > 4 || ne.iter().any(|&n| n < 0) {
            return bad(format!("shape {ne:?} must have 1 to 4 non-negative dimensions"));
        }
        if ne.iter().try_fold(1i64, |a, &n| a.checked_mul(n)).is_none() {
            return bad(format!("element count of shape {ne:?} overflows int64"));
        }
        let Some(row) = dtype.row_size(ne[0]) else {
            return bad(format!(
                "ne[0] = {} is not a multiple of the {dtype} block size {}",
                ne[0],
                dtype.block_size()
            ));
        };
        match ne[1..].iter().try_fold(row, |a, &n| usize::try_from(n).ok().and_then(|n| a.checked_mul(n))) {
            Some(size) => Ok(size),
            None => bad(format!("byte size of shape {ne:?} overflows")),
        }
    }

    /// Adds a tensor of shape `ne` (ggml order, 1 to 4 dims) whose bytes are
    /// `data` (borrowed or owned), laid out as ggml stores that type.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a duplicate or too long name (ggml needs < 64
    /// bytes) or a bad shape; [`Error::DataSize`] if `data` has the wrong length.
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        dtype: DType,
        ne: &[i64],
        data: impl Into<Cow<'a, [u8]>>,
    ) -> Result<&mut Self> {
        let (name, data) = (name.into(), data.into());
        let size = self.check_tensor(&name, dtype, ne)?;
        if data.len() != size {
            return Err(Error::DataSize { name, expected: size, found: data.len() });
        }
        self.tensors.push(PendingTensor { name, dtype, ne: ne.to_vec(), size, data: Source::Bytes(data) });
        Ok(self)
    }

    /// Adds a tensor whose bytes are read from `reader` when the file is
    /// written; the reader must yield exactly the tensor's size in bytes, or
    /// the write fails (and, for [`GgufWriter::write`], leaves no file behind).
    ///
    /// # Errors
    /// As [`GgufWriter::add_tensor`], except for the data length.
    pub fn add_tensor_from_reader(
        &mut self,
        name: impl Into<String>,
        dtype: DType,
        ne: &[i64],
        reader: impl Read + 'a,
    ) -> Result<&mut Self> {
        let name = name.into();
        let size = self.check_tensor(&name, dtype, ne)?;
        self.tensors.push(PendingTensor { name, dtype, ne: ne.to_vec(), size, data: Source::Reader(Box::new(reader)) });
        Ok(self)
    }

    /// Writes the file to `w` (buffer it: the writer issues many small writes).
    ///
    /// # Errors
    /// [`Error::Io`] from `w` or a tensor's reader, [`Error::DataSize`] if a
    /// reader yields too few bytes, [`Error::Invalid`] if it yields too many.
    pub fn write_to<W: Write>(self, w: W) -> Result<()> {
        let align = self.alignment() as u64;
        let mut w = Counting { inner: w, written: 0 };
        w.write_all(&MAGIC)?;
        w.write_all(&3u32.to_le_bytes())?;
        w.write_all(&(self.tensors.len() as u64).to_le_bytes())?;
        w.write_all(&(self.metadata.len() as u64).to_le_bytes())?;
        for (key, value) in &self.metadata {
            write_str(&mut w, key)?;
            w.write_all(&value.value_type().id().to_le_bytes())?;
            write_value(&mut w, value)?;
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            write_str(&mut w, &t.name)?;
            w.write_all(&(t.ne.len() as u32).to_le_bytes())?;
            for &n in &t.ne {
                w.write_all(&(n as u64).to_le_bytes())?;
            }
            w.write_all(&t.dtype.ggml_id().to_le_bytes())?;
            w.write_all(&offset.to_le_bytes())?;
            offset = align_up(offset + t.size as u64, align)
                .ok_or_else(|| Error::Invalid("gguf: data section size overflows".into()))?;
        }
        w.pad(align)?;
        for t in self.tensors {
            match t.data {
                Source::Bytes(b) => w.write_all(&b)?,
                Source::Reader(mut r) => {
                    let n = io::copy(&mut (&mut r).take(t.size as u64), &mut w)?;
                    if n != t.size as u64 {
                        return Err(Error::DataSize { name: t.name, expected: t.size, found: n as usize });
                    }
                    if r.read(&mut [0u8])? != 0 {
                        let msg = format!("gguf: tensor '{}': reader yields more than {} bytes", t.name, t.size);
                        return Err(Error::Invalid(msg));
                    }
                }
            }
            w.pad(align)?;
        }
        w.flush()?;
        Ok(())
    }

    /// Writes the file to `path` atomically: into a new temporary file in the
    /// same directory, synced, then renamed over `path`. On any error the
    /// temporary file is removed and `path` is untouched.
    ///
    /// # Errors
    /// As [`GgufWriter::write_to`]; [`Error::Io`] if the directory does not
    /// exist or is not writable.
    pub fn write(self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let Some(file_name) = path.file_name() else {
            return Err(Error::Invalid(format!("gguf: {} is not a file path", path.display())));
        };
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(file_name);
        tmp_name.push(format!(".{}.{n}.tmp", std::process::id()));
        let mut tmp = TempFile { path: dir.join(tmp_name), keep: false };
        let file = OpenOptions::new().write(true).create_new(true).open(&tmp.path)?;
        let mut buf = BufWriter::with_capacity(1 << 20, file);
        self.write_to(&mut buf)?;
        let file: File = buf.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp.path, path)?;
        tmp.keep = true;
        Ok(())
    }
}

/// Removes the temporary file when dropped, unless it was renamed into place.
struct TempFile {
    path: PathBuf,
    keep: bool,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// A writer that counts the bytes written, for padding.
struct Counting<W> {
    inner: W,
    written: u64,
}

impl<W: Write> Counting<W> {
    fn pad(&mut self, align: u64) -> io::Result<()> {
        const ZEROS: [u8; 256] = [0; 256];
        let mut n = (align - self.written % align) % align;
        while n > 0 {
            let k = n.min(ZEROS.len() as u64) as usize;
            self.write_all(&ZEROS[..k])?;
            n -= k as u64;
        }
        Ok(())
    }
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn write_str(w: &mut impl Write, s: &str) -> io::Result<()> {
    w.write_all(&(s.len() as u64).to_le_bytes())?;
    w.write_all(s.as_bytes())
}

fn write_value(w: &mut impl Write, v: &Value) -> io::Result<()> {
    match v {
        Value::U8(x) => w.write_all(&x.to_le_bytes()),
        Value::I8(x) => w.write_all(&x.to_le_bytes()),
        Value::U16(x) => w.write_all(&x.to_le_bytes()),
        Value::I16(x) => w.write_all(&x.to_le_bytes()),
        Value::U32(x) => w.write_all(&x.to_le_bytes()),
        Value::I32(x) => w.write_all(&x.to_le_bytes()),
        Value::F32(x) => w.write_all(&x.to_le_bytes()),
        Value::Bool(x) => w.write_all(&[u8::from(*x)]),
        Value::String(s) => write_str(w, s),
        Value::Array(a) => write_array(w, a),
        Value::U64(x) => w.write_all(&x.to_le_bytes()),
        Value::I64(x) => w.write_all(&x.to_le_bytes()),
        Value::F64(x) => w.write_all(&x.to_le_bytes()),
    }
}

/// An array body: element type, count, elements.
fn write_array(w: &mut impl Write, a: &Array) -> io::Result<()> {
    w.write_all(&a.elem_type().id().to_le_bytes())?;
    w.write_all(&(a.len() as u64).to_le_bytes())?;
    macro_rules! each {
        ($v:expr) => {{
            for x in $v {
                w.write_all(&x.to_le_bytes())?;
            }
            Ok(())
        }};
    }
    match a {
        Array::U8(v) => w.write_all(v),
        Array::I8(v) => each!(v),
        Array::U16(v) => each!(v),
        Array::I16(v) => each!(v),
        Array::U32(v) => each!(v),
        Array::I32(v) => each!(v),
        Array::F32(v) => each!(v),
        Array::Bool(v) => each!(v.iter().map(|&b| u8::from(b))),
        Array::String(v) => v.iter().try_for_each(|s| write_str(w, s)),
        Array::Array(v) => v.iter().try_for_each(|a| write_array(w, a)),
        Array::U64(v) => each!(v),
        Array::I64(v) => each!(v),
        Array::F64(v) => each!(v),
    }
}
