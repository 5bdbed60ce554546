// Activation rows quantized on the device to the weights' dot partner, value
// for value what the CPU's `quant::dot::quantize_activations` writes
// (src/quant/dot/act.rs: ggml-cpu's x86 Q8_0/Q8_1 quantizer, and the
// reference Q8_K one). Every rounding step is an explicit _rn intrinsic so
// NVRTC cannot contract it into an FMA. Compiled with prelude.cuh prepended.
//
// Output layouts (one packed row per activation row, rows in logical order
// r = i1 + ne1 * (i2 + ne2 * i3)):
// - "Q8 36": 36-byte blocks {f16 d, f16 s, i8 qs[32]} for both Q8_0 and Q8_1
//   partners: Q8_1's bytes exactly, and for Q8_0 its d and qs with `s` added,
//   so the quants start 4-byte aligned for the dot kernels.
// - Q8_K: the CPU's 292-byte blocks {f32 d, i8 qs[256], i16 bsums[16]}.

// _mm_max_ps lane semantics: a > b ? a : b (b when either is NaN).
__device__ __forceinline__ float rg_max_ps(float a, float b) { return a > b ? a : b; }

// One warp per 32-value block: 4 warps per thread block, `nblocks` blocks in
// all, `bpr` blocks per row. `x` has K = 32 * bpr values per row.
extern "C" __global__ void rg_quantize_q8_1(char* dst, const char* x, RgT tx, i64 bpr, i64 nblocks) {
    __shared__ float ab[4][32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const i64 blk = (i64)blockIdx.x * 4 + wid;
    if (blk >= nblocks) return;  // whole warps leave together
    const i64 r = blk / bpr, j = blk % bpr;
    const float v = rg_load(x + rg_row_offset(tx, r) + (j * 32 + lane) * tx.nb[0], tx.type);
    ab[wid][lane] = fabsf(v);
    __syncwarp();
    // amax in the lane order of ggml-cpu's AVX code (it only matters for NaN)
    const float* a = ab[wid];
    float m[8];
#pragma unroll
    for (int l = 0; l < 8; l++) {
        float t = a[l];
#pragma unroll
        for (int k = 1; k < 4; k++) t = rg_max_ps(t, a[8 * k + l]);
        m[l] = t;
    }
    float m4[4];
#pragma unroll
    for (int k = 0; k < 4; k++) m4[k] = rg_max_ps(m[4 + k], m[k]);
    const float amax = rg_max_ps(rg_max_ps(m4[0], m4[2]), rg_max_ps(m4[1], m4[3]));
    const float d = __fdiv_rn(amax, 127.0f);
    const float id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
    const float rv = rintf(__fmul_rn(v, id));  // round half to even, as vroundps
    // vcvtps2dq: NaN and out-of-range give INT_MIN
    const int i = (rv >= -2147483648.0f && rv < 2147483648.0f) ? (int)rv : (int)0x80000000;
    unsigned s = (unsigned)i;  // wrapping sum
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const int q = i < -128 ? -128 : (i > 127 ? 127 : i);
    char* y = dst + blk * 36;
    y[4 + lane] = (char)(signed char)q;
    if (lane == 0) {
        *(unsigned short*)y = rg_f2h(d);
        *(unsigned short*)(y + 2) = rg_f2h(__fmul_rn(d, (float)(int)s));
    }
}

// x86's result of `iscale * v` + 1.5*2^23 reduced to nearest_int's low bits,
// with x86's NaN propagation (a NaN operand quieted; a new NaN is 0xffc00000)
// where CUDA would give its canonical NaN.
__device__ __forceinline__ int rg_nearest_q8k(float iscale, float v) {
    const float p = __fmul_rn(iscale, v);
    unsigned bits;
    if (p != p) {
        bits = (v != v) ? (__float_as_uint(v) | 0x00400000u) : 0xffc00000u;
    } else {
        bits = __float_as_uint(__fadd_rn(p, 12582912.0f));
    }
    return (int)(bits & 0x007fffffu) - 0x00400000;
}

// One warp per 256-value super-block (4 per thread block); lane l quantizes
// values 8l..8l+8. The reference quantize_row_q8_K_ref: the first value of
// largest magnitude (NaN ignored) sets iscale = -127 / max.
extern "C" __global__ void rg_quantize_q8_k(char* dst, const char* x, RgT tx, i64 bpr, i64 nblocks) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const i64 blk = (i64)blockIdx.x * 4 + wid;
    if (blk >= nblocks) return;
    const i64 r = blk / bpr, j = blk % bpr;
    const char* row = x + rg_row_offset(tx, r);
    float v[8];
    float amax = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; k++) {
        v[k] = rg_load(row + (j * 256 + lane * 8 + k) * tx.nb[0], tx.type);
        amax = fmaxf(amax, fabsf(v[k]));  // fmaxf ignores NaN, as `abs > amax` does
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    int first = 1 << 30;
#pragma unroll
    for (int k = 7; k >= 0; k--) {
        if (fabsf(v[k]) == amax) first = lane * 8 + k;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) first = min(first, __shfl_xor_sync(0xffffffffu, first, o));
    char* y = dst + blk * 292;
    if (amax == 0.0f) {
        // all zeros (or NaN): the CPU's zeroed block
        if (lane == 0) *(float*)y = 0.0f;
        *(int*)(y + 4 + lane * 8) = 0;
        *(int*)(y + 8 + lane * 8) = 0;
        if (lane < 8) *(int*)(y + 260 + lane * 4) = 0;
        return;
    }
    float mine = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; k++) {
        if (k == (first & 7)) mine = v[k];
    }
    const float mx = __shfl_sync(0xffffffffu, mine, (first >> 3) & 31);
    const float iscale = __fdiv_rn(-127.0f, mx);
    int sum = 0;
    unsigned packed[2] = {0u, 0u};
#pragma unroll
    for (int k = 0; k < 8; k++) {
        int q = rg_nearest_q8k(iscale, v[k]);
        q = q > 127 ? 127 : q;
        const signed char b = (signed char)(q & 0xff);
        sum += (int)b;
        packed[k >> 2] |= ((unsigned)(unsigned char)b) << (8 * (k & 3));
    }
    *(unsigned*)(y + 4 + lane * 8) = packed[0];
    *(unsigned*)(y + 8 + lane * 8) = packed[1];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    if ((lane & 1) == 0) *(short*)(y + 260 + lane) = (short)sum;
    if (lane == 0) *(float*)y = __fdiv_rn(1.0f, iscale);
}
