// Quantized matrix times a few activation rows: dst[i0, i1] = dot(weight row
// i0, activation row i1), from the weight blocks and the activations quantized
// by quantize_act.cu, with the CPU's arithmetic (src/quant/dot/scalar.rs): an
// exact integer dot per block (per super-block for the k-quants), then that
// block's f32 scaling with the same operations in the same order (explicit
// _rn intrinsics: no FMA contraction). Only the f32 sum over blocks is
// associated differently (per thread, then a tree).
//
// Geometry: one thread block of RG_MMVQ_THREADS per weight row (grid.x), a
// tile of up to RG_MMVQ_NC activation rows (grid.y), one (i2, i3) batch
// (grid.z). Each thread takes 32-value units u = tid, tid + THREADS, ...: a
// whole legacy block, or group u % 8 of super-block u / 8 (the 8 lanes of a
// super-block then add their integer partial sums with shuffles, exactly).
// A unit's weights are loaded once into registers and dotted with every row
// of the tile, so the weights stream from memory once per tile.
//
// The rg_mmvq_id_* kernels are the same bodies for mul_mat_id: grid.y/z
// number tiles of (slot, token) pairs routed to one expert (moe.cuh), whose
// activation rows and destination columns come from shared tables instead of
// being evenly spaced.
// Compiled with prelude.cuh, mmvq_blocks.cuh (the weight formats) and moe.cuh
// (the tiles of mul_mat_id) prepended.

#define RG_MMVQ_NC 8
#define RG_MMVQ_THREADS 128

// Mirrors `KMmvq` in src/backend/cuda/matmul/mmvq.rs (#[repr(C)], 104 bytes).
struct RgMmvq {
    i64 w_nb1, w_nb2, w_nb3;  // weight byte strides (rows of packed blocks)
    i64 d_nb1, d_nb2, d_nb3;  // dst byte strides (nb0 = 4)
    i64 act_row;              // bytes per quantized activation row
    i64 n;                    // activation rows per batch (dst ne1)
    i64 ne2;                  // dst ne2
    i64 r2, r3;               // broadcast ratios of the weights over dims 2, 3
    i64 m;                    // weight rows (dst ne0)
    int units;                // 32-value units per row
    int pad;
};

// ---- the kernels --------------------------------------------------------------

// Where the activation rows of a block's tile are and where its sums go:
// column c dots activation row act(c) and stores weight row r at out(c) + 4 r.
// Dense mul_mat: rows evenly spaced in one batch.
struct RgDenseCols {
    const char* a0;  // activation row of column 0
    i64 astep;       // bytes between activation rows
    char* d0;        // destination of column 0, weight row 0 of the block
    i64 dstep;       // bytes between destination columns
    __device__ __forceinline__ const char* act(int c) const { return a0 + c * astep; }
    __device__ __forceinline__ char* out(int c) const { return d0 + c * dstep; }
};
// mul_mat_id: the tile's pairs, from the shared tables rg_moe_tile fills.
struct RgIdCols {
    const char* acts;   // the quantized activation rows
    const i64* arow;    // activation row of each column
    i64 act_row;        // bytes per activation row
    char* d0;           // dst plus weight row 0 of the block
    const i64* doff;    // destination byte offset of each column
    __device__ __forceinline__ const char* act(int c) const { return acts + arow[c] * act_row; }
    __device__ __forceinline__ char* out(int c) const { return d0 + doff[c]; }
};

// The dense tile (blockIdx.y) of batch (i2, i3): weight row `row0` at dst
// row offset 4 row0.
__device__ __forceinline__ RgDenseCols rg_dense_cols(float* dst, const char* act, const RgMmvq& p, i64 row0, i64 col0,
                                                     i64 i2, i64 i3) {
    RgDenseCols c;
    c.a0 = act + ((i3 * p.ne2 + i2) * p.n + col0) * p.act_row;
    c.astep = p.act_row;
    c.d0 = (char*)dst + row0 * 4 + col0 * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3;
    c.dstep = p.d_nb1;
    return c;
}

// The block's sums: acc[r][c] of every thread, added over each warp by a
// shuffle tree, then over the warps in order, into cols.out(c) + 4 r for the
// first nrows rows and ncols columns. One __syncthreads: every thread of the
// block must call it.
template <int ROWS, int NC, class C>
__device__ __forceinline__ void rg_mmvq_store(const float (&acc)[ROWS][NC], const C& cols, int nrows, int ncols) {
    __shared__ float red[RG_MMVQ_THREADS / 32][ROWS][NC];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
#pragma unroll
        for (int c = 0; c < NC; c++) {
            float v = acc[r][c];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            if (lane == 0) red[wid][r][c] = v;
        }
    }
    __syncthreads();
    const int r = threadIdx.x / NC, c = threadIdx.x % NC;
    if (r < nrows && c < ncols) {
        float v = 0.0f;
#pragma unroll
        for (int k = 0; k < RG_MMVQ_THREADS / 32; k++) v += red[k][r][c];
        *(float*)(cols.out(c) + r * 4) = v;
    }
}

// One weight row (at `wrow`, `units` 32-value units) against the tile's
// `ncols` activation rows.
template <class W, class C>
__device__ __forceinline__ void rg_mmvq_row(const char* wrow, int units, const C& cols, int ncols) {
    float acc[1][RG_MMVQ_NC];
#pragma unroll
    for (int c = 0; c < RG_MMVQ_NC; c++) acc[0][c] = 0.0f;
    // uniform trip count: every lane reaches the shuffles of the k-quant dots
    for (int base = 0; base < units; base += RG_MMVQ_THREADS) {
        const int u = base + (int)threadIdx.x;
        const bool ok = u < units;
        W wv;
        if (ok) wv.load(wrow, u);
#pragma unroll
        for (int c = 0; c < RG_MMVQ_NC; c++) {
            if (c < ncols) acc[0][c] += wv.dot(ok, cols.act(c), u);
        }
    }
    rg_mmvq_store<1, RG_MMVQ_NC>(acc, cols, 1, ncols);
}

template <class W>
__device__ __forceinline__ void rg_mmvq(float* dst, const char* w, const char* act, const RgMmvq& p) {
    const i64 row = blockIdx.x;
    const i64 z = blockIdx.z;
    const i64 i2 = z % p.ne2, i3 = z / p.ne2;
    const i64 col0 = (i64)blockIdx.y * RG_MMVQ_NC;
    const i64 left = p.n - col0;
    const int ncols = left < RG_MMVQ_NC ? (int)left : RG_MMVQ_NC;
    const char* wrow = w + row * p.w_nb1 + (i2 / p.r2) * p.w_nb2 + (i3 / p.r3) * p.w_nb3;
    rg_mmvq_row<W>(wrow, p.units, rg_dense_cols(dst, act, p, row, col0, i2, i3), ncols);
}

// ---- the staged kernel ----------------------------------------------------------
//
// The same function with the same unit-to-thread map, for weight rows aligned
// to the staging vectors (16 bytes; 8 for Q3_K and Q6_K, whose 4 super-blocks
// are not whole 16-byte vectors) and 16-byte aligned activation rows, with
// RG_MMVQ_ROWS weight rows per thread block (grid.x = ceil(m / RG_MMVQ_ROWS)).
// Each warp copies its chunk of 32 units of every row (W::CHUNK bytes: 32
// legacy blocks or 4 super-blocks) and, per activation row, the chunk's
// activation blocks (W::ACT bytes) into shared memory with vector loads that
// the warp's lanes take in order, then dots from there:
// the generic kernel's per-lane loads of 2 or 4 bytes at a block's stride
// touch 18-36 sectors per warp request for 64-128 useful bytes, these touch
// each sector once, and each activation chunk serves RG_MMVQ_ROWS rows. A
// warp's last chunk, when a row has fewer than 32 units left, is read as the
// generic kernel reads it. Each row's sum is formed exactly as there, so the
// results are the same bits.
#define RG_MMVQ_ROWS 4

// Copies BYTES (a multiple of 8) from global to shared memory, a warp's lanes
// taking consecutive 16-byte vectors (8-byte ones when BYTES is not a
// multiple of 16).
template <int BYTES>
__device__ __forceinline__ void rg_stage(char* sm, const char* g, int lane) {
    if constexpr (BYTES % 16 == 0) {
        for (int i = lane; i < BYTES / 16; i += 32) ((uint4*)sm)[i] = ((const uint4*)g)[i];
    } else {
        for (int i = lane; i < BYTES / 8; i += 32) ((uint2*)sm)[i] = ((const uint2*)g)[i];
    }
}

// `nrows` weight rows from `wrow0` (w_nb1 bytes apart) against the tile's
// `ncols` activation rows. NC: activation rows per block, RG_MMVQ_NC or 1
// (the `_n1` kernels, for N = 1: a quarter of the registers, so more blocks
// fit on a multiprocessor).
template <class W, int NC, class C>
__device__ __forceinline__ void rg_mmvq_rows(const char* wrow0, i64 w_nb1, int units, int nrows, const C& cols,
                                             int ncols) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    alignas(16) __shared__ char wsm[RG_MMVQ_THREADS / 32][RG_MMVQ_ROWS][W::CHUNK];
    alignas(16) __shared__ char asm36[RG_MMVQ_THREADS / 32][W::ACT];
    float acc[RG_MMVQ_ROWS][NC];
#pragma unroll
    for (int r = 0; r < RG_MMVQ_ROWS; r++) {
#pragma unroll
        for (int c = 0; c < NC; c++) acc[r][c] = 0.0f;
    }
    for (int base = 0; base < units; base += RG_MMVQ_THREADS) {
        const int chunk = base + wid * 32;  // this warp's first unit (warp-uniform)
        if (chunk >= units) break;
        const int u = chunk + lane;
        W wv[RG_MMVQ_ROWS];
        if (chunk + 32 <= units) {
#pragma unroll
            for (int r = 0; r < RG_MMVQ_ROWS; r++) {
                if (r < nrows) rg_stage<W::CHUNK>(wsm[wid][r], wrow0 + r * w_nb1 + (i64)(chunk >> 5) * W::CHUNK, lane);
            }
            __syncwarp();
#pragma unroll
            for (int r = 0; r < RG_MMVQ_ROWS; r++) {
                if (r < nrows) wv[r].load(wsm[wid][r], lane);
            }
#pragma unroll
            for (int c = 0; c < NC; c++) {
                if (c < ncols) {
                    __syncwarp();  // every lane is done with the previous activation chunk
                    rg_stage<W::ACT>(asm36[wid], W::act_chunk(cols.act(c), chunk), lane);
                    __syncwarp();
#pragma unroll
                    for (int r = 0; r < RG_MMVQ_ROWS; r++) {
                        if (r < nrows) acc[r][c] += wv[r].dot(true, asm36[wid], lane);
                    }
                }
            }
            __syncwarp();  // before the next chunk overwrites the weights
        } else {
            const bool ok = u < units;
#pragma unroll
            for (int r = 0; r < RG_MMVQ_ROWS; r++) {
                if (r < nrows && ok) wv[r].load(wrow0 + r * w_nb1, u);
            }
#pragma unroll
            for (int c = 0; c < NC; c++) {
#pragma unroll
                for (int r = 0; r < RG_MMVQ_ROWS; r++) {
                    if (c < ncols && r < nrows) acc[r][c] += wv[r].dot(ok, cols.act(c), u);
                }
            }
        }
    }
    rg_mmvq_store<RG_MMVQ_ROWS, NC>(acc, cols, nrows, ncols);
}

template <class W, int NC>
__device__ __forceinline__ void rg_mmvq_staged(float* dst, const char* w, const char* act, const RgMmvq& p) {
    const i64 row0 = (i64)blockIdx.x * RG_MMVQ_ROWS;
    const i64 z = blockIdx.z;
    const i64 i2 = z % p.ne2, i3 = z / p.ne2;
    const i64 col0 = (i64)blockIdx.y * NC;
    const i64 left = p.n - col0;
    const int ncols = left < NC ? (int)left : NC;
    const i64 rows_left = p.m - row0;
    const int nrows = rows_left < RG_MMVQ_ROWS ? (int)rows_left : RG_MMVQ_ROWS;
    const char* wrow0 = w + row0 * p.w_nb1 + (i2 / p.r2) * p.w_nb2 + (i3 / p.r3) * p.w_nb3;
    rg_mmvq_rows<W, NC>(wrow0, p.w_nb1, p.units, nrows, rg_dense_cols(dst, act, p, row0, col0, i2, i3), ncols);
}

template <class W>
__device__ __forceinline__ void rg_mmvq_staged_tile(float* dst, const char* w, const char* act, const RgMmvq& p) {
    rg_mmvq_staged<W, RG_MMVQ_NC>(dst, w, act, p);
}
template <class W>
__device__ __forceinline__ void rg_mmvq_staged_n1(float* dst, const char* w, const char* act, const RgMmvq& p) {
    rg_mmvq_staged<W, 1>(dst, w, act, p);
}

// ---- mul_mat_id -----------------------------------------------------------------
//
// grid.x as above (weight rows, or groups of RG_MMVQ_ROWS of them); tile
// blockIdx.y + gridDim.y * blockIdx.z of the pairs routed to one expert
// (rg_moe_tile: a table of tiles of at most NC pairs, or one pair per tile).
// Weights at w + expert * w_nb2; p.ne2, p.n, r2, r3 and w_nb3 are unused.

// ROWS: 1 for the generic body, RG_MMVQ_ROWS for the staged one.
template <class W, int NC, bool STAGED>
__device__ __forceinline__ void rg_mmvq_id(float* dst, const char* w, const char* act, const RgMmvq& p,
                                           const RgMoe& q) {
    __shared__ i64 arow[NC], doff[NC];
    int expert;
    const int ncols = rg_moe_tile<NC>(q, p.d_nb1, p.d_nb2, arow, doff, &expert);
    if (ncols == 0) return;  // block-uniform
    const i64 row0 = STAGED ? (i64)blockIdx.x * RG_MMVQ_ROWS : (i64)blockIdx.x;
    RgIdCols cols;
    cols.acts = act;
    cols.arow = arow;
    cols.act_row = p.act_row;
    cols.d0 = (char*)dst + row0 * 4;
    cols.doff = doff;
    const char* wrow0 = w + row0 * p.w_nb1 + expert * p.w_nb2;
    if constexpr (STAGED) {
        const i64 rows_left = p.m - row0;
        const int nrows = rows_left < RG_MMVQ_ROWS ? (int)rows_left : RG_MMVQ_ROWS;
        rg_mmvq_rows<W, NC>(wrow0, p.w_nb1, p.units, nrows, cols, ncols);
    } else {
        rg_mmvq_row<W>(wrow0, p.units, cols, ncols);
    }
}
template <class W>
__device__ __forceinline__ void rg_mmvq_id_generic(float* dst, const char* w, const char* act, const RgMmvq& p,
                                                   const RgMoe& q) {
    rg_mmvq_id<W, RG_MMVQ_NC, false>(dst, w, act, p, q);
}
template <class W>
__device__ __forceinline__ void rg_mmvq_id_tile(float* dst, const char* w, const char* act, const RgMmvq& p,
                                                const RgMoe& q) {
    rg_mmvq_id<W, RG_MMVQ_NC, true>(dst, w, act, p, q);
}
template <class W>
__device__ __forceinline__ void rg_mmvq_id_n1(float* dst, const char* w, const char* act, const RgMmvq& p,
                                              const RgMoe& q) {
    rg_mmvq_id<W, 1, true>(dst, w, act, p, q);
}

// `call` is the kernel template instantiation (rg_mmvq<W>, rg_mmvq_staged_tile<W> or
// rg_mmvq_staged_n1<W>).
#define RG_MMVQ_ENTRY(name, call) \
    extern "C" __global__ void __launch_bounds__(RG_MMVQ_THREADS) name(float* dst, const char* w, const char* act, RgMmvq p) { \
        call(dst, w, act, p); \
    }
// The mul_mat_id kernels (rg_mmvq_id_generic<W>, rg_mmvq_id_tile<W>, rg_mmvq_id_n1<W>).
#define RG_MMVQ_ID_ENTRY(name, call) \
    extern "C" __global__ void __launch_bounds__(RG_MMVQ_THREADS) name(float* dst, const char* w, const char* act, RgMmvq p, RgMoe q) { \
        call(dst, w, act, p, q); \
    }

// Each weight type's kernels. The host loads module mmvq_<type> (the three
// mul_mat kernels) or mmvq_id_<type> (the three mul_mat_id ones): this file
// with RG_MMVQ_TYPE defined to the type's code (and RG_MMVQ_ID for the
// second), so a model compiles only the types and ops it has (all of them
// take tens of seconds of NVRTC time for sm_90); module "mmvq" (RG_MMVQ_TYPE
// undefined) has every kernel.
#if !defined(RG_MMVQ_TYPE)
#define RG_MMVQ_HAS(T, ID) 1
#elif defined(RG_MMVQ_ID)
#define RG_MMVQ_HAS(T, ID) (RG_MMVQ_TYPE == (T) && (ID))
#else
#define RG_MMVQ_HAS(T, ID) (RG_MMVQ_TYPE == (T) && !(ID))
#endif
#if RG_MMVQ_HAS(RG_Q4_0, 0)
RG_MMVQ_ENTRY(rg_mmvq_q4_0, rg_mmvq<WQ4_0>)
RG_MMVQ_ENTRY(rg_mmvq_q4_0_staged, rg_mmvq_staged_tile<WQ4_0>)
RG_MMVQ_ENTRY(rg_mmvq_q4_0_staged_n1, rg_mmvq_staged_n1<WQ4_0>)
#endif
#if RG_MMVQ_HAS(RG_Q4_0, 1)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q4_0, rg_mmvq_id_generic<WQ4_0>)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q4_0_staged, rg_mmvq_id_tile<WQ4_0>)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q4_0_staged_n1, rg_mmvq_id_n1<WQ4_0>)
#endif
#if RG_MMVQ_HAS(RG_Q4_1, 0)
RG_MMVQ_ENTRY(rg_mmvq_q4_1, rg_mmvq<WQ4_1>)
RG_MMVQ_ENTRY(rg_mmvq_q4_1_staged, rg_mmvq_staged_tile<WQ4_1>)
RG_MMVQ_ENTRY(rg_mmvq_q4_1_staged_n1, rg_mmvq_staged_n1<WQ4_1>)
#endif
#if RG_MMVQ_HAS(RG_Q4_1, 1)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q4_1, rg_mmvq_id_generic<WQ4_1>)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q4_1_staged, rg_mmvq_id_tile<WQ4_1>)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q4_1_staged_n1, rg_mmvq_id_n1<WQ4_1>)
#endif
#if RG_MMVQ_HAS(RG_Q5_0, 0)
RG_MMVQ_ENTRY(rg_mmvq_q5_0, rg_mmvq<WQ5_0>)
RG_MMVQ_ENTRY(rg_mmvq_q5_0_staged, rg_mmvq_staged_tile<WQ5_0>)
RG_MMVQ_ENTRY(rg_mmvq_q5_0_staged_n1, rg_mmvq_staged_n1<WQ5_0>)
#endif
#if RG_MMVQ_HAS(RG_Q5_0, 1)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q5_0, rg_mmvq_id_generic<WQ5_0>)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q5_0_staged, rg_mmvq_id_tile<WQ5_0>)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q5_0_staged_n1, rg_mmvq_id_n1<WQ5_0>)
#endif
#if RG_MMVQ_HAS(RG_Q5_1, 0)
RG_MMVQ_ENTRY(rg_mmvq_q5_1, rg_mmvq<WQ5_1>)
RG_MMVQ_ENTRY(rg_mmvq_q5_1_staged, rg_mmvq_staged_tile<WQ5_1>)
RG_MMVQ_ENTRY(rg_mmvq_q5_1_staged_n1, rg_mmvq_staged_n1<WQ5_1>)
#endif
#if RG_MMVQ_HAS(RG_Q5_1, 1)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q5_1, rg_mmvq_id_generic<WQ5_1>)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q5_1_staged, rg_mmvq_id_tile<WQ5_1>)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q5_1_staged_n1, rg_mmvq_id_n1<WQ5_1>)
#endif
#if RG_MMVQ_HAS(RG_Q8_0, 0)
RG_MMVQ_ENTRY(rg_mmvq_q8_0, rg_mmvq<WQ8_0>)
RG_MMVQ_ENTRY(rg_mmvq_q8_0_staged, rg_mmvq_staged_tile<WQ8_0>)
RG_MMVQ_ENTRY(rg_mmvq_q8_0_staged_n1, rg_mmvq_staged_n1<WQ8_0>)
#endif
#if RG_MMVQ_HAS(RG_Q8_0, 1)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q8_0, rg_mmvq_id_generic<WQ8_0>)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q8_0_staged, rg_mmvq_id_tile<WQ8_0>)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q8_0_staged_n1, rg_mmvq_id_n1<WQ8_0>)
#endif
#if RG_MMVQ_HAS(RG_Q2_K, 0)
RG_MMVQ_ENTRY(rg_mmvq_q2_k, rg_mmvq<WQ2_K>)
RG_MMVQ_ENTRY(rg_mmvq_q2_k_staged, rg_mmvq_staged_tile<WQ2_K>)
RG_MMVQ_ENTRY(rg_mmvq_q2_k_staged_n1, rg_mmvq_staged_n1<WQ2_K>)
#endif
#if RG_MMVQ_HAS(RG_Q2_K, 1)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q2_k, rg_mmvq_id_generic<WQ2_K>)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q2_k_staged, rg_mmvq_id_tile<WQ2_K>)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q2_k_staged_n1, rg_mmvq_id_n1<WQ2_K>)
#endif
#if RG_MMVQ_HAS(RG_Q3_K, 0)
RG_MMVQ_ENTRY(rg_mmvq_q3_k, rg_mmvq<WQ3_K>)
RG_MMVQ_ENTRY(rg_mmvq_q3_k_staged, rg_mmvq_staged_tile<WQ3_K>)
RG_MMVQ_ENTRY(rg_mmvq_q3_k_staged_n1, rg_mmvq_staged_n1<WQ3_K>)
#endif
#if RG_MMVQ_HAS(RG_Q3_K, 1)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q3_k, rg_mmvq_id_generic<WQ3_K>)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q3_k_staged, rg_mmvq_id_tile<WQ3_K>)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q3_k_staged_n1, rg_mmvq_id_n1<WQ3_K>)
#endif
#if RG_MMVQ_HAS(RG_Q4_K, 0)
RG_MMVQ_ENTRY(rg_mmvq_q4_k, rg_mmvq<WQK45<false>>)
RG_MMVQ_ENTRY(rg_mmvq_q4_k_staged, rg_mmvq_staged_tile<WQK45<false>>)
RG_MMVQ_ENTRY(rg_mmvq_q4_k_staged_n1, rg_mmvq_staged_n1<WQK45<false>>)
#endif
#if RG_MMVQ_HAS(RG_Q4_K, 1)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q4_k, rg_mmvq_id_generic<WQK45<false>>)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q4_k_staged, rg_mmvq_id_tile<WQK45<false>>)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q4_k_staged_n1, rg_mmvq_id_n1<WQK45<false>>)
#endif
#if RG_MMVQ_HAS(RG_Q5_K, 0)
RG_MMVQ_ENTRY(rg_mmvq_q5_k, rg_mmvq<WQK45<true>>)
RG_MMVQ_ENTRY(rg_mmvq_q5_k_staged, rg_mmvq_staged_tile<WQK45<true>>)
RG_MMVQ_ENTRY(rg_mmvq_q5_k_staged_n1, rg_mmvq_staged_n1<WQK45<true>>)
#endif
#if RG_MMVQ_HAS(RG_Q5_K, 1)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q5_k, rg_mmvq_id_generic<WQK45<true>>)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q5_k_staged, rg_mmvq_id_tile<WQK45<true>>)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q5_k_staged_n1, rg_mmvq_id_n1<WQK45<true>>)
#endif
#if RG_MMVQ_HAS(RG_Q6_K, 0)
RG_MMVQ_ENTRY(rg_mmvq_q6_k, rg_mmvq<WQ6_K>)
RG_MMVQ_ENTRY(rg_mmvq_q6_k_staged, rg_mmvq_staged_tile<WQ6_K>)
RG_MMVQ_ENTRY(rg_mmvq_q6_k_staged_n1, rg_mmvq_staged_n1<WQ6_K>)
#endif
#if RG_MMVQ_HAS(RG_Q6_K, 1)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q6_k, rg_mmvq_id_generic<WQ6_K>)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q6_k_staged, rg_mmvq_id_tile<WQ6_K>)
RG_MMVQ_ID_ENTRY(rg_mmvq_id_q6_k_staged_n1, rg_mmvq_id_n1<WQ6_K>)
#endif
