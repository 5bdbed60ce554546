// mul_mat_id for the weights the dot kernels of mmvq.cu do not take: F32,
// F16, BF16, the block types without dot kernels, and block rows those
// kernels cannot load. Compiled with prelude.cuh, iq_grids.cuh, quant.cuh
// (the per-value dequantization) and moe.cuh (the tiles) prepended.

#define RG_MOE_ROWS 4  // weight rows per block: one per warp
#define RG_MOE_NC 8    // pairs per tile, at most

// The F32, F16 or BF16 values of the 16 bytes at p (4 or 8 of them) into v;
// returns how many.
__device__ __forceinline__ int rg_moe_plain16(const char* p, int type, float* v) {
    const uint4 q = *(const uint4*)p;
    const unsigned u[4] = {q.x, q.y, q.z, q.w};
    if (type == RG_F32) {
#pragma unroll
        for (int j = 0; j < 4; j++) v[j] = __uint_as_float(u[j]);
        return 4;
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const unsigned short h = (unsigned short)(u[j / 2] >> (16 * (j % 2)));
        v[j] = type == RG_F16 ? rg_h2f(h) : rg_bf2f(h);
    }
    return 8;
}

// An activation value rounded as `round` says.
__device__ __forceinline__ float rg_moe_round(float v, int round) {
    if (round == RG_F16) v = rg_h2f(rg_f2h(v));
    if (round == RG_BF16) v = rg_bf2f(rg_f2bf(v));
    return v;
}

// Activation values i0..i0+per (per 4 or 8) of pair column x into v: 16-byte
// loads where the values are packed and aligned for them, else one by one.
__device__ __forceinline__ void rg_moe_acts(const char* x, const RgT& tb, i64 i0, int per, int round, float* v) {
    const char* p = x + i0 * tb.nb[0];
    const int size = tb.type == RG_F32 ? 4 : 2;
    if (tb.nb[0] == size && ((u64)p & 15) == 0 && (size == 4 || per == 8)) {
        for (int j = 0; j < per; j += 16 / size) rg_moe_plain16(p + j * size, tb.type, v + j);
    } else {
        for (int j = 0; j < per; j++) v[j] = rg_load(p + j * tb.nb[0], tb.type);
    }
    for (int j = 0; j < per; j++) v[j] = rg_moe_round(v[j], round);
}

// dst[i0, s, t] = sum over k of w[k, i0, e] * b[k, s mod n_b, t] for the pairs
// (s, t) of tile blockIdx.y + gridDim.y * blockIdx.z (moe.cuh), e their
// expert. grid.x: groups of RG_MOE_ROWS weight rows, a warp each, whose lanes
// take every 32nd value, or of a packed F32/F16/BF16 row starting 16-byte
// aligned every 32nd 16 bytes (one vector load each: a warp reads 512
// contiguous bytes per request). w is of any type the kernels read (block types blocked
// along dim 0); b plain at any strides, its values rounded to `round` (RG_F16
// or RG_BF16: as the CPU rounds activations for weights of that type; other
// codes keep them). Sums in f32; dst has nb0 = 4.
extern "C" __global__ void __launch_bounds__(128) rg_moe_mv(float* dst, const char* w, RgT tw, const char* b, RgT tb,
                                                            RgMoe q, i64 d_nb1, i64 d_nb2, int round) {
    __shared__ i64 arow[RG_MOE_NC], doff[RG_MOE_NC];
    int expert;
    const int n = rg_moe_tile<RG_MOE_NC>(q, d_nb1, d_nb2, arow, doff, &expert);
    const int lane = threadIdx.x & 31;
    const i64 row = (i64)blockIdx.x * RG_MOE_ROWS + (threadIdx.x >> 5);
    if (n == 0 || row >= tw.ne[1]) return;  // warp-uniform, and no barrier follows
    const char* wr = w + row * tw.nb[1] + (i64)expert * tw.nb[2];
    const char* x[RG_MOE_NC];
    float acc[RG_MOE_NC];
#pragma unroll
    for (int c = 0; c < RG_MOE_NC; c++) {
        x[c] = b + (c < n ? (arow[c] % q.n_b) * tb.nb[1] + (arow[c] / q.n_b) * tb.nb[2] : 0);
        acc[c] = 0.0f;
    }
    i64 done = 0;  // values taken by the vector loop
    const int size = tw.type == RG_F32 ? 4 : 2;
    const bool plain = tw.type == RG_F32 || tw.type == RG_F16 || tw.type == RG_BF16;
    if (plain && tw.nb[0] == size && ((u64)wr & 15) == 0) {
        const int per = 16 / size;
        done = tw.ne[0] / (32 * per) * (32 * per);
        for (i64 i0 = lane * per; i0 < done; i0 += 32 * per) {
            float wv[8], av[8];
            rg_moe_plain16(wr + i0 * size, tw.type, wv);
#pragma unroll
            for (int c = 0; c < RG_MOE_NC; c++) {
                if (c < n) {
                    rg_moe_acts(x[c], tb, i0, per, round, av);
                    for (int j = 0; j < per; j++) acc[c] = fmaf(wv[j], av[j], acc[c]);
                }
            }
        }
    }
    for (i64 i = done + lane; i < tw.ne[0]; i += 32) {
        const float wv = rgq_row_value(wr, tw, i);
#pragma unroll
        for (int c = 0; c < RG_MOE_NC; c++) {
            if (c < n) acc[c] = fmaf(wv, rg_moe_round(rg_load(x[c] + i * tb.nb[0], tb.type), round), acc[c]);
        }
    }
#pragma unroll
    for (int c = 0; c < RG_MOE_NC; c++) {
        if (c < n) {
            float v = acc[c];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            if (lane == 0) *(float*)((char*)dst + doff[c] + row * 4) = v;
        }
    }
}
