//! Rotary position embedding (ggml's `rope_ext`, normal and NeoX modes, YaRN).
//!
//! The angles follow ggml's f32 arithmetic step for step: the per-pair angle
//! starts at the position and is multiplied by `freq_base^(-2/n_dims)` once per
//! pair (not recomputed with `powf`), then corrected by YaRN. Where a C
//! compiler fuses ggml's `a*b + c*d` into `fma(a, b, c*d)` (GCC and Clang do
//! on FMA hardware, which llama.cpp's native builds enable), `mul_add` does
//! the same, so results match such builds bit for bit. Each thread keeps the
//! cos/sin table of the token it is on and rebuilds it when the token changes.

use super::mem::{Exec, Strided, StridedMut};
use super::norm::map_rows;
use crate::error::{Error, Result};
use crate::tensor::RopeParams;

/// ggml's `ggml_rope_yarn_corr_dim`: the pair index at which a frequency makes
/// `n_rot` full turns over `n_ctx_orig` positions.
fn yarn_corr_dim(n_dims: i32, n_ctx_orig: i32, n_rot: f32, base: f32) -> f32 {
    n_dims as f32 * (n_ctx_orig as f32 / (n_rot * 2.0 * std::f32::consts::PI)).ln() / (2.0 * base.ln())
}

/// ggml's `ggml_rope_yarn_corr_dims`: `[max(0, floor(lo)), min(n_dims - 1, ceil(hi))]`,
/// with C's `MAX`/`MIN` (a NaN bound is kept as is).
fn yarn_corr_dims(n_dims: i32, n_ctx_orig: i32, base: f32, beta_fast: f32, beta_slow: f32) -> [f32; 2] {
    let start = yarn_corr_dim(n_dims, n_ctx_orig, beta_fast, base).floor();
    let end = yarn_corr_dim(n_dims, n_ctx_orig, beta_slow, base).ceil();
    let top = (n_dims - 1) as f32;
    [if 0.0 > start { 0.0 } else { start }, if top < end { top } else { end }]
}

/// ggml's `rope_yarn_ramp`: 1 below `low`, 0 above `high`, linear between, in
/// units of pairs (`i0 / 2`).
fn yarn_ramp(low: f32, high: f32, i0: i32) -> f32 {
    let width = if 0.001 > high - low { 0.001 } else { high - low };
    let y = ((i0 / 2) as f32 - low) / width;
    let clamped = if 0.0 > y { 0.0 } else { y };
    1.0 - if 1.0 < clamped { 1.0 } else { clamped }
}

/// ggml's `rope_yarn`: `(cos, sin)` of the corrected angle, times the magnitude.
fn yarn(theta_extrap: f32, p: &RopeParams, corr: [f32; 2], i0: i32) -> (f32, f32) {
    let theta_interp = p.freq_scale * theta_extrap;
    let mut theta = theta_interp;
    let mut mscale = p.attn_factor;
    if p.ext_factor != 0.0 {
        let mix = yarn_ramp(corr[0], corr[1], i0) * p.ext_factor;
        theta = theta_interp.mul_add(1.0 - mix, theta_extrap * mix);
        mscale *= 0.1f32.mul_add((1.0 / p.freq_scale).ln(), 1.0);
    }
    (theta.cos() * mscale, theta.sin() * mscale)
}

/// Rotates the first `p.n_dims` values of every row of `a` by the angles of
/// its token's position (`pos[i2]`), or with `back` by the opposite angles
/// (the angles are linear in the position: those of `-pos[i2]`, exactly); the
/// rest pass through.
pub(crate) fn rope(
    ex: &Exec,
    p: &RopeParams,
    back: bool,
    dst: StridedMut,
    a: Strided,
    pos: Strided,
    freq_factors: Option<Strided>,
) -> Result<()> {
    let n_dims = usize::try_from(p.n_dims).unwrap_or(0);
    if n_dims < 2 || n_dims % 2 != 0 || n_dims as i64 > a.l.ne[0] || pos.l.nelements() != a.l.ne[2] {
        return Err(Error::internal(format!("rope n_dims={} for ne={:?}", p.n_dims, a.l.ne)));
    }
    let half = n_dims / 2;
    if freq_factors.is_some_and(|f| f.l.dtype != crate::dtype::DType::F32 || f.l.ne[0] < half as i64)
        || pos.l.dtype != crate::dtype::DType::I32
    {
        return Err(Error::internal("rope positions or frequency factors do not fit"));
    }
    // SAFETY (both reads): pos holds a.ne2 I32 values at stride nb0 and the
    // factors at least n_dims/2 F32 values (checked when the op was built).
    let positions: Vec<i32> = (0..pos.l.ne[0] as usize)
        .map(|i| unsafe { pos.ptr().add(i * pos.l.nb[0]).cast::<i32>().read() })
        .map(|x| if back { x.wrapping_neg() } else { x })
        .collect();
    let factors: Option<Vec<f32>> =
        freq_factors.map(|f| (0..half).map(|i| unsafe { f.ptr().add(i * f.l.nb[0]).cast::<f32>().read() }).collect());
    let theta_scale = p.freq_base.powf(-2.0 / p.n_dims as f32);
    let corr = yarn_corr_dims(p.n_dims, p.n_ctx_orig, p.freq_base, p.beta_fast, p.beta_slow);
    let neox = p.mode == RopeParams::NEOX;
    let fill = |cache: &mut [f32], position: i32| {
        let mut theta = position as f32;
        for i in 0..half {
            let ff = factors.as_ref().map_or(1.0, |f| f[i]);
            let (c, s) = yarn(theta / ff, p, corr, (2 * i) as i32);
            cache[2 * i] = c;
            cache[2 * i + 1] = s;
            theta *= theta_scale;
        }
    };
    map_rows(
        ex,
        "rope",
        dst,
        a,
        6,
        || (-1i64, vec![0f32; n_dims]),
        |(last, cache), [_, i2, _], x, y| {
            if *last != i2 {
                fill(cache, positions[i2 as usize]);
                *last = i2;
            }
            y.copy_from_slice(x);
            for i in 0..half {
                let (c, s) = (cache[2 * i], cache[2 * i + 1]);
                let (j0, j1) = if neox { (i, i + half) } else { (2 * i, 2 * i + 1) };
                let (x0, x1) = (x[j0], x[j1]);
                y[j0] = x0.mul_add(c, -(x1 * s));
                y[j1] = x0.mul_add(s, x1 * c);
            }
        },
    )
}
