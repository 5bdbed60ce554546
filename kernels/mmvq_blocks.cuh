// The weight formats of the dot kernels (kernels/mmvq.cu): for each quantized
// weight type, a struct W that loads one 32-value unit of a weight row into
// registers (load) and dots it with the matching activation block (dot), with
// the CPU's arithmetic (src/quant/dot/scalar.rs); and what the staged kernel
// needs of it (CHUNK, ACT, act_chunk). Prepended to mmvq.cu, after the
// prelude (HEADERS in src/backend/cuda/kernels.rs).

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

// Q3_K and Q6_K: values stored with an offset `off` added (4, 32), taken off
// through the activations' sums: per 16-value group, sc * (Σ q·y - off · Σ y).
__device__ __forceinline__ float dot_offset(bool ok, const char* arow, int u, const int* q, int sc0, int sc1, float d,
                                            int off) {
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
        is = sc0 * (s0 - off * y0) + sc1 * (s1 - off * y1);
    }
    is = sum8(is);
    if (!ok || (u & 7) != 0) return 0.0f;
    return __fmul_rn(__fmul_rn(d, *(const float*)a), (float)is);
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
    __device__ float dot(bool ok, const char* arow, int u) const { return dot_offset(ok, arow, u, q, sc0, sc1, d, 4); }
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
    __device__ float dot(bool ok, const char* arow, int u) const { return dot_offset(ok, arow, u, q, sc0, sc1, d, 32); }
};
