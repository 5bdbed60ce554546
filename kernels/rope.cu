// Rotary position embedding (ggml's rope_ext: normal and NeoX, YaRN), as
// src/backend/cpu/rope.rs. The host computes theta_scale = freq_base^(-2/n_dims)
// and YaRN's correction dims exactly as the CPU does; per token the angles are
// theta_k = pos * theta_scale^k by repeated multiplication (as ggml), not powf.
// Compiled with prelude.cuh prepended.

// Mirrors `KRope` in src/backend/cuda/kernels.rs (#[repr(C)], 36 bytes).
struct RgRope {
    int n_dims;
    int neox;
    float theta_scale;
    float freq_scale;
    float ext_factor;
    float attn_factor;
    float corr0;
    float corr1;
    int pos_sign;  // -1: rope_back (the angles of the negated positions)
};

__device__ __forceinline__ float rg_yarn_ramp(float low, float high, int i0) {
    float width = 0.001f > high - low ? 0.001f : high - low;
    float y = ((float)(i0 / 2) - low) / width;
    float c = 0.0f > y ? 0.0f : y;
    return 1.0f - (1.0f < c ? 1.0f : c);
}

// One block per row (i1, i2, i3); dynamic shared memory: n_dims/2 floats.
// pos: a.ne2 I32 positions (stride tp.nb0); ff: optional F32 frequency factors.
extern "C" __global__ void rg_rope(RgRope p, char* dst, RgT d, const char* a, RgT ta, const char* pos, RgT tp,
                                   const char* ff, RgT tf, int has_ff) {
    RG_DYNAMIC_SHARED(float, rg_theta);
    i64 i1, i2, i3;
    rg_unravel_row(ta, blockIdx.x, &i1, &i2, &i3);
    const char* x = a + i1 * ta.nb[1] + i2 * ta.nb[2] + i3 * ta.nb[3];
    char* y = dst + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
    int half = p.n_dims / 2;
    if (threadIdx.x == 0) {
        float theta = (float)(p.pos_sign * *(const int*)(pos + i2 * tp.nb[0]));
        for (int k = 0; k < half; k++) {
            rg_theta[k] = theta;
            theta *= p.theta_scale;
        }
    }
    __syncthreads();
    // normal (not NeoX) F32 rows with 8-byte aligned pairs: each pair is one
    // float2 load and store (a warp reads 256 contiguous bytes, not every other 4)
    bool pairs = !p.neox && ta.type == RG_F32 && d.type == RG_F32 && ta.nb[0] == 4 && d.nb[0] == 4 &&
                 (((unsigned long long)x | (unsigned long long)y) & 7) == 0;
    for (int k = threadIdx.x; k < half; k += blockDim.x) {
        float fac = has_ff ? *(const float*)(ff + (i64)k * tf.nb[0]) : 1.0f;
        float theta_extrap = rg_theta[k] / fac;
        float theta_interp = p.freq_scale * theta_extrap;
        float theta = theta_interp;
        float mscale = p.attn_factor;
        if (p.ext_factor != 0.0f) {
            float mix = rg_yarn_ramp(p.corr0, p.corr1, 2 * k) * p.ext_factor;
            theta = fmaf(theta_interp, 1.0f - mix, theta_extrap * mix);
            mscale *= fmaf(0.1f, logf(1.0f / p.freq_scale), 1.0f);
        }
        float c = cosf(theta) * mscale, s = sinf(theta) * mscale;
        if (pairs) {
            float2 v = *(const float2*)(x + 8 * (i64)k);
            *(float2*)(y + 8 * (i64)k) = make_float2(fmaf(v.x, c, -(v.y * s)), fmaf(v.x, s, v.y * c));
            continue;
        }
        i64 j0 = p.neox ? k : 2 * k;
        i64 j1 = p.neox ? k + half : 2 * k + 1;
        float x0 = rg_load(x + j0 * ta.nb[0], ta.type), x1 = rg_load(x + j1 * ta.nb[0], ta.type);
        rg_store(y + j0 * d.nb[0], d.type, fmaf(x0, c, -(x1 * s)));
        rg_store(y + j1 * d.nb[0], d.type, fmaf(x0, s, x1 * c));
    }
    for (i64 i = p.n_dims + threadIdx.x; i < ta.ne[0]; i += blockDim.x) {
        rg_store(y + i * d.nb[0], d.type, rg_load(x + i * ta.nb[0], ta.type));
    }
}
