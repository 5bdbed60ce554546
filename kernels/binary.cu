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

__device__ __forceinline__ float4 rg_binop4(int op, float4 x, float4 y) {
    return make_float4(rg_binop(op, x.x, y.x), rg_binop(op, x.y, y.y), rg_binop(op, x.z, y.z), rg_binop(op, x.w, y.w));
}

// Fast path: dst, a, b packed F32 of the same n elements (dst may be a or b:
// each element is read, then written, by one thread).
extern "C" __global__ void rg_binary_f32_contig(int op, float* dst, const float* a, const float* b, i64 n) {
    RG_GRID_STRIDE(i, n) { dst[i] = rg_binop(op, a[i], b[i]); }
}
// As above in float4s: the host checked that dst, a and b are 16-byte aligned.
// Vector i covers elements 4i..4i+3; the last n % 4 elements one per index.
extern "C" __global__ void rg_binary_f32_contig4(int op, float* dst, const float* a, const float* b, i64 n) {
    const i64 nv = n >> 2;
    RG_GRID_STRIDE(i, n - nv * 3) {
        if (i < nv) {
            ((float4*)dst)[i] = rg_binop4(op, ((const float4*)a)[i], ((const float4*)b)[i]);
        } else {
            const i64 j = i + nv * 3;  // nv*4 + (i - nv)
            dst[j] = rg_binop(op, a[j], b[j]);
        }
    }
}

// Row fast path, F32: dst and a of the same shape with packed rows (nb0 = 4),
// b with packed rows of ne0 or 1 values, tiled over the rows by modulo of its
// ne1..ne3. Block (blockDim.x, blockDim.y): blockDim.y rows per block, each
// row's elements [blockIdx.y*chunk, +chunk) by blockDim.x threads in steps of
// V. Index math once per row, in 32 bits (the host checked rows and every
// ne1..ne3 fit). V = 4: float4s (the host checked ne0 % 4 == 0, chunk % 4 == 0
// and every row start 16-byte aligned). dst may be a (in place).
#define RG_ROW_BATCH 4

template <int V>
__device__ __forceinline__ void rg_binary_rows(int op, char* dst, const RgT& d, const char* a, const RgT& ta,
                                               const char* b, const RgT& tb, unsigned int rows, i64 chunk) {
    const unsigned int r = blockIdx.x * blockDim.y + threadIdx.y;
    if (r >= rows) return;
    const unsigned int n1 = (unsigned int)d.ne[1], n2 = (unsigned int)d.ne[2];
    const unsigned int i1 = r % n1, t = r / n1;
    const unsigned int i2 = t % n2, i3 = t / n2;
    float* pd = (float*)(dst + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3]);
    const float* pa = (const float*)(a + i1 * ta.nb[1] + i2 * ta.nb[2] + i3 * ta.nb[3]);
    const float* pb = (const float*)(b + (i1 % (unsigned int)tb.ne[1]) * tb.nb[1] + (i2 % (unsigned int)tb.ne[2]) * tb.nb[2]
                                     + (i3 % (unsigned int)tb.ne[3]) * tb.nb[3]);
    const bool bone = tb.ne[0] == 1;
    const float bs = bone ? pb[0] : 0.0f;
    const i64 lo = (i64)blockIdx.y * chunk;
    const i64 hi = lo + chunk < d.ne[0] ? lo + chunk : d.ne[0];
    const i64 step = (i64)blockDim.x * V;
    // RG_ROW_BATCH steps at a time: every load of the batch before any store, so
    // more bytes are in flight per thread. Each element is read and written by
    // this thread only, so this is safe in place (dst == a, or dst == b of a's shape).
    for (i64 base = lo + (i64)threadIdx.x * V; base < hi; base += step * RG_ROW_BATCH) {
        if (V == 4) {
            float4 xa[RG_ROW_BATCH], xb[RG_ROW_BATCH];
#pragma unroll
            for (int u = 0; u < RG_ROW_BATCH; ++u) {
                const i64 i = base + u * step;
                if (i < hi) {
                    xa[u] = *(const float4*)(pa + i);
                    xb[u] = bone ? make_float4(bs, bs, bs, bs) : *(const float4*)(pb + i);
                }
            }
#pragma unroll
            for (int u = 0; u < RG_ROW_BATCH; ++u) {
                const i64 i = base + u * step;
                if (i < hi) *(float4*)(pd + i) = rg_binop4(op, xa[u], xb[u]);
            }
        } else {
            float xa[RG_ROW_BATCH], xb[RG_ROW_BATCH];
#pragma unroll
            for (int u = 0; u < RG_ROW_BATCH; ++u) {
                const i64 i = base + u * step;
                if (i < hi) {
                    xa[u] = pa[i];
                    xb[u] = bone ? bs : pb[i];
                }
            }
#pragma unroll
            for (int u = 0; u < RG_ROW_BATCH; ++u) {
                const i64 i = base + u * step;
                if (i < hi) pd[i] = rg_binop(op, xa[u], xb[u]);
            }
        }
    }
}
extern "C" __global__ void rg_binary_rows_f32(int op, char* dst, RgT d, const char* a, RgT ta, const char* b, RgT tb,
                                              unsigned int rows, i64 chunk) {
    rg_binary_rows<1>(op, dst, d, a, ta, b, tb, rows, chunk);
}
extern "C" __global__ void rg_binary_rows_f32x4(int op, char* dst, RgT d, const char* a, RgT ta, const char* b, RgT tb,
                                                unsigned int rows, i64 chunk) {
    rg_binary_rows<4>(op, dst, d, a, ta, b, tb, rows, chunk);
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
