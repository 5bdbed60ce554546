// The gradient ops, as src/backend/cpu/back.rs: F32, sums in double, each
// output element computed by one thread in a fixed order (the CPU's bits).
// Compiled with prelude.cuh prepended.

// The 4-d index of flat logical element i of a tensor of shape t.ne.
__device__ __forceinline__ void rg_index4(const RgT& t, i64 i, i64* i0, i64* i1, i64* i2, i64* i3) {
    *i0 = i % t.ne[0]; i /= t.ne[0];
    *i1 = i % t.ne[1]; i /= t.ne[1];
    *i2 = i % t.ne[2];
    *i3 = i / t.ne[2];
}

// repeat_back: dst[j] = sum of a[i] over i % dst.ne == j. A thread per dst element.
extern "C" __global__ void rg_repeat_back(char* dst, RgT d, const char* a, RgT ta, i64 n) {
    RG_GRID_STRIDE(j, n) {
        i64 i0, i1, i2, i3;
        rg_index4(d, j, &i0, &i1, &i2, &i3);
        double acc = 0.0;
        for (i64 t3 = i3; t3 < ta.ne[3]; t3 += d.ne[3])
            for (i64 t2 = i2; t2 < ta.ne[2]; t2 += d.ne[2])
                for (i64 t1 = i1; t1 < ta.ne[1]; t1 += d.ne[1])
                    for (i64 t0 = i0; t0 < ta.ne[0]; t0 += d.ne[0])
                        acc += (double)rg_load(a + t0 * ta.nb[0] + t1 * ta.nb[1] + t2 * ta.nb[2] + t3 * ta.nb[3], ta.type);
        rg_store(dst + i0 * d.nb[0] + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3], d.type, (float)acc);
    }
}

// f'(x) in double for the unary op codes of unary.cu (0 relu, 1 gelu: its tanh
// approximation, 2 silu, 3 neg, 4 sqr, 5 sqrt, 6 exp, 8 sigmoid).
__device__ double rg_derivative(int op, double x) {
    switch (op) {
    case 0: return x > 0.0 ? 1.0 : 0.0;
    case 1: {
        const double C = 0.7978845608028654, A = 0.044715;
        const double t = tanh(C * (x + A * x * x * x));
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * C * (1.0 + 3.0 * A * x * x);
    }
    case 2: {
        const double s = 1.0 / (1.0 + exp(-x));
        return s * (1.0 + x * (1.0 - s));
    }
    case 3: return -1.0;
    case 4: return 2.0 * x;
    case 5: return 0.5 / sqrt(x);
    case 8: {
        const double s = 1.0 / (1.0 + exp(-x));
        return s * (1.0 - s);
    }
    default: return exp(x);
    }
}

// unary_back: dst = g * f'(x), all of one shape.
extern "C" __global__ void rg_unary_back(int op, char* dst, RgT d, const char* x, RgT tx, const char* g, RgT tg, i64 n) {
    RG_GRID_STRIDE(i, n) {
        const double v = (double)rg_load(g + rg_offset(tg, i), tg.type) * rg_derivative(op, (double)rg_load(x + rg_offset(tx, i), tx.type));
        rg_store(dst + rg_offset(d, i), d.type, (float)v);
    }
}

// get_rows_back: dst row r = the sum, in order of i, of the rows i of g with
// idx[i] == r (0 if none). One block per dst row; an index outside dst's rows
// sets bit 0 of *err (block 0 checks them all).
extern "C" __global__ void rg_get_rows_back(char* dst, RgT d, const char* g, RgT tg, const char* idx, RgT ti, int* err) {
    const i64 r = blockIdx.x, n_idx = ti.ne[0];
    if (r == 0 && threadIdx.x == 0) {
        for (i64 i = 0; i < n_idx; i++) {
            const int row = *(const int*)(idx + i * ti.nb[0]);
            if (row < 0 || row >= d.ne[1]) atomicOr(err, 1);
        }
    }
    for (i64 i0 = threadIdx.x; i0 < d.ne[0]; i0 += blockDim.x) {
        float acc = 0.0f;
        for (i64 i = 0; i < n_idx; i++) {
            if (*(const int*)(idx + i * ti.nb[0]) == r) acc += rg_load(g + i0 * tg.nb[0] + i * tg.nb[1], tg.type);
        }
        rg_store(dst + i0 * d.nb[0] + r * d.nb[1], d.type, acc);
    }
}

// rms_norm_back: per row, dx = (g - x * sum(g x) / (n (mean(x^2) + eps))) / sqrt(mean(x^2) + eps),
// the sums in double. One block per row.
extern "C" __global__ void rg_rms_norm_back(float eps, char* dst, RgT d, const char* x, RgT tx, const char* g, RgT tg) {
    i64 i1, i2, i3;
    rg_unravel_row(tx, blockIdx.x, &i1, &i2, &i3);
    const char* xr = x + i1 * tx.nb[1] + i2 * tx.nb[2] + i3 * tx.nb[3];
    const char* gr = g + i1 * tg.nb[1] + i2 * tg.nb[2] + i3 * tg.nb[3];
    char* y = dst + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
    const i64 n = tx.ne[0];
    double sxx = 0.0, sgx = 0.0;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        const double xv = (double)rg_load(xr + i * tx.nb[0], tx.type), gv = (double)rg_load(gr + i * tg.nb[0], tg.type);
        sxx += xv * xv;
        sgx += gv * xv;
    }
    sxx = rg_block_sum(sxx);
    sgx = rg_block_sum(sgx);
    const double ms = sxx / (double)(n > 0 ? n : 1) + (double)eps;
    const double inv = 1.0 / sqrt(ms), k = sgx / ((double)(n > 0 ? n : 1) * ms);
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        const double v = ((double)rg_load(gr + i * tg.nb[0], tg.type) - (double)rg_load(xr + i * tx.nb[0], tx.type) * k) * inv;
        rg_store(y + i * d.nb[0], d.type, (float)v);
    }
}

// view_back, first launch: the packed F32 dst set to zero.
extern "C" __global__ void rg_zero_f32(float* dst, i64 n) {
    RG_GRID_STRIDE(i, n) { dst[i] = 0.0f; }
}

// view_back, second launch: element i of g (of the view's shape) to byte
// off + sum i_k * nb_k of dst. The view maps no two elements to one place.
extern "C" __global__ void rg_view_back(char* dst, i64 nb0, i64 nb1, i64 nb2, i64 nb3, i64 off, const char* g, RgT tg,
                                        i64 n) {
    RG_GRID_STRIDE(i, n) {
        i64 i0, i1, i2, i3;
        rg_index4(tg, i, &i0, &i1, &i2, &i3);
        *(float*)(dst + off + i0 * nb0 + i1 * nb1 + i2 * nb2 + i3 * nb3) = rg_load(g + rg_offset(tg, i), tg.type);
    }
}

// AdamW's fused steps, every product, sum and quotient rounded to F32 as the
// separate elementwise ops round them (the _rn intrinsics: no contraction to FMA).
// adamw_moment: dst = h0*m + h1*g (g*g with sq).
extern "C" __global__ void rg_adamw_moment(int sq, char* dst, RgT d, const char* m, RgT tm, const char* g, RgT tg,
                                           const char* h, RgT th, i64 n) {
    const float h0 = rg_load(h, th.type), h1 = rg_load(h + th.nb[0], th.type);
    RG_GRID_STRIDE(i, n) {
        const float gv = rg_load(g + rg_offset(tg, i), tg.type);
        const float x = sq ? __fmul_rn(gv, gv) : gv;
        const float mv = rg_load(m + rg_offset(tm, i), tm.type);
        rg_store(dst + rg_offset(d, i), d.type, __fadd_rn(__fmul_rn(mv, h0), __fmul_rn(x, h1)));
    }
}

// adamw_update: dst = h0*p - (h1*m) / (sqrt(h2*v) + h3).
extern "C" __global__ void rg_adamw_update(char* dst, RgT d, const char* p, RgT tp, const char* m, RgT tm,
                                           const char* v, RgT tv, const char* h, RgT th, i64 n) {
    float hv[4];
    for (int k = 0; k < 4; k++) hv[k] = k < th.ne[0] ? rg_load(h + k * th.nb[0], th.type) : 0.0f;
    RG_GRID_STRIDE(i, n) {
        const float pv = rg_load(p + rg_offset(tp, i), tp.type);
        const float mv = rg_load(m + rg_offset(tm, i), tm.type);
        const float vv = rg_load(v + rg_offset(tv, i), tv.type);
        const float den = __fadd_rn(__fsqrt_rn(__fmul_rn(vv, hv[2])), hv[3]);
        rg_store(dst + rg_offset(d, i), d.type, __fsub_rn(__fmul_rn(pv, hv[0]), __fdiv_rn(__fmul_rn(mv, hv[1]), den)));
    }
}
