// rgml CUDA emulator: the cuBLAS calls rgml makes, on the CPU, with cuBLAS's
// argument checks (a leading dimension below its minimum is
// CUBLAS_STATUS_INVALID_VALUE). Column-major, as cuBLAS; each dot product is
// summed in double and rounded once to the output type. The work goes to the
// handle's stream through libcuda.so (capture.cpp's rg_emu_stream_submit), so a
// capturing stream records it: arguments are checked, and alpha and beta read
// (host pointer mode), at the call; the product is computed when it runs.
#include <cstdio>
#include <cstring>
#include <initializer_list>

typedef int cublasStatus_t;
struct cublasContext { void* stream; };
typedef cublasContext* cublasHandle_t;
enum { SUCCESS = 0, NOT_INITIALIZED = 1, INVALID_VALUE = 7, EXECUTION_FAILED = 13, NOT_SUPPORTED = 15 };
enum { R_32F = 0, R_16F = 2, R_16BF = 14 };
enum { COMPUTE_32F = 68, COMPUTE_32F_PEDANTIC = 69 };

static double load(const void* p, int type, long long i) {
    switch (type) {
    case R_32F: return ((const float*)p)[i];
    case R_16F: return (double)((const _Float16*)p)[i];
    default: {
        unsigned short h = ((const unsigned short*)p)[i];
        unsigned u = (unsigned)h << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
    }
}
static void store(void* p, int type, long long i, double v) {
    float f = (float)v;
    switch (type) {
    case R_32F: ((float*)p)[i] = f; break;
    case R_16F: ((_Float16*)p)[i] = (_Float16)f; break;
    default: {
        unsigned u;
        std::memcpy(&u, &f, 4);
        if ((u & 0x7fffffffu) > 0x7f800000u) {
            ((unsigned short*)p)[i] = (unsigned short)((u >> 16) | 0x40);
        } else {
            ((unsigned short*)p)[i] = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
        }
    }
    }
}
// One GEMM's arguments, alpha and beta by value.
struct Gemm {
    int transa, transb, m, n, k;
    float alpha, beta;
    const void* A; int atype, lda; long long sa;
    const void* B; int btype, ldb; long long sb;
    void* C; int ctype, ldc; long long sc;
    int batch;
};

extern "C" int rg_emu_in_device(unsigned long long p, size_t n);
static size_t type_bytes(int t) { return t == R_32F ? 4 : 2; }
// Whether the `rows` x `cols` column-major matrices at `p` (leading dimension
// `ld`, `batch` of them `stride` apart) lie in one device allocation.
static bool in_device(const void* p, int type, long long rows, long long cols, long long ld, long long stride, long long batch) {
    if (rows <= 0 || cols <= 0 || batch <= 0) return true;
    long long lo = stride < 0 ? (batch - 1) * stride : 0;
    long long hi = (stride > 0 ? (batch - 1) * stride : 0) + (cols - 1) * ld + rows;
    size_t size = type_bytes(type);
    return rg_emu_in_device((unsigned long long)p + lo * (long long)size, (size_t)(hi - lo) * size) != 0;
}
// nullptr, or which operand is not all in device memory (at the call and at a replay)
static const char* outside(const Gemm& g) {
    if (!in_device(g.A, g.atype, g.transa ? g.k : g.m, g.transa ? g.m : g.k, g.lda, g.sa, g.batch))
        return "cublasGemmStridedBatchedEx: A outside every device allocation";
    if (!in_device(g.B, g.btype, g.transb ? g.n : g.k, g.transb ? g.k : g.n, g.ldb, g.sb, g.batch))
        return "cublasGemmStridedBatchedEx: B outside every device allocation";
    if (!in_device(g.C, g.ctype, g.m, g.n, g.ldc, g.sc, g.batch))
        return "cublasGemmStridedBatchedEx: C outside every device allocation";
    return nullptr;
}

// C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b]; op(A) is m x k, op(B) k x n.
static const char* run_gemm(void* arg) {
    const Gemm& g = *(const Gemm*)arg;
    if (const char* why = outside(g)) return why;
    for (long long b = 0; b < g.batch; b++) {
        for (long long j = 0; j < g.n; j++) {
            for (long long i = 0; i < g.m; i++) {
                double acc = 0.0;
                for (long long p = 0; p < g.k; p++) {
                    long long ai = b * g.sa + (g.transa ? i * g.lda + p : p * g.lda + i);
                    long long bi = b * g.sb + (g.transb ? p * g.ldb + j : j * g.ldb + p);
                    acc += load(g.A, g.atype, ai) * load(g.B, g.btype, bi);
                }
                long long ci = b * g.sc + j * g.ldc + i;
                double out = (double)g.alpha * acc;
                if (g.beta != 0.0f) out += (double)g.beta * load(g.C, g.ctype, ci);  // beta 0: C is not read (BLAS)
                store(g.C, g.ctype, ci, out);
            }
        }
    }
    return nullptr;
}
static void free_gemm(void* arg) { delete (Gemm*)arg; }

static cublasStatus_t bad(const char* why) {
    std::fprintf(stderr, "cuda-emu: cublasGemmStridedBatchedEx: %s\n", why);
    return INVALID_VALUE;
}

extern "C" {
int rg_emu_stream_submit(const char* fn, void* stream, const char* (*run)(void*), void* arg, void (*free_arg)(void*));

cublasStatus_t cublasCreate_v2(cublasHandle_t* h) { *h = new cublasContext{nullptr}; return SUCCESS; }
cublasStatus_t cublasDestroy_v2(cublasHandle_t h) { delete h; return SUCCESS; }
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, void* s) {
    if (!h) return NOT_INITIALIZED;
    h->stream = s;
    return SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t h, int) { return h ? SUCCESS : NOT_INITIALIZED; }
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void*, size_t) { return h ? SUCCESS : NOT_INITIALIZED; }
const char* cublasGetStatusString(cublasStatus_t s) { return s == SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "cuBLAS error (cuda-emu)"; }
const char* cublasGetStatusName(cublasStatus_t s) { return cublasGetStatusString(s); }

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, int transa, int transb, int m, int n, int k,
                                          const void* alpha, const void* A, int atype, int lda, long long sa,
                                          const void* B, int btype, int ldb, long long sb, const void* beta, void* C,
                                          int ctype, int ldc, long long sc, int batch, int compute, int algo) {
    (void)algo;
    if (!h) return NOT_INITIALIZED;
    if (m < 0 || n < 0 || k < 0 || batch < 0) return bad("negative size");
    if (transa < 0 || transa > 1 || transb < 0 || transb > 1) return bad("only OP_N and OP_T are emulated");
    int arows = transa ? k : m, brows = transb ? n : k;
    if (lda < (arows > 1 ? arows : 1)) return bad("lda below max(1, rows of A)");
    if (ldb < (brows > 1 ? brows : 1)) return bad("ldb below max(1, rows of B)");
    if (ldc < (m > 1 ? m : 1)) return bad("ldc below max(1, m)");
    if (compute != COMPUTE_32F && compute != COMPUTE_32F_PEDANTIC) return NOT_SUPPORTED;
    for (int t : {atype, btype, ctype}) {
        if (t != R_32F && t != R_16F && t != R_16BF) return NOT_SUPPORTED;
    }
    if (atype != btype) return NOT_SUPPORTED;
    Gemm* g = new Gemm{transa, transb, m, n, k, *(const float*)alpha, *(const float*)beta,
                       A, atype, lda, sa, B, btype, ldb, sb, C, ctype, ldc, sc, batch};
    if (const char* why = outside(*g)) {
        delete g;
        return bad(why + std::strlen("cublasGemmStridedBatchedEx: "));
    }
    if (rg_emu_stream_submit("cublasGemmStridedBatchedEx", h->stream, run_gemm, g, free_gemm) != 0) return EXECUTION_FAILED;
    return SUCCESS;
}
}
