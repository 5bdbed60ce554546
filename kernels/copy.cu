// Copies with type conversion (cont, dup, cpy): element i of dst in logical
// order takes element i of src in logical order (the shapes may differ, the
// element counts agree). Plain types F32/F16/BF16/I32; I32 to I32 is exact;
// block types (dequantizing, quantizing into the 32-value types, moving blocks)
// below. Compiled with prelude.cuh and quant.cuh prepended.
//
// Fast paths (chosen on the host, src/backend/cuda/fast.rs): packed same-type
// copies in vectors of up to 16 bytes, packed F32 <-> F16/BF16 in vectors of
// 4 values, and a shared-memory tiled copy for transposed sources.

// ---- packed fast paths (the host picks the vector width; src/backend/cuda/fast.rs) ----
//
// A packed run of n elements split as: `head` scalar elements, then `nvec`
// vectors of V elements starting at element `head` (both pointers aligned to
// their vector size there), then the scalar tail. Index i < nvec is vector i;
// the others are the head and tail elements, one per index.
__device__ __forceinline__ i64 rg_scalar_at(i64 i, i64 nvec, i64 head, int v) {
    i64 j = i - nvec;
    return j < head ? j : j + nvec * v;
}

// Same-type copy of `nbytes` bytes in vectors of type V (1, 2, 4, 8 or 16 bytes).
template <typename V>
__device__ __forceinline__ void rg_copy_vec(char* dst, const char* src, i64 head, i64 nvec, i64 nbytes) {
    const int w = (int)sizeof(V);
    RG_GRID_STRIDE(i, nbytes - nvec * (w - 1)) {
        if (i < nvec) {
            ((V*)(dst + head))[i] = ((const V*)(src + head))[i];
        } else {
            i64 at = rg_scalar_at(i, nvec, head, w);
            dst[at] = src[at];
        }
    }
}
extern "C" __global__ void rg_copy_v1(char* dst, const char* src, i64 head, i64 nvec, i64 nbytes) {
    rg_copy_vec<unsigned char>(dst, src, head, nvec, nbytes);
}
extern "C" __global__ void rg_copy_v2(char* dst, const char* src, i64 head, i64 nvec, i64 nbytes) {
    rg_copy_vec<unsigned short>(dst, src, head, nvec, nbytes);
}
extern "C" __global__ void rg_copy_v4(char* dst, const char* src, i64 head, i64 nvec, i64 nbytes) {
    rg_copy_vec<unsigned int>(dst, src, head, nvec, nbytes);
}
extern "C" __global__ void rg_copy_v8(char* dst, const char* src, i64 head, i64 nvec, i64 nbytes) {
    rg_copy_vec<uint2>(dst, src, head, nvec, nbytes);
}
extern "C" __global__ void rg_copy_v16(char* dst, const char* src, i64 head, i64 nvec, i64 nbytes) {
    rg_copy_vec<uint4>(dst, src, head, nvec, nbytes);
}

// F32 -> F16/BF16 (`dt`) and back, one value at a time: exactly rg_store's and
// rg_load's conversions (round to nearest even, the same NaN handling).
__device__ __forceinline__ unsigned int rg_f2x(int dt, float v) {
    return dt == RG_BF16 ? (unsigned int)rg_f2bf(v) : (unsigned int)rg_f2h(v);
}
__device__ __forceinline__ float rg_x2f(int st, unsigned int h) {
    return st == RG_BF16 ? rg_bf2f((unsigned short)h) : rg_h2f((unsigned short)h);
}

// Packed F32 -> packed F16/BF16 of n elements: 4 floats in (16 bytes), 4
// halves out (8 bytes) per vector.
extern "C" __global__ void rg_f32_to_half_v4(unsigned short* dst, int dt, const float* src, i64 head, i64 nvec, i64 n) {
    RG_GRID_STRIDE(i, n - nvec * 3) {
        if (i < nvec) {
            float4 x = ((const float4*)(src + head))[i];
            uint2 o;
            o.x = rg_f2x(dt, x.x) | (rg_f2x(dt, x.y) << 16);
            o.y = rg_f2x(dt, x.z) | (rg_f2x(dt, x.w) << 16);
            ((uint2*)(dst + head))[i] = o;
        } else {
            i64 at = rg_scalar_at(i, nvec, head, 4);
            dst[at] = (unsigned short)rg_f2x(dt, src[at]);
        }
    }
}
// As above with 2 floats (8 bytes) in, 2 halves (4 bytes) out per vector.
extern "C" __global__ void rg_f32_to_half_v2(unsigned short* dst, int dt, const float* src, i64 head, i64 nvec, i64 n) {
    RG_GRID_STRIDE(i, n - nvec) {
        if (i < nvec) {
            float2 x = ((const float2*)(src + head))[i];
            ((unsigned int*)(dst + head))[i] = rg_f2x(dt, x.x) | (rg_f2x(dt, x.y) << 16);
        } else {
            i64 at = rg_scalar_at(i, nvec, head, 2);
            dst[at] = (unsigned short)rg_f2x(dt, src[at]);
        }
    }
}
// Packed F16/BF16 (`st`) -> packed F32 of n elements: 4 halves in, 4 floats out per vector.
extern "C" __global__ void rg_half_to_f32_v4(float* dst, const unsigned short* src, int st, i64 head, i64 nvec, i64 n) {
    RG_GRID_STRIDE(i, n - nvec * 3) {
        if (i < nvec) {
            uint2 x = ((const uint2*)(src + head))[i];
            float4 o;
            o.x = rg_x2f(st, x.x & 0xffffu);
            o.y = rg_x2f(st, x.x >> 16);
            o.z = rg_x2f(st, x.y & 0xffffu);
            o.w = rg_x2f(st, x.y >> 16);
            ((float4*)(dst + head))[i] = o;
        } else {
            i64 at = rg_scalar_at(i, nvec, head, 4);
            dst[at] = rg_x2f(st, src[at]);
        }
    }
}
// As above with 2 halves in, 2 floats out per vector.
extern "C" __global__ void rg_half_to_f32_v2(float* dst, const unsigned short* src, int st, i64 head, i64 nvec, i64 n) {
    RG_GRID_STRIDE(i, n - nvec) {
        if (i < nvec) {
            unsigned int x = ((const unsigned int*)(src + head))[i];
            float2 o;
            o.x = rg_x2f(st, x & 0xffffu);
            o.y = rg_x2f(st, x >> 16);
            ((float2*)(dst + head))[i] = o;
        } else {
            i64 at = rg_scalar_at(i, nvec, head, 2);
            dst[at] = rg_x2f(st, src[at]);
        }
    }
}

// Transposing copy: dst and src of the same shape, src's unit-stride dim is
// k (1..3), not 0; p and q are the other two dims. A block moves 32x32 tiles
// over (i0, ik) through shared memory (blockDim 32x8): reads run along k
// (src's packed dim), writes along dim 0 (dst's). Tiles hold the values
// already in dst's representation (same type: the raw bits, else rg_load then
// rg_store's conversion), the row padded by one word against bank conflicts.
#define RG_TILE 32
#define RG_TILE_ROWS 8

__device__ __forceinline__ unsigned int rg_bits_as(const char* p, int st, int dt) {
    bool s2 = st == RG_F16 || st == RG_BF16;
    if (st == dt) return s2 ? (unsigned int)*(const unsigned short*)p : *(const unsigned int*)p;
    float v = rg_load(p, st);
    switch (dt) {
    case RG_F16: return rg_f2h(v);
    case RG_BF16: return rg_f2bf(v);
    case RG_I32: return (unsigned int)(int)v;
    default: return __float_as_uint(v);
    }
}

// a[k] for a dim k chosen at run time, without indexing the kernel parameter
// (a dynamic index would copy the whole struct to local memory).
__device__ __forceinline__ i64 rg_pick(const i64 (&a)[4], int k) {
    return k == 1 ? a[1] : (k == 2 ? a[2] : (k == 3 ? a[3] : a[0]));
}

// 8 blocks of 256 threads per SM: ptxas fits it in 32 registers without spills
// (sm_90), so the SM is full and has many loads in flight.
extern "C" __global__ void __launch_bounds__(256, 8) rg_copy_transpose(char* dst, RgT d, const char* src, RgT ts, int k, int p, int q) {
    __shared__ unsigned int tile[RG_TILE][RG_TILE + 1];
    const i64 ne0 = d.ne[0], nek = rg_pick(d.ne, k), nep = rg_pick(d.ne, p), npq = nep * rg_pick(d.ne, q);
    const i64 snb0 = ts.nb[0], snbk = rg_pick(ts.nb, k), dnb0 = d.nb[0], dnbk = rg_pick(d.nb, k);
    const i64 snbp = rg_pick(ts.nb, p), snbq = rg_pick(ts.nb, q), dnbp = rg_pick(d.nb, p), dnbq = rg_pick(d.nb, q);
    const int st = ts.type, dt = d.type;
    const bool d2 = dt == RG_F16 || dt == RG_BF16;
    const int tx = threadIdx.x, ty = threadIdx.y;
    // every loop bound below is uniform over the block, so all threads reach each barrier
    for (i64 z = blockIdx.z; z < npq; z += gridDim.z) {
        const i64 ip = z % nep, iq = z / nep;
        const char* sb = src + ip * snbp + iq * snbq;
        char* db = dst + ip * dnbp + iq * dnbq;
        for (i64 kb = (i64)blockIdx.y * RG_TILE; kb < nek; kb += (i64)gridDim.y * RG_TILE) {
            for (i64 i0b = (i64)blockIdx.x * RG_TILE; i0b < ne0; i0b += (i64)gridDim.x * RG_TILE) {
                // read along k (src's unit stride): tile[j][tx] = src(i0b + j, kb + tx)
                const i64 ik = kb + tx;
                for (int j = ty; j < RG_TILE; j += RG_TILE_ROWS) {
                    const i64 i0 = i0b + j;
                    if (ik < nek && i0 < ne0) tile[j][tx] = rg_bits_as(sb + i0 * snb0 + ik * snbk, st, dt);
                }
                __syncthreads();
                // write along dim 0 (dst's unit stride): dst(i0b + tx, kb + j) = tile[tx][j]
                const i64 i0 = i0b + tx;
                for (int j = ty; j < RG_TILE; j += RG_TILE_ROWS) {
                    const i64 ikw = kb + j;
                    if (ikw < nek && i0 < ne0) {
                        char* pd = db + i0 * dnb0 + ikw * dnbk;
                        const unsigned int v = tile[tx][j];
                        if (d2) *(unsigned short*)pd = (unsigned short)v;
                        else *(unsigned int*)pd = v;
                    }
                }
                __syncthreads();
            }
        }
    }
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
