//! `--n-gpu-layers`: a model split between a GPU and the CPU by layer, as
//! llama.cpp's `-ngl` splits it: the last N repeating layers (their weights
//! and KV cache) on the GPU, the output layer too once N exceeds the layer
//! count, the rest on the CPU; any op the GPU lacks runs on the CPU as well.
//!
//! One difference: llama.cpp keeps the input embedding on the CPU always;
//! here `token_embd` goes with the output layer, since a tied output reads
//! the same tensor (llama.cpp duplicates it) and fetching a few rows costs
//! nothing on either side.

use rgml::{AnyBackend, Context, Result, SplitBackend, TensorId};

/// Index of the GPU in the split's backends.
pub const GPU: usize = 0;
/// Index of the CPU in the split's backends.
pub const CPU: usize = 1;

/// The layer a model tensor belongs to, by its name: `blk.N.*` and the
/// caches `cache_k.N`/`cache_v.N` to layer N, the output and input tensors
/// to `n_layer` (the output layer), anything else to none.
pub fn layer_of(name: &str, n_layer: usize) -> Option<usize> {
    if let Some(rest) = name.strip_prefix("blk.") {
        return rest.split('.').next()?.parse().ok();
    }
    if let Some(n) = name.strip_prefix("cache_k.").or_else(|| name.strip_prefix("cache_v.")) {
        return n.parse().ok();
    }
    let output = ["output.", "output_norm.", "token_embd."];
    output.iter().any(|p| name.starts_with(p)).then_some(n_layer)
}

/// Whether layer `layer` (`n_layer`: the output layer) runs on the GPU with
/// `n_gpu_layers` offloaded.
pub fn on_gpu(layer: usize, n_layer: usize, n_gpu_layers: usize) -> bool {
    if layer >= n_layer {
        n_gpu_layers > n_layer
    } else {
        layer >= n_layer.saturating_sub(n_gpu_layers)
    }
}

/// `gpu` and `cpu` as one backend, with `n_gpu_layers` of the model's
/// `n_layer` layers on the GPU (`None`: all of them and the output layer).
pub fn split(
    gpu: AnyBackend,
    cpu: AnyBackend,
    n_layer: usize,
    n_gpu_layers: Option<usize>,
) -> Result<SplitBackend<AnyBackend>> {
    let ngl = n_gpu_layers.unwrap_or(n_layer + 1);
    SplitBackend::with_homes(vec![gpu, cpu], move |ctx: &Context, id: TensorId| {
        let layer = layer_of(ctx.tensor(id).ok()?.name(), n_layer)?;
        Some(if on_gpu(layer, n_layer, ngl) { GPU } else { CPU })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_layers() {
        assert_eq!(layer_of("blk.12.attn_q.weight", 30), Some(12));
        assert_eq!(layer_of("cache_v.3", 30), Some(3));
        assert_eq!(layer_of("output_norm.weight", 30), Some(30));
        assert_eq!(layer_of("token_embd.weight", 30), Some(30));
        assert_eq!(layer_of("rope_freqs.weight", 30), None);
        assert_eq!(layer_of("blk.x.attn_q.weight", 30), None);
    }

    #[test]
    fn the_last_layers_go_first_and_the_output_last() {
        let gpu = |ngl| (0..=4).filter(|&l| on_gpu(l, 4, ngl)).collect::<Vec<_>>();
        assert_eq!(gpu(0), Vec::<usize>::new());
        assert_eq!(gpu(1), [3]);
        assert_eq!(gpu(4), [0, 1, 2, 3]);
        assert_eq!(gpu(5), [0, 1, 2, 3, 4]);
        assert_eq!(gpu(99), [0, 1, 2, 3, 4]);
    }
}
