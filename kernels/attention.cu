// flash_attn_ext, as src/backend/cpu/attention.rs computes it, up to rounding:
// one block per (head, query row, sequence). The query is first rounded as the
// key type's dot partner holds it (F16/BF16, or Q8 blocks of 32); the keys are
// then taken a chunk at a time: the chunk's scores (masked keys skipped) in
// shared memory, an online softmax (running maximum, sum in double, the value
// sums rescaled when the maximum grows) and each thread's value dims summed
// over the chunk. No scores tensor; a row whose keys are all masked gives zeros.
// Compiled with prelude.cuh and quant.cuh prepended.

#define RG_FA_CHUNK 256

// The query row as the key type's dot partner holds it, into `qs` (d floats):
// 0 as it is (F32 keys), 1 rounded to F16, 2 to BF16, 3 quantized to Q8 blocks
// of 32 with an F16 scale (Q8_0/Q8_1, the partners of the 32-value key types).
__device__ void rg_fa_query(const char* q, RgT tq, int q_round, float* qs) {
    int d = (int)tq.ne[0];
    if (q_round == 3) {
        for (int b = threadIdx.x; b < d / RGQ_QK; b += blockDim.x) {
            float x[RGQ_QK];
            signed char qq[RGQ_QK];
            for (int j = 0; j < RGQ_QK; ++j) x[j] = rg_load(q + (RGQ_QK * b + j) * tq.nb[0], RG_F32);
            float dd = rgq_h2f(rgq_f2h(rgq_quantize_q8(x, qq)));
            for (int j = 0; j < RGQ_QK; ++j) qs[RGQ_QK * b + j] = __fmul_rn((float)qq[j], dd);
        }
        return;
    }
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        float x = rg_load(q + c * tq.nb[0], RG_F32);
        qs[c] = q_round == 1 ? rg_h2f(rg_f2h(x)) : (q_round == 2 ? rg_bf2f(rg_f2bf(x)) : x);
    }
}

extern "C" __global__ void rg_flash_attn(float scale, int n_head_log2, float m0, float m1, char* dst, RgT td,
                                         const char* q, RgT tq, const char* k, RgT tk, const char* v, RgT tv,
                                         const char* mask, RgT tm, int has_mask, int q_round,
                                         const float* sinks) {
    const float NEG_INF = -__int_as_float(0x7f800000);
    const i64 n_head = tq.ne[2], n_q = tq.ne[1], n_kv = tk.ne[1];
    const i64 item = blockIdx.x;
    const i64 h = item % n_head, i = (item / n_head) % n_q, s = item / (n_head * n_q);
    const i64 kh = h / (n_head / tk.ne[2]);
    const int d = (int)tq.ne[0], dv = (int)tv.ne[0];
    RG_DYNAMIC_SHARED(float, sh);
    float* qs = sh;                 // d: the query
    float* sc = sh + d;             // RG_FA_CHUNK: scores, then their exponentials
    float* acc = sc + RG_FA_CHUNK;  // dv: the weighted value sums
    rg_fa_query(q + i * tq.nb[1] + h * tq.nb[2] + s * tq.nb[3], tq, q_round, qs);
    for (int c = threadIdx.x; c < dv; c += blockDim.x) acc[c] = 0.0f;
    const char* mrow = has_mask ? mask + i * tm.nb[1] + (h % tm.ne[2]) * tm.nb[2] + (s % tm.ne[3]) * tm.nb[3] : 0;
    const float slope = has_mask ? rg_alibi_slope((int)h, n_head_log2, m0, m1) : 1.0f;
    const char* kbase = k + kh * tk.nb[2] + s * tk.nb[3];
    const char* vbase = v + kh * tv.nb[2] + s * tv.nb[3];
    float mx = NEG_INF;
    double sum = 0.0;
    __syncthreads();
    for (i64 j0 = 0; j0 < n_kv; j0 += RG_FA_CHUNK) {
        const int nc = (int)(n_kv - j0 < RG_FA_CHUNK ? n_kv - j0 : RG_FA_CHUNK);
        float cmax = NEG_INF;
        for (int jj = threadIdx.x; jj < nc; jj += blockDim.x) {
            const i64 j = j0 + jj;
            const float mv = has_mask ? rg_load(mrow + j * tm.nb[0], tm.type) : 0.0f;
            float x = NEG_INF;
            if (mv != NEG_INF) {
                const char* krow = kbase + j * tk.nb[1];
                float dot = 0.0f;
                for (int c = 0; c < d; ++c) dot = fmaf(rgq_row_value(krow, tk, c), qs[c], dot);
                x = dot * scale;
                x = slope == 1.0f ? x + mv : fmaf(slope, mv, x);
            }
            sc[jj] = x;
            cmax = cmax > x ? cmax : x;
        }
        cmax = rg_block_max(cmax);
        if (cmax == NEG_INF) continue;  // every key of the chunk masked (the same in every thread)
        const float mnew = mx > cmax ? mx : cmax;
        const float corr = expf(mx - mnew);  // 0 while nothing was summed
        double part = 0.0;
        for (int jj = threadIdx.x; jj < nc; jj += blockDim.x) {
            const float e = expf(sc[jj] - mnew);
            sc[jj] = e;
            part += (double)e;
        }
        part = rg_block_sum(part);  // also orders the exponentials before their readers
        sum = sum * (double)corr + part;
        for (int c = threadIdx.x; c < dv; c += blockDim.x) {
            float a = acc[c] * corr;
            for (int jj = 0; jj < nc; ++jj) {
                const float e = sc[jj];
                if (e != 0.0f) a = fmaf(e, rgq_row_value(vbase + (j0 + jj) * tv.nb[1], tv, c), a);
            }
            acc[c] = a;
        }
        mx = mnew;
        __syncthreads();
    }
    if (sinks) {
        // head h's sink: one more term of the softmax, with no value
        const float mnew = mx > sinks[h] ? mx : sinks[h];
        const float corr = expf(mx - mnew);
        sum = sum * (double)corr + (double)expf(sinks[h] - mnew);
        for (int c = threadIdx.x; c < dv; c += blockDim.x) acc[c] *= corr;
        mx = mnew;
    }
    char* out = dst + h * td.nb[1] + i * td.nb[2] + s * td.nb[3];
    const float inv = mx == NEG_INF ? 0.0f : (float)(1.0 / sum);
    for (int c = threadIdx.x; c < dv; c += blockDim.x) rg_store(out + c * td.nb[0], RG_F32, acc[c] * inv);
}
