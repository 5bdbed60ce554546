//! Parsing a GGUF header from bytes. Every count, length and offset is checked
//! against the bytes that are left before anything is allocated for it, so a
//! malformed file fails fast with an [`Error::Gguf`] and never panics.

use std::collections::HashMap;
use std::fmt::Display;

use super::format::{align_up, DEFAULT_ALIGNMENT, MAGIC, MAX_ARRAY_DEPTH, MAX_TENSOR_NAME};
use super::header::Slot;
use super::header::{GgufHeader, TensorInfo, UnknownTensor};
use super::value::{Array, Value, ValueType};
use crate::dtype::DType;
use crate::error::{Error, Result};

/// Bytes of the smallest possible KV pair: key length, a 1-byte key, type, a 1-byte value.
const MIN_KV_SIZE: u64 = 8 + 1 + 4 + 1;
/// Bytes of the smallest possible tensor info: name length, n_dims = 0, type, offset.
const MIN_TENSOR_INFO_SIZE: u64 = 8 + 4 + 4 + 8;
/// Most KV pairs or tensor infos reserved for up front: a count the file's size
/// allows can still be huge (a corrupt count in a 40 GB model), so vectors grow
/// with what is actually parsed beyond this.
const MAX_RESERVE: usize = 4096;

/// A malformed-file error at byte `offset`.
pub(crate) fn gguf_err(offset: impl TryInto<u64>, msg: impl Into<String>) -> Error {
    Error::Gguf { offset: offset.try_into().unwrap_or(u64::MAX), msg: msg.into() }
}

/// Prefixes the message of an [`Error::Gguf`] with `what` (other errors pass through).
fn context(e: Error, what: impl FnOnce() -> String) -> Error {
    match e {
        Error::Gguf { offset, msg } => Error::Gguf { offset, msg: format!("{}: {msg}", what()) },
        e => e,
    }
}

/// Little-endian numbers that can be read from a byte chunk of exactly their size.
trait Le: Sized {
    const SIZE: usize;
    fn from_le(b: &[u8]) -> Self;
}
macro_rules! le {
    ($($t:ty),*) => {$(
        impl Le for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn from_le(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(b);
                <$t>::from_le_bytes(a)
            }
        }
    )*};
}
le!(u8, i8, u16, i16, u32, i32, f32, u64, i64, f64);

/// A read position in the file's bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// The next `n` bytes, or an error naming `what` if the file ends first.
    fn take(&mut self, n: usize, what: impl Display) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(gguf_err(
                self.pos,
                format!("file ends inside {what}: {n} bytes needed, {} left", self.remaining()),
            ));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn num<T: Le>(&mut self, what: impl Display) -> Result<T> {
        self.take(T::SIZE, what).map(T::from_le)
    }

    /// A u64 length or count of items of at least `min_item` bytes each,
    /// checked against the bytes left, so it can be allocated for.
    fn count(&mut self, min_item: u64, what: impl Display) -> Result<usize> {
        let at = self.pos;
        let n: u64 = self.num(format_args!("{what}"))?;
        let left = self.remaining() as u64;
        match n.checked_mul(min_item) {
            Some(need) if need <= left => Ok(n as usize),
            _ if min_item == 1 => Err(gguf_err(at, format!("{what} is {n}, but only {left} bytes are left"))),
            _ => Err(gguf_err(
                at,
                format!("{what} is {n}, but at least {n}×{min_item} bytes would be needed and only {left} are left"),
            )),
        }
    }

    /// A GGUF string: u64 byte length + UTF-8 bytes (invalid UTF-8 is an error).
    fn string(&mut self, what: impl Display + Copy) -> Result<String> {
        let len = self.count(1, format_args!("{what} length"))?;
        let at = self.pos;
        let raw = self.take(len, what)?;
        match std::str::from_utf8(raw) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(gguf_err(at + e.valid_up_to(), format!("{what} is not valid UTF-8"))),
        }
    }

    fn value_type(&mut self, what: &str) -> Result<ValueType> {
        let at = self.pos;
        let id: u32 = self.num(what)?;
        ValueType::from_id(id).ok_or_else(|| gguf_err(at, format!("invalid {what} {id} (valid ids are 0..=12)")))
    }

    fn bool(&mut self) -> Result<bool> {
        let at = self.pos;
        match self.num::<u8>("bool")? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(gguf_err(at, format!("bool byte is {b}, must be 0 or 1"))),
        }
    }

    fn fixed_vec<T: Le>(&mut self, n: usize) -> Result<Vec<T>> {
        // n ≤ bytes left (checked by `count`), so n * SIZE does not overflow.
        let raw = self.take(n * T::SIZE, "array")?;
        Ok(raw.chunks_exact(T::SIZE).map(T::from_le).collect())
    }

    fn value(&mut self, ty: ValueType) -> Result<Value> {
        Ok(match ty {
            ValueType::U8 => Value::U8(self.num("u8")?),
            ValueType::I8 => Value::I8(self.num("i8")?),
            ValueType::U16 => Value::U16(self.num("u16")?),
            ValueType::I16 => Value::I16(self.num("i16")?),
            ValueType::U32 => Value::U32(self.num("u32")?),
            ValueType::I32 => Value::I32(self.num("i32")?),
            ValueType::F32 => Value::F32(self.num("f32")?),
            ValueType::Bool => Value::Bool(self.bool()?),
            ValueType::String => Value::String(self.string("string")?),
            ValueType::Array => Value::Array(self.array(1)?),
            ValueType::U64 => Value::U64(self.num("u64")?),
            ValueType::I64 => Value::I64(self.num("i64")?),
            ValueType::F64 => Value::F64(self.num("f64")?),
        })
    }

    /// An array body (element type, count, elements) at nesting level `depth` (1 = outermost).
    fn array(&mut self, depth: usize) -> Result<Array> {
        let at = self.pos;
        let ty = self.value_type("array element type")?;
        if ty == ValueType::Array && depth >= MAX_ARRAY_DEPTH {
            return Err(gguf_err(at, format!("arrays nested deeper than {MAX_ARRAY_DEPTH} levels")));
        }
        let n = self.count(ty.min_size() as u64, format_args!("array length (of {ty})"))?;
        Ok(match ty {
            ValueType::U8 => Array::U8(self.fixed_vec(n)?),
            ValueType::I8 => Array::I8(self.fixed_vec(n)?),
            ValueType::U16 => Array::U16(self.fixed_vec(n)?),
            ValueType::I16 => Array::I16(self.fixed_vec(n)?),
            ValueType::U32 => Array::U32(self.fixed_vec(n)?),
            ValueType::I32 => Array::I32(self.fixed_vec(n)?),
            ValueType::F32 => Array::F32(self.fixed_vec(n)?),
            ValueType::U64 => Array::U64(self.fixed_vec(n)?),
            ValueType::I64 => Array::I64(self.fixed_vec(n)?),
            ValueType::F64 => Array::F64(self.fixed_vec(n)?),
            ValueType::Bool => Array::Bool((0..n).map(|_| self.bool()).collect::<Result<_>>()?),
            ValueType::String => {
                Array::String((0..n).map(|i| self.string(format_args!("string {i}"))).collect::<Result<_>>()?)
            }
            ValueType::Array => Array::Array((0..n).map(|_| self.array(depth + 1)).collect::<Result<_>>()?),
        })
    }
}

impl GgufHeader {
    /// Parses and validates the header of a whole GGUF file held in `bytes`
    /// (tensor ranges are checked against its length).
    ///
    /// # Errors
    /// [`Error::Gguf`] with the byte offset of the first problem found.
    pub fn parse(bytes: &[u8]) -> Result<GgufHeader> {
        parse(bytes)
    }
}

fn parse(bytes: &[u8]) -> Result<GgufHeader> {
    let mut c = Cursor { bytes, pos: 0 };
    if bytes.is_empty() {
        return Err(gguf_err(0, "empty file (no GGUF magic)"));
    }
    let magic = c.take(4, "the magic")?;
    if magic != MAGIC {
        let shown: String = magic.iter().map(|&b| if b.is_ascii_graphic() { b as char } else { '?' }).collect();
        return Err(gguf_err(0, format!("bad magic '{shown}' ({magic:02x?}), expected 'GGUF'")));
    }
    let version: u32 = c.num("the version")?;
    match version {
        2 | 3 => {}
        v if v & 0xFFFF == 0 => {
            return Err(gguf_err(4, format!("version {v:#x} looks byte-swapped: big-endian files are not supported")))
        }
        1 => return Err(gguf_err(4, "GGUF version 1 is not supported (only 2 and 3)")),
        v => return Err(gguf_err(4, format!("GGUF version {v} is not supported (only 2 and 3)"))),
    }
    let n_tensors_raw: u64 = c.num("the tensor count")?;
    let n_kv = c.count(MIN_KV_SIZE, "the KV count")?;
    // The KV pairs and the tensor infos must both fit in what is left.
    let left = c.remaining() as u64 - n_kv as u64 * MIN_KV_SIZE;
    let n_tensors = match n_tensors_raw.checked_mul(MIN_TENSOR_INFO_SIZE) {
        Some(need) if need <= left => n_tensors_raw as usize,
        _ => {
            return Err(gguf_err(
                8,
                format!(
                    "the tensor count is {n_tensors_raw}, but at least {n_tensors_raw}×{MIN_TENSOR_INFO_SIZE} bytes \
                     would be needed after {n_kv} KV pairs and only {left} are left"
                ),
            ))
        }
    };

    let mut metadata = Vec::with_capacity(n_kv.min(MAX_RESERVE));
    let mut kv_index = HashMap::with_capacity(n_kv.min(MAX_RESERVE));
    let mut alignment_at = None;
    for i in 0..n_kv {
        let key_at = c.pos;
        let key = c.string("key").map_err(|e| context(e, || format!("KV {i}")))?;
        if key.is_empty() {
            return Err(gguf_err(key_at, format!("KV {i} has an empty key")));
        }
        if let Some(&j) = kv_index.get(&key) {
            return Err(gguf_err(key_at, format!("duplicate key '{key}' (KV pairs {j} and {i})")));
        }
        let value = c
            .value_type("value type")
            .and_then(|ty| {
                if key == "general.alignment" {
                    alignment_at = Some(c.pos);
                }
                c.value(ty)
            })
            .map_err(|e| context(e, || format!("KV {i} '{key}'")))?;
        kv_index.insert(key.clone(), i);
        metadata.push((key, value));
    }

    let alignment = match (alignment_at, kv_index.get("general.alignment").map(|&i| &metadata[i].1)) {
        (Some(at), Some(Value::U32(a))) if *a == 0 || !a.is_power_of_two() => {
            return Err(gguf_err(at, format!("general.alignment is {a}, must be a non-zero power of two")))
        }
        (_, Some(Value::U32(a))) => *a as u64,
        (at, Some(v)) => {
            let msg = format!("general.alignment must be a u32, found {}", v.type_description());
            return Err(gguf_err(at.unwrap_or(0), msg));
        }
        (_, None) => DEFAULT_ALIGNMENT as u64,
    };

    let reserve = n_tensors.min(MAX_RESERVE);
    let mut raw: Vec<RawInfo> = Vec::with_capacity(reserve);
    let mut names = HashMap::with_capacity(reserve);
    for i in 0..n_tensors {
        let info = tensor_info(&mut c).map_err(|e| context(e, || format!("tensor info {i}")))?;
        if let Some(&j) = names.get(&info.name) {
            return Err(gguf_err(info.name_at, format!("duplicate tensor name '{}' (tensors {j} and {i})", info.name)));
        }
        names.insert(info.name.clone(), i);
        raw.push(info);
    }

    let file_size = bytes.len() as u64;
    let header_end = c.pos as u64;
    // ggml: with no tensors there is no data section, and no padding is required.
    let data_offset = if n_tensors == 0 { Some(header_end) } else { align_up(header_end, alignment) };
    let data_offset = match data_offset {
        Some(d) if d <= file_size => d,
        _ => {
            let msg = format!("the data section (header end padded to {alignment}) starts past the end of the file");
            return Err(gguf_err(header_end, msg));
        }
    };

    // a tensor of an unknown type holds at most the bytes up to the next tensor that
    // occupies any (by offset), or to the end of the file
    let occupies = |t: &RawInfo| t.size.map_or(t.n_elements > 0, |s| s > 0);
    let mut starts: Vec<u64> = raw.iter().filter(|t| occupies(t)).map(|t| t.offset as u64).collect();
    starts.sort_unstable();
    let data_len = file_size - data_offset;
    for t in &mut raw {
        let offset = t.offset as u64;
        if !offset.is_multiple_of(alignment) {
            let msg = format!("tensor '{}': offset {offset} is not a multiple of the alignment {alignment}", t.name);
            return Err(gguf_err(t.offset_at, msg));
        }
        if t.size.is_none() && offset <= data_len {
            let next = starts.get(starts.partition_point(|&s| s <= offset)).copied().unwrap_or(data_len);
            if t.n_elements > 0 && next == offset {
                let msg = format!(
                    "tensor '{}' ({}) has {} elements but no bytes before the next tensor or the end of the file",
                    t.name,
                    DType::unknown_id_reason(t.type_id),
                    t.n_elements
                );
                return Err(gguf_err(t.offset_at, msg));
            }
            t.bound = if t.n_elements > 0 { (next - offset) as usize } else { 0 };
        }
        let end = data_offset.checked_add(offset).and_then(|s| s.checked_add(t.extent() as u64));
        if end.is_none_or(|e| e > file_size) {
            let msg = format!(
                "tensor '{}': data at offset {offset} + {} bytes in the data section (which starts at {data_offset}) \
                 lies past the end of the file ({file_size} bytes)",
                t.name,
                t.extent()
            );
            return Err(gguf_err(t.offset_at, msg));
        }
    }
    let mut order: Vec<usize> = (0..n_tensors).filter(|&i| raw[i].extent() > 0).collect();
    order.sort_by_key(|&i| raw[i].offset);
    for w in order.windows(2) {
        let (a, b) = (&raw[w[0]], &raw[w[1]]);
        if a.offset + a.extent() > b.offset {
            let msg = format!(
                "tensor '{}' (data section bytes {}..{}) overlaps tensor '{}' (bytes {}..{})",
                b.name,
                b.offset,
                b.offset + b.extent(),
                a.name,
                a.offset,
                a.offset + a.extent()
            );
            return Err(gguf_err(b.offset_at, msg));
        }
    }

    let mut tensors: Vec<TensorInfo> = Vec::with_capacity(reserve);
    let mut tensor_index = HashMap::with_capacity(reserve);
    let (mut unknown, mut unknown_index, mut slots) = (Vec::new(), HashMap::new(), Vec::with_capacity(reserve));
    for t in raw {
        let RawInfo { name, dtype, type_id, ne, n_dims, offset, size, bound, .. } = t;
        match (dtype, size) {
            (Some(dtype), Some(size)) => {
                tensor_index.insert(name.clone(), tensors.len());
                slots.push(Slot::Known(tensors.len()));
                tensors.push(TensorInfo { name, dtype, ne, n_dims, offset, size });
            }
            _ => {
                unknown_index.insert(name.clone(), unknown.len());
                slots.push(Slot::Unknown(unknown.len()));
                unknown.push(UnknownTensor { name, type_id, ne, n_dims, offset, max_size: bound });
            }
        }
    }

    Ok(GgufHeader {
        version,
        alignment: alignment as usize,
        data_offset: data_offset as usize,
        file_size: bytes.len(),
        metadata,
        kv_index,
        tensors,
        tensor_index,
        unknown,
        unknown_index,
        order: slots,
    })
}

/// A tensor info as parsed, before the file-level checks: its type may be
/// unknown (`dtype` and `size` `None`; `bound` set by `parse`).
struct RawInfo {
    name: String,
    dtype: Option<DType>,
    type_id: u32,
    ne: [i64; 4],
    n_dims: u32,
    n_elements: i64,
    offset: usize,
    /// Bytes of data, for a known type.
    size: Option<usize>,
    /// For an unknown type, the bytes up to the next tensor (or the file end).
    bound: usize,
    /// Byte offsets of the name and of the offset field.
    name_at: usize,
    offset_at: usize,
}

impl RawInfo {
    /// The bytes the tensor's data may occupy.
    fn extent(&self) -> usize {
        self.size.unwrap_or(self.bound)
    }
}

/// One tensor info. Its offset and size are not checked against the file here
/// (`parse` does); a type id rgml does not know is kept, without a size.
fn tensor_info(c: &mut Cursor<'_>) -> Result<RawInfo> {
    let name_at = c.pos;
    let name = c.string("tensor name")?;
    if name.len() > MAX_TENSOR_NAME {
        let msg = format!("tensor name is {} bytes, the GGUF limit is {MAX_TENSOR_NAME}", name.len());
        return Err(gguf_err(name_at, msg));
    }
    let dims_at = c.pos;
    let n_dims: u32 = c.num("n_dims")?;
    if n_dims > 4 {
        return Err(gguf_err(dims_at, format!("tensor '{name}' has {n_dims} dimensions, at most 4 are allowed")));
    }
    let ne_at = c.pos;
    let mut ne = [1i64; 4];
    for (d, slot) in ne.iter_mut().enumerate().take(n_dims as usize) {
        let at = c.pos;
        let v: u64 = c.num(format_args!("ne[{d}]"))?;
        *slot = i64::try_from(v)
            .map_err(|_| gguf_err(at, format!("tensor '{name}': ne[{d}] = {v} is negative as an int64")))?;
    }
    let Some(n_elements) = ne.iter().try_fold(1i64, |acc, &n| acc.checked_mul(n)) else {
        return Err(gguf_err(ne_at, format!("tensor '{name}': element count of shape {ne:?} overflows int64")));
    };
    let type_id: u32 = c.num("tensor type")?;
    let dtype = DType::from_ggml_id(type_id);
    let size = match dtype {
        None => None,
        Some(dtype) => Some(
            dtype
                .row_size(ne[0])
                .ok_or_else(|| {
                    let bs = dtype.block_size();
                    gguf_err(
                        ne_at,
                        format!("tensor '{name}': ne[0] = {} is not a multiple of the {dtype} block size {bs}", ne[0]),
                    )
                })
                .and_then(|row| {
                    ne[1..]
                        .iter()
                        .try_fold(row, |acc, &n| usize::try_from(n).ok().and_then(|n| acc.checked_mul(n)))
                        .ok_or_else(|| {
                            gguf_err(ne_at, format!("tensor '{name}': byte size of shape {ne:?} ({dtype}) overflows"))
                        })
                })?,
        ),
    };
    let offset_at = c.pos;
    let offset: u64 = c.num("tensor offset")?;
    let offset = usize::try_from(offset).map_err(|_| {
        gguf_err(offset_at, format!("tensor '{name}': offset {offset} does not fit this machine's address space"))
    })?;
    Ok(RawInfo { name, dtype, type_id, ne, n_dims, n_elements, offset, size, bound: 0, name_at, offset_at })
}
