//! The parsed, validated header of a safetensors file.

use std::collections::HashMap;
use std::ops::Range;

use super::format::{st_dtype, MAX_HEADER_SIZE};
use super::json::{self, RawEntry};
use crate::dtype::DType;
use crate::error::{Error, Result};

/// A tensor of the file that rgml can load: a [`DType`] and at most 4 dims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SafetensorsTensor {
    /// The tensor's name (its key in the header).
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// The shape as stored: row-major, outermost dimension first (`[]` for a scalar).
    pub shape: Vec<u64>,
    /// The shape in ggml order — `shape` reversed, innermost first, unused
    /// dims 1 (a scalar is `[1, 1, 1, 1]`).
    pub ne: [i64; 4],
    /// Absolute byte range of the data in the file.
    pub range: Range<usize>,
}

impl SafetensorsTensor {
    /// The dims to create the tensor with: `ne` up to the stored rank (at least one).
    pub fn dims(&self) -> &[i64] {
        &self.ne[..self.shape.len().clamp(1, 4)]
    }
}

/// A valid tensor entry that rgml cannot load — a dtype rgml has no
/// [`DType`] for (`U8`, `BOOL`, `F8_E4M3`…) or more than 4 dims. The file
/// opens; [`load_safetensors`](crate::load_safetensors) leaves it out and
/// asking for it names it and this reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedTensor {
    /// The tensor's name.
    pub name: String,
    /// Its dtype name, as stored.
    pub dtype: String,
    /// Its shape, as stored (row-major).
    pub shape: Vec<u64>,
    /// Absolute byte range of the data in the file.
    pub range: Range<usize>,
    /// Why rgml cannot use it.
    pub why: String,
}

/// The header of a safetensors file: its tensors (those rgml loads and those
/// it leaves out, each in header order) and the `__metadata__` strings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SafetensorsHeader {
    tensors: Vec<SafetensorsTensor>,
    skipped: Vec<SkippedTensor>,
    by_name: HashMap<String, usize>,
    metadata: Vec<(String, String)>,
    data_start: usize,
}

fn err(offset: usize, msg: impl Into<String>) -> Error {
    Error::Safetensors { offset: offset as u64, msg: msg.into() }
}

impl SafetensorsHeader {
    /// Parses and validates the header of the file whose bytes are `bytes`
    /// (the whole file: offsets are checked against its length). See the
    /// [module documentation](crate::safetensors) for what is checked.
    ///
    /// # Errors
    /// [`Error::Safetensors`] with the byte offset of the problem.
    pub fn parse(bytes: &[u8]) -> Result<SafetensorsHeader> {
        let len_bytes: [u8; 8] = bytes
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| err(0, format!("file of {} bytes is shorter than the 8-byte header length", bytes.len())))?;
        let n = u64::from_le_bytes(len_bytes);
        let room = bytes.len() - 8;
        let n = match usize::try_from(n) {
            Ok(n) if n <= MAX_HEADER_SIZE && n <= room => n,
            _ if n > MAX_HEADER_SIZE as u64 => {
                return Err(err(0, format!("header length {n} exceeds the limit of {MAX_HEADER_SIZE} bytes")))
            }
            _ => {
                return Err(err(0, format!("header length {n} runs past the end of the file ({room} bytes follow it)")))
            }
        };
        let json = &bytes[8..8 + n];
        if json.first() != Some(&b'{') {
            return Err(err(8, "the header does not start with '{' (a JSON object)"));
        }
        let raw = json::parse(json).map_err(|(e, key)| {
            let at = 8 + json::error_offset(json, &e);
            match key {
                Some(k) => err(at, format!("invalid JSON header: entry {k:?}: {}", json::message(&e))),
                None => err(at, format!("invalid JSON header: {}", json::message(&e))),
            }
        })?;
        let data_start = 8 + n;
        let data_len = bytes.len() - data_start;
        let mut h = SafetensorsHeader { data_start, metadata: raw.metadata, ..Default::default() };
        let mut ranges: Vec<(Range<usize>, usize)> = Vec::new();
        for (i, e) in raw.entries.into_iter().enumerate() {
            let range = check_entry(&e, data_start, data_len)?;
            if !range.is_empty() {
                ranges.push((range.clone(), i));
            }
            let dtype = st_dtype(&e.dtype).and_then(|d| d.dtype);
            let rank = e.shape.len();
            match dtype {
                Some(dtype) if rank <= 4 => {
                    let mut ne = [1i64; 4];
                    for (k, &d) in e.shape.iter().rev().enumerate() {
                        ne[k] = d as i64; // fits: checked by check_entry
                    }
                    h.tensors.push(SafetensorsTensor { name: e.name, dtype, shape: e.shape, ne, range });
                }
                _ => {
                    let why = match dtype {
                        None => format!("dtype {} has no rgml type", e.dtype),
                        Some(_) => format!("{rank} dims (shape {:?}); rgml tensors have at most 4", e.shape),
                    };
                    h.skipped.push(SkippedTensor { name: e.name, dtype: e.dtype, shape: e.shape, range, why });
                }
            }
        }
        // names are unique (checked while parsing); index the loadable ones
        h.by_name = h.tensors.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect();
        // no two non-empty ranges overlap
        ranges.sort_by_key(|(r, _)| (r.start, r.end));
        for w in ranges.windows(2) {
            let ((a, _), (b, _)) = (&w[0], &w[1]);
            if b.start < a.end {
                let name = |r: &Range<usize>| h.name_at(r).unwrap_or("?").to_string();
                return Err(err(
                    b.start,
                    format!("tensors {:?} (bytes {a:?}) and {:?} (bytes {b:?}) overlap", name(a), name(b)),
                ));
            }
        }
        Ok(h)
    }

    fn name_at(&self, r: &Range<usize>) -> Option<&str> {
        let t = self.tensors.iter().find(|t| &t.range == r).map(|t| t.name.as_str());
        t.or_else(|| self.skipped.iter().find(|t| &t.range == r).map(|t| t.name.as_str()))
    }

    /// The tensors rgml can load, in header order.
    pub fn tensors(&self) -> &[SafetensorsTensor] {
        &self.tensors
    }
    /// The valid tensors rgml cannot load (see [`SkippedTensor`]), in header order.
    pub fn skipped(&self) -> &[SkippedTensor] {
        &self.skipped
    }
    /// The loadable tensor named `name`, if there is one.
    pub fn tensor(&self, name: &str) -> Option<&SafetensorsTensor> {
        self.by_name.get(name).map(|&i| &self.tensors[i])
    }
    /// The `__metadata__` pairs, in header order (empty if there is none).
    pub fn metadata(&self) -> &[(String, String)] {
        &self.metadata
    }
    /// The `__metadata__` value of `key`, if present.
    pub fn metadata_value(&self, key: &str) -> Option<&str> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
    /// Where the data section starts in the file (8 + the header length).
    pub fn data_start(&self) -> usize {
        self.data_start
    }
    /// Every tensor name in the file, loadable or not, in no particular order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.iter().map(|t| t.name.as_str()).chain(self.skipped.iter().map(|t| t.name.as_str()))
    }
}

/// Checks one entry: known dtype name, each dim and the element count within
/// `i64`, a byte size that does not overflow and equals `end - begin`, offsets
/// ordered and inside the data section. Returns the absolute byte range.
fn check_entry(e: &RawEntry, data_start: usize, data_len: usize) -> Result<Range<usize>> {
    let name = &e.name;
    let [begin, end] = e.offsets;
    let at = |off: u64| data_start.saturating_add(usize::try_from(off).unwrap_or(usize::MAX));
    let st =
        st_dtype(&e.dtype).ok_or_else(|| err(at(begin), format!("tensor {name:?}: unknown dtype {:?}", e.dtype)))?;
    if let Some(d) = e.shape.iter().find(|&&d| d > i64::MAX as u64) {
        return Err(err(at(begin), format!("tensor {name:?}: dim {d} of shape {:?} exceeds i64", e.shape)));
    }
    let mut count: u64 = 1;
    for &d in &e.shape {
        count = count
            .checked_mul(d)
            .filter(|&c| c <= i64::MAX as u64)
            .ok_or_else(|| err(at(begin), format!("tensor {name:?}: shape {:?} has too many elements", e.shape)))?;
    }
    let bits = count
        .checked_mul(st.bits)
        .ok_or_else(|| err(at(begin), format!("tensor {name:?}: shape {:?} is too large in bytes", e.shape)))?;
    if bits % 8 != 0 {
        return Err(err(at(begin), format!("tensor {name:?}: {count} {} values do not fill whole bytes", e.dtype)));
    }
    if end < begin {
        return Err(err(at(begin), format!("tensor {name:?}: data_offsets [{begin}, {end}] end before they begin")));
    }
    if end > data_len as u64 {
        return Err(err(
            at(begin),
            format!("tensor {name:?}: data_offsets [{begin}, {end}] run past the data section ({data_len} bytes)"),
        ));
    }
    if bits / 8 != end - begin {
        return Err(err(
            at(begin),
            format!(
                "tensor {name:?}: {} of shape {:?} needs {} bytes, data_offsets [{begin}, {end}] hold {}",
                e.dtype,
                e.shape,
                bits / 8,
                end - begin
            ),
        ));
    }
    // end <= data_len, so both fit usize
    Ok(data_start + begin as usize..data_start + end as usize)
}
