//! The header's JSON, read by serde visitors that keep key order and refuse
//! duplicate keys (which `serde_json::Value` would silently merge), unknown
//! fields, and over-long arrays, before anything is built from it.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use super::format::{MAX_SHAPE_DIMS, METADATA_KEY};

/// One tensor entry as written, before validation.
pub(super) struct RawEntry {
    pub name: String,
    pub dtype: String,
    pub shape: Vec<u64>,
    pub offsets: [u64; 2],
}

/// The whole header as written: tensor entries in file order, then metadata.
pub(super) struct RawHeader {
    pub entries: Vec<RawEntry>,
    pub metadata: Vec<(String, String)>,
}

/// Reads `json` (the whole header, trailing whitespace allowed) into a
/// [`RawHeader`]; on error, also the key of the entry being read, if any.
pub(super) fn parse(json: &[u8]) -> Result<RawHeader, (serde_json::Error, Option<String>)> {
    let current = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(json);
    let header = (&mut de).deserialize_map(HeaderVisitor { current: &current }).map_err(|e| (e, current.take()))?;
    de.end().map_err(|e| (e, None))?;
    Ok(header)
}

/// serde_json's message without its " at line L column C" suffix.
pub(super) fn message(e: &serde_json::Error) -> String {
    let s = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    s.strip_suffix(&suffix).map_or(s.clone(), str::to_string)
}

struct HeaderVisitor<'a> {
    /// The key whose value is being read.
    current: &'a RefCell<Option<String>>,
}

impl<'de> Visitor<'de> for HeaderVisitor<'_> {
    type Value = RawHeader;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object of tensor entries")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawHeader, A::Error> {
        let mut seen = HashSet::new();
        let mut entries = Vec::new();
        let mut metadata = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
            *self.current.borrow_mut() = Some(key.clone());
            if key == METADATA_KEY {
                metadata = map.next_value::<Metadata>()?.0;
            } else {
                let f: EntryFields = map.next_value()?;
                entries.push(RawEntry { name: key, dtype: f.dtype, shape: f.shape.0, offsets: f.offsets });
            }
            *self.current.borrow_mut() = None;
        }
        Ok(RawHeader { entries, metadata })
    }
}

/// `__metadata__`: an object of strings, keys unique.
struct Metadata(Vec<(String, String)>);

impl<'de> Deserialize<'de> for Metadata {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Metadata;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of string values (__metadata__)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Metadata, A::Error> {
                let mut seen = HashSet::new();
                let mut out = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    if !seen.insert(key.clone()) {
                        return Err(de::Error::custom(format!("duplicate __metadata__ key {key:?}")));
                    }
                    out.push((key, map.next_value::<String>()?));
                }
                Ok(Metadata(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// The three fields of a tensor entry, each exactly once.
struct EntryFields {
    dtype: String,
    shape: Shape,
    offsets: [u64; 2],
}

impl<'de> Deserialize<'de> for EntryFields {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = EntryFields;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object with dtype, shape and data_offsets")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<EntryFields, A::Error> {
                let (mut dtype, mut shape, mut offsets) = (None, None, None);
                while let Some(key) = map.next_key::<String>()? {
                    let dup = match key.as_str() {
                        "dtype" => dtype.replace(map.next_value::<String>()?).is_some(),
                        "shape" => shape.replace(map.next_value::<Shape>()?).is_some(),
                        "data_offsets" => offsets.replace(map.next_value::<[u64; 2]>()?).is_some(),
                        _ => return Err(de::Error::custom(format!("unknown field {key:?}"))),
                    };
                    if dup {
                        return Err(de::Error::custom(format!("duplicate field {key:?}")));
                    }
                }
                Ok(EntryFields {
                    dtype: dtype.ok_or_else(|| de::Error::missing_field("dtype"))?,
                    shape: shape.ok_or_else(|| de::Error::missing_field("shape"))?,
                    offsets: offsets.ok_or_else(|| de::Error::missing_field("data_offsets"))?,
                })
            }
        }
        d.deserialize_map(V)
    }
}

/// A shape: non-negative integers, at most [`MAX_SHAPE_DIMS`] of them.
struct Shape(Vec<u64>);

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Shape;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "an array of at most {MAX_SHAPE_DIMS} non-negative integers")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
                let mut dims = Vec::new();
                while let Some(d) = seq.next_element::<u64>()? {
                    if dims.len() == MAX_SHAPE_DIMS {
                        return Err(de::Error::custom(format!("shape has more than {MAX_SHAPE_DIMS} dims")));
                    }
                    dims.push(d);
                }
                Ok(Shape(dims))
            }
        }
        d.deserialize_seq(V)
    }
}

/// The byte offset (within `json`) of serde_json's error position (1-based
/// line and column, the column counted in bytes).
pub(super) fn error_offset(json: &[u8], e: &serde_json::Error) -> usize {
    let line_start = if e.line() <= 1 {
        0
    } else {
        json.iter().enumerate().filter(|&(_, &b)| b == b'\n').nth(e.line() - 2).map_or(json.len(), |(i, _)| i + 1)
    };
    (line_start + e.column().saturating_sub(1)).min(json.len())
}
