//! Metadata values: the 13 GGUF value types, scalars and (nested) typed arrays.

use std::fmt;

/// A GGUF metadata value type, with its number in the file (`gguf_type` in ggml).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueType {
    /// Unsigned 8-bit integer (id 0).
    U8,
    /// Signed 8-bit integer (id 1).
    I8,
    /// Unsigned 16-bit integer (id 2).
    U16,
    /// Signed 16-bit integer (id 3).
    I16,
    /// Unsigned 32-bit integer (id 4).
    U32,
    /// Signed 32-bit integer (id 5).
    I32,
    /// IEEE binary32 (id 6).
    F32,
    /// One byte, 0 or 1 (id 7).
    Bool,
    /// u64 byte length + UTF-8 bytes (id 8).
    String,
    /// Element type id, u64 element count, elements (id 9).
    Array,
    /// Unsigned 64-bit integer (id 10).
    U64,
    /// Signed 64-bit integer (id 11).
    I64,
    /// IEEE binary64 (id 12).
    F64,
}

impl ValueType {
    /// Every type, in id order.
    pub const ALL: [ValueType; 13] = [
        ValueType::U8,
        ValueType::I8,
        ValueType::U16,
        ValueType::I16,
        ValueType::U32,
        ValueType::I32,
        ValueType::F32,
        ValueType::Bool,
        ValueType::String,
        ValueType::Array,
        ValueType::U64,
        ValueType::I64,
        ValueType::F64,
    ];

    /// The type's number in a GGUF file.
    pub const fn id(self) -> u32 {
        self as u32
    }

    /// The type with this number, if it is one of the 13.
    pub fn from_id(id: u32) -> Option<ValueType> {
        ValueType::ALL.get(usize::try_from(id).ok()?).copied()
    }

    /// Bytes of one value of a fixed-size type; `None` for strings and arrays.
    pub const fn fixed_size(self) -> Option<usize> {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => Some(1),
            ValueType::U16 | ValueType::I16 => Some(2),
            ValueType::U32 | ValueType::I32 | ValueType::F32 => Some(4),
            ValueType::U64 | ValueType::I64 | ValueType::F64 => Some(8),
            ValueType::String | ValueType::Array => None,
        }
    }

    /// The fewest bytes one value of this type takes in a file: its fixed size,
    /// 8 for a string (the length), 12 for an array (element type and count).
    pub const fn min_size(self) -> usize {
        match self {
            ValueType::String => 8,
            ValueType::Array => 12,
            _ => match self.fixed_size() {
                Some(n) => n,
                None => 0,
            },
        }
    }

    /// Short name: `u8`, `i32`, `f64`, `bool`, `string`, `array`…
    pub const fn name(self) -> &'static str {
        match self {
            ValueType::U8 => "u8",
            ValueType::I8 => "i8",
            ValueType::U16 => "u16",
            ValueType::I16 => "i16",
            ValueType::U32 => "u32",
            ValueType::I32 => "i32",
            ValueType::F32 => "f32",
            ValueType::Bool => "bool",
            ValueType::String => "string",
            ValueType::Array => "array",
            ValueType::U64 => "u64",
            ValueType::I64 => "i64",
            ValueType::F64 => "f64",
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A metadata value. Arrays are stored typed ([`Array`]), so an array of a
/// million `u8` takes a megabyte, not a million enum values, and an empty
/// array keeps its element type.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `u8`.
    U8(u8),
    /// `i8`.
    I8(i8),
    /// `u16`.
    U16(u16),
    /// `i16`.
    I16(i16),
    /// `u32`.
    U32(u32),
    /// `i32`.
    I32(i32),
    /// `f32`.
    F32(f32),
    /// `bool`.
    Bool(bool),
    /// A UTF-8 string.
    String(String),
    /// An array (possibly of arrays).
    Array(Array),
    /// `u64`.
    U64(u64),
    /// `i64`.
    I64(i64),
    /// `f64`.
    F64(f64),
}

/// A homogeneous array: one `Vec` per element type. Arrays of arrays hold
/// inner arrays that may each have their own element type and length.
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    /// Array of `u8`.
    U8(Vec<u8>),
    /// Array of `i8`.
    I8(Vec<i8>),
    /// Array of `u16`.
    U16(Vec<u16>),
    /// Array of `i16`.
    I16(Vec<i16>),
    /// Array of `u32`.
    U32(Vec<u32>),
    /// Array of `i32`.
    I32(Vec<i32>),
    /// Array of `f32`.
    F32(Vec<f32>),
    /// Array of `bool`.
    Bool(Vec<bool>),
    /// Array of strings.
    String(Vec<String>),
    /// Array of arrays.
    Array(Vec<Array>),
    /// Array of `u64`.
    U64(Vec<u64>),
    /// Array of `i64`.
    I64(Vec<i64>),
    /// Array of `f64`.
    F64(Vec<f64>),
}

/// Calls `$m!(Variant, elem_type, accessor)` for each of the 11 fixed-size types.
macro_rules! for_fixed_types {
    ($m:ident) => {
        $m!(U8, u8, as_u8);
        $m!(I8, i8, as_i8);
        $m!(U16, u16, as_u16);
        $m!(I16, i16, as_i16);
        $m!(U32, u32, as_u32);
        $m!(I32, i32, as_i32);
        $m!(F32, f32, as_f32);
        $m!(Bool, bool, as_bool);
        $m!(U64, u64, as_u64);
        $m!(I64, i64, as_i64);
        $m!(F64, f64, as_f64);
    };
}

impl Value {
    /// The value's type.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    /// The string, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The array, if this is an array.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// A description of the type for messages: `u32`, `array of string`,
    /// `array of array of i32`…
    pub fn type_description(&self) -> String {
        match self {
            Value::Array(a) => a.type_description(),
            v => v.value_type().name().to_string(),
        }
    }
}

impl Array {
    /// The element type.
    pub fn elem_type(&self) -> ValueType {
        match self {
            Array::U8(_) => ValueType::U8,
            Array::I8(_) => ValueType::I8,
            Array::U16(_) => ValueType::U16,
            Array::I16(_) => ValueType::I16,
            Array::U32(_) => ValueType::U32,
            Array::I32(_) => ValueType::I32,
            Array::F32(_) => ValueType::F32,
            Array::Bool(_) => ValueType::Bool,
            Array::String(_) => ValueType::String,
            Array::Array(_) => ValueType::Array,
            Array::U64(_) => ValueType::U64,
            Array::I64(_) => ValueType::I64,
            Array::F64(_) => ValueType::F64,
        }
    }

    /// Number of elements (not bytes; inner arrays count as one each).
    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::String(v) => v.len(),
            Array::Array(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F64(v) => v.len(),
        }
    }

    /// True if the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An empty array with this element type.
    pub fn empty(elem_type: ValueType) -> Array {
        match elem_type {
            ValueType::U8 => Array::U8(Vec::new()),
            ValueType::I8 => Array::I8(Vec::new()),
            ValueType::U16 => Array::U16(Vec::new()),
            ValueType::I16 => Array::I16(Vec::new()),
            ValueType::U32 => Array::U32(Vec::new()),
            ValueType::I32 => Array::I32(Vec::new()),
            ValueType::F32 => Array::F32(Vec::new()),
            ValueType::Bool => Array::Bool(Vec::new()),
            ValueType::String => Array::String(Vec::new()),
            ValueType::Array => Array::Array(Vec::new()),
            ValueType::U64 => Array::U64(Vec::new()),
            ValueType::I64 => Array::I64(Vec::new()),
            ValueType::F64 => Array::F64(Vec::new()),
        }
    }

    /// The strings, if this is an array of strings.
    pub fn as_strings(&self) -> Option<&[String]> {
        match self {
            Array::String(v) => Some(v),
            _ => None,
        }
    }

    /// The inner arrays, if this is an array of arrays.
    pub fn as_arrays(&self) -> Option<&[Array]> {
        match self {
            Array::Array(v) => Some(v),
            _ => None,
        }
    }

    /// Levels of array nesting: 1 for an array of scalars or strings, 2 for an
    /// array of such arrays, and so on (an empty array of arrays counts 2).
    pub fn depth(&self) -> usize {
        match self {
            Array::Array(v) => 1 + v.iter().map(Array::depth).max().unwrap_or(1),
            _ => 1,
        }
    }

    /// A description of the type for messages: `array of u32`, `array of array of i8`…
    pub fn type_description(&self) -> String {
        match self {
            Array::Array(v) => match v.first() {
                Some(inner) => format!("array of {}", inner.type_description()),
                None => "array of array".to_string(),
            },
            a => format!("array of {}", a.elem_type()),
        }
    }
}

macro_rules! fixed_impls {
    ($v:ident, $t:ty, $as:ident) => {
        impl From<$t> for Value {
            fn from(x: $t) -> Value {
                Value::$v(x)
            }
        }
        impl From<Vec<$t>> for Array {
            fn from(x: Vec<$t>) -> Array {
                Array::$v(x)
            }
        }
        impl From<Vec<$t>> for Value {
            fn from(x: Vec<$t>) -> Value {
                Value::Array(Array::$v(x))
            }
        }
        impl From<&[$t]> for Value {
            fn from(x: &[$t]) -> Value {
                Value::Array(Array::$v(x.to_vec()))
            }
        }
        impl Array {
            #[doc = concat!("The elements, if this is an array of `", stringify!($t), "`.")]
            pub fn $as(&self) -> Option<&[$t]> {
                match self {
                    Array::$v(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}
for_fixed_types!(fixed_impls);

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}
impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_string())
    }
}
impl From<Array> for Value {
    fn from(a: Array) -> Value {
        Value::Array(a)
    }
}
impl From<Vec<String>> for Array {
    fn from(v: Vec<String>) -> Array {
        Array::String(v)
    }
}
impl From<Vec<String>> for Value {
    fn from(v: Vec<String>) -> Value {
        Value::Array(Array::String(v))
    }
}
impl From<Vec<&str>> for Value {
    fn from(v: Vec<&str>) -> Value {
        Value::Array(Array::String(v.into_iter().map(str::to_string).collect()))
    }
}
impl From<Vec<Array>> for Array {
    fn from(v: Vec<Array>) -> Array {
        Array::Array(v)
    }
}
impl From<Vec<Array>> for Value {
    fn from(v: Vec<Array>) -> Value {
        Value::Array(Array::Array(v))
    }
}
