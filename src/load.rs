//! Loading weights: the tensors of a GGUF or safetensors file become
//! read-only leaves of a context whose bytes are the file's mapping (no copy;
//! a tensor the file stores misaligned for its type is copied). Tensors rgml
//! cannot use (a GGUF type id it does not know; a safetensors dtype it has no
//! type for, or more than 4 dims) are left out; asking for one is an error
//! naming it and why.

use std::collections::HashMap;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::safetensors::{SafetensorsFile, SafetensorsIndex};
use crate::tensor::TensorId;

/// A file's tensors, by name, as leaves of one context.
#[derive(Clone, Debug, Default)]
pub struct Weights {
    by_name: HashMap<String, TensorId>,
    order: Vec<(String, TensorId)>,
    /// The tensors left out, by name: their type id and why.
    unknown: HashMap<String, (u32, String)>,
    /// The safetensors tensors left out, by name: where their data start and why.
    skipped: HashMap<String, (usize, String)>,
}

impl Weights {
    /// The leaf named `name`; an error naming the missing tensor,
    /// [`Error::UnknownType`] (with the name and type id) for a tensor of a
    /// GGUF file whose type rgml does not know, or [`Error::Safetensors`]
    /// (with the name, dtype or shape, and why) for a tensor of a safetensors
    /// file that was left out.
    pub fn get(&self, name: &str) -> Result<TensorId> {
        if let Some(&id) = self.by_name.get(name) {
            return Ok(id);
        }
        if let Some((offset, why)) = self.skipped.get(name) {
            return Err(Error::Safetensors {
                offset: *offset as u64,
                msg: format!("tensor {name:?}: {why}; it was not loaded"),
            });
        }
        match self.unknown.get(name) {
            Some((type_id, why)) => Err(Error::UnknownType {
                name: name.to_string(),
                type_id: *type_id,
                why: format!("{why}; it was not loaded"),
            }),
            None => Err(Error::Metadata { key: format!("tensor {name}"), msg: "not in the model file".into() }),
        }
    }
    /// The tensors of the file that were left out (type id rgml does not
    /// know), as `(name, type id)` in no particular order.
    pub fn unknown(&self) -> impl Iterator<Item = (&str, u32)> {
        self.unknown.iter().map(|(n, (id, _))| (n.as_str(), *id))
    }
    /// The safetensors tensors that were left out, as `(name, why)` in no
    /// particular order.
    pub fn skipped(&self) -> impl Iterator<Item = (&str, &str)> {
        self.skipped.iter().map(|(n, (_, why))| (n.as_str(), why.as_str()))
    }
    /// The leaf named `name`, if there is one (`None` for a tensor of an unknown type too).
    pub fn find(&self, name: &str) -> Option<TensorId> {
        self.by_name.get(name).copied()
    }
    /// Puts `id` in the place of the tensor named `name` (e.g. a trained F32
    /// copy of a quantized weight); returns the leaf it replaces.
    ///
    /// # Errors
    /// As [`Weights::get`] when there is no tensor `name`.
    pub fn replace(&mut self, name: &str, id: TensorId) -> Result<TensorId> {
        let old = self.get(name)?;
        self.by_name.insert(name.to_string(), id);
        if let Some(slot) = self.order.iter_mut().find(|(n, _)| n == name) {
            slot.1 = id;
        }
        Ok(old)
    }
    /// All tensors in file order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, TensorId)> {
        self.order.iter().map(|(n, id)| (n.as_str(), *id))
    }
    /// Number of tensors loaded (those of unknown types not counted).
    pub fn len(&self) -> usize {
        self.order.len()
    }
    /// True when the file held no tensor.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

/// Adds every tensor of `file` to `ctx` as a named, read-only leaf over the
/// file's mapping; tensors of a type id rgml does not know are left out (see
/// [`Weights::get`] and [`Weights::unknown`]).
pub fn load_gguf(ctx: &mut Context, file: &GgufFile) -> Result<Weights> {
    let mut w = Weights::default();
    for t in file.header().unknown_tensors() {
        w.unknown.insert(t.name.clone(), (t.type_id, t.why()));
    }
    for info in file.header().tensors() {
        let dims = (info.n_dims as usize).clamp(1, 4);
        let id = ctx.new_tensor_mapped(info.dtype, &info.ne[..dims], file.map(), file.tensor_range(info).start)?;
        ctx.set_name(id, &info.name)?;
        w.by_name.insert(info.name.clone(), id);
        w.order.push((info.name.clone(), id));
    }
    Ok(w)
}

/// Adds every loadable tensor of the safetensors `file` to `ctx` as a named,
/// read-only leaf over the file's mapping, in header order, with `ne` the
/// stored shape reversed (see [`crate::safetensors`]); a tensor stored
/// misaligned for its type is copied. Tensors rgml cannot load are left out
/// (see [`Weights::get`] and [`Weights::skipped`]).
///
/// # Errors
/// As [`Context::new_tensor_mapped`] (not for a file from
/// [`SafetensorsFile::open`], whose ranges are checked).
pub fn load_safetensors(ctx: &mut Context, file: &SafetensorsFile) -> Result<Weights> {
    let mut w = Weights::default();
    add_safetensors(ctx, file, &mut w)?;
    Ok(w)
}

/// Loads every shard of a sharded checkpoint into `ctx`, as
/// [`load_safetensors`] does one file: all the shards' tensors in one
/// [`Weights`], shard by shard in the order the index first names them.
///
/// # Errors
/// As [`load_safetensors`].
pub fn load_safetensors_index(ctx: &mut Context, index: &SafetensorsIndex) -> Result<Weights> {
    let mut w = Weights::default();
    for file in index.shards() {
        add_safetensors(ctx, file, &mut w)?;
    }
    Ok(w)
}

fn add_safetensors(ctx: &mut Context, file: &SafetensorsFile, w: &mut Weights) -> Result<()> {
    for t in file.skipped() {
        w.skipped.insert(t.name.clone(), (t.range.start, t.why.clone()));
    }
    for t in file.tensors() {
        let id = ctx.new_tensor_mapped(t.dtype, t.dims(), file.map(), t.range.start)?;
        ctx.set_name(id, &t.name)?;
        w.by_name.insert(t.name.clone(), id);
        w.order.push((t.name.clone(), id));
    }
    Ok(())
}
