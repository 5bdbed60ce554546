//! The parsed header of a GGUF file: metadata, tensor infos, layout.

use std::collections::HashMap;
use std::ops::Range;

use super::value::{Array, Value};
use crate::dtype::DType;
use crate::error::{Error, Result};

/// One tensor's entry in the header: name, type, shape, and where its bytes are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// The tensor's name (at most 64 bytes of UTF-8).
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape in ggml order: `ne[0]` is the row length (fastest), unused dims are 1.
    pub ne: [i64; 4],
    /// Number of dimensions stored in the file (0..=4).
    pub n_dims: u32,
    /// Byte offset of the data, relative to the start of the data section.
    pub offset: usize,
    /// Bytes of data: `ne[0]/block_size*type_size * ne[1]*ne[2]*ne[3]`.
    pub size: usize,
}

impl TensorInfo {
    /// Number of elements (0 if any dimension is 0).
    pub fn n_elements(&self) -> i64 {
        // cannot overflow for an info from the parser; saturates for hand-made ones
        self.ne.iter().fold(1i64, |a, &n| a.saturating_mul(n))
    }

    /// Strides in bytes of the contiguous layout, ggml order (`nb[0]` = type size).
    pub fn nb(&self) -> [usize; 4] {
        let dim = |i: usize| usize::try_from(self.ne[i]).unwrap_or(0);
        let mut nb = [self.dtype.type_size(), 0, 0, 0];
        nb[1] = nb[0].saturating_mul(dim(0) / self.dtype.block_size());
        nb[2] = nb[1].saturating_mul(dim(1));
        nb[3] = nb[2].saturating_mul(dim(2));
        nb
    }
}

/// A tensor whose ggml type id rgml does not know: a type removed from ggml
/// (Q4_2, Q4_0_4_4…), one ggml has and rgml does not implement (NVFP4, Q1_0,
/// Q2_0), or one newer than rgml. Its byte size cannot be computed, so it is
/// bounded: its bytes lie between its offset and the next tensor's (or the
/// end of the file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownTensor {
    /// The tensor's name.
    pub name: String,
    /// Its ggml type id, as stored.
    pub type_id: u32,
    /// Shape in ggml order (unused dims are 1).
    pub ne: [i64; 4],
    /// Number of dimensions stored in the file.
    pub n_dims: u32,
    /// Byte offset of the data, relative to the start of the data section.
    pub offset: usize,
    /// The most bytes its data can have: up to the next tensor's offset, or to
    /// the end of the file (0 for a tensor without elements).
    pub max_size: usize,
}

impl UnknownTensor {
    /// Why rgml cannot use it: the id and, for ids ggml has used, the name
    /// (`"type id 4 (Q4_2) was removed from ggml"`).
    pub fn why(&self) -> String {
        DType::unknown_id_reason(self.type_id)
    }
}

/// One tensor of a file, of a type rgml knows or not ([`GgufHeader::entries`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorEntry<'a> {
    /// A tensor of a [`DType`].
    Known(&'a TensorInfo),
    /// A tensor of a type id rgml does not know.
    Unknown(&'a UnknownTensor),
}

impl<'a> TensorEntry<'a> {
    /// The tensor's name.
    pub fn name(&self) -> &'a str {
        match self {
            TensorEntry::Known(t) => &t.name,
            TensorEntry::Unknown(t) => &t.name,
        }
    }
    /// The shape, ggml order.
    pub fn ne(&self) -> [i64; 4] {
        match self {
            TensorEntry::Known(t) => t.ne,
            TensorEntry::Unknown(t) => t.ne,
        }
    }
    /// The stored number of dimensions.
    pub fn n_dims(&self) -> u32 {
        match self {
            TensorEntry::Known(t) => t.n_dims,
            TensorEntry::Unknown(t) => t.n_dims,
        }
    }
    /// The ggml type id as stored.
    pub fn type_id(&self) -> u32 {
        match self {
            TensorEntry::Known(t) => t.dtype.ggml_id(),
            TensorEntry::Unknown(t) => t.type_id,
        }
    }
    /// The offset in the data section.
    pub fn offset(&self) -> usize {
        match self {
            TensorEntry::Known(t) => t.offset,
            TensorEntry::Unknown(t) => t.offset,
        }
    }
}

/// Where the `i`-th tensor of the file is kept: in `tensors` or in `unknown`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Slot {
    Known(usize),
    Unknown(usize),
}

/// Everything in a GGUF file before its tensor data, parsed and validated:
/// every tensor's bytes lie inside the file, aligned and without overlaps.
///
/// Tensors of a type id rgml does not know do not make the file invalid: they
/// are kept apart ([`GgufHeader::unknown_tensors`]), bounded by the next
/// tensor, and every other check applies to them. [`GgufHeader::tensors`]
/// holds the others; [`GgufHeader::entries`] lists all in file order.
///
/// Typed accessors (`get_u32`…) accept the exact type and every narrower type
/// whose values all convert losslessly: `get_u32` accepts `u8`, `u16` and
/// `u32`; `get_i64` accepts every integer type but `u64`; `get_f64` accepts
/// `f32`. They never convert by value (an `i32` holding 5 is not a `u32`),
/// and never between integers and floats. Use [`GgufHeader::get`] for the
/// value as stored.
#[derive(Clone, Debug)]
pub struct GgufHeader {
    pub(crate) version: u32,
    pub(crate) alignment: usize,
    pub(crate) data_offset: usize,
    pub(crate) file_size: usize,
    pub(crate) metadata: Vec<(String, Value)>,
    pub(crate) kv_index: HashMap<String, usize>,
    pub(crate) tensors: Vec<TensorInfo>,
    pub(crate) tensor_index: HashMap<String, usize>,
    pub(crate) unknown: Vec<UnknownTensor>,
    pub(crate) unknown_index: HashMap<String, usize>,
    /// Every tensor in file order.
    pub(crate) order: Vec<Slot>,
}

fn metadata_err(key: &str, msg: impl Into<String>) -> Error {
    Error::Metadata { key: key.to_string(), msg: msg.into() }
}

macro_rules! getter {
    ($name:ident, $t:ty, $accepts:literal, $($v:ident),+) => {
        #[doc = concat!("The value of `key` as `", stringify!($t), "`; accepts ", $accepts, ".")]
        ///
        /// # Errors
        /// [`Error::Metadata`] if the key is missing or holds another type.
        pub fn $name(&self, key: &str) -> Result<$t> {
            match self.require(key)? {
                $(Value::$v(x) => Ok(<$t>::from(*x)),)+
                v => Err(metadata_err(
                    key,
                    format!("expected {} ({}), found {}", stringify!($t), $accepts, v.type_description()),
                )),
            }
        }
    };
}

impl GgufHeader {
    /// The GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The data alignment: `general.alignment`, or 32 when absent.
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// Absolute byte offset of the data section: the end of the header padded to
    /// the alignment (with no tensors, the unpadded end of the header, as in ggml).
    pub fn data_offset(&self) -> usize {
        self.data_offset
    }

    /// Size of the whole file in bytes.
    pub fn file_size(&self) -> usize {
        self.file_size
    }

    /// All metadata, in file order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.metadata
    }

    /// The value of `key`, as stored.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.kv_index.get(key).map(|&i| &self.metadata[i].1)
    }

    fn require(&self, key: &str) -> Result<&Value> {
        self.get(key).ok_or_else(|| metadata_err(key, "not found"))
    }

    getter!(get_u8, u8, "u8 only", U8);
    getter!(get_i8, i8, "i8 only", I8);
    getter!(get_u16, u16, "u8 or u16", U8, U16);
    getter!(get_i16, i16, "i8, i16 or u8", I8, I16, U8);
    getter!(get_u32, u32, "u8, u16 or u32", U8, U16, U32);
    getter!(get_i32, i32, "i8, i16, i32, u8 or u16", I8, I16, I32, U8, U16);
    getter!(get_u64, u64, "u8, u16, u32 or u64", U8, U16, U32, U64);
    getter!(get_i64, i64, "any integer type but u64", I8, I16, I32, I64, U8, U16, U32);
    getter!(get_f32, f32, "f32 only", F32);
    getter!(get_f64, f64, "f32 or f64", F32, F64);
    getter!(get_bool, bool, "bool only", Bool);

    /// The string value of `key`.
    ///
    /// # Errors
    /// [`Error::Metadata`] if the key is missing or not a string.
    pub fn get_str(&self, key: &str) -> Result<&str> {
        match self.require(key)? {
            Value::String(s) => Ok(s),
            v => Err(metadata_err(key, format!("expected string, found {}", v.type_description()))),
        }
    }

    /// The array value of `key` (see [`Array`]'s `as_*` accessors for its elements).
    ///
    /// # Errors
    /// [`Error::Metadata`] if the key is missing or not an array.
    pub fn get_array(&self, key: &str) -> Result<&Array> {
        match self.require(key)? {
            Value::Array(a) => Ok(a),
            v => Err(metadata_err(key, format!("expected array, found {}", v.type_description()))),
        }
    }

    /// The array of strings of `key` (e.g. `tokenizer.ggml.tokens`).
    ///
    /// # Errors
    /// [`Error::Metadata`] if the key is missing or not an array of strings.
    pub fn get_str_array(&self, key: &str) -> Result<&[String]> {
        let a = self.get_array(key)?;
        a.as_strings()
            .ok_or_else(|| metadata_err(key, format!("expected array of string, found {}", a.type_description())))
    }

    /// The infos of the tensors whose type rgml knows, in file order (the
    /// others are in [`GgufHeader::unknown_tensors`]).
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor named `name`, if its type is one rgml knows.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    /// The tensors whose ggml type id rgml does not know, in file order.
    pub fn unknown_tensors(&self) -> &[UnknownTensor] {
        &self.unknown
    }

    /// The tensor named `name`, if its type id is one rgml does not know.
    pub fn unknown_tensor(&self, name: &str) -> Option<&UnknownTensor> {
        self.unknown_index.get(name).map(|&i| &self.unknown[i])
    }

    /// Every tensor of the file, known type or not, in file order.
    pub fn entries(&self) -> impl Iterator<Item = TensorEntry<'_>> {
        self.order.iter().map(|s| match *s {
            Slot::Known(i) => TensorEntry::Known(&self.tensors[i]),
            Slot::Unknown(i) => TensorEntry::Unknown(&self.unknown[i]),
        })
    }

    /// The number of tensors in the file, of known types or not.
    pub fn n_tensors(&self) -> usize {
        self.order.len()
    }

    /// Absolute byte range of a tensor's data in the file. For an info of this
    /// header it lies inside the file (checked by [`GgufHeader::parse`]).
    pub fn tensor_range(&self, info: &TensorInfo) -> Range<usize> {
        let start = self.data_offset.saturating_add(info.offset);
        start..start.saturating_add(info.size)
    }
}
