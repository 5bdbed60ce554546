// get_rows and set_rows, as src/backend/cpu/rows.rs, and the F32 read-out.
// Indices are I32; an index outside the rows sets bit 0 of *err, two rows of
// one set_rows written to the same place set bit 1 (the host turns either
// into an error). Block types (all 12 to read, the 32-value ones to write)
// come from quant.cuh. Compiled with prelude.cuh and quant.cuh prepended.

// Row r of a tensor of shape t (flat over dims 1..3): its (i1, i2, i3), and the
// row its I32 index idx[i1, i2, i3] names, or -1 when that is outside 0..rows.
__device__ __forceinline__ i64 rg_index_row(const RgT& t, i64 r, const char* idx, const RgT& ti, i64 rows, i64* i1,
                                            i64* i2, i64* i3) {
    rg_unravel_row(t, r, i1, i2, i3);
    const i64 row = *(const int*)(idx + *i1 * ti.nb[0] + *i2 * ti.nb[1] + *i3 * ti.nb[2]);
    return row < 0 || row >= rows ? -1 : row;
}

// dst[:, i1, i2, i3] = a[:, idx[i1, i2, i3], i2, i3]. One block per dst row.
// a is plain or a block type blocked along dim 0.
extern "C" __global__ void rg_get_rows(char* dst, RgT d, const char* a, RgT ta, const char* idx, RgT ti, int* err) {
    i64 i1, i2, i3;
    const i64 row = rg_index_row(d, blockIdx.x, idx, ti, ta.ne[1], &i1, &i2, &i3);
    if (row < 0) {
        if (threadIdx.x == 0) atomicOr(err, 1);
        return;
    }
    const char* src = a + row * ta.nb[1] + i2 * ta.nb[2] + i3 * ta.nb[3];
    char* y = dst + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
    for (i64 i = threadIdx.x; i < d.ne[0]; i += blockDim.x) rg_store(y + i * d.nb[0], d.type, rgq_row_value(src, ta, i));
}

// set_rows, first pass: each row of b claims its place in dst (`claims`:
// d.ne1 * d.ne2 * d.ne3 zeroed ints, one per destination row); a place
// claimed twice sets bit 1 of *err, an index outside dst's rows bit 0, so the
// second pass writes nothing when either happens (as the CPU, which checks
// every index first). Grid-stride over b's `nrows` rows.
extern "C" __global__ void rg_set_rows_claim(int* claims, RgT d, RgT tb, const char* idx, RgT ti, int* err, i64 nrows) {
    RG_GRID_STRIDE(r, nrows) {
        i64 i1, i2, i3;
        const i64 row = rg_index_row(tb, r, idx, ti, d.ne[1], &i1, &i2, &i3);
        if (row < 0) {
            atomicOr(err, 1);
            continue;
        }
        if (atomicAdd(claims + row + d.ne[1] * (i2 + d.ne[2] * i3), 1) != 0) atomicOr(err, 2);
    }
}

// dst[:, idx[i1, i2, i3], i2, i3] = b[:, i1, i2, i3] into a plain dst. One
// block per row of b (plain, or a block type blocked along dim 0). Writes
// nothing once *err is set (by rg_set_rows_claim, or an earlier node).
extern "C" __global__ void rg_set_rows(char* dst, RgT d, const char* b, RgT tb, const char* idx, RgT ti, int* err) {
    if (*(volatile int*)err) return;
    i64 i1, i2, i3;
    const i64 row = rg_index_row(tb, blockIdx.x, idx, ti, d.ne[1], &i1, &i2, &i3);
    if (row < 0) {
        if (threadIdx.x == 0) atomicOr(err, 1);
        return;
    }
    const char* x = b + i1 * tb.nb[1] + i2 * tb.nb[2] + i3 * tb.nb[3];
    char* y = dst + row * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
    for (i64 i = threadIdx.x; i < tb.ne[0]; i += blockDim.x) rg_store(y + i * d.nb[0], d.type, rgq_row_value(x, tb, i));
}

// set_rows into a block-type dst (blocked along dim 0): one thread per
// (row of b, block of the row); nblocks = b's rows times d.ne0 / block size.
// A block of the same type as b is moved byte for byte (as the CPU does);
// otherwise its values are quantized (32-value types only; the host checks).
// Writes nothing once *err is set.
extern "C" __global__ void rg_set_rows_q(char* dst, RgT d, const char* b, RgT tb, const char* idx, RgT ti, int* err, i64 nblocks) {
    if (*(volatile int*)err) return;
    int bs = rgq_block_size(d.type);
    i64 per_row = d.ne[0] / bs;
    RG_GRID_STRIDE(k, nblocks) {
        i64 r = k / per_row, u0 = k % per_row;
        i64 i1, i2, i3;
        const i64 row = rg_index_row(tb, r, idx, ti, d.ne[1], &i1, &i2, &i3);
        if (row < 0) {
            atomicOr(err, 1);
            continue;
        }
        const char* x = b + i1 * tb.nb[1] + i2 * tb.nb[2] + i3 * tb.nb[3];
        char* y = dst + row * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3] + u0 * d.nb[0];
        if (tb.type == d.type) {
            rgq_copy_block(y, x + u0 * tb.nb[0], rgq_type_size(d.type));
        } else {
            float v[RGQ_QK];
            for (int j = 0; j < RGQ_QK; ++j) v[j] = rgq_row_value(x, tb, u0 * RGQ_QK + j);
            rgq_quantize(d.type, y, v);
        }
    }
}

// dst = a as packed F32 in logical order (any strides; plain, or any block
// type blocked along any dim). Grid-stride over every element.
extern "C" __global__ void rg_to_f32(float* dst, const char* a, RgT ta) {
    i64 n = ta.ne[0] * ta.ne[1] * ta.ne[2] * ta.ne[3];
    RG_GRID_STRIDE(i, n) { dst[i] = rgq_get(a, ta, i); }
}
