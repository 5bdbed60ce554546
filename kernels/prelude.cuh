// rgml CUDA prelude: prepended by the Rust side to every kernels/*.cu source
// before NVRTC compiles it (the sources do not #include it). Nothing here needs
// the CUDA toolkit headers: f16/bf16 conversions are inline PTX and bit ops.
//
// Type codes: keep in sync with `type_code` in src/backend/cuda/kernels.rs
// (the block types are 4..=15; kernels/quant.cuh relies on that range).
#define RG_F32 0
#define RG_F16 1
#define RG_BF16 2
#define RG_I32 3
#define RG_Q4_0 4
#define RG_Q8_0 5
#define RG_Q4_1 6
#define RG_Q5_0 7
#define RG_Q5_1 8
#define RG_Q8_1 9
#define RG_Q2_K 10
#define RG_Q3_K 11
#define RG_Q4_K 12
#define RG_Q5_K 13
#define RG_Q6_K 14
#define RG_Q8_K 15
#define RG_IQ4_NL 16
#define RG_IQ4_XS 17
#define RG_MXFP4 18
#define RG_IQ1_S 19
#define RG_IQ1_M 20
#define RG_IQ2_XXS 21
#define RG_IQ2_XS 22
#define RG_IQ2_S 23
#define RG_IQ3_XXS 24
#define RG_IQ3_S 25
#define RG_TQ1_0 26
#define RG_TQ2_0 27

typedef long long i64;
typedef unsigned long long u64;

// Shape and byte strides of one operand, passed by value (mirrors `KTensor`
// in src/backend/cuda/kernels.rs: #[repr(C)], 72 bytes).
struct RgT {
    i64 ne[4];
    i64 nb[4];
    int type;
    int bdim;  // block types: the dim whose values are stored in blocks (0 unless transposed)
};

#ifndef RG_EMU
__device__ __forceinline__ float rg_h2f(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ unsigned short rg_f2h(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
// dp4a: c + the dot product of a's and b's four signed bytes.
__device__ __forceinline__ int rg_dp4a(int a, int b, int c) {
    int r;
    asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}
#define RG_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#else  // the CPU emulator (tools/cuda-emu): the same conversions without PTX
__device__ __forceinline__ float rg_h2f(unsigned short h) {
    _Float16 x;
    __builtin_memcpy(&x, &h, 2);
    return (float)x;
}
__device__ __forceinline__ unsigned short rg_f2h(float f) {
    _Float16 x = (_Float16)f;
    unsigned short h;
    __builtin_memcpy(&h, &x, 2);
    return h;
}
__device__ __forceinline__ int rg_dp4a(int a, int b, int c) {
    for (int i = 0; i < 32; i += 8) c += (int)(signed char)(a >> i) * (int)(signed char)(b >> i);
    return c;
}
#define RG_DYNAMIC_SHARED(type, name) type* name = (type*)rg_emu::dynamic_smem
#endif
__device__ __forceinline__ float rg_bf2f(unsigned short h) {
    return __uint_as_float(((unsigned int)h) << 16);
}
// round to nearest even; NaN stays NaN (quiet bit set), as the `half` crate.
__device__ __forceinline__ unsigned short rg_f2bf(float f) {
    unsigned int x = __float_as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (unsigned short)((x >> 16) | 0x0040u);
    }
    unsigned int round = 0x7fffu + ((x >> 16) & 1u);
    return (unsigned short)((x + round) >> 16);
}

// Loads the float value at `p` of a plain type (F32/F16/BF16/I32).
__device__ __forceinline__ float rg_load(const char* p, int type) {
    switch (type) {
    case RG_F16: return rg_h2f(*(const unsigned short*)p);
    case RG_BF16: return rg_bf2f(*(const unsigned short*)p);
    case RG_I32: return (float)(*(const int*)p);
    default: return *(const float*)p;
    }
}
// Stores `v` at `p` converted to a plain type (F32/F16/BF16/I32).
__device__ __forceinline__ void rg_store(char* p, int type, float v) {
    switch (type) {
    case RG_F16: *(unsigned short*)p = rg_f2h(v); break;
    case RG_BF16: *(unsigned short*)p = rg_f2bf(v); break;
    case RG_I32: *(int*)p = (int)v; break;
    default: *(float*)p = v; break;
    }
}

// Byte offset of the element with flat logical index `i` (ne[0] fastest).
__device__ __forceinline__ i64 rg_offset(const RgT& t, i64 i) {
    i64 i0 = i % t.ne[0]; i /= t.ne[0];
    i64 i1 = i % t.ne[1]; i /= t.ne[1];
    i64 i2 = i % t.ne[2];
    i64 i3 = i / t.ne[2];
    return i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}
// Byte offset of row `r` (flat over dims 1..3) of `t`.
__device__ __forceinline__ i64 rg_row_offset(const RgT& t, i64 r) {
    i64 i1 = r % t.ne[1]; r /= t.ne[1];
    i64 i2 = r % t.ne[2];
    i64 i3 = r / t.ne[2];
    return i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}
// (i1, i2, i3) of row `r` of a tensor of shape `ne`.
__device__ __forceinline__ void rg_unravel_row(const RgT& t, i64 r, i64* i1, i64* i2, i64* i3) {
    *i1 = r % t.ne[1]; r /= t.ne[1];
    *i2 = r % t.ne[2];
    *i3 = r / t.ne[2];
}

#define RG_GRID_STRIDE(i, n) \
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)blockDim.x * gridDim.x)

// Block-wide sum of one double per thread (blockDim.x a power of two <= 1024).
__device__ double rg_block_sum(double v) {
    __shared__ double rg_red[32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) rg_red[warp] = v;
    __syncthreads();
    int nw = (blockDim.x + 31) >> 5;
    v = (threadIdx.x < nw) ? rg_red[threadIdx.x] : 0.0;
    if (warp == 0) {
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    }
    __syncthreads();
    if (threadIdx.x == 0) rg_red[0] = v;
    __syncthreads();
    v = rg_red[0];
    __syncthreads();
    return v;
}
// Block-wide max with C's MAX(a, b) = a > b ? a : b (a NaN argument b wins).
__device__ float rg_block_max(float v) {
    __shared__ float rg_mx[32];
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = v > w ? v : w;
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) rg_mx[warp] = v;
    __syncthreads();
    int nw = (blockDim.x + 31) >> 5;
    v = (threadIdx.x < nw) ? rg_mx[threadIdx.x] : -__int_as_float(0x7f800000);
    if (warp == 0) {
        for (int o = 16; o > 0; o >>= 1) {
            float w = __shfl_xor_sync(0xffffffffu, v, o);
            v = v > w ? v : w;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) rg_mx[0] = v;
    __syncthreads();
    v = rg_mx[0];
    __syncthreads();
    return v;
}

// ALiBi slope of head h: 1 without ALiBi (n_head_log2 == 0); else
// m0^(h+1) for h < n_head_log2 and m1^(2(h - n_head_log2) + 1) after.
__device__ __forceinline__ float rg_alibi_slope(int h, int n_head_log2, float m0, float m1) {
    if (n_head_log2 == 0) return 1.0f;
    return h < n_head_log2 ? powf(m0, (float)(h + 1)) : powf(m1, (float)(2 * (h - n_head_log2) + 1));
}
