// rgml block-quantized formats on the device: ggml's block structs (byte for
// byte, as src/quant/blocks.rs), per-value dequantization bit-identical to the
// CPU's (src/quant/legacy.rs, src/quant/k.rs), and the reference quantizers of
// the 32-value types byte-identical to the CPU's.
//
// Appended after prelude.cuh for the modules that read or write block types
// (see `QUANT_MODULES` in src/backend/cuda/kernels.rs). Every float operation
// that the CPU does as a separate multiply and add is written with the _rn
// intrinsics, so NVRTC cannot contract it into an FMA and round differently.
// Names start with rgq_ / RgqBlock.

#define RGQ_QK 32
#define RGQ_QK_K 256

struct RgqBlockQ4_0 { unsigned short d; unsigned char qs[16]; };
struct RgqBlockQ4_1 { unsigned short d, m; unsigned char qs[16]; };
struct RgqBlockQ5_0 { unsigned short d; unsigned char qh[4]; unsigned char qs[16]; };
struct RgqBlockQ5_1 { unsigned short d, m; unsigned char qh[4]; unsigned char qs[16]; };
struct RgqBlockQ8_0 { unsigned short d; signed char qs[32]; };
struct RgqBlockQ8_1 { unsigned short d, s; signed char qs[32]; };
struct RgqBlockQ2_K { unsigned char scales[16]; unsigned char qs[64]; unsigned short d, dmin; };
struct RgqBlockQ3_K { unsigned char hmask[32]; unsigned char qs[64]; unsigned char scales[12]; unsigned short d; };
struct RgqBlockQ4_K { unsigned short d, dmin; unsigned char scales[12]; unsigned char qs[128]; };
struct RgqBlockQ5_K { unsigned short d, dmin; unsigned char scales[12]; unsigned char qh[32]; unsigned char qs[128]; };
struct RgqBlockQ6_K { unsigned char ql[128]; unsigned char qh[64]; signed char scales[16]; unsigned short d; };
struct RgqBlockQ8_K { float d; signed char qs[256]; short bsums[16]; };
struct RgqBlockIQ4_NL { unsigned short d; unsigned char qs[16]; };
struct RgqBlockIQ4_XS { unsigned short d, scales_h; unsigned char scales_l[4]; unsigned char qs[128]; };
struct RgqBlockMXFP4 { unsigned char e; unsigned char qs[16]; };

static_assert(sizeof(RgqBlockQ4_0) == 18, "Q4_0");
static_assert(sizeof(RgqBlockQ4_1) == 20, "Q4_1");
static_assert(sizeof(RgqBlockQ5_0) == 22, "Q5_0");
static_assert(sizeof(RgqBlockQ5_1) == 24, "Q5_1");
static_assert(sizeof(RgqBlockQ8_0) == 34, "Q8_0");
static_assert(sizeof(RgqBlockQ8_1) == 36, "Q8_1");
static_assert(sizeof(RgqBlockQ2_K) == 84, "Q2_K");
static_assert(sizeof(RgqBlockQ3_K) == 110, "Q3_K");
static_assert(sizeof(RgqBlockQ4_K) == 144, "Q4_K");
static_assert(sizeof(RgqBlockQ5_K) == 176, "Q5_K");
static_assert(sizeof(RgqBlockQ6_K) == 210, "Q6_K");
static_assert(sizeof(RgqBlockQ8_K) == 292, "Q8_K");
static_assert(sizeof(RgqBlockIQ4_NL) == 18, "IQ4_NL");
static_assert(sizeof(RgqBlockIQ4_XS) == 136, "IQ4_XS");
static_assert(sizeof(RgqBlockMXFP4) == 17, "MXFP4");

// IQ4_NL's 16 levels (also IQ4_XS's), and MXFP4's E2M1 values doubled
// (src/quant/iq_grids.rs).
__constant__ signed char rgq_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                       1,    13,   25,  38,  53,  69,  89,  113};
__constant__ signed char rgq_kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// True for the 24 block types.
__device__ __forceinline__ bool rgq_is_block(int type) { return type >= RG_Q4_0 && type <= RG_TQ2_0; }
// True for the types of 256-value super-blocks (the k-quants, IQ4_XS, the
// grid i-quants and the ternary types).
__device__ __forceinline__ bool rgq_is_k(int type) {
    return (type >= RG_Q2_K && type <= RG_Q8_K) || type == RG_IQ4_XS || (type >= RG_IQ1_S && type <= RG_TQ2_0);
}
// Values per block (1 for plain types).
__device__ __forceinline__ int rgq_block_size(int type) {
    return rgq_is_k(type) ? RGQ_QK_K : (rgq_is_block(type) ? RGQ_QK : 1);
}
// Bytes per block of a block type.
__device__ __forceinline__ int rgq_type_size(int type) {
    switch (type) {
    case RG_Q4_0: return 18;
    case RG_Q4_1: return 20;
    case RG_Q5_0: return 22;
    case RG_Q5_1: return 24;
    case RG_Q8_0: return 34;
    case RG_Q8_1: return 36;
    case RG_Q2_K: return 84;
    case RG_Q3_K: return 110;
    case RG_Q4_K: return 144;
    case RG_Q5_K: return 176;
    case RG_Q6_K: return 210;
    case RG_Q8_K: return 292;
    case RG_IQ4_NL: return 18;
    case RG_IQ4_XS: return 136;
    case RG_MXFP4: return 17;
    case RG_IQ1_S: return 50;
    case RG_IQ1_M: return 56;
    case RG_IQ2_XXS: return 66;
    case RG_IQ2_XS: return 74;
    case RG_IQ2_S: return 82;
    case RG_IQ3_XXS: return 98;
    case RG_IQ3_S: return 110;
    case RG_TQ1_0: return 54;
    case RG_TQ2_0: return 66;
    default: return 0;
    }
}

// f16 bits to f32 exactly as the CPU's `f16_to_f32`: a NaN keeps its payload
// and its signaling bit (the hardware conversion may quiet it).
__device__ __forceinline__ float rgq_h2f(unsigned short h) {
    if ((h & 0x7c00u) == 0x7c00u) {
        unsigned int sign = ((unsigned int)(h & 0x8000u)) << 16;
        return __uint_as_float(sign | 0x7f800000u | (((unsigned int)(h & 0x3ffu)) << 13));
    }
    return rg_h2f(h);
}
// f32 to f16 bits as the CPU's `f32_to_f16` (ggml's): round to nearest even,
// overflow to infinity, any NaN to 0x7e00 with its sign.
__device__ __forceinline__ unsigned short rgq_f2h(float f) {
    unsigned int x = __float_as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)(((x >> 16) & 0x8000u) | 0x7e00u);
    return rg_f2h(f);
}

// The fifth-bit word of Q5_0/Q5_1 (little-endian u32 at any 2-byte alignment).
__device__ __forceinline__ unsigned int rgq_qh32(const unsigned char* qh) {
    return (unsigned int)qh[0] | ((unsigned int)qh[1] << 8) | ((unsigned int)qh[2] << 16) | ((unsigned int)qh[3] << 24);
}
// Value j's low nibble in the Q4_0/Q4_1/Q5 packing (byte j%16; high nibble for j >= 16).
__device__ __forceinline__ int rgq_nib32(const unsigned char* qs, int j) {
    return j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
}
// The 2-bit field of value j in the Q2_K/Q3_K packing.
__device__ __forceinline__ int rgq_low2(const unsigned char* qs, int j) {
    int h = j / 128, r = j % 128;
    return (qs[32 * h + r % 32] >> (2 * (r / 32))) & 3;
}
// Q4_K/Q5_K 6-bit scale and min of group g.
__device__ __forceinline__ void rgq_scale_min_k4(int g, const unsigned char* q, int* sc, int* m) {
    if (g < 4) {
        *sc = q[g] & 63;
        *m = q[g + 4] & 63;
    } else {
        *sc = (q[g + 4] & 0x0f) | ((q[g - 4] >> 6) << 4);
        *m = (q[g + 4] >> 4) | ((q[g] >> 6) << 4);
    }
}

// ---- the grid i-quants and the ternary types, as src/quant/iq.rs and
// src/quant/ternary.rs (bytes read one by one: the blocks are 2-byte aligned) ----

__device__ __forceinline__ unsigned int rgq_u16(const unsigned char* p) { return p[0] | (p[1] << 8); }
__device__ __forceinline__ unsigned int rgq_u32(const unsigned char* p) { return rgq_u16(p) | (rgq_u16(p + 2) << 16); }
// Byte b of a u64 grid entry.
__device__ __forceinline__ int rgq_byte64(unsigned long long g, int b) { return (int)((g >> (8 * b)) & 0xff); }
// `db · mag · (sign bit jj of `signs` ? -1 : 1)`, as the CPU's signed8.
__device__ __forceinline__ float rgq_signed(float db, int mag, int signs, int jj) {
    return __fmul_rn(__fmul_rn(db, (float)mag), (signs >> jj) & 1 ? -1.0f : 1.0f);
}
// `d · (0.5 + s) · f`.
__device__ __forceinline__ float rgq_half_scale(float d, unsigned int s, float f) {
    return __fmul_rn(__fmul_rn(d, __fadd_rn(0.5f, (float)s)), f);
}
// Trit n (0..5) of a TQ1_0 byte: ((q · 3^n mod 256) · 3) >> 8.
__device__ __forceinline__ int rgq_trit(unsigned int q, int n) {
    const unsigned int pow3[5] = {1, 3, 9, 27, 81};
    return (int)((((q * pow3[n]) & 0xff) * 3) >> 8);
}

__device__ float rgq_value_iq(int type, const unsigned char* b, int j) {
    const int g = j / 32, l = (j % 32) / 8, jj = j % 8, p = j / 8;
    switch (type) {
    case RG_IQ2_XXS: {  // d, then per group of 32 two u32: grid indices; signs and scale
        const unsigned char* w = b + 2 + 8 * g;
        unsigned int a0 = rgq_u32(w), a1 = rgq_u32(w + 4);
        float db = rgq_half_scale(rgq_h2f(rgq_u16(b)), a1 >> 28, 0.25f);
        int mag = rgq_byte64(rgq_iq2xxs_grid[(a0 >> (8 * l)) & 0xff], jj);
        return rgq_signed(db, mag, rgq_ksigns_iq2xs[(a1 >> (7 * l)) & 127], jj);
    }
    case RG_IQ2_XS: {  // d, 32 u16 (9-bit index, 7-bit signs), 8 scale bytes
        unsigned int q = rgq_u16(b + 2 + 2 * p);
        unsigned int sc = (b[66 + p / 4] >> (4 * ((p / 2) % 2))) & 0x0f;
        int mag = rgq_byte64(rgq_iq2xs_grid[q & 511], jj);
        return rgq_signed(rgq_half_scale(rgq_h2f(rgq_u16(b)), sc, 0.25f), mag, rgq_ksigns_iq2xs[q >> 9], jj);
    }
    case RG_IQ2_S: {  // d, 32 index bytes, 32 sign bytes, 8 qh, 8 scales
        int gp = p / 4, lp = p % 4;
        unsigned int high = ((unsigned int)b[66 + gp] << (8 - 2 * lp)) & 0x300;
        unsigned int sc = (b[74 + p / 4] >> (4 * ((p / 2) % 2))) & 0x0f;
        int mag = rgq_byte64(rgq_iq2s_grid[b[2 + p] | high], jj);
        return rgq_signed(rgq_half_scale(rgq_h2f(rgq_u16(b)), sc, 0.25f), mag, b[2 + 32 + p], jj);
    }
    case RG_IQ3_XXS: {  // d, 64 index bytes, 8 u32 of signs and scale
        unsigned int w = rgq_u32(b + 2 + 64 + 4 * g);
        unsigned int grid = rgq_iq3xxs_grid[b[2 + 8 * g + 2 * l + jj / 4]];
        int mag = (int)((grid >> (8 * (jj % 4))) & 0xff);
        return rgq_signed(rgq_half_scale(rgq_h2f(rgq_u16(b)), w >> 28, 0.5f), mag, rgq_ksigns_iq2xs[(w >> (7 * l)) & 127], jj);
    }
    case RG_IQ3_S: {  // d, 64 index bytes, 8 qh, 32 sign bytes, 4 scale bytes
        unsigned int h = b[66 + g];
        unsigned int idx = jj < 4 ? (b[2 + 8 * g + 2 * l] | ((h << (8 - 2 * l)) & 256))
                                  : (b[2 + 8 * g + 2 * l + 1] | ((h << (7 - 2 * l)) & 256));
        int mag = (int)((rgq_iq3s_grid[idx] >> (8 * (jj % 4))) & 0xff);
        int sc = (b[106 + g / 2] >> (4 * (g % 2))) & 0x0f;
        float db = __fmul_rn(rgq_h2f(rgq_u16(b)), (float)(1 + 2 * sc));
        return rgq_signed(db, mag, b[74 + 4 * g + l], jj);
    }
    case RG_IQ1_S: {  // d, 32 index bytes, 8 u16 qh (3-bit index tops, scale, shift sign)
        unsigned int h = rgq_u16(b + 34 + 2 * g);
        unsigned int idx = b[2 + 4 * g + l] | (((h >> (3 * l)) & 7) << 8);
        int v = (int)(signed char)rgq_byte64(rgq_iq1s_grid[idx & 0x7ff], jj);
        float dl = __fmul_rn(rgq_h2f(rgq_u16(b)), (float)(2 * (int)((h >> 12) & 7) + 1));
        return __fmul_rn(dl, __fadd_rn((float)v, (h & 0x8000) ? -0.125f : 0.125f));
    }
    case RG_IQ1_M: {  // 32 index bytes, 16 qh, 4 u16 scale words (the f16 d in their top nibbles)
        unsigned int w0 = rgq_u16(b + 48), w1 = rgq_u16(b + 50), w2 = rgq_u16(b + 52), w3 = rgq_u16(b + 54);
        unsigned int dbits = (w0 >> 12) | ((w1 >> 8) & 0x00f0) | ((w2 >> 4) & 0x0f00) | (w3 & 0xf000);
        unsigned int h = b[32 + p / 2];
        int shift = 4 * (p % 2);
        unsigned int idx = b[p] | (((h << 8) >> shift) & 0x700);
        int v = (int)(signed char)rgq_byte64(rgq_iq1s_grid[idx & 0x7ff], jj);
        int r = p / 2, gs = r / 2, half = r % 2;
        unsigned int w = rgq_u16(b + 48 + 2 * (gs / 2));
        int sc = 2 * (int)((w >> (6 * (gs % 2) + 3 * half)) & 7) + 1;
        float dl = __fmul_rn(rgq_h2f((unsigned short)dbits), (float)sc);
        return __fmul_rn(dl, __fadd_rn((float)v, (h & (0x08u << shift)) ? -0.125f : 0.125f));
    }
    case RG_TQ1_0: {  // 48 five-trit bytes (32 along runs of 32, 16 along 16), 4 qh, d
        int t;
        if (j < 160) t = rgq_trit(b[j % 32], j / 32);
        else if (j < 240) t = rgq_trit(b[32 + (j - 160) % 16], (j - 160) / 16);
        else t = rgq_trit(b[48 + (j - 240) % 4], (j - 240) / 4);
        return __fmul_rn((float)(t - 1), rgq_h2f(rgq_u16(b + 52)));
    }
    case RG_TQ2_0: {  // 64 bytes of 2-bit fields, d
        int h = j / 128, r = j % 128;
        int q = (b[32 * h + r % 32] >> (2 * (r / 32))) & 3;
        return __fmul_rn((float)(q - 1), rgq_h2f(rgq_u16(b + 64)));
    }
    default: return 0.0f;
    }
}

// Value j (0 <= j < block size) of the block at `p` of block type `type`,
// computed with the same f32 operations as the CPU dequantizer.
__device__ float rgq_value(int type, const char* p, int j) {
    switch (type) {
    case RG_Q4_0: {
        const RgqBlockQ4_0* b = (const RgqBlockQ4_0*)p;
        return __fmul_rn((float)(rgq_nib32(b->qs, j) - 8), rgq_h2f(b->d));
    }
    case RG_Q4_1: {
        const RgqBlockQ4_1* b = (const RgqBlockQ4_1*)p;
        return __fadd_rn(__fmul_rn((float)rgq_nib32(b->qs, j), rgq_h2f(b->d)), rgq_h2f(b->m));
    }
    case RG_Q5_0: {
        const RgqBlockQ5_0* b = (const RgqBlockQ5_0*)p;
        int q = rgq_nib32(b->qs, j) | (int)(((rgq_qh32(b->qh) >> j) & 1u) << 4);
        return __fmul_rn((float)(q - 16), rgq_h2f(b->d));
    }
    case RG_Q5_1: {
        const RgqBlockQ5_1* b = (const RgqBlockQ5_1*)p;
        int q = rgq_nib32(b->qs, j) | (int)(((rgq_qh32(b->qh) >> j) & 1u) << 4);
        return __fadd_rn(__fmul_rn((float)q, rgq_h2f(b->d)), rgq_h2f(b->m));
    }
    case RG_Q8_0: {
        const RgqBlockQ8_0* b = (const RgqBlockQ8_0*)p;
        return __fmul_rn((float)b->qs[j], rgq_h2f(b->d));
    }
    case RG_Q8_1: {
        const RgqBlockQ8_1* b = (const RgqBlockQ8_1*)p;
        return __fmul_rn((float)b->qs[j], rgq_h2f(b->d));
    }
    case RG_Q2_K: {
        const RgqBlockQ2_K* b = (const RgqBlockQ2_K*)p;
        int sc = b->scales[j / 16];
        float dl = __fmul_rn(rgq_h2f(b->d), (float)(sc & 0x0f));
        float ml = __fmul_rn(rgq_h2f(b->dmin), (float)(sc >> 4));
        return __fsub_rn(__fmul_rn(dl, (float)rgq_low2(b->qs, j)), ml);
    }
    case RG_Q3_K: {
        const RgqBlockQ3_K* b = (const RgqBlockQ3_K*)p;
        int g = j / 16;
        int low = g < 8 ? (b->scales[g] & 0x0f) : (b->scales[g - 8] >> 4);
        int high = (b->scales[8 + g % 4] >> (2 * (g / 4))) & 3;
        float dl = __fmul_rn(rgq_h2f(b->d), (float)((low | (high << 4)) - 32));
        int hbit = (b->hmask[j % 32] >> (j / 32)) & 1;
        int q = rgq_low2(b->qs, j) - (hbit ? 0 : 4);
        return __fmul_rn(dl, (float)q);
    }
    case RG_Q4_K: {
        const RgqBlockQ4_K* b = (const RgqBlockQ4_K*)p;
        int g = j / 32, sc, m;
        rgq_scale_min_k4(g, b->scales, &sc, &m);
        float dl = __fmul_rn(rgq_h2f(b->d), (float)sc);
        float ml = __fmul_rn(rgq_h2f(b->dmin), (float)m);
        int q = (b->qs[32 * (g / 2) + j % 32] >> (4 * (g % 2))) & 0x0f;
        return __fsub_rn(__fmul_rn(dl, (float)q), ml);
    }
    case RG_Q5_K: {
        const RgqBlockQ5_K* b = (const RgqBlockQ5_K*)p;
        int g = j / 32, i = j % 32, sc, m;
        rgq_scale_min_k4(g, b->scales, &sc, &m);
        float dl = __fmul_rn(rgq_h2f(b->d), (float)sc);
        float ml = __fmul_rn(rgq_h2f(b->dmin), (float)m);
        int q = ((b->qs[32 * (g / 2) + i] >> (4 * (g % 2))) & 0x0f) + ((b->qh[i] & (1 << g)) ? 16 : 0);
        return __fsub_rn(__fmul_rn(dl, (float)q), ml);
    }
    case RG_Q6_K: {
        const RgqBlockQ6_K* b = (const RgqBlockQ6_K*)p;
        int h = j / 128, r = j % 128, quarter = r / 32, l = r % 32;
        int low = (b->ql[64 * h + 32 * (quarter % 2) + l] >> (4 * (quarter / 2))) & 0x0f;
        int high = (b->qh[32 * h + l] >> (2 * quarter)) & 3;
        int q = (low | (high << 4)) - 32;
        return __fmul_rn(__fmul_rn(rgq_h2f(b->d), (float)b->scales[j / 16]), (float)q);
    }
    case RG_Q8_K: {
        const RgqBlockQ8_K* b = (const RgqBlockQ8_K*)p;
        return __fmul_rn(b->d, (float)b->qs[j]);
    }
    case RG_IQ4_NL: {
        const RgqBlockIQ4_NL* b = (const RgqBlockIQ4_NL*)p;
        return __fmul_rn(rgq_h2f(b->d), (float)rgq_kvalues_iq4nl[rgq_nib32(b->qs, j)]);
    }
    case RG_IQ4_XS: {
        const RgqBlockIQ4_XS* b = (const RgqBlockIQ4_XS*)p;
        int g = j / 32;
        int ls = ((b->scales_l[g / 2] >> (4 * (g % 2))) & 0x0f) | (((b->scales_h >> (2 * g)) & 3) << 4);
        float dl = __fmul_rn(rgq_h2f(b->d), (float)(ls - 32));
        return __fmul_rn(dl, (float)rgq_kvalues_iq4nl[rgq_nib32(b->qs + 16 * g, j % 32)]);
    }
    case RG_MXFP4: {
        const RgqBlockMXFP4* b = (const RgqBlockMXFP4*)p;
        // half of 2^(e - 127), subnormal for e < 2 (ggml's e8m0_to_fp32_half)
        unsigned int bits = b->e < 2 ? (0x00200000u << b->e) : ((unsigned int)(b->e - 1) << 23);
        return __fmul_rn((float)rgq_kvalues_mxfp4[rgq_nib32(b->qs, j)], __uint_as_float(bits));
    }
    default: return rgq_value_iq(type, (const unsigned char*)p, j);
    }
}

// Storage-unit counts of `t` per dim: blocks along its block dim, else elements.
__device__ __forceinline__ void rgq_units(const RgT& t, i64 u[4]) {
    int bs = rgq_block_size(t.type);
    for (int d = 0; d < 4; ++d) u[d] = d == t.bdim ? t.ne[d] / bs : t.ne[d];
}
// Byte offset of the storage unit with flat index k (over the units, dim 0 fastest).
__device__ __forceinline__ i64 rgq_unit_offset(const RgT& t, i64 k, i64 idx[4]) {
    i64 u[4];
    rgq_units(t, u);
    idx[0] = k % u[0]; k /= u[0];
    idx[1] = k % u[1]; k /= u[1];
    idx[2] = k % u[2];
    idx[3] = k / u[2];
    return idx[0] * t.nb[0] + idx[1] * t.nb[1] + idx[2] * t.nb[2] + idx[3] * t.nb[3];
}
// Flat logical index (dim 0 fastest) of value j of the block at unit index `u`.
__device__ __forceinline__ i64 rgq_logical(const RgT& t, const i64 u[4], int j) {
    i64 i[4] = {u[0], u[1], u[2], u[3]};
    i[t.bdim] = u[t.bdim] * rgq_block_size(t.type) + j;
    return ((i[3] * t.ne[2] + i[2]) * t.ne[1] + i[1]) * t.ne[0] + i[0];
}

// The value with flat logical index k of `t` at `base`: any layout, any type
// the kernels read (block types blocked along t.bdim, plain types).
__device__ float rgq_get(const char* base, const RgT& t, i64 k) {
    i64 i[4];
    i[0] = k % t.ne[0]; k /= t.ne[0];
    i[1] = k % t.ne[1]; k /= t.ne[1];
    i[2] = k % t.ne[2];
    i[3] = k / t.ne[2];
    if (rgq_is_block(t.type)) {
        int bs = rgq_block_size(t.type);
        int j = (int)(i[t.bdim] % bs);
        i[t.bdim] /= bs;
        return rgq_value(t.type, base + i[0] * t.nb[0] + i[1] * t.nb[1] + i[2] * t.nb[2] + i[3] * t.nb[3], j);
    }
    return rg_load(base + i[0] * t.nb[0] + i[1] * t.nb[1] + i[2] * t.nb[2] + i[3] * t.nb[3], t.type);
}
// Value i0 of a row at `row` whose type is blocked along dim 0 (or plain).
__device__ __forceinline__ float rgq_row_value(const char* row, const RgT& t, i64 i0) {
    if (rgq_is_block(t.type)) {
        int bs = rgq_block_size(t.type);
        return rgq_value(t.type, row + (i0 / bs) * t.nb[0], (int)(i0 % bs));
    }
    return rg_load(row + i0 * t.nb[0], t.type);
}

// ---- quantizers (the 32-value types), as src/quant/legacy.rs ----

// `trunc(v)` clamped to 0..=hi (Rust's saturating `as i32`: NaN gives 0).
__device__ __forceinline__ unsigned char rgq_trunc_clamp(float v, int hi) {
    int t = __float2int_rz(v);
    return (unsigned char)(t < 0 ? 0 : (t > hi ? hi : t));
}
// `1/d`, or 0 when d is 0.
__device__ __forceinline__ float rgq_inverse(float d) { return d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f; }
// The value of largest magnitude (the first one on ties), or 0.
__device__ __forceinline__ float rgq_signed_absmax(const float* x) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < RGQ_QK; ++j) {
        float a = fabsf(x[j]);
        if (amax < a) { amax = a; max = x[j]; }
    }
    return max;
}
__device__ __forceinline__ void rgq_min_max(const float* x, float* mn, float* mx) {
    float lo = 3.40282347e+38f, hi = -3.40282347e+38f;
    for (int j = 0; j < RGQ_QK; ++j) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}
// Packs 32 five-bit quants: low nibbles (j with j+16) and the fifth-bit word.
__device__ __forceinline__ void rgq_pack5(const unsigned char* q, unsigned char* qs, unsigned char* qh) {
    unsigned int h = 0;
    for (int j = 0; j < 16; ++j) {
        qs[j] = (unsigned char)((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
        h |= ((unsigned int)(q[j] >> 4)) << j;
        h |= ((unsigned int)(q[j + 16] >> 4)) << (j + 16);
    }
    qh[0] = (unsigned char)h; qh[1] = (unsigned char)(h >> 8); qh[2] = (unsigned char)(h >> 16); qh[3] = (unsigned char)(h >> 24);
}
// Round half away from zero, exactly (Rust's `f32::round`): the fraction
// x - trunc(x) is exact, so no intermediate rounding can move a tie.
__device__ __forceinline__ float rgq_round(float x) {
    float t = truncf(x);
    if (fabsf(__fsub_rn(x, t)) >= 0.5f) t = __fadd_rn(t, copysignf(1.0f, x));
    return t;
}
// Q8_0/Q8_1: d = amax/127 (ggml's MAX: a NaN |x| wins), q = round half away from zero, saturated to i8.
__device__ __forceinline__ float rgq_quantize_q8(const float* x, signed char* qs) {
    float amax = 0.0f;
    for (int j = 0; j < RGQ_QK; ++j) {
        float a = fabsf(x[j]);
        amax = amax > a ? amax : a;
    }
    float d = __fdiv_rn(amax, 127.0f);
    float id = rgq_inverse(d);
    for (int j = 0; j < RGQ_QK; ++j) {
        int t = __float2int_rz(rgq_round(__fmul_rn(x[j], id)));
        qs[j] = (signed char)(t < -128 ? -128 : (t > 127 ? 127 : t));
    }
    return d;
}

// True if the kernels can quantize into `type` (the 32-value block types).
__device__ __forceinline__ bool rgq_can_quantize(int type) { return type >= RG_Q4_0 && type <= RG_Q8_1; }

// Quantizes the 32 values x into one block at p of a 32-value type.
__device__ void rgq_quantize(int type, char* p, const float* x) {
    switch (type) {
    case RG_Q4_0: {
        RgqBlockQ4_0* b = (RgqBlockQ4_0*)p;
        float d = __fdiv_rn(rgq_signed_absmax(x), -8.0f), id = rgq_inverse(d);
        for (int j = 0; j < 16; ++j) {
            unsigned char lo = rgq_trunc_clamp(__fadd_rn(__fmul_rn(x[j], id), 8.5f), 15);
            unsigned char hi = rgq_trunc_clamp(__fadd_rn(__fmul_rn(x[j + 16], id), 8.5f), 15);
            b->qs[j] = (unsigned char)(lo | (hi << 4));
        }
        b->d = rgq_f2h(d);
        break;
    }
    case RG_Q4_1: {
        RgqBlockQ4_1* b = (RgqBlockQ4_1*)p;
        float mn, mx;
        rgq_min_max(x, &mn, &mx);
        float d = __fdiv_rn(__fsub_rn(mx, mn), 15.0f), id = rgq_inverse(d);
        for (int j = 0; j < 16; ++j) {
            unsigned char lo = rgq_trunc_clamp(__fadd_rn(__fmul_rn(__fsub_rn(x[j], mn), id), 0.5f), 15);
            unsigned char hi = rgq_trunc_clamp(__fadd_rn(__fmul_rn(__fsub_rn(x[j + 16], mn), id), 0.5f), 15);
            b->qs[j] = (unsigned char)(lo | (hi << 4));
        }
        b->d = rgq_f2h(d);
        b->m = rgq_f2h(mn);
        break;
    }
    case RG_Q5_0: {
        RgqBlockQ5_0* b = (RgqBlockQ5_0*)p;
        float d = __fdiv_rn(rgq_signed_absmax(x), -16.0f), id = rgq_inverse(d);
        unsigned char q[RGQ_QK];
        for (int j = 0; j < RGQ_QK; ++j) q[j] = rgq_trunc_clamp(__fadd_rn(__fmul_rn(x[j], id), 16.5f), 31);
        rgq_pack5(q, b->qs, b->qh);
        b->d = rgq_f2h(d);
        break;
    }
    case RG_Q5_1: {
        RgqBlockQ5_1* b = (RgqBlockQ5_1*)p;
        float mn, mx;
        rgq_min_max(x, &mn, &mx);
        float d = __fdiv_rn(__fsub_rn(mx, mn), 31.0f), id = rgq_inverse(d);
        unsigned char q[RGQ_QK];
        for (int j = 0; j < RGQ_QK; ++j) q[j] = rgq_trunc_clamp(__fadd_rn(__fmul_rn(__fsub_rn(x[j], mn), id), 0.5f), 31);
        rgq_pack5(q, b->qs, b->qh);
        b->d = rgq_f2h(d);
        b->m = rgq_f2h(mn);
        break;
    }
    case RG_Q8_0: {
        RgqBlockQ8_0* b = (RgqBlockQ8_0*)p;
        b->d = rgq_f2h(rgq_quantize_q8(x, b->qs));
        break;
    }
    case RG_Q8_1: {
        RgqBlockQ8_1* b = (RgqBlockQ8_1*)p;
        float d = rgq_quantize_q8(x, b->qs);
        int sum = 0;
        for (int j = 0; j < RGQ_QK; ++j) sum += b->qs[j];
        b->d = rgq_f2h(d);
        b->s = rgq_f2h(__fmul_rn((float)sum, d));
        break;
    }
    default: break;
    }
}

// Copies one block of `size` bytes: by 2-byte units when `size` is even (both
// ends then 2-byte aligned), else byte by byte.
__device__ __forceinline__ void rgq_copy_block(char* dst, const char* src, int size) {
    if (size % 2) {  // MXFP4's 17-byte blocks are byte-aligned only
        for (int k = 0; k < size; ++k) dst[k] = src[k];
        return;
    }
    for (int k = 0; k < size / 2; ++k) ((unsigned short*)dst)[k] = ((const unsigned short*)src)[k];
}
