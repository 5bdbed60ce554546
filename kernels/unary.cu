// Elementwise unary ops and scale, and the gated linear units. op: 0 relu, 1 gelu (tanh approximation, f16-rounded),
// 2 silu, 3 neg, 4 sqr, 5 sqrt, 6 exp, 7 scale by `param`, 8 sigmoid (UNARY_* in
// src/backend/cuda/kernels.rs). Same formulas as src/backend/cpu/elementwise.rs.
// Compiled with prelude.cuh prepended.

__device__ __forceinline__ float rg_unop(int op, float param, float x) {
    switch (op) {
    case 0: return x > 0.0f ? x : 0.0f;
    case 1: {
        // ggml's CPU GELU: the input and the result rounded to f16 (its lookup table)
        if (x <= -10.0f) return 0.0f;
        if (x >= 10.0f) return x;
        const float SQRT_2_OVER_PI = 0.7978846f;
        const float COEF_A = 0.044715f;
        const float h = rg_h2f(rg_f2h(x));
        return rg_h2f(rg_f2h(0.5f * h * (1.0f + tanhf(SQRT_2_OVER_PI * h * (1.0f + COEF_A * h * h)))));
    }
    case 2: return x / (1.0f + expf(-x));
    case 3: return -x;
    case 4: return x * x;
    case 5: return sqrtf(x);
    case 6: return expf(x);
    case 8: return 1.0f / (1.0f + expf(-x));
    default: return x * param;
    }
}

// Fast path: dst and a packed F32 of n elements (dst may be a: in place).
extern "C" __global__ void rg_unary_f32_contig(int op, float param, float* dst, const float* a, i64 n) {
    RG_GRID_STRIDE(i, n) { dst[i] = rg_unop(op, param, a[i]); }
}
// As above in float4s: the host checked that dst and a are 16-byte aligned.
// Vector i covers elements 4i..4i+3; the last n % 4 elements one per index.
extern "C" __global__ void rg_unary_f32_contig4(int op, float param, float* dst, const float* a, i64 n) {
    const i64 nv = n >> 2;
    RG_GRID_STRIDE(i, n - nv * 3) {
        if (i < nv) {
            const float4 x = ((const float4*)a)[i];
            ((float4*)dst)[i] = make_float4(rg_unop(op, param, x.x), rg_unop(op, param, x.y), rg_unop(op, param, x.z),
                                            rg_unop(op, param, x.w));
        } else {
            const i64 j = i + nv * 3;
            dst[j] = rg_unop(op, param, a[j]);
        }
    }
}

// General path: dst and a of the same shape, any strides and plain types.
extern "C" __global__ void rg_unary(int op, float param, char* dst, RgT d, const char* a, RgT ta, i64 n) {
    RG_GRID_STRIDE(i, n) {
        rg_store(dst + rg_offset(d, i), d.type, rg_unop(op, param, rg_load(a + rg_offset(ta, i), ta.type)));
    }
}

// Gated linear units: dst = f(a) * b, all of one shape, any strides and plain
// types. op: 0 swiglu (silu), 1 geglu (the f16-rounded GELU; exactly 0 from
// -10 down, as ggml), 2 swiglu_oai (gpt-oss: alpha 1.702, limit 7), as glu()
// in src/backend/cpu/elementwise.rs.
extern "C" __global__ void rg_glu(int op, char* dst, RgT d, const char* a, RgT ta, const char* b, RgT tb, i64 n) {
    RG_GRID_STRIDE(i, n) {
        const float x = rg_load(a + rg_offset(ta, i), ta.type);
        const float g = rg_load(b + rg_offset(tb, i), tb.type);
        float y;
        if (op == 2) {
            const float xc = fminf(x, 7.0f), gc = fminf(fmaxf(g, -7.0f), 7.0f);
            y = xc / (1.0f + expf(1.702f * -xc)) * (gc + 1.0f);
        } else {
            y = op == 0 ? rg_unop(2, 0.0f, x) * g : (x <= -10.0f ? 0.0f : rg_unop(1, 0.0f, x) * g);
        }
        rg_store(dst + rg_offset(d, i), d.type, y);
    }
}
