// rgml CUDA emulator: the cuBLAS calls rgml makes, on the CPU, with cuBLAS's
// argument checks (a leading dimension below its minimum is
// CUBLAS_STATUS_INVALID_VALUE). Column-major, as cuBLAS; each dot product is
// summed in double and rounded once to the output type.
#include <cstdio>
#include <cstring>
#include <initializer_list>

typedef int cublasStatus_t;
struct cublasContext { void* stream; };
typedef cublasContext* cublasHandle_t;
enum { SUCCESS = 0, NOT_INITIALIZED = 1, INVALID_VALUE = 7, NOT_SUPPORTED = 15 };
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
static cublasStatus_t bad(const char* why) {
    std::fprintf(stderr, "cuda-emu: cublasGemmStridedBatchedEx: %s\n", why);
    return INVALID_VALUE;
}

extern "C" {
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

// C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b]; op(A) is m x k, op(B) k x n.
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
    const float al = *(const float*)alpha, be = *(const float*)beta;
    for (long long b = 0; b < batch; b++) {
        const char* a = (const char*)A;
        const char* bb = (const char*)B;
        for (long long j = 0; j < n; j++) {
            for (long long i = 0; i < m; i++) {
                double acc = 0.0;
                for (long long p = 0; p < k; p++) {
                    long long ai = b * sa + (transa ? i * lda + p : p * lda + i);
                    long long bi = b * sb + (transb ? p * ldb + j : j * ldb + p);
                    acc += load(a, atype, ai) * load(bb, btype, bi);
                }
                long long ci = b * sc + j * ldc + i;
                double out = (double)al * acc;
                if (be != 0.0f) out += (double)be * load(C, ctype, ci);  // beta 0: C is not read (BLAS)
                store(C, ctype, ci, out);
            }
        }
    }
    return SUCCESS;
}
}
