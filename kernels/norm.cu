// Row normalisations, as src/backend/cpu/norm.rs. One block per row; dst and
// a have the same shape. Compiled with prelude.cuh prepended.

// rms_norm: y = x * (1 / sqrt(mean(x^2) + eps)); squares in float summed in
// double, the mean rounded to float.
// With a weight (has_w), y * w[i0 % w.ne0] of the weight row (i1, i2, i3) taken
// modulo its dims, rounded as the separate mul would round it.
extern "C" __global__ void rg_rms_norm(float eps, char* dst, RgT d, const char* a, RgT ta, const char* w, RgT tw,
                                       int has_w) {
    i64 i1, i2, i3;
    rg_unravel_row(ta, blockIdx.x, &i1, &i2, &i3);
    const char* x = a + i1 * ta.nb[1] + i2 * ta.nb[2] + i3 * ta.nb[3];
    char* y = dst + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
    i64 n = ta.ne[0];
    double acc = 0.0;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        float v = rg_load(x + i * ta.nb[0], ta.type);
        acc += (double)(v * v);
    }
    acc = rg_block_sum(acc);
    float mean = (float)(acc / (double)n);
    float scale = 1.0f / sqrtf(mean + eps);
    const char* wr = has_w ? w + (i1 % tw.ne[1]) * tw.nb[1] + (i2 % tw.ne[2]) * tw.nb[2] + (i3 % tw.ne[3]) * tw.nb[3] : 0;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        float v = rg_load(x + i * ta.nb[0], ta.type) * scale;
        if (has_w) v = v * rg_load(wr + (i % tw.ne[0]) * tw.nb[0], tw.type);
        rg_store(y + i * d.nb[0], d.type, v);
    }
}

// norm: y = (x - mean) / sqrt(var + eps); the sum in double rounded to float
// before dividing by n in float; squared deviations summed in double.
extern "C" __global__ void rg_norm(float eps, char* dst, RgT d, const char* a, RgT ta) {
    i64 i1, i2, i3;
    rg_unravel_row(ta, blockIdx.x, &i1, &i2, &i3);
    const char* x = a + i1 * ta.nb[1] + i2 * ta.nb[2] + i3 * ta.nb[3];
    char* y = dst + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
    i64 n = ta.ne[0];
    double acc = 0.0;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) acc += (double)rg_load(x + i * ta.nb[0], ta.type);
    acc = rg_block_sum(acc);
    float mean = (float)acc / (float)n;
    double sq = 0.0;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        float dv = rg_load(x + i * ta.nb[0], ta.type) - mean;
        sq += (double)(dv * dv);
    }
    sq = rg_block_sum(sq);
    float var = (float)(sq / (double)n);
    float scale = 1.0f / sqrtf(var + eps);
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        rg_store(y + i * d.nb[0], d.type, (rg_load(x + i * ta.nb[0], ta.type) - mean) * scale);
    }
}
