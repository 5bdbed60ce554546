// soft_max_ext and diag_mask_inf, as src/backend/cpu/softmax.rs.
// Compiled with prelude.cuh prepended.

// One block per row. v = x*scale + slope*mask (fused), then exp(v - max)
// summed in double, the row scaled by (float)(1/sum); a row whose maximum is
// -inf becomes zeros. The values are recomputed per pass (no scratch).
// The mask row of (i1, i2, i3) is (i1, i2 % mask.ne2, i3 % mask.ne3). With
// `sinks` (n_head packed floats, else null), head i2's sink joins the maximum
// and the sum.
extern "C" __global__ void rg_soft_max(float scale, int n_head_log2, float m0, float m1, char* dst, RgT d,
                                       const char* a, RgT ta, const char* mask, RgT tm, int has_mask,
                                       const float* sinks) {
    i64 i1, i2, i3;
    rg_unravel_row(ta, blockIdx.x, &i1, &i2, &i3);
    const char* x = a + i1 * ta.nb[1] + i2 * ta.nb[2] + i3 * ta.nb[3];
    char* y = dst + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
    const char* m = has_mask ? mask + i1 * tm.nb[1] + (i2 % tm.ne[2]) * tm.nb[2] + (i3 % tm.ne[3]) * tm.nb[3] : 0;
    float slope = has_mask ? rg_alibi_slope((int)i2, n_head_log2, m0, m1) : 1.0f;
    i64 n = ta.ne[0];
#define RG_SM_VALUE(i) \
    (has_mask ? fmaf(slope, rg_load(m + (i) * tm.nb[0], tm.type), rg_load(x + (i) * ta.nb[0], ta.type) * scale) \
              : rg_load(x + (i) * ta.nb[0], ta.type) * scale)
    float mx = -__int_as_float(0x7f800000);
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        float v = RG_SM_VALUE(i);
        mx = mx > v ? mx : v;
    }
    mx = rg_block_max(mx);
    if (sinks) mx = mx > sinks[i2] ? mx : sinks[i2];
    if (mx == -__int_as_float(0x7f800000)) {
        for (i64 i = threadIdx.x; i < n; i += blockDim.x) rg_store(y + i * d.nb[0], d.type, 0.0f);
        return;
    }
    double sum = 0.0;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) sum += (double)expf(RG_SM_VALUE(i) - mx);
    sum = rg_block_sum(sum);
    if (sinks) sum += (double)expf(sinks[i2] - mx);
    float inv = (float)(1.0 / sum);
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) rg_store(y + i * d.nb[0], d.type, expf(RG_SM_VALUE(i) - mx) * inv);
#undef RG_SM_VALUE
}

// dst = a with elements i0 > n_past + i1 set to -inf (dst may be a: in place).
extern "C" __global__ void rg_diag_mask_inf(int n_past, char* dst, RgT d, const char* a, RgT ta, i64 n) {
    RG_GRID_STRIDE(i, n) {
        i64 i0 = i % ta.ne[0];
        i64 i1 = (i / ta.ne[0]) % ta.ne[1];
        float v = rg_load(a + rg_offset(ta, i), ta.type);
        rg_store(dst + rg_offset(d, i), d.type, i0 > (i64)n_past + i1 ? -__int_as_float(0x7f800000) : v);
    }
}
