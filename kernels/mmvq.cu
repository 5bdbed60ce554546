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
// Compiled with prelude.cuh prepended.

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

// 4 bytes at a 2-byte aligned address, and at a 4-byte aligned one.
__device__ __forceinline__ int ld_b2(const char* p) {
    const unsigned short* q = (const unsigned short*)p;
    return (int)((unsigned)q[0] | ((unsigned)q[1] << 16));
}
__device__ __forceinline__ int ld_b4(const char* p) { return *(const int*)p; }
__device__ __forceinline__ float ld_h(const char* p) { return rg_h2f(*(const unsigned short*)p); }

__device__ __forceinline__ int dp4(int a, int b, int c) { return rg_dp4a(a, b, c); }
#define ONES 0x01010101

// Bits s..s+3 of qh moved to bit 4 of bytes 0..3 (the fifth bits of Q5_0/Q5_1).
__device__ __forceinline__ int bits5(unsigned qh, int s) {
    unsigned x = qh >> s;
    return (int)(((x & 1u) << 4) | ((x & 2u) << 11) | ((x & 4u) << 18) | ((x & 8u) << 25));
}

// Legacy Q8 36 activation block: f16 d at 0, f16 s at 2, quants at 4.
#define A36(arow, u) ((arow) + (i64)(u) * 36)

// What the staged kernel needs of a weight type: CHUNK, the bytes of 32
// units (32 legacy blocks, or 4 super-blocks); ACT, the bytes of the
// activation blocks they meet; act_chunk, where those start in a row.
#define RG_LEGACY_CHUNKS                                                                \
    static constexpr int CHUNK = 32 * BYTES, ACT = 32 * 36;                            \
    __device__ static const char* act_chunk(const char* arow, int u) { return A36(arow, u); }
#define RG_K_CHUNKS(sb)                                                                 \
    static constexpr int CHUNK = 4 * (sb), ACT = 4 * 292;                              \
    __device__ static const char* act_chunk(const char* arow, int u) { return AK(arow, u >> 3); }

// ---- legacy types: one block per unit ------------------------------------

struct WQ4_0 {
    static constexpr int BYTES = 18;  // bytes per block
    RG_LEGACY_CHUNKS
    float d;
    int q[4];
    __device__ void load(const char* row, int u) {
        const char* b = row + (i64)u * BYTES;
        d = ld_h(b);
#pragma unroll
        for (int i = 0; i < 4; i++) q[i] = ld_b2(b + 2 + 4 * i);
    }
    __device__ float dot(bool ok, const char* arow, int u) const {
        if (!ok) return 0.0f;
        const char* a = A36(arow, u);
        const int* y = (const int*)(a + 4);
        int s = 0, sy = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            s = dp4(q[i] & 0x0F0F0F0F, y[i], s);
            s = dp4((q[i] >> 4) & 0x0F0F0F0F, y[i + 4], s);
            sy = dp4(ONES, y[i], dp4(ONES, y[i + 4], sy));
        }
        return __fmul_rn(__fmul_rn((float)(s - 8 * sy), d), ld_h(a));
    }
};

struct WQ4_1 {
    static constexpr int BYTES = 20;  // bytes per block
    RG_LEGACY_CHUNKS
    float d, m;
    int q[4];
    __device__ void load(const char* row, int u) {
        const char* b = row + (i64)u * BYTES;
        d = ld_h(b);
        m = ld_h(b + 2);
#pragma unroll
        for (int i = 0; i < 4; i++) q[i] = ld_b4(b + 4 + 4 * i);
    }
    __device__ float dot(bool ok, const char* arow, int u) const {
        if (!ok) return 0.0f;
        const char* a = A36(arow, u);
        const int* y = (const int*)(a + 4);
        int s = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            s = dp4(q[i] & 0x0F0F0F0F, y[i], s);
            s = dp4((q[i] >> 4) & 0x0F0F0F0F, y[i + 4], s);
        }
        return __fadd_rn(__fmul_rn(__fmul_rn(d, ld_h(a)), (float)s), __fmul_rn(m, ld_h(a + 2)));
    }
};

struct WQ5_0 {
    static constexpr int BYTES = 22;  // bytes per block
    RG_LEGACY_CHUNKS
    float d;
    int q[8];
    __device__ void load(const char* row, int u) {
        const char* b = row + (i64)u * BYTES;
        d = ld_h(b);
        const unsigned qh = (unsigned)ld_b2(b + 2);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int x = ld_b2(b + 6 + 4 * i);
            q[i] = (x & 0x0F0F0F0F) | bits5(qh, 4 * i);
            q[i + 4] = ((x >> 4) & 0x0F0F0F0F) | bits5(qh, 16 + 4 * i);
        }
    }
    __device__ float dot(bool ok, const char* arow, int u) const {
        if (!ok) return 0.0f;
        const char* a = A36(arow, u);
        const int* y = (const int*)(a + 4);
        int s = 0, sy = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            s = dp4(q[i], y[i], s);
            sy = dp4(ONES, y[i], sy);
        }
        return __fmul_rn(__fmul_rn(d, ld_h(a)), (float)(s - 16 * sy));
    }
};

struct WQ5_1 {
    static constexpr int BYTES = 24;  // bytes per block
    RG_LEGACY_CHUNKS
    float d, m;
    int q[8];
    __device__ void load(const char* row, int u) {
        const char* b = row + (i64)u * BYTES;
        d = ld_h(b);
        m = ld_h(b + 2);
        const unsigned qh = (unsigned)ld_b4(b + 4);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int x = ld_b4(b + 8 + 4 * i);
            q[i] = (x & 0x0F0F0F0F) | bits5(qh, 4 * i);
            q[i + 4] = ((x >> 4) & 0x0F0F0F0F) | bits5(qh, 16 + 4 * i);
        }
    }
    __device__ float dot(bool ok, const char* arow, int u) const {
        if (!ok) return 0.0f;
        const char* a = A36(arow, u);
        const int* y = (const int*)(a + 4);
        int s = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) s = dp4(q[i], y[i], s);
        return __fadd_rn(__fmul_rn(__fmul_rn(d, ld_h(a)), (float)s), __fmul_rn(m, ld_h(a + 2)));
    }
};

struct WQ8_0 {
    static constexpr int BYTES = 34;  // bytes per block
    RG_LEGACY_CHUNKS
    float d;
    int q[8];
    __device__ void load(const char* row, int u) {
        const char* b = row + (i64)u * BYTES;
        d = ld_h(b);
#pragma unroll
        for (int i = 0; i < 8; i++) q[i] = ld_b2(b + 2 + 4 * i);
    }
    __device__ float dot(bool ok, const char* arow, int u) const {
        if (!ok) return 0.0f;
        const char* a = A36(arow, u);
        const int* y = (const int*)(a + 4);
        int s = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) s = dp4(q[i], y[i], s);
        return __fmul_rn((float)s, __fmul_rn(d, ld_h(a)));
    }
};

// ---- k-quants: group g = u % 8 (values 32g..32g+32) of super-block u / 8 ----

// Adds x over the 8 lanes of a super-block (aligned groups of 8 lanes).
__device__ __forceinline__ int sum8(int x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    x += __shfl_xor_sync(0xffffffffu, x, 2);
    x += __shfl_xor_sync(0xffffffffu, x, 4);
    return x;
}

// The Q8_K block of super-block sb: f32 d at 0, quants at 4, i16 bsums at 260.
#define AK(arow, sb) ((arow) + (i64)(sb) * 292)

// Σ y·q over the two 16-value groups of this unit: (ints 0..3, ints 4..7).
__device__ __forceinline__ void dot16x2(const int* q, const int* y, int& s0, int& s1) {
    s0 = 0;
    s1 = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        s0 = dp4(q[i], y[i], s0);
        s1 = dp4(q[i + 4], y[i + 4], s1);
    }
}

// Scale and min of group g of Q4_K/Q5_K's packed 12 bytes (scale_min_k4).
__device__ __forceinline__ void scale_min_k4(const unsigned char* sc, int g, int& s, int& m) {
    if (g < 4) {
        s = sc[g] & 63;
        m = sc[g + 4] & 63;
    } else {
        s = (sc[g + 4] & 0x0F) | ((sc[g - 4] >> 6) << 4);
        m = (sc[g + 4] >> 4) | ((sc[g] >> 6) << 4);
    }
}

struct WQ2_K {
    RG_K_CHUNKS(84)
    float d, dmin;
    int q[8], sc0, sc1, mn0, mn1;
    __device__ void load(const char* row, int u) {
        const char* b = row + (i64)(u >> 3) * 84;
        const int g = u & 7, sh = 2 * (g & 3);
        const unsigned char* sc = (const unsigned char*)b;
        sc0 = sc[2 * g] & 15;
        mn0 = sc[2 * g] >> 4;
        sc1 = sc[2 * g + 1] & 15;
        mn1 = sc[2 * g + 1] >> 4;
#pragma unroll
        for (int i = 0; i < 8; i++) q[i] = (ld_b4(b + 16 + 32 * (g >> 2) + 4 * i) >> sh) & 0x03030303;
        d = ld_h(b + 80);
        dmin = ld_h(b + 82);
    }
    __device__ float dot(bool ok, const char* arow, int u) const {
        int is = 0, ms = 0;
        const char* a = AK(arow, u >> 3);
        if (ok) {
            const int g = u & 7;
            int s0, s1;
            dot16x2(q, (const int*)(a + 4 + 32 * g), s0, s1);
            is = sc0 * s0 + sc1 * s1;
            const short* bs = (const short*)(a + 260);
            ms = (int)bs[2 * g] * mn0 + (int)bs[2 * g + 1] * mn1;
        }
        is = sum8(is);
        ms = sum8(ms);
        if (!ok || (u & 7) != 0) return 0.0f;
        const float da = *(const float*)a;
        return __fsub_rn(__fmul_rn(__fmul_rn(da, d), (float)is), __fmul_rn(__fmul_rn(da, dmin), (float)ms));
    }
};

struct WQ3_K {
    RG_K_CHUNKS(110)
    float d;
    int q[8], sc0, sc1;
    __device__ void load(const char* row, int u) {
        const char* b = row + (i64)(u >> 3) * 110;
        const int g = u & 7, sh = 2 * (g & 3);
        // value = low2 + 4 * hbit, 0..7; the offset of 4 comes off in dot()
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int lo = (ld_b2(b + 32 + 32 * (g >> 2) + 4 * i) >> sh) & 0x03030303;
            const int hb = (ld_b2(b + 4 * i) >> g) & 0x01010101;
            q[i] = lo | (hb << 2);
        }
        const unsigned char* sc = (const unsigned char*)(b + 96);
        int s[2];
#pragma unroll
        for (int t = 0; t < 2; t++) {
            const int j = 2 * g + t;
            const int low = j < 8 ? (sc[j] & 15) : (sc[j - 8] >> 4);
            const int high = (sc[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
            s[t] = (low | (high << 4)) - 32;
        }
        sc0 = s[0];
        sc1 = s[1];
        d = ld_h(b + 108);
    }
    __device__ float dot(bool ok, const char* arow, int u) const {
        int is = 0;
        const char* a = AK(arow, u >> 3);
        if (ok) {
            const int* y = (const int*)(a + 4 + 32 * (u & 7));
            int s0, s1, y0 = 0, y1 = 0;
            dot16x2(q, y, s0, s1);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                y0 = dp4(ONES, y[i], y0);
                y1 = dp4(ONES, y[i + 4], y1);
            }
            is = sc0 * (s0 - 4 * y0) + sc1 * (s1 - 4 * y1);
        }
        is = sum8(is);
        if (!ok || (u & 7) != 0) return 0.0f;
        return __fmul_rn(__fmul_rn(d, *(const float*)a), (float)is);
    }
};

// Q4_K (144-byte blocks) and Q5_K (176, with fifth bits): same scales and sums.
template <bool FIVE>
struct WQK45 {
    RG_K_CHUNKS(FIVE ? 176 : 144)
    float d, dmin;
    int q[8], sc, mn;
    __device__ void load(const char* row, int u) {
        const char* b = row + (i64)(u >> 3) * (FIVE ? 176 : 144);
        const int g = u & 7;
        d = ld_h(b);
        dmin = ld_h(b + 2);
        scale_min_k4((const unsigned char*)(b + 4), g, sc, mn);
        const char* qs = b + (FIVE ? 48 : 16) + 32 * (g >> 1);
        const int sh = 4 * (g & 1);
        // 32 quant bytes, 16-byte aligned (blocks of 144/176 bytes, aligned rows)
        const int4 v0 = *(const int4*)qs, v1 = *(const int4*)(qs + 16);
        const int raw[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
#pragma unroll
        for (int i = 0; i < 8; i++) {
            q[i] = (raw[i] >> sh) & 0x0F0F0F0F;
            if (FIVE) q[i] |= ((ld_b4(b + 16 + 4 * i) >> g) & 0x01010101) << 4;
        }
    }
    __device__ float dot(bool ok, const char* arow, int u) const {
        int is = 0, ms = 0;
        const char* a = AK(arow, u >> 3);
        if (ok) {
            const int g = u & 7;
            const int* y = (const int*)(a + 4 + 32 * g);
            int s = 0;
#pragma unroll
            for (int i = 0; i < 8; i++) s = dp4(q[i], y[i], s);
            is = sc * s;
            const short* bs = (const short*)(a + 260);
            ms = mn * ((int)bs[2 * g] + (int)bs[2 * g + 1]);
        }
        is = sum8(is);
        ms = sum8(ms);
        if (!ok || (u & 7) != 0) return 0.0f;
        const float da = *(const float*)a;
        return __fsub_rn(__fmul_rn(__fmul_rn(d, da), (float)is), __fmul_rn(__fmul_rn(dmin, da), (float)ms));
    }
};

struct WQ6_K {
    RG_K_CHUNKS(210)
    float d;
    int q[8], sc0, sc1;
    __device__ void load(const char* row, int u) {
        const char* b = row + (i64)(u >> 3) * 210;
        const int g = u & 7, half = g >> 2, quarter = g & 3;
        const char* ql = b + 64 * half + 32 * (quarter & 1);
        const char* qh = b + 128 + 32 * half;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int lo = (ld_b2(ql + 4 * i) >> (4 * (quarter >> 1))) & 0x0F0F0F0F;
            const int hi = (ld_b2(qh + 4 * i) >> (2 * quarter)) & 0x03030303;
            q[i] = lo | (hi << 4);  // 0..63; the offset of 32 comes off in dot()
        }
        sc0 = (int)(signed char)b[192 + 2 * g];
        sc1 = (int)(signed char)b[192 + 2 * g + 1];
        d = ld_h(b + 208);
    }
    __device__ float dot(bool ok, const char* arow, int u) const {
        int is = 0;
        const char* a = AK(arow, u >> 3);
        if (ok) {
            const int* y = (const int*)(a + 4 + 32 * (u & 7));
            int s0, s1, y0 = 0, y1 = 0;
            dot16x2(q, y, s0, s1);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                y0 = dp4(ONES, y[i], y0);
                y1 = dp4(ONES, y[i + 4], y1);
            }
            is = sc0 * (s0 - 32 * y0) + sc1 * (s1 - 32 * y1);
        }
        is = sum8(is);
        if (!ok || (u & 7) != 0) return 0.0f;
        return __fmul_rn(__fmul_rn(d, *(const float*)a), (float)is);
    }
};

// ---- the kernels --------------------------------------------------------------

// The block's sums: acc[r][c] of every thread, added over each warp by a
// shuffle tree, then over the warps in order, into dst[row0 + r, col0 + c]
// for the first nrows rows and ncols columns. One __syncthreads: every thread
// of the block must call it.
template <int ROWS, int NC>
__device__ __forceinline__ void rg_mmvq_store(const float (&acc)[ROWS][NC], float* dst, const RgMmvq& p, i64 row0,
                                              int nrows, i64 col0, int ncols, i64 i2, i64 i3) {
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
        char* out = (char*)dst + (row0 + r) * 4 + (col0 + c) * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3;
        *(float*)out = v;
    }
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
    const char* arow = act + ((i3 * p.ne2 + i2) * p.n + col0) * p.act_row;
    float acc[1][RG_MMVQ_NC];
#pragma unroll
    for (int c = 0; c < RG_MMVQ_NC; c++) acc[0][c] = 0.0f;
    // uniform trip count: every lane reaches the shuffles of the k-quant dots
    for (int base = 0; base < p.units; base += RG_MMVQ_THREADS) {
        const int u = base + (int)threadIdx.x;
        const bool ok = u < p.units;
        W wv;
        if (ok) wv.load(wrow, u);
#pragma unroll
        for (int c = 0; c < RG_MMVQ_NC; c++) {
            if (c < ncols) acc[0][c] += wv.dot(ok, arow + c * p.act_row, u);
        }
    }
    rg_mmvq_store<1, RG_MMVQ_NC>(acc, dst, p, row, 1, col0, ncols, i2, i3);
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

// NC: activation rows per block, RG_MMVQ_NC or 1 (the `_n1` kernels, for
// N = 1: a quarter of the registers, so more blocks fit on a multiprocessor).
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
    const char* arow = act + ((i3 * p.ne2 + i2) * p.n + col0) * p.act_row;
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    alignas(16) __shared__ char wsm[RG_MMVQ_THREADS / 32][RG_MMVQ_ROWS][W::CHUNK];
    alignas(16) __shared__ char asm36[RG_MMVQ_THREADS / 32][W::ACT];
    float acc[RG_MMVQ_ROWS][NC];
#pragma unroll
    for (int r = 0; r < RG_MMVQ_ROWS; r++) {
#pragma unroll
        for (int c = 0; c < NC; c++) acc[r][c] = 0.0f;
    }
    for (int base = 0; base < p.units; base += RG_MMVQ_THREADS) {
        const int chunk = base + wid * 32;  // this warp's first unit (warp-uniform)
        if (chunk >= p.units) break;
        const int u = chunk + lane;
        W wv[RG_MMVQ_ROWS];
        if (chunk + 32 <= p.units) {
#pragma unroll
            for (int r = 0; r < RG_MMVQ_ROWS; r++) {
                if (r < nrows) rg_stage<W::CHUNK>(wsm[wid][r], wrow0 + r * p.w_nb1 + (i64)(chunk >> 5) * W::CHUNK, lane);
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
                    rg_stage<W::ACT>(asm36[wid], W::act_chunk(arow + c * p.act_row, chunk), lane);
                    __syncwarp();
#pragma unroll
                    for (int r = 0; r < RG_MMVQ_ROWS; r++) {
                        if (r < nrows) acc[r][c] += wv[r].dot(true, asm36[wid], lane);
                    }
                }
            }
            __syncwarp();  // before the next chunk overwrites the weights
        } else {
            const bool ok = u < p.units;
#pragma unroll
            for (int r = 0; r < RG_MMVQ_ROWS; r++) {
                if (r < nrows && ok) wv[r].load(wrow0 + r * p.w_nb1, u);
            }
#pragma unroll
            for (int c = 0; c < NC; c++) {
#pragma unroll
                for (int r = 0; r < RG_MMVQ_ROWS; r++) {
                    if (c < ncols && r < nrows) acc[r][c] += wv[r].dot(ok, arow + c * p.act_row, u);
                }
            }
        }
    }
    rg_mmvq_store<RG_MMVQ_ROWS, NC>(acc, dst, p, row0, nrows, col0, ncols, i2, i3);
}

template <class W>
__device__ __forceinline__ void rg_mmvq_staged_tile(float* dst, const char* w, const char* act, const RgMmvq& p) {
    rg_mmvq_staged<W, RG_MMVQ_NC>(dst, w, act, p);
}
template <class W>
__device__ __forceinline__ void rg_mmvq_staged_n1(float* dst, const char* w, const char* act, const RgMmvq& p) {
    rg_mmvq_staged<W, 1>(dst, w, act, p);
}

// `call` is the kernel template instantiation (rg_mmvq<W>, rg_mmvq_staged_tile<W> or
// rg_mmvq_staged_n1<W>).
#define RG_MMVQ_ENTRY(name, call) \
    extern "C" __global__ void __launch_bounds__(RG_MMVQ_THREADS) name(float* dst, const char* w, const char* act, RgMmvq p) { \
        call(dst, w, act, p); \
    }

RG_MMVQ_ENTRY(rg_mmvq_q4_0, rg_mmvq<WQ4_0>)
RG_MMVQ_ENTRY(rg_mmvq_q4_1, rg_mmvq<WQ4_1>)
RG_MMVQ_ENTRY(rg_mmvq_q5_0, rg_mmvq<WQ5_0>)
RG_MMVQ_ENTRY(rg_mmvq_q5_1, rg_mmvq<WQ5_1>)
RG_MMVQ_ENTRY(rg_mmvq_q8_0, rg_mmvq<WQ8_0>)
RG_MMVQ_ENTRY(rg_mmvq_q2_k, rg_mmvq<WQ2_K>)
RG_MMVQ_ENTRY(rg_mmvq_q3_k, rg_mmvq<WQ3_K>)
RG_MMVQ_ENTRY(rg_mmvq_q4_k, rg_mmvq<WQK45<false>>)
RG_MMVQ_ENTRY(rg_mmvq_q5_k, rg_mmvq<WQK45<true>>)
RG_MMVQ_ENTRY(rg_mmvq_q6_k, rg_mmvq<WQ6_K>)
RG_MMVQ_ENTRY(rg_mmvq_q4_0_staged, rg_mmvq_staged_tile<WQ4_0>)
RG_MMVQ_ENTRY(rg_mmvq_q4_1_staged, rg_mmvq_staged_tile<WQ4_1>)
RG_MMVQ_ENTRY(rg_mmvq_q5_0_staged, rg_mmvq_staged_tile<WQ5_0>)
RG_MMVQ_ENTRY(rg_mmvq_q5_1_staged, rg_mmvq_staged_tile<WQ5_1>)
RG_MMVQ_ENTRY(rg_mmvq_q8_0_staged, rg_mmvq_staged_tile<WQ8_0>)
RG_MMVQ_ENTRY(rg_mmvq_q2_k_staged, rg_mmvq_staged_tile<WQ2_K>)
RG_MMVQ_ENTRY(rg_mmvq_q3_k_staged, rg_mmvq_staged_tile<WQ3_K>)
RG_MMVQ_ENTRY(rg_mmvq_q4_k_staged, rg_mmvq_staged_tile<WQK45<false>>)
RG_MMVQ_ENTRY(rg_mmvq_q5_k_staged, rg_mmvq_staged_tile<WQK45<true>>)
RG_MMVQ_ENTRY(rg_mmvq_q6_k_staged, rg_mmvq_staged_tile<WQ6_K>)
RG_MMVQ_ENTRY(rg_mmvq_q4_0_staged_n1, rg_mmvq_staged_n1<WQ4_0>)
RG_MMVQ_ENTRY(rg_mmvq_q4_1_staged_n1, rg_mmvq_staged_n1<WQ4_1>)
RG_MMVQ_ENTRY(rg_mmvq_q5_0_staged_n1, rg_mmvq_staged_n1<WQ5_0>)
RG_MMVQ_ENTRY(rg_mmvq_q5_1_staged_n1, rg_mmvq_staged_n1<WQ5_1>)
RG_MMVQ_ENTRY(rg_mmvq_q8_0_staged_n1, rg_mmvq_staged_n1<WQ8_0>)
RG_MMVQ_ENTRY(rg_mmvq_q2_k_staged_n1, rg_mmvq_staged_n1<WQ2_K>)
RG_MMVQ_ENTRY(rg_mmvq_q3_k_staged_n1, rg_mmvq_staged_n1<WQ3_K>)
RG_MMVQ_ENTRY(rg_mmvq_q4_k_staged_n1, rg_mmvq_staged_n1<WQK45<false>>)
RG_MMVQ_ENTRY(rg_mmvq_q5_k_staged_n1, rg_mmvq_staged_n1<WQK45<true>>)
RG_MMVQ_ENTRY(rg_mmvq_q6_k_staged_n1, rg_mmvq_staged_n1<WQ6_K>)
