// mul_mat_id for the weights the dot kernels of mmvq.cu do not take: F32,
// F16, BF16, the block types without dot kernels, and block rows those
// kernels cannot load. Compiled with prelude.cuh, iq_grids.cuh, quant.cuh
// (the per-value dequantization) and moe.cuh (the tiles) prepended.

#define RG_MOE_ROWS 4  // weight rows per block: one per warp
#define RG_MOE_NC 8    // pairs per tile, at most

// dst[i0, s, t] = sum over k of w[k, i0, e] * b[k, s mod n_b, t] for the pairs
// (s, t) of tile blockIdx.y + gridDim.y * blockIdx.z (moe.cuh), e their
// expert. grid.x: groups of RG_MOE_ROWS weight rows, a warp each, whose lanes
// take every 32nd value. w is of any type the kernels read (block types blocked
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
    for (i64 i = lane; i < tw.ne[0]; i += 32) {
        const float wv = rgq_row_value(wr, tw, i);
#pragma unroll
        for (int c = 0; c < RG_MOE_NC; c++) {
            if (c < n) {
                float v = rg_load(x[c] + i * tb.nb[0], tb.type);
                if (round == RG_F16) v = rg_h2f(rg_f2h(v));
                if (round == RG_BF16) v = rg_bf2f(rg_f2bf(v));
                acc[c] = fmaf(wv, v, acc[c]);
            }
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
