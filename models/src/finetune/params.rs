//! What a fine-tuning trains: F32 copies of the file's weights, or LoRA adapters
//! on the layers' matrices.

use rgml::gguf::GgufFile;
use rgml::{Context, DType, Result, TensorId, Weights};

use crate::model::kv;
use crate::quantize::dequantize_rows;
use crate::transformer::blocks::{Adapter, Adapters};
use crate::transformer::weights::{Ffn, Layer, Qkv};

/// One trained tensor of the file, and the parameters that train it.
pub(super) enum Trained {
    /// The tensor `name` itself, as an F32 parameter.
    Full { name: String, p: TensorId },
    /// An adapter of the tensor `name`.
    Lora { name: String, adapter: Adapter },
}

impl Trained {
    /// The optimizer's parameters.
    pub fn params(&self) -> Vec<TensorId> {
        match self {
            Trained::Full { p, .. } => vec![*p],
            Trained::Lora { adapter, .. } => vec![adapter.a, adapter.b],
        }
    }

    /// How many values those parameters hold.
    pub fn values(&self, ctx: &Context) -> usize {
        self.params().iter().map(|&p| ctx.layout(p).map_or(0, |l| l.nelements() as usize)).sum()
    }
}

/// Every weight of `file` (rope frequency factors, constants, aside) as an F32
/// parameter in its place in `w`. Checks first that the parameters, their gradients,
/// AdamW's two moments and the backend's copy fit in memory.
pub(super) fn full(ctx: &mut Context, file: &GgufFile, w: &mut Weights) -> Result<Vec<Trained>> {
    let infos: Vec<_> = file.tensors().iter().filter(|t| !t.name.starts_with("rope_")).collect();
    let values: u64 = infos.iter().map(|t| t.n_elements() as u64).sum();
    kv::check_fits(
        values.saturating_mul(4 * 5),
        &format!("training {values} weights in F32 (with gradients and AdamW's moments)"),
        "--lora RANK trains adapters instead",
    )?;
    let mut out = Vec::with_capacity(infos.len());
    for t in infos {
        let dims = (t.n_dims as usize).clamp(1, 4);
        let f32s = dequantize_rows(t.dtype, t.ne[0] as usize, file.tensor_bytes(t))?;
        let p = ctx.new_f32(&t.ne[..dims], &f32s)?;
        ctx.set_name(p, &t.name)?;
        ctx.set_param(p)?;
        w.replace(&t.name, p)?;
        out.push(Trained::Full { name: t.name.clone(), p });
    }
    Ok(out)
}

/// The matrices of `l` an adapter trains: the attention's and the feed-forward's
/// (of a mixture of experts, the shared expert's).
fn matrices(l: &Layer) -> Vec<TensorId> {
    let mut m = match l.qkv {
        Qkv::Split { q, k, v, .. } => vec![q, k, v],
        Qkv::Fused { w, .. } => vec![w],
    };
    m.push(l.wo);
    match l.ffn {
        Ffn::Gated { gate, up, down, .. } => m.extend([gate, up, down]),
        Ffn::FusedGateUp { up, down } => m.extend([up, down]),
        // the stacked experts take no adapter (a product per expert would); a shared expert does
        Ffn::Experts(x) => m.extend(x.shared.iter().flat_map(|s| [s.gate, s.up, s.down])),
    }
    m
}

/// Adapters of rank `rank` on every layer matrix: `a` uniform in ±1/√n_in (PEFT's
/// Kaiming start), `b` zero, so training starts from the file's model.
pub(super) fn lora(
    ctx: &mut Context,
    w: &Weights,
    layers: &[Layer],
    rank: usize,
    scale: f32,
    seed: u64,
    adapters: &mut Adapters,
) -> Result<Vec<Trained>> {
    let mut rng = SplitMix(seed);
    let mut out = Vec::new();
    for &m in layers.iter().flat_map(matrices).collect::<Vec<_>>().iter() {
        let name = ctx.label(m);
        debug_assert_eq!(w.find(&name), Some(m));
        let ne = ctx.layout(m)?.ne;
        let (n_in, n_out, r) = (ne[0], ne[1], rank as i64);
        let bound = 1.0 / (n_in as f64).sqrt();
        let a_init: Vec<f32> = (0..n_in * r).map(|_| ((rng.unit() * 2.0 - 1.0) * bound) as f32).collect();
        let a = ctx.new_f32(&[n_in, r], &a_init)?;
        let b = ctx.new_tensor(DType::F32, &[r, n_out])?;
        for (p, part) in [(a, "a"), (b, "b")] {
            ctx.set_name(p, format!("{name}.lora_{part}"))?;
            ctx.set_param(p)?;
        }
        let adapter = Adapter { a, b, scale };
        adapters.insert(m, adapter);
        out.push(Trained::Lora { name, adapter });
    }
    Ok(out)
}

/// SplitMix64: the adapters' initial values, the same for a seed everywhere.
struct SplitMix(u64);

impl SplitMix {
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}
