// Elementwise binary ops with ggml's broadcast: b is tiled over a's shape
// (b index i_k % b.ne[k]); dst has a's shape. op: 0 add, 1 sub, 2 mul, 3 div
// (BINARY_* in src/backend/cuda/kernels.rs). Compiled with prelude.cuh prepended.

__device__ __forceinline__ float rg_binop(int op, float x, float y) {
    switch (op) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return x * y;
    default: return x / y;
    }
}

// Fast path: dst, a, b packed F32 of the same n elements.
extern "C" __global__ void rg_binary_f32_contig(int op, float* dst, const float* a, const float* b, i64 n) {
    RG_GRID_STRIDE(i, n) { dst[i] = rg_binop(op, a[i], b[i]); }
}

// General path: any strides and plain types, b broadcast by modulo.
extern "C" __global__ void rg_binary(int op, char* dst, RgT d, const char* a, RgT ta, const char* b, RgT tb, i64 n) {
    RG_GRID_STRIDE(i, n) {
        i64 r = i;
        i64 i0 = r % d.ne[0]; r /= d.ne[0];
        i64 i1 = r % d.ne[1]; r /= d.ne[1];
        i64 i2 = r % d.ne[2];
        i64 i3 = r / d.ne[2];
        const char* pa = a + i0 * ta.nb[0] + i1 * ta.nb[1] + i2 * ta.nb[2] + i3 * ta.nb[3];
        const char* pb = b + (i0 % tb.ne[0]) * tb.nb[0] + (i1 % tb.ne[1]) * tb.nb[1] + (i2 % tb.ne[2]) * tb.nb[2]
                         + (i3 % tb.ne[3]) * tb.nb[3];
        char* pd = dst + i0 * d.nb[0] + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
        rg_store(pd, d.type, rg_binop(op, rg_load(pa, ta.type), rg_load(pb, tb.type)));
    }
}
