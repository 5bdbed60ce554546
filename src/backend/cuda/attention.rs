//! `flash_attn_ext` on the device (`kernels/attention.cu`): one block per
//! query row and head, keys a chunk at a time with an online softmax; the
//! CPU's function up to the rounding of the softmax's order.

use super::device::Device;
use super::kernels::alibi_params;
use super::launch::{launch, per_row, Bound, BoundMut};
use crate::backend::exec::{Extra, SoftMax};
use crate::dtype::DType;
use crate::error::{Error, Result};

/// Keys per chunk of the kernel (`RG_FA_CHUNK`): a score each in shared memory.
const CHUNK: i64 = 256;

/// How the kernel rounds the query for keys of type `t` (as the CPU's dot
/// partner holds it), or `None` for key types it does not read.
pub(crate) fn query_rounding(t: DType) -> Option<i32> {
    match t {
        DType::F32 => Some(0),
        DType::F16 => Some(1),
        DType::BF16 => Some(2),
        // partners Q8_0 and Q8_1: the same quants and F16 scales
        DType::Q8_0 | DType::Q4_0 | DType::Q5_0 | DType::Q4_1 | DType::Q5_1 => Some(3),
        _ => None,
    }
}

/// `dst[:, h, i, s] = softmax(scale·q·kᵀ + slope·mask)·v` (see
/// [`crate::Context::flash_attn_ext`]).
pub(crate) fn flash_attn(dev: &Device, p: SoftMax, dst: BoundMut, qkv: [Bound; 3], extra: Extra<Bound>) -> Result<()> {
    const OP: &str = "flash_attn_ext";
    let ([q, k, v], mask) = (qkv, extra.mask);
    let q_round =
        query_rounding(k.l.dtype).ok_or(Error::Unsupported { op: "flash_attn_ext (CUDA keys)", dtype: k.l.dtype })?;
    let (qn, kn) = (q.l.ne, k.l.ne);
    if q.l.dtype != DType::F32 || kn[2] == 0 || qn[2] % kn[2] != 0 || dst.l.ne != [v.l.ne[0], qn[2], qn[1], qn[3]] {
        return Err(Error::internal(format!("flash_attn_ext of q {qn:?}, k {kn:?} into {:?}", dst.l.ne)));
    }
    if dst.l.is_empty() {
        return Ok(());
    }
    let (scale, (nhl2, m0, m1)) = (p.scale, alibi_params(qn[2], p.max_bias));
    let (mp, mk) = match mask {
        Some(m) => (m.ptr, m.p(OP)?),
        None => (0u64, q.p(OP)?),
    };
    let shared = u32::try_from((qn[0] + CHUNK + v.l.ne[0]) * 4)
        .map_err(|_| Error::Invalid(format!("{OP}: head sizes {} and {} exceed shared memory", qn[0], v.l.ne[0])))?;
    let units = qn[1] * qn[2] * qn[3];
    let sp = super::ops::sinks_ptr(extra.sinks, qn[2])?;
    launch!(dev, "attention", "rg_flash_attn", per_row(units, shared)?;
        scale, nhl2, m0, m1, dst.ptr, dst.p(OP)?, q.ptr, q.p(OP)?, k.ptr, k.q(OP)?, v.ptr, v.q(OP)?,
        mp, mk, i32::from(mask.is_some()), q_round, sp);
    Ok(())
}
