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

/// Everything in a GGUF file before its tensor data, parsed and validated:
/// every tensor's bytes lie inside the file, aligned and without overlaps.
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
    /// Parses and validates the header of a whole GGUF file held in `bytes`.
    ///
    /// # Errors
    /// [`Error::Gguf`] with the byte offset of the first problem found.
    pub fn parse(bytes: &[u8]) -> Result<GgufHeader> {
        super::reader::parse(bytes)
    }

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

    /// All tensor infos, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    /// Absolute byte range of a tensor's data in the file. For an info of this
    /// header it lies inside the file (checked by [`GgufHeader::parse`]).
    pub fn tensor_range(&self, info: &TensorInfo) -> Range<usize> {
        let start = self.data_offset.saturating_add(info.offset);
        start..start.saturating_add(info.size)
    }
}
