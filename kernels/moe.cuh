// The tiles of mul_mat_id's (slot, token) pairs, shared by its kernels
// (kernels/mmvq.cu for the dot kernels, kernels/moe.cu for the others).
// Pair p = s + n_used * t is slot s of token t: expert ids[s, t] times
// activation row (s mod n_b) + n_b * t, into dst column (s, t). Prepended
// after the prelude (HEADERS in src/backend/cuda/kernels.rs).

// Mirrors `KMoe` in src/backend/cuda/matmul/moe.rs (#[repr(C)], 80 bytes).
struct RgMoe {
    const char* ids;   // the I32 ids [n_used, n_tokens]: one pair per tile (when route is null)
    const int* route;  // else rg_moe_route's table: the pairs by expert, then the tiles
    int* err;          // bit 2 is set for an expert id outside 0..n_expert
    i64 ids_nb0, ids_nb1;  // byte strides of ids
    i64 n_used, n_b;       // slots per token; activation rows per token (1 or n_used)
    i64 n_pairs;           // n_used * n_tokens
    i64 n_tiles;           // tiles in the grid (entries of the route table)
    int n_expert, pad;
};

// This block's tile (blockIdx.y + gridDim.y * blockIdx.z) read into shared
// tables: arow[c] the activation row and doff[c] the destination byte offset
// (s * d_nb1 + t * d_nb2) of its pairs, at most NC of them. Returns their
// count, and sets *expert; 0 for a tile past the last, or whose expert id is
// out of range (flagged in *q.err: nothing is read or written for it). Has
// one __syncthreads: every thread of the block must call it.
template <int NC>
__device__ int rg_moe_tile(const RgMoe& q, i64 d_nb1, i64 d_nb2, i64* arow, i64* doff, int* expert) {
    __shared__ int rg_tile[2];
    const i64 tile = (i64)blockIdx.y + (i64)gridDim.y * blockIdx.z;
    if (threadIdx.x == 0) {
        int e = 0, n = 0;
        i64 first = tile;
        if (tile < q.n_tiles && q.route == nullptr) {
            e = *(const int*)(q.ids + (tile % q.n_used) * q.ids_nb0 + (tile / q.n_used) * q.ids_nb1);
            n = 1;
            if (e < 0 || e >= q.n_expert) {
                atomicOr(q.err, 4);
                n = 0;
            }
        } else if (tile < q.n_tiles) {
            const int* t = q.route + q.n_pairs + 3 * tile;
            e = t[0];
            first = t[1];
            n = t[2] < NC ? t[2] : NC;
        }
        for (int c = 0; c < n; c++) {
            const i64 p = q.route == nullptr ? first : (i64)q.route[first + c];
            const i64 s = p % q.n_used, t = p / q.n_used;
            arow[c] = s % q.n_b + q.n_b * t;
            doff[c] = s * d_nb1 + t * d_nb2;
        }
        rg_tile[0] = e;
        rg_tile[1] = n;
    }
    __syncthreads();
    *expert = rg_tile[0];
    return rg_tile[1];
}
