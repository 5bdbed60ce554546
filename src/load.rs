//! Loading weights: the tensors of a GGUF file become read-only leaves of a
//! context whose bytes are the file's mapping (no copy; a tensor the file
//! stores misaligned for its type is copied).

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
}

impl Weights {
    /// The leaf named `name`, or an error naming the missing tensor.
    pub fn get(&self, name: &str) -> Result<TensorId> {
        self.by_name
            .get(name)
            .copied()
            .ok_or_else(|| Error::Metadata { key: format!("tensor {name}"), msg: "not in the model file".into() })
    }
    /// The leaf named `name`, if there is one.
    pub fn find(&self, name: &str) -> Option<TensorId> {
        self.by_name.get(name).copied()
    }
    /// All tensors in file order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, TensorId)> {
        self.order.iter().map(|(n, id)| (n.as_str(), *id))
    }
    /// Number of tensors.
    pub fn len(&self) -> usize {
        self.order.len()
    }
    /// True when the file held no tensor.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

/// Adds every tensor of `file` to `ctx` as a named, read-only leaf over the
/// file's mapping.
pub fn load_gguf(ctx: &mut Context, file: &GgufFile) -> Result<Weights> {
    let mut w = Weights::default();
    for info in file.header().tensors() {
        let dims = (info.n_dims as usize).clamp(1, 4);
        let id = ctx.new_tensor_mapped(info.dtype, &info.ne[..dims], file.map(), file.tensor_range(info).start)?;
        ctx.set_name(id, &info.name)?;
        w.by_name.insert(info.name.clone(), id);
        w.order.push((info.name.clone(), id));
    }
    Ok(w)
}
