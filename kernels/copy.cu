// Copies with type conversion (cont, dup, cpy): element i of dst in logical
// order takes element i of src in logical order (the shapes may differ, the
// element counts agree). Plain types F32/F16/BF16/I32; I32 to I32 is exact.
// Compiled with prelude.cuh prepended.

// Fast path: both packed, same plain type: a byte copy of n elements of `size` bytes.
extern "C" __global__ void rg_copy_bytes(char* dst, const char* src, i64 nbytes) {
    RG_GRID_STRIDE(i, nbytes) { dst[i] = src[i]; }
}

// General path: any strides, any plain types.
extern "C" __global__ void rg_copy(char* dst, RgT d, const char* src, RgT ts, i64 n) {
    RG_GRID_STRIDE(i, n) {
        char* pd = dst + rg_offset(d, i);
        const char* ps = src + rg_offset(ts, i);
        if (d.type == RG_I32 && ts.type == RG_I32) {
            *(int*)pd = *(const int*)ps;
        } else {
            rg_store(pd, d.type, rg_load(ps, ts.type));
        }
    }
}
