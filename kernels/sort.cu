// argsort, and the routing table of mul_mat_id: block-wide bitonic sorts of
// unique 64-bit keys (what is sorted by in the high half, the index in the
// low half), so equal values keep their index order and the result is one
// fixed permutation, whatever the thread schedule. One block per row; the
// keys in dynamic shared memory, or in global memory (`work`) for rows longer
// than shared memory holds. Compiled with prelude.cuh prepended.

// Sorts the n keys at k ascending (n a power of two); every thread of the
// block must call it. Ends with a __syncthreads.
__device__ void rg_bitonic(u64* k, i64 n) {
    for (i64 size = 2; size <= n; size <<= 1) {
        for (i64 stride = size >> 1; stride > 0; stride >>= 1) {
            for (i64 i = threadIdx.x; i < n / 2; i += blockDim.x) {
                // i's pair: bit `stride` of i inserted as 0 (stride is a power of two)
                const i64 lo = ((i & ~(stride - 1)) << 1) | (i & (stride - 1)), hi = lo + stride;
                const u64 a = k[lo], b = k[hi];
                // ascending within blocks of `size` whose bit `size` is clear
                if ((a > b) == ((lo & size) == 0)) {
                    k[lo] = b;
                    k[hi] = a;
                }
            }
            __syncthreads();
        }
    }
}

// The key bits of v in the CPU's order (src/backend/cpu/sort.rs): negated when
// descending, NaN as +inf, -0 as 0, then IEEE bits mapped so that unsigned
// order is numeric order.
__device__ __forceinline__ unsigned rg_order_bits(float v, int descending) {
    if (descending) v = -v;
    if (v != v) v = __int_as_float(0x7f800000);
    if (v == 0.0f) v = 0.0f;
    const unsigned u = __float_as_uint(v);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// dst[:, r] (I32) = the indices of row r = row0 + blockIdx.x of a in value
// order. n: ne0 rounded up to a power of two; the keys in dynamic shared
// memory (n * 8 bytes) when work is null, else at work + n * blockIdx.x.
extern "C" __global__ void rg_argsort(char* dst, RgT d, const char* a, RgT ta, u64* work, i64 n, int descending,
                                      i64 row0) {
    RG_DYNAMIC_SHARED(u64, rg_keys);
    u64* keys = work ? work + n * blockIdx.x : rg_keys;
    i64 i1, i2, i3;
    rg_unravel_row(ta, row0 + blockIdx.x, &i1, &i2, &i3);
    const char* x = a + i1 * ta.nb[1] + i2 * ta.nb[2] + i3 * ta.nb[3];
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        // padding sorts last
        keys[i] = i < ta.ne[0] ? ((u64)rg_order_bits(rg_load(x + i * ta.nb[0], ta.type), descending) << 32) | (u64)i
                               : ~0ull;
    }
    __syncthreads();
    rg_bitonic(keys, n);
    char* y = dst + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
    for (i64 i = threadIdx.x; i < ta.ne[0]; i += blockDim.x) *(int*)(y + i * d.nb[0]) = (int)(unsigned)keys[i];
}

// The first of the `len` sorted keys at k that is >= v.
__device__ __forceinline__ i64 rg_lower_bound(const u64* k, i64 len, u64 v) {
    i64 lo = 0, hi = len;
    while (lo < hi) {
        const i64 mid = (lo + hi) / 2;
        if (k[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// mul_mat_id's routing table (kernels/moe.cuh) at `route`, from the I32 ids
// [n_used, n_tokens] (any strides): ints [0, P) the P pairs p = s + n_used * t
// by expert, then p; then n_tiles tiles {expert, first, count}: each expert's
// pairs in runs of at most `tile`, experts in order, then {0, 0, 0}. An id
// outside 0..n_expert sets bit 2 of *err and its pair is in no tile. One
// block; n: P rounded up to a power of two, the keys as in rg_argsort.
extern "C" __global__ void rg_moe_route(int* route, const char* ids, RgT ti, u64* work, i64 n, int n_expert, int tile,
                                        i64 n_tiles, int* err) {
    RG_DYNAMIC_SHARED(u64, rg_keys);
    __shared__ int rg_scan[1024];
    u64* keys = work ? work : rg_keys;
    const i64 pairs = ti.ne[0] * ti.ne[1];
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        u64 key = ~0ull;
        if (i < pairs) {
            int e = *(const int*)(ids + (i % ti.ne[0]) * ti.nb[0] + (i / ti.ne[0]) * ti.nb[1]);
            if (e < 0 || e >= n_expert) {
                atomicOr(err, 4);
                e = n_expert;  // after every expert's pairs
            }
            key = ((u64)(unsigned)e << 32) | (u64)i;
        }
        keys[i] = key;
    }
    __syncthreads();
    rg_bitonic(keys, n);
    for (i64 i = threadIdx.x; i < pairs; i += blockDim.x) route[i] = (int)(unsigned)keys[i];
    // each thread takes a run of experts: its tile count, then an exclusive
    // scan over the threads places its tiles
    const int per = (n_expert + (int)blockDim.x - 1) / (int)blockDim.x;
    const int e0 = min((int)threadIdx.x * per, n_expert), e1 = min(e0 + per, n_expert);
    int mine = 0;
    for (int e = e0; e < e1; e++) {
        const i64 c = rg_lower_bound(keys, pairs, (u64)(e + 1) << 32) - rg_lower_bound(keys, pairs, (u64)e << 32);
        mine += (int)((c + tile - 1) / tile);
    }
    rg_scan[threadIdx.x] = mine;
    __syncthreads();
    for (int o = 1; o < (int)blockDim.x; o <<= 1) {
        const int v = (int)threadIdx.x >= o ? rg_scan[threadIdx.x - o] : 0;
        __syncthreads();
        rg_scan[threadIdx.x] += v;
        __syncthreads();
    }
    const i64 total = rg_scan[blockDim.x - 1];
    int* tiles = route + pairs;
    i64 at = rg_scan[threadIdx.x] - mine;
    for (int e = e0; e < e1; e++) {
        const i64 first = rg_lower_bound(keys, pairs, (u64)e << 32);
        const i64 end = rg_lower_bound(keys, pairs, (u64)(e + 1) << 32);
        for (i64 j = first; j < end && at < n_tiles; j += tile, at++) {
            tiles[3 * at] = e;
            tiles[3 * at + 1] = (int)j;
            tiles[3 * at + 2] = (int)(end - j < tile ? end - j : tile);
        }
    }
    for (i64 j = total + threadIdx.x; j < n_tiles; j += blockDim.x) {
        tiles[3 * j] = 0;
        tiles[3 * j + 1] = 0;
        tiles[3 * j + 2] = 0;
    }
}
