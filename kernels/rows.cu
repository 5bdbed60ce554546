// get_rows and set_rows, as src/backend/cpu/rows.rs. Indices are I32; an
// index outside the rows sets *err to 1 (the host turns it into an error).
// Compiled with prelude.cuh prepended.

// Value i0 of the row at `row` of type `type` (plain, Q4_0 or Q8_0; block
// types address dim 0 in 32-value blocks of nb0 bytes).
__device__ __forceinline__ float rg_load_row_value(const char* row, const RgT& t, i64 i0) {
    if (t.type == RG_Q4_0) {
        const char* b = row + (i0 / 32) * t.nb[0];
        float dd = rg_h2f(*(const unsigned short*)b);
        int j = (int)(i0 % 32);
        unsigned char q = (unsigned char)b[2 + (j & 15)];
        int v = j < 16 ? (q & 0xF) : (q >> 4);
        return (float)(v - 8) * dd;
    }
    if (t.type == RG_Q8_0) {
        const char* b = row + (i0 / 32) * t.nb[0];
        float dd = rg_h2f(*(const unsigned short*)b);
        return (float)((signed char)b[2 + i0 % 32]) * dd;
    }
    return rg_load(row + i0 * t.nb[0], t.type);
}

// dst[:, i1, i2, i3] = a[:, idx[i1, i2, i3], i2, i3]. One block per dst row.
extern "C" __global__ void rg_get_rows(char* dst, RgT d, const char* a, RgT ta, const char* idx, RgT ti, int* err) {
    i64 i1, i2, i3;
    rg_unravel_row(d, blockIdx.x, &i1, &i2, &i3);
    i64 row = *(const int*)(idx + i1 * ti.nb[0] + i2 * ti.nb[1] + i3 * ti.nb[2]);
    if (row < 0 || row >= ta.ne[1]) {
        if (threadIdx.x == 0) atomicExch(err, 1);
        return;
    }
    const char* src = a + row * ta.nb[1] + i2 * ta.nb[2] + i3 * ta.nb[3];
    char* y = dst + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
    for (i64 i = threadIdx.x; i < d.ne[0]; i += blockDim.x) rg_store(y + i * d.nb[0], d.type, rg_load_row_value(src, ta, i));
}

// dst[:, idx[i1, i2, i3], i2, i3] = b[:, i1, i2, i3]. One block per row of b.
// Two rows written to one place are not detected here (the host may check).
extern "C" __global__ void rg_set_rows(char* dst, RgT d, const char* b, RgT tb, const char* idx, RgT ti, int* err) {
    i64 i1, i2, i3;
    rg_unravel_row(tb, blockIdx.x, &i1, &i2, &i3);
    i64 row = *(const int*)(idx + i1 * ti.nb[0] + i2 * ti.nb[1] + i3 * ti.nb[2]);
    if (row < 0 || row >= d.ne[1]) {
        if (threadIdx.x == 0) atomicExch(err, 1);
        return;
    }
    const char* x = b + i1 * tb.nb[1] + i2 * tb.nb[2] + i3 * tb.nb[3];
    char* y = dst + row * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
    for (i64 i = threadIdx.x; i < tb.ne[0]; i += blockDim.x) rg_store(y + i * d.nb[0], d.type, rg_load(x + i * tb.nb[0], tb.type));
}

// dst = a as packed F32 in logical order (any strides; plain, Q4_0 or Q8_0).
// One block per row of a; dst row r starts at dst + r * a.ne0.
extern "C" __global__ void rg_to_f32(float* dst, const char* a, RgT ta) {
    i64 r = blockIdx.x;
    const char* src = a + rg_row_offset(ta, r);
    float* y = dst + r * ta.ne[0];
    for (i64 i = threadIdx.x; i < ta.ne[0]; i += blockDim.x) y[i] = rg_load_row_value(src, ta, i);
}
