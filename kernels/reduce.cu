// sum_rows: dst[0, i1, i2, i3] = sum over i0 of a[i0, i1, i2, i3] / div (1 for
// sum_rows, ne0 for mean), summed and divided in double like
// src/backend/cpu/reduce.rs. One block per row.
// Compiled with prelude.cuh prepended.

extern "C" __global__ void rg_sum_rows(char* dst, RgT d, const char* a, RgT ta, double div) {
    i64 r = blockIdx.x;
    i64 i1, i2, i3;
    rg_unravel_row(ta, r, &i1, &i2, &i3);
    const char* x = a + i1 * ta.nb[1] + i2 * ta.nb[2] + i3 * ta.nb[3];
    double acc = 0.0;
    for (i64 i0 = threadIdx.x; i0 < ta.ne[0]; i0 += blockDim.x) acc += (double)rg_load(x + i0 * ta.nb[0], ta.type);
    acc = rg_block_sum(acc);
    if (threadIdx.x == 0) rg_store(dst + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3], d.type, (float)(acc / div));
}

// sum: dst[0] = the sum of every element of a, in double. One block: thread t
// sums rows t, t + blockDim.x, ... (each in order), then the block sums those.
extern "C" __global__ void rg_sum(char* dst, RgT d, const char* a, RgT ta, i64 nrows) {
    double acc = 0.0;
    for (i64 r = threadIdx.x; r < nrows; r += blockDim.x) {
        i64 i1, i2, i3;
        rg_unravel_row(ta, r, &i1, &i2, &i3);
        const char* x = a + i1 * ta.nb[1] + i2 * ta.nb[2] + i3 * ta.nb[3];
        for (i64 i0 = 0; i0 < ta.ne[0]; i0++) acc += (double)rg_load(x + i0 * ta.nb[0], ta.type);
    }
    acc = rg_block_sum(acc);
    if (threadIdx.x == 0) rg_store(dst, d.type, (float)acc);
}

// argmax: dst[i1] (I32) = the index of the first largest value of row i1 of
// the matrix a, as src/backend/cpu/reduce.rs (NaN never compares larger). A
// thread per row.
extern "C" __global__ void rg_argmax(char* dst, RgT d, const char* a, RgT ta, i64 nrows) {
    RG_GRID_STRIDE(r, nrows) {
        const char* x = a + r * ta.nb[1];
        float best = rg_load(x, ta.type);
        int idx = 0;
        for (i64 i0 = 1; i0 < ta.ne[0]; i0++) {
            float v = rg_load(x + i0 * ta.nb[0], ta.type);
            if (v > best) { best = v; idx = (int)i0; }
        }
        *(int*)(dst + r * d.nb[0]) = idx;
    }
}

// count_equal: dst[0] (I64) = how many elements of the I32 tensors a and b
// (one shape) are equal. One block; the per-thread counts summed in double
// (exact below 2^53).
extern "C" __global__ void rg_count_equal(char* dst, const char* a, RgT ta, const char* b, RgT tb, i64 n) {
    double acc = 0.0;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        i64 i0 = i % ta.ne[0], r = i / ta.ne[0];
        i64 i1 = r % ta.ne[1], i2 = (r / ta.ne[1]) % ta.ne[2], i3 = r / (ta.ne[1] * ta.ne[2]);
        int x = *(const int*)(a + i0 * ta.nb[0] + i1 * ta.nb[1] + i2 * ta.nb[2] + i3 * ta.nb[3]);
        int y = *(const int*)(b + i0 * tb.nb[0] + i1 * tb.nb[1] + i2 * tb.nb[2] + i3 * tb.nb[3]);
        acc += (x == y) ? 1.0 : 0.0;
    }
    acc = rg_block_sum(acc);
    if (threadIdx.x == 0) *(long long*)dst = (long long)acc;
}

// cross_entropy_loss: dst[0] = -(1/rows) * sum over rows of
// sum_i labels[i] * (logits[i] - max - log(sum_j exp(logits[j] - max))), in
// double like src/backend/cpu/reduce.rs. One block: thread t takes rows t,
// t + blockDim.x, ...
extern "C" __global__ void rg_cross_entropy_loss(char* dst, RgT d, const char* a, RgT ta, const char* b, RgT tb,
                                                  i64 nrows) {
    double acc = 0.0;
    for (i64 r = threadIdx.x; r < nrows; r += blockDim.x) {
        i64 i1, i2, i3;
        rg_unravel_row(ta, r, &i1, &i2, &i3);
        const char* x = a + i1 * ta.nb[1] + i2 * ta.nb[2] + i3 * ta.nb[3];
        const char* y = b + i1 * tb.nb[1] + i2 * tb.nb[2] + i3 * tb.nb[3];
        double mx = ta.ne[0] > 0 ? (double)rg_load(x, ta.type) : 0.0;
        for (i64 i = 1; i < ta.ne[0]; i++) mx = fmax(mx, (double)rg_load(x + i * ta.nb[0], ta.type));
        double se = 0.0;
        for (i64 i = 0; i < ta.ne[0]; i++) se += exp((double)rg_load(x + i * ta.nb[0], ta.type) - mx);
        const double lse = mx + log(se);
        for (i64 i = 0; i < ta.ne[0]; i++)
            acc += (double)rg_load(y + i * tb.nb[0], tb.type) * ((double)rg_load(x + i * ta.nb[0], ta.type) - lse);
    }
    acc = rg_block_sum(acc);
    if (threadIdx.x == 0) rg_store(dst, d.type, (float)(-acc / (double)nrows));
}
