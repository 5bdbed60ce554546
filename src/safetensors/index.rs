//! Sharded checkpoints: `model.safetensors.index.json` and the files it names.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};

use super::file::SafetensorsFile;
use crate::error::{Error, Result};

/// The largest index file read (64 MiB).
const MAX_INDEX_SIZE: u64 = 64 << 20;

/// A sharded safetensors checkpoint: the index's `weight_map` (tensor name →
/// shard file, relative to the index's folder) and every shard, each opened
/// (mapped and validated) once.
#[derive(Clone, Debug)]
pub struct SafetensorsIndex {
    shards: Vec<SafetensorsFile>,
    /// tensor name → index in `shards`, in name order.
    weight_map: BTreeMap<String, usize>,
}

fn err(msg: String) -> Error {
    Error::Safetensors { offset: 0, msg }
}

impl SafetensorsIndex {
    /// Reads the index at `path` and opens every shard it names. Other keys
    /// of the index (`metadata`) are ignored.
    ///
    /// # Errors
    /// [`Error::Io`] if a file cannot be read (a missing shard names its
    /// path), [`Error::Safetensors`] if the index is not a JSON object with a
    /// `weight_map` object of strings (duplicate keys refused), a shard name
    /// is not a plain file name in the index's folder, a shard is
    /// invalid, a tensor of the map is not in its shard, or a tensor is in
    /// two shards.
    pub fn open(path: impl AsRef<Path>) -> Result<SafetensorsIndex> {
        let path = path.as_ref();
        let what = path.display();
        let len = std::fs::metadata(path)?.len();
        if len > MAX_INDEX_SIZE {
            return Err(err(format!("index {what}: {len} bytes exceeds the limit of {MAX_INDEX_SIZE}")));
        }
        let text = std::fs::read(path)?;
        let index: IndexJson = serde_json::from_slice(&text).map_err(|e| err(format!("index {what}: {e}")))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut shard_of: HashMap<String, usize> = HashMap::new();
        let mut shards = Vec::new();
        let mut weight_map = BTreeMap::new();
        for (name, file) in index.weight_map {
            if Path::new(&file).file_name() != Some(std::ffi::OsStr::new(&file)) {
                return Err(err(format!("index {what}: shard {file:?} of tensor {name:?} is not a plain file name")));
            }
            let i = match shard_of.get(&file) {
                Some(&i) => i,
                None => {
                    let shard_path: PathBuf = dir.join(&file);
                    let shard = SafetensorsFile::open(&shard_path).map_err(|e| match e {
                        Error::Io(io) => {
                            Error::Io(std::io::Error::new(io.kind(), format!("shard {}: {io}", shard_path.display())))
                        }
                        Error::Safetensors { offset, msg } => {
                            Error::Safetensors { offset, msg: format!("shard {}: {msg}", shard_path.display()) }
                        }
                        e => e,
                    })?;
                    shards.push(shard);
                    shard_of.insert(file.clone(), shards.len() - 1);
                    shards.len() - 1
                }
            };
            if !shards[i].names().any(|n| n == name) {
                return Err(err(format!("index {what}: tensor {name:?} is not in its shard {file}")));
            }
            weight_map.insert(name, i);
        }
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, s) in shards.iter().enumerate() {
            for n in s.names() {
                if let Some(&j) = seen.get(n) {
                    return Err(err(format!(
                        "index {what}: tensor {n:?} is in two shards, {} and {}",
                        shards[j].path().display(),
                        s.path().display()
                    )));
                }
                seen.insert(n, i);
            }
        }
        Ok(SafetensorsIndex { shards, weight_map })
    }

    /// The shards, in the order the index first names them.
    pub fn shards(&self) -> &[SafetensorsFile] {
        &self.shards
    }

    /// The shard holding the tensor `name`, if the index names it.
    pub fn shard_of(&self, name: &str) -> Option<&SafetensorsFile> {
        self.weight_map.get(name).map(|&i| &self.shards[i])
    }

    /// The tensor names of the index, in name order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.weight_map.keys().map(String::as_str)
    }
}

/// The index: `weight_map` required, other keys ignored, no key twice.
struct IndexJson {
    weight_map: Vec<(String, String)>,
}

impl<'de> Deserialize<'de> for IndexJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = IndexJson;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an index object with a weight_map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<IndexJson, A::Error> {
                let mut seen = HashSet::new();
                let mut weight_map = None;
                while let Some(key) = map.next_key::<String>()? {
                    if !seen.insert(key.clone()) {
                        return Err(de::Error::custom(format!("duplicate key {key:?}")));
                    }
                    if key == "weight_map" {
                        weight_map = Some(map.next_value::<WeightMap>()?.0);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(IndexJson { weight_map: weight_map.ok_or_else(|| de::Error::missing_field("weight_map"))? })
            }
        }
        d.deserialize_map(V)
    }
}

/// `weight_map`: tensor name → file name, names unique.
struct WeightMap(Vec<(String, String)>);

impl<'de> Deserialize<'de> for WeightMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = WeightMap;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of tensor name to file name")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<WeightMap, A::Error> {
                let mut seen = HashSet::new();
                let mut out = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    if !seen.insert(key.clone()) {
                        return Err(de::Error::custom(format!("tensor {key:?} is named twice in weight_map")));
                    }
                    out.push((key, map.next_value::<String>()?));
                }
                Ok(WeightMap(out))
            }
        }
        d.deserialize_map(V)
    }
}
