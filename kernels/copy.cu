// Copies with type conversion (cont, dup, cpy): element i of dst in logical
// order takes element i of src in logical order (the shapes may differ, the
// element counts agree). Plain types F32/F16/BF16/I32; I32 to I32 is exact;
// block types (dequantizing, quantizing into the 32-value types, moving blocks)
// below. Compiled with prelude.cuh and quant.cuh prepended.

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

// ---- block types (kernels/quant.cuh) ----

// Dequantizing copy: element i of dst (plain type, any strides) in logical
// order takes element i of src (a block type blocked along ts.bdim, any strides).
extern "C" __global__ void rg_copy_dq(char* dst, RgT d, const char* src, RgT ts, i64 n) {
    RG_GRID_STRIDE(i, n) { rg_store(dst + rg_offset(d, i), d.type, rgq_get(src, ts, i)); }
}

// Quantizing copy: one thread per block of dst (a 32-value block type blocked
// along d.bdim, any strides); its values are the elements of src (any type the
// kernels read, any layout) at the same logical indices. nblocks = dst's blocks.
extern "C" __global__ void rg_copy_q(char* dst, RgT d, const char* src, RgT ts, i64 nblocks) {
    RG_GRID_STRIDE(k, nblocks) {
        i64 u[4];
        char* blk = dst + rgq_unit_offset(d, k, u);
        float x[RGQ_QK];
        for (int j = 0; j < RGQ_QK; ++j) x[j] = rgq_get(src, ts, rgq_logical(d, u, j));
        rgq_quantize(d.type, blk, x);
    }
}

// Same-type block move: block k of dst (flat over its storage units) takes
// block k of src (flat over src's units) byte for byte, never requantizing.
// The host calls it when both have the same unit shape or the same blocks per
// row along dim 0.
extern "C" __global__ void rg_copy_blocks(char* dst, RgT d, const char* src, RgT ts, i64 nblocks) {
    int size = rgq_type_size(d.type);
    RG_GRID_STRIDE(k, nblocks) {
        i64 ud[4], us[4];
        rgq_copy_block(dst + rgq_unit_offset(d, k, ud), src + rgq_unit_offset(ts, k, us), size);
    }
}
