//! Loading weights: the tensors of a GGUF file become read-only leaves of a
//! context whose bytes are the file's mapping (no copy; a tensor the file
//! stores misaligned for its type is copied). Tensors of a type id rgml does
//! not know are left out; asking for one is an error naming it and its id.

use std::collections::HashMap;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::tensor::TensorId;

/// A file's tensors, by name, as leaves of one context.
#[derive(Clone, Debug, Default)]
pub struct Weights {
    by_name: HashMap<String, TensorId>,
    order: Vec<(String, TensorId)>,
    /// The tensors left out, by name: their type id and why.
    unknown: HashMap<String, (u32, String)>,
}

impl Weights {
    /// The leaf named `name`; an error naming the missing tensor, or
    /// [`Error::UnknownType`] (with the name and type id) for a tensor of the
    /// file whose type rgml does not know.
    pub fn get(&self, name: &str) -> Result<TensorId> {
        if let Some(&id) = self.by_name.get(name) {
            return Ok(id);
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
