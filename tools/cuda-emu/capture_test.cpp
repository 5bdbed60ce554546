// Stream capture and graphs in the CUDA emulator, driven through the C API
// as cudarc calls it (tools/cuda-emu/test.sh builds and runs this). Prints one
// PASS line per check and exits nonzero on the first failure; prints the
// CUDA_EMU_STATS line it expects at exit as "EXPECT_STATS <line>".
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void* CUcontext;
typedef void* CUstream;
typedef void* CUevent;
typedef void* CUmodule;
typedef void* CUfunction;
typedef void* CUgraph;
typedef void* CUgraphExec;
typedef void* cublasHandle_t;

extern "C" {
CUresult cuInit(unsigned);
CUresult cuDeviceGet(int*, int);
CUresult cuDevicePrimaryCtxRetain(CUcontext*, int);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxSynchronize();
CUresult cuStreamCreate(CUstream*, unsigned);
CUresult cuStreamDestroy_v2(CUstream);
CUresult cuStreamSynchronize(CUstream);
CUresult cuStreamQuery(CUstream);
CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned);
CUresult cuStreamBeginCapture_v2(CUstream, int);
CUresult cuStreamEndCapture(CUstream, CUgraph*);
CUresult cuStreamIsCapturing(CUstream, int*);
CUresult cuEventCreate(CUevent*, unsigned);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuEventQuery(CUevent);
CUresult cuEventSynchronize(CUevent);
CUresult cuMemAlloc_v2(CUdeviceptr*, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemAllocAsync(CUdeviceptr*, size_t, CUstream);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemHostAlloc(void**, size_t, unsigned);
CUresult cuMemFreeHost(void*);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void*, size_t);
CUresult cuMemcpyDtoH_v2(void*, CUdeviceptr, size_t);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr, const void*, size_t, CUstream);
CUresult cuMemcpyDtoHAsync_v2(void*, CUdeviceptr, size_t, CUstream);
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr, CUdeviceptr, size_t, CUstream);
CUresult cuMemsetD8Async(CUdeviceptr, unsigned char, size_t, CUstream);
CUresult cuMemsetD32Async(CUdeviceptr, unsigned, size_t, CUstream);
CUresult cuMemsetD8_v2(CUdeviceptr, unsigned char, size_t);
CUresult cuModuleLoadData(CUmodule*, const void*);
CUresult cuModuleGetFunction(CUfunction*, CUmodule, const char*);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                        void**, void**);
CUresult cuGraphInstantiateWithFlags(CUgraphExec*, CUgraph, unsigned long long);
CUresult cuGraphLaunch(CUgraphExec, CUstream);
CUresult cuGraphUpload(CUgraphExec, CUstream);
CUresult cuGraphExecDestroy(CUgraphExec);
CUresult cuGraphDestroy(CUgraph);
int cublasCreate_v2(cublasHandle_t*);
int cublasSetStream_v2(cublasHandle_t, CUstream);
int cublasSetWorkspace_v2(cublasHandle_t, void*, size_t);
int cublasGemmStridedBatchedEx(cublasHandle_t, int, int, int, int, int, const void*, const void*, int, int, long long,
                               const void*, int, int, long long, const void*, void*, int, int, long long, int, int, int);
}

enum { GLOBAL = 0, THREAD_LOCAL = 1, RELAXED = 2 };
static const CUstream LEGACY = nullptr;

static void check(bool ok, const std::string& what) {
    if (!ok) {
        std::printf("FAIL %s\n", what.c_str());
        std::exit(1);
    }
}
static void expect(CUresult got, CUresult want, const std::string& what) {
    if (got != want) {
        std::printf("FAIL %s: got %d, want %d\n", what.c_str(), got, want);
        std::exit(1);
    }
}
static void pass(const std::string& what) { std::printf("PASS %s\n", what.c_str()); }
static int status(CUstream s) {
    int st = -1;
    expect(cuStreamIsCapturing(s, &st), 0, "cuStreamIsCapturing");
    return st;
}

static CUfunction add;  // rg_binary_f32_contig(int op, float* dst, const float* a, const float* b, i64 n)
static CUresult launch_add(CUstream s, int op, CUdeviceptr dst, CUdeviceptr a, CUdeviceptr b, long long n) {
    void* params[] = {&op, &dst, &a, &b, &n};
    return cuLaunchKernel(add, 1, 1, 1, 32, 1, 1, 0, s, params, nullptr);
}
static std::vector<float> read(CUdeviceptr p, size_t n) {
    std::vector<float> v(n);
    expect(cuMemcpyDtoH_v2(v.data(), p, n * 4), 0, "cuMemcpyDtoH");
    return v;
}
static unsigned bits(float f) {
    unsigned u;
    std::memcpy(&u, &f, 4);
    return u;
}

int main() {
    int graphs = 0;  // successful captures, for the stats line
    CUcontext ctx;
    int dev;
    expect(cuInit(0), 0, "cuInit");
    expect(cuDeviceGet(&dev, 0), 0, "cuDeviceGet");
    expect(cuDevicePrimaryCtxRetain(&ctx, dev), 0, "cuDevicePrimaryCtxRetain");
    expect(cuCtxSetCurrent(ctx), 0, "cuCtxSetCurrent");
    CUstream s, s2, blocking;
    expect(cuStreamCreate(&s, 1), 0, "cuStreamCreate");
    expect(cuStreamCreate(&s2, 1), 0, "cuStreamCreate");
    expect(cuStreamCreate(&blocking, 0), 0, "cuStreamCreate");
    const char* ptx = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry rg_binary_f32_contig(\n)\n";
    CUmodule mod;
    expect(cuModuleLoadData(&mod, ptx), 0, "cuModuleLoadData");
    expect(cuModuleGetFunction(&add, mod, "rg_binary_f32_contig"), 0, "cuModuleGetFunction");

    const int N = 64;
    CUdeviceptr a, b, c, d, d2, e;
    for (CUdeviceptr* p : {&a, &b, &c, &d, &d2, &e}) expect(cuMemAlloc_v2(p, N * 4), 0, "cuMemAlloc");
    float *hin, *hout;
    expect(cuMemHostAlloc((void**)&hin, N * 4, 0), 0, "cuMemHostAlloc");
    expect(cuMemHostAlloc((void**)&hout, 16 * 4, 0), 0, "cuMemHostAlloc");
    std::vector<float> ones(N, 1.0f), bv(N);
    for (int i = 0; i < N; i++) bv[i] = (float)(i % 7);
    expect(cuMemcpyHtoD_v2(a, ones.data(), N * 4), 0, "cuMemcpyHtoD");
    expect(cuMemcpyHtoD_v2(b, bv.data(), N * 4), 0, "cuMemcpyHtoD");
    expect(launch_add(s, 0, c, a, b, N), 0, "eager launch");
    check(read(c, N)[5] == 1.0f + 5.0f, "eager launch result");
    pass("eager launch runs at once");

    expect(cuStreamBeginCapture_v2(LEGACY, GLOBAL), 900, "capture of the NULL stream");
    expect(cuStreamBeginCapture_v2((CUstream)1, GLOBAL), 900, "capture of CU_STREAM_LEGACY");
    pass("the legacy stream cannot be captured (900)");
    CUgraph g = (CUgraph)1;
    expect(cuStreamEndCapture(s, &g), 401, "end of a capture never begun");
    check(status(s) == 0, "status none");
    pass("cuStreamEndCapture without a capture: 401");

    // ---- capture: memset, pinned HtoD, kernel, cuBLAS GEMM, DtoD, pinned DtoH ----
    cublasHandle_t h;
    expect(cublasCreate_v2(&h), 0, "cublasCreate");
    expect(cublasSetStream_v2(h, s), 0, "cublasSetStream");
    CUdeviceptr ws;
    expect(cuMemAlloc_v2(&ws, 1 << 20), 0, "cuMemAlloc workspace");
    expect(cublasSetWorkspace_v2(h, (void*)ws, 1 << 20), 0, "cublasSetWorkspace");
    for (int i = 0; i < 16; i++) hout[i] = -7.0f;
    expect(cuMemsetD32Async(d, bits(-3.0f), N, s2), 0, "memset d");
    std::vector<float> a_before = read(a, N), c_before = read(c, N);

    expect(cuStreamBeginCapture_v2(s, GLOBAL), 0, "begin capture");
    check(status(s) == 1, "status active");
    expect(cuStreamBeginCapture_v2(s, GLOBAL), 401, "second begin");
    expect(cuMemsetD32Async(d, bits(1.0f), 16, s), 0, "captured memset");
    expect(cuMemcpyHtoDAsync_v2(a, hin, N * 4, s), 0, "captured HtoD from pinned memory");
    int op = 0;  // add
    long long n = N;
    void* params[] = {&op, &c, &a, &b, &n};
    expect(cuLaunchKernel(add, 1, 1, 1, 32, 1, 1, 0, s, params, nullptr), 0, "captured launch");
    op = 2;  // a multiply, had the launch kept a pointer to its parameter
    n = 1;
    float alpha = 1.0f, beta = 1.0f;
    // d[0:16] = c[0:16] (4x4) * b[0:16] (4x4) + d[0:16], column-major
    expect(cublasGemmStridedBatchedEx(h, 0, 0, 4, 4, 4, &alpha, (void*)c, 0, 4, 0, (void*)b, 0, 4, 0, &beta, (void*)d, 0, 4,
                                      0, 1, 68, -1),
           0, "captured GEMM");
    alpha = 5.0f;
    beta = 0.0f;
    expect(cuMemcpyDtoDAsync_v2(d2, d, 16 * 4, s), 0, "captured DtoD");
    expect(cuMemcpyDtoHAsync_v2(hout, d2, 16 * 4, s), 0, "captured DtoH to pinned memory");
    CUevent ev;
    expect(cuEventCreate(&ev, 0), 0, "cuEventCreate");
    expect(cuEventRecord(ev, s), 0, "event recorded in the capture");
    expect(cuStreamWaitEvent(s, ev, 0), 0, "wait on an event of the same capture");
    // another stream runs at once during the capture
    expect(cuMemsetD8Async(e, 0x42, N * 4, s2), 0, "memset on another stream");
    unsigned char eb[4] = {0};
    expect(cuMemcpyDtoHAsync_v2(eb, e, 4, s2), 0, "pageable DtoH on another stream");
    check(eb[0] == 0x42 && eb[3] == 0x42, "work on another stream ran during the capture");
    pass("work on another (non-capturing) stream runs at once during a capture");
    CUgraph graph = nullptr;
    expect(cuStreamEndCapture(s, &graph), 0, "end capture");
    check(graph != nullptr, "a graph");
    check(status(s) == 0, "status none after the capture");
    graphs++;
    pass("capture of memset, HtoD, kernel, GEMM, DtoD, DtoH ends with a graph");

    check(read(a, N) == a_before, "the captured HtoD did not run");
    check(read(c, N) == c_before, "the captured kernel did not run");
    std::vector<float> dv = read(d, 16);
    for (float x : dv) check(x == -3.0f, "the captured memset and GEMM did not run");
    for (int i = 0; i < 16; i++) check(hout[i] == -7.0f, "the captured DtoH did not run");
    pass("nothing captured ran before the graph launch");

    CUgraphExec exec;
    expect(cuGraphInstantiateWithFlags(&exec, graph, 1 | 4), 1, "AUTO_FREE_ON_LAUNCH | DEVICE_LAUNCH");
    expect(cuGraphInstantiateWithFlags(&exec, graph, 0), 0, "instantiate");
    expect(cuGraphUpload(exec, s), 0, "upload");
    expect(cuGraphDestroy(graph), 0, "graph destroy");  // the exec keeps its own copy
    for (int round = 0; round < 2; round++) {
        std::vector<float> in(N), bb(N);
        for (int i = 0; i < N; i++) {
            in[i] = (float)(round == 0 ? i % 5 : 2 * (i % 3) + 1);
            bb[i] = (float)(round == 0 ? i % 7 : (i % 4) - 1);
            hin[i] = in[i];
        }
        // new device data between the launches: the graph reads it when it runs
        expect(cuMemcpyHtoD_v2(b, bb.data(), N * 4), 0, "new b");
        expect(cuGraphLaunch(exec, s), 0, "graph launch");
        for (int j = 0; j < 4; j++) {
            for (int i = 0; i < 4; i++) {
                double acc = 0;
                for (int p = 0; p < 4; p++) acc += (double)(in[i + 4 * p] + bb[i + 4 * p]) * bb[p + 4 * j];
                float want = (float)(acc + 1.0);
                if (hout[i + 4 * j] != want) {
                    std::printf("FAIL replay %d: out[%d] = %g, want %g\n", round, i + 4 * j, hout[i + 4 * j], want);
                    return 1;
                }
            }
        }
    }
    pass("two graph launches replay every operation with the data of their time (parameters and alpha/beta as captured)");

    // ---- illegal operations: an error, an invalidated capture, a stream usable again ----
    CUevent outside;
    expect(cuEventCreate(&outside, 0), 0, "cuEventCreate");
    expect(cuEventRecord(outside, s2), 0, "event outside the capture");
    CUdeviceptr scratch;
    expect(cuMemAlloc_v2(&scratch, 256), 0, "cuMemAlloc");
    std::vector<float> pageable(N);
    struct Case {
        const char* name;
        int mode;
        CUresult want;
        std::function<CUresult()> call;
    };
    std::vector<Case> cases = {
        {"cuStreamSynchronize on the capturing stream", RELAXED, 900, [&] { return cuStreamSynchronize(s); }},
        {"cuStreamQuery on the capturing stream", RELAXED, 900, [&] { return cuStreamQuery(s); }},
        {"cuCtxSynchronize", RELAXED, 900, [&] { return cuCtxSynchronize(); }},
        {"cuMemAlloc (global)", GLOBAL, 900, [&] { CUdeviceptr p; return cuMemAlloc_v2(&p, 256); }},
        {"cuMemAlloc (thread-local)", THREAD_LOCAL, 900, [&] { CUdeviceptr p; return cuMemAlloc_v2(&p, 256); }},
        {"cuMemFree", THREAD_LOCAL, 900, [&] { return cuMemFree_v2(scratch); }},
        {"cuMemHostAlloc", GLOBAL, 900, [&] { void* p; return cuMemHostAlloc(&p, 64, 0); }},
        {"cuMemcpyDtoH (synchronous)", GLOBAL, 900, [&] { return cuMemcpyDtoH_v2(pageable.data(), a, 4); }},
        {"cuMemsetD8 (synchronous)", THREAD_LOCAL, 900, [&] { return cuMemsetD8_v2(e, 0, 4); }},
        {"cuEventSynchronize", GLOBAL, 900, [&] { return cuEventSynchronize(outside); }},
        {"cuMemcpyHtoDAsync from pageable memory", RELAXED, 900,
         [&] { return cuMemcpyHtoDAsync_v2(a, pageable.data(), 16, s); }},
        {"cuMemcpyDtoHAsync to pageable memory", RELAXED, 900,
         [&] { return cuMemcpyDtoHAsync_v2(pageable.data(), a, 16, s); }},
        {"cuStreamWaitEvent on an event from outside", RELAXED, 905, [&] { return cuStreamWaitEvent(s, outside, 0); }},
        {"cuEventQuery on an event of the capture", RELAXED, 907, [&] {
             cuEventRecord(ev, s);
             return cuEventQuery(ev);
         }},
        {"cuMemAllocAsync on the capturing stream", RELAXED, 900,
         [&] { CUdeviceptr p; return cuMemAllocAsync(&p, 256, s); }},
        {"cuMemFreeAsync on the capturing stream", RELAXED, 900, [&] { return cuMemFreeAsync(scratch, s); }},
        {"cuGraphLaunch into the capture", RELAXED, 900, [&] { return cuGraphLaunch(exec, s); }},
    };
    for (const Case& k : cases) {
        expect(cuStreamBeginCapture_v2(s, k.mode), 0, std::string("begin for ") + k.name);
        expect(cuMemsetD8Async(e, 1, 4, s), 0, std::string("memset before ") + k.name);
        expect(k.call(), k.want, k.name);
        check(status(s) == 2, std::string("status invalidated after ") + k.name);
        expect(cuMemsetD8Async(e, 1, 4, s), 901, std::string("work after ") + k.name);
        CUgraph bad = (CUgraph)1;
        expect(cuStreamEndCapture(s, &bad), 901, std::string("end after ") + k.name);
        check(bad == nullptr && status(s) == 0, std::string("no graph, capture over after ") + k.name);
        expect(cuStreamBeginCapture_v2(s, k.mode), 0, std::string("fresh capture after ") + k.name);
        expect(cuMemsetD8Async(e, 1, 4, s), 0, std::string("memset in the fresh capture after ") + k.name);
        CUgraph ok = nullptr;
        expect(cuStreamEndCapture(s, &ok), 0, std::string("fresh end after ") + k.name);
        check(ok != nullptr, "a graph");
        graphs++;
        cuGraphDestroy(ok);
        pass(std::string(k.name) + ": " + std::to_string(k.want) + ", capture invalidated (901), stream usable again");
    }

    // ---- RELAXED permits the potentially unsafe calls ----
    expect(cuStreamBeginCapture_v2(s, RELAXED), 0, "begin relaxed");
    CUdeviceptr p;
    expect(cuMemAlloc_v2(&p, 256), 0, "cuMemAlloc in a relaxed capture");
    expect(cuMemFree_v2(p), 0, "cuMemFree in a relaxed capture");
    expect(cuMemcpyDtoH_v2(pageable.data(), a, 4), 0, "synchronous copy in a relaxed capture");
    expect(cuEventSynchronize(outside), 0, "cuEventSynchronize in a relaxed capture");
    check(status(s) == 1, "relaxed capture still active");
    expect(cuStreamEndCapture(s, &g), 0, "end relaxed");
    graphs++;
    cuGraphDestroy(g);
    pass("RELAXED capture permits cuMemAlloc, cuMemFree, synchronous copies, cuEventSynchronize");

    // ---- other threads: THREAD_LOCAL binds only its own, GLOBAL every thread ----
    auto on_thread = [&](std::function<CUresult()> f) {
        CUresult r = -1;
        std::thread t([&] {
            cuCtxSetCurrent(ctx);
            r = f();
        });
        t.join();
        return r;
    };
    expect(cuStreamBeginCapture_v2(s, THREAD_LOCAL), 0, "begin thread-local");
    expect(on_thread([&] { CUdeviceptr q; CUresult r = cuMemAlloc_v2(&q, 256); cuMemFree_v2(q); return r; }), 0,
           "cuMemAlloc on another thread during a thread-local capture");
    expect(on_thread([&] { CUgraph x; return cuStreamEndCapture(s, &x); }), 908, "end from another thread");
    check(status(s) == 1, "thread-local capture still active");
    expect(cuStreamEndCapture(s, &g), 0, "end thread-local");
    graphs++;
    cuGraphDestroy(g);
    pass("THREAD_LOCAL: other threads may allocate; cuStreamEndCapture from another thread is 908");
    expect(cuStreamBeginCapture_v2(s, GLOBAL), 0, "begin global");
    expect(on_thread([&] { CUdeviceptr q; return cuMemAlloc_v2(&q, 256); }), 900,
           "cuMemAlloc on another thread during a global capture");
    check(status(s) == 2, "global capture invalidated by another thread");
    expect(cuStreamEndCapture(s, &g), 901, "end global");
    pass("GLOBAL: cuMemAlloc on another thread is 900 and invalidates the capture");

    // ---- the legacy stream while a blocking stream captures ----
    expect(cuStreamBeginCapture_v2(s, GLOBAL), 0, "begin on a non-blocking stream");
    expect(cuMemsetD8Async(e, 3, 4, LEGACY), 0, "legacy stream beside a non-blocking capture");
    expect(cuStreamEndCapture(s, &g), 0, "end");
    graphs++;
    cuGraphDestroy(g);
    expect(cuStreamBeginCapture_v2(blocking, GLOBAL), 0, "begin on a blocking stream");
    int st;
    expect(cuStreamIsCapturing(LEGACY, &st), 906, "legacy status beside a blocking capture");
    check(status(blocking) == 1, "cuStreamIsCapturing(legacy) does not invalidate");
    expect(cuMemsetD8Async(e, 3, 4, LEGACY), 906, "legacy stream beside a blocking capture");
    expect(cuStreamEndCapture(blocking, &g), 901, "end blocking");
    pass("the legacy stream beside a blocking stream's capture: 906, capture invalidated");

    // ---- cuBLAS on an invalidated capture fails ----
    expect(cuStreamBeginCapture_v2(s, RELAXED), 0, "begin");
    expect(cuStreamSynchronize(s), 900, "invalidate");
    check(cublasGemmStridedBatchedEx(h, 0, 0, 4, 4, 4, &alpha, (void*)c, 0, 4, 0, (void*)b, 0, 4, 0, &beta, (void*)d, 0,
                                     4, 0, 1, 68, -1) == 13,
          "cuBLAS on an invalidated capture");
    expect(cuStreamEndCapture(s, &g), 901, "end");
    pass("cuBLAS on an invalidated capture: CUBLAS_STATUS_EXECUTION_FAILED");

    // ---- replay checks memory as it is then ----
    CUdeviceptr gone;
    expect(cuMemAlloc_v2(&gone, N * 4), 0, "cuMemAlloc");
    expect(cuStreamBeginCapture_v2(s, GLOBAL), 0, "begin");
    expect(launch_add(s, 0, gone, a, b, N), 0, "captured launch");
    expect(cuStreamEndCapture(s, &g), 0, "end");
    graphs++;
    CUgraphExec stale;
    expect(cuGraphInstantiateWithFlags(&stale, g, 0), 0, "instantiate");
    expect(cuMemFree_v2(gone), 0, "free the kernel's buffer");
    expect(cuGraphLaunch(stale, s), 719, "replay into freed device memory");
    cuGraphExecDestroy(stale);
    cuGraphDestroy(g);
    float* pin;
    expect(cuMemHostAlloc((void**)&pin, 64, 0), 0, "cuMemHostAlloc");
    expect(cuStreamBeginCapture_v2(s, GLOBAL), 0, "begin");
    expect(cuMemcpyHtoDAsync_v2(a, pin, 64, s), 0, "captured HtoD");
    expect(cuStreamEndCapture(s, &g), 0, "end");
    graphs++;
    expect(cuGraphInstantiateWithFlags(&stale, g, 0), 0, "instantiate");
    expect(cuMemFreeHost(pin), 0, "free the pinned memory");
    expect(cuGraphLaunch(stale, s), 719, "replay from freed pinned memory");
    cuGraphExecDestroy(stale);
    cuGraphDestroy(g);
    pass("a replay into freed device or pinned memory fails (719)");

    expect(cuGraphExecDestroy(exec), 0, "exec destroy");
    // 1 eager launch; graph launches: 2 good, 2 failing (6 + 6 + 1 + 1 operations)
    std::printf("EXPECT_STATS eager_launches=1 graph_launches=4 replayed_ops=14 captures=%d\n", graphs);
    return 0;
}
