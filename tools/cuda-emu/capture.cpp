// rgml CUDA emulator: streams, events, stream capture and graphs of the CUDA
// driver API (the rest: driver.cpp). Streams run synchronously; events time
// the CPU.
// Stream capture records stream-ordered work into a graph instead of running
// it, with the driver's capture rules; cuGraphLaunch replays it (README.md).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "driver.h"

using namespace rg_emu_driver;

struct CUgraph_st { std::vector<Op> ops; };
struct CUgraphExec_st { std::vector<Op> ops; };

static double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ---- stream capture ----
// Under cap_mu: the streams capturing now (their Capture may be invalidated),
// and the host allocations of cuMemHostAlloc (start -> bytes), the only host
// memory a captured copy may name, as on the driver.
static std::mutex cap_mu;
static std::vector<CUstream> capturing;
static std::map<uintptr_t, size_t> pinned;
static unsigned long long next_capture_id = 1;
static const char* const INVALIDATED = "the stream's capture was invalidated by an earlier error";

// CUDA_EMU_STATS=FILE appends one line per process at exit: kernel launches
// run at once, graph launches, operations replayed by them, graphs captured.
static std::atomic<unsigned long long> eager_launches{0}, graph_launches{0}, replayed_ops{0}, captures{0};
static struct StatsAtExit {
    ~StatsAtExit() {
        const char* path = std::getenv("CUDA_EMU_STATS");
        if (!path || !*path) return;
        if (FILE* f = std::fopen(path, "a")) {
            std::fprintf(f, "eager_launches=%llu graph_launches=%llu replayed_ops=%llu captures=%llu\n",
                         eager_launches.load(), graph_launches.load(), replayed_ops.load(), captures.load());
            std::fclose(f);
        }
    }
} stats_at_exit;

// NULL and CU_STREAM_LEGACY name the legacy stream; CU_STREAM_PER_THREAD (2)
// is no object either.
static bool is_legacy(CUstream s) { return s == nullptr || s == (CUstream)1; }
static bool is_object(CUstream s) { return (uintptr_t)s > 2; }
static Capture* capture_of(CUstream s) { return is_object(s) ? s->capture.get() : nullptr; }
static Capture* active_capture(unsigned long long id) {
    for (CUstream s : capturing) {
        if (s->capture->id == id) return s->capture.get();
    }
    return nullptr;
}
static bool in_pinned(const void* p, size_t n) {
    auto it = pinned.upper_bound((uintptr_t)p);
    if (it == pinned.begin()) return false;
    --it;
    return (uintptr_t)p + n <= it->first + it->second;
}
// A call that breaks the rules of capture fails and invalidates the capture(s)
// it broke: cuStreamEndCapture then returns no graph.
static CUresult forbid(CUresult r, const char* fn, const char* why, std::initializer_list<Capture*> broken) {
    for (Capture* c : broken) c->invalidated = true;
    return say(r, fn, why);
}
// The legacy stream waits on every blocking stream, so using it while one
// captures would depend on the capture: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
// invalidating it (cap_mu held).
static CUresult use_legacy(const char* fn) {
    bool hit = false;
    for (CUstream s : capturing) {
        if (!(s->flags & 1)) s->capture->invalidated = hit = true;
    }
    if (!hit) return OK;
    return say(CAPTURE_IMPLICIT, fn, "the legacy stream used during a blocking stream's capture (it would wait for it)");
}
// A potentially unsafe call (allocation, synchronous copy or memset, event
// query or synchronization: calls that may synchronize implicitly) is
// prohibited while this thread has a GLOBAL or THREAD_LOCAL capture, or any
// thread a GLOBAL one (RELAXED permits it); it invalidates those captures.
CUresult rg_emu_driver::unsafe_call(const char* fn) {
    std::lock_guard<std::mutex> g(cap_mu);
    bool hit = false;
    for (CUstream s : capturing) {
        Capture& c = *s->capture;
        if (c.mode == MODE_GLOBAL || (c.mode == MODE_THREAD_LOCAL && c.thread == std::this_thread::get_id()))
            c.invalidated = hit = true;
    }
    if (!hit) return OK;
    return say(CAPTURE_UNSUPPORTED, fn, "not permitted during stream capture (mode global, or thread-local on this thread)");
}
// Issues stream-ordered work to `s`: recorded into s's capture (a copy naming
// pageable host memory is unsupported there), or run now (a failure: `fail`).
CUresult rg_emu_driver::issue(CUstream s, const char* fn, Op op, CUresult fail) {
    {
        std::lock_guard<std::mutex> g(cap_mu);
        if (Capture* c = capture_of(s)) {
            if (c->invalidated) return say(CAPTURE_INVALIDATED, fn, INVALIDATED);
            if (op.host && !in_pinned(op.host, op.host_bytes))
                return forbid(CAPTURE_UNSUPPORTED, fn,
                              "a copy from or to pageable host memory (not cuMemHostAlloc's) during stream capture", {c});
            c->ops.push_back(std::move(op));
            return OK;
        }
        if (is_legacy(s)) {
            if (CUresult r = use_legacy(fn)) return r;
        }
    }
    if (op.kernel) eager_launches++;
    std::string err = op.run();
    return err.empty() ? OK : say(fail, fn, err);
}
// cuMemHostAlloc and cuMemFreeHost (driver.cpp) keep `pinned`.
void rg_emu_driver::pin_host(void* p, size_t bytes) {
    std::lock_guard<std::mutex> g(cap_mu);
    pinned[(uintptr_t)p] = bytes;
}
bool rg_emu_driver::unpin_host(void* p) {
    std::lock_guard<std::mutex> g(cap_mu);
    return pinned.erase((uintptr_t)p) != 0;
}
// Stream-ordered allocation in a capture makes graph memory nodes on the
// driver; the emulator rejects it: rgml allocates before it captures.
CUresult rg_emu_driver::async_alloc_ok(CUstream s, const char* fn) {
    std::lock_guard<std::mutex> g(cap_mu);
    if (Capture* c = capture_of(s))
        return forbid(CAPTURE_UNSUPPORTED, fn,
                      "allocating or freeing on the stream during stream capture: rgml must not allocate in a capture "
                      "(graph memory nodes are not emulated)", {c});
    return is_legacy(s) ? use_legacy(fn) : OK;
}
// cuCtxSynchronize (driver.cpp) during any capture: every capture is invalidated.
CUresult rg_emu_driver::sync_context(const char* fn) {
    std::lock_guard<std::mutex> g(cap_mu);
    if (capturing.empty()) return OK;
    for (CUstream s : capturing) s->capture->invalidated = true;
    return say(CAPTURE_UNSUPPORTED, fn, "synchronizing the context during stream capture (it would wait for it)");
}

extern "C" {
CUresult cuStreamCreate(CUstream* s, unsigned flags) {
    if (!current) return INVALID_CONTEXT;
    *s = new CUstream_st{(int)flags, nullptr};
    return OK;
}
CUresult cuStreamCreateWithPriority(CUstream* s, unsigned flags, int) { return cuStreamCreate(s, flags); }
CUresult cuStreamDestroy_v2(CUstream s) {
    if (!is_object(s)) return INVALID_HANDLE;
    std::lock_guard<std::mutex> g(cap_mu);
    if (s->capture) capturing.erase(std::find(capturing.begin(), capturing.end(), s));
    delete s;
    return OK;
}
// Waiting for a capturing stream is invalid: its work is not scheduled.
static CUresult stream_wait(CUstream s, const char* fn) {
    std::lock_guard<std::mutex> g(cap_mu);
    if (Capture* c = capture_of(s))
        return forbid(CAPTURE_UNSUPPORTED, fn, "waiting for the stream during its capture (its work is not scheduled)", {c});
    return is_legacy(s) ? use_legacy(fn) : OK;
}
CUresult cuStreamSynchronize(CUstream s) { return stream_wait(s, "cuStreamSynchronize"); }
CUresult cuStreamQuery(CUstream s) { return stream_wait(s, "cuStreamQuery"); }
// In a capture, a wait joins work of the same capture (a no-op here: the
// capture is one stream, in order) or, with CU_EVENT_WAIT_EXTERNAL, an outside
// event (complete: streams are synchronous). A capture of another stream
// forking into this one is not emulated.
CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
    if (!e) return INVALID_HANDLE;
    std::lock_guard<std::mutex> g(cap_mu);
    Capture* ec = active_capture(e->capture);
    if (Capture* c = capture_of(s)) {
        if (c->invalidated) return say(CAPTURE_INVALIDATED, "cuStreamWaitEvent", INVALIDATED);
        if (ec == c || (flags & 1)) return OK;
        if (ec) return forbid(CAPTURE_MERGE, "cuStreamWaitEvent", "waiting on an event of another capture during stream capture", {c});
        return forbid(CAPTURE_ISOLATION, "cuStreamWaitEvent",
                      "waiting on an event recorded outside the capture during stream capture (no CU_EVENT_WAIT_EXTERNAL)", {c});
    }
    if (ec)
        return forbid(CAPTURE_UNSUPPORTED, "cuStreamWaitEvent",
                      "another stream waiting on an event recorded during stream capture (joining a capture is not emulated)", {ec});
    return is_legacy(s) ? use_legacy("cuStreamWaitEvent") : OK;
}

CUresult cuStreamBeginCapture_v2(CUstream s, int mode) {
    if (is_legacy(s)) return say(CAPTURE_UNSUPPORTED, "cuStreamBeginCapture", "the legacy stream cannot be captured");
    if (!is_object(s)) return say(NOT_SUPPORTED, "cuStreamBeginCapture", "capture of the per-thread default stream is not emulated");
    if (mode < MODE_GLOBAL || mode > MODE_RELAXED) return INVALID_VALUE;
    std::lock_guard<std::mutex> g(cap_mu);
    if (s->capture) return say(ILLEGAL_STATE, "cuStreamBeginCapture", "the stream is already capturing");
    s->capture.reset(new Capture{next_capture_id++, mode, std::this_thread::get_id(), false, {}});
    capturing.push_back(s);
    return OK;
}
CUresult cuStreamEndCapture(CUstream s, CUgraph* out) {
    if (!out) return INVALID_VALUE;
    std::lock_guard<std::mutex> g(cap_mu);
    Capture* c = capture_of(s);
    if (!c) return say(ILLEGAL_STATE, "cuStreamEndCapture", "the stream is not capturing");
    if (c->mode != MODE_RELAXED && c->thread != std::this_thread::get_id())
        return say(CAPTURE_WRONG_THREAD, "cuStreamEndCapture", "not the thread that began the capture (mode not relaxed)");
    std::unique_ptr<Capture> done = std::move(s->capture);
    capturing.erase(std::find(capturing.begin(), capturing.end(), s));
    *out = nullptr;
    if (done->invalidated) return say(CAPTURE_INVALIDATED, "cuStreamEndCapture", INVALIDATED);
    *out = new CUgraph_st{std::move(done->ops)};
    captures++;
    return OK;
}
// 0 none, 1 active, 2 invalidated. The legacy stream cannot say while a
// blocking stream captures (that capture stays valid).
CUresult cuStreamIsCapturing(CUstream s, int* status) {
    if (!status) return INVALID_VALUE;
    std::lock_guard<std::mutex> g(cap_mu);
    if (is_legacy(s)) {
        for (CUstream c : capturing) {
            if (!(c->flags & 1))
                return say(CAPTURE_IMPLICIT, "cuStreamIsCapturing", "the legacy stream during a blocking stream's capture");
        }
    }
    Capture* c = capture_of(s);
    *status = !c ? 0 : c->invalidated ? 2 : 1;
    return OK;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
    if (!exec || !graph) return INVALID_VALUE;
    // AUTO_FREE_ON_LAUNCH 1, UPLOAD 2, DEVICE_LAUNCH 4 (not with AUTO_FREE_ON_LAUNCH), USE_NODE_PRIORITY 8
    if ((flags & ~15ull) || (flags & 5) == 5) return INVALID_VALUE;
    *exec = new CUgraphExec_st{graph->ops};
    return OK;
}
// Replays the graph's operations in order, at once: kernels see the device
// memory of now, copies the host memory of now.
CUresult cuGraphLaunch(CUgraphExec exec, CUstream s) {
    if (!exec) return INVALID_VALUE;
    {
        std::lock_guard<std::mutex> g(cap_mu);
        if (Capture* c = capture_of(s))
            return forbid(CAPTURE_UNSUPPORTED, "cuGraphLaunch", "a graph launched into a stream during its capture (not emulated)", {c});
        if (is_legacy(s)) {
            if (CUresult r = use_legacy("cuGraphLaunch")) return r;
        }
    }
    graph_launches++;
    for (size_t i = 0; i < exec->ops.size(); i++) {
        const Op& op = exec->ops[i];
        std::string err;
        if (op.host) {
            std::lock_guard<std::mutex> g(cap_mu);
            if (!in_pinned(op.host, op.host_bytes)) err = "its host memory was freed";
        }
        if (err.empty()) err = op.run();
        replayed_ops++;
        if (!err.empty()) return say(LAUNCH_FAILED, "cuGraphLaunch", "operation " + std::to_string(i) + " (" + op.what + "): " + err);
    }
    return OK;
}
CUresult cuGraphUpload(CUgraphExec exec, CUstream) { return exec ? OK : INVALID_VALUE; }
CUresult cuGraphExecDestroy(CUgraphExec exec) { delete exec; return OK; }
CUresult cuGraphDestroy(CUgraph graph) { delete graph; return OK; }

CUresult cuEventCreate(CUevent* e, unsigned) { *e = new CUevent_st{0.0, 0}; return OK; }
CUresult cuEventDestroy_v2(CUevent e) { delete e; return OK; }
// In a capture the event only marks a point of it (no graph node).
CUresult cuEventRecord(CUevent e, CUstream s) {
    if (!e) return INVALID_HANDLE;
    std::lock_guard<std::mutex> g(cap_mu);
    if (Capture* c = capture_of(s)) {
        if (c->invalidated) return say(CAPTURE_INVALIDATED, "cuEventRecord", INVALIDATED);
        e->capture = c->id;
        return OK;
    }
    if (is_legacy(s)) {
        if (CUresult r = use_legacy("cuEventRecord")) return r;
    }
    e->ms = now_ms();
    e->capture = 0;
    return OK;
}
// An event last recorded in a capture stands for work that is not scheduled.
static CUresult event_wait(CUevent e, const char* fn) {
    if (!e) return INVALID_HANDLE;
    {
        std::lock_guard<std::mutex> g(cap_mu);
        if (Capture* c = active_capture(e->capture))
            return forbid(CAPTURED_EVENT, fn, "waiting for an event recorded during stream capture (its work is not scheduled)", {c});
    }
    return unsafe_call(fn);
}
CUresult cuEventQuery(CUevent e) { return event_wait(e, "cuEventQuery"); }
CUresult cuEventSynchronize(CUevent e) { return event_wait(e, "cuEventSynchronize"); }
CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
    if (!a || !b) return INVALID_HANDLE;
    *ms = (float)(b->ms - a->ms);
    return OK;
}
CUresult cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) { return cuEventElapsedTime(ms, a, b); }

// For libcublas.so (cublas.cpp): a cuBLAS call's work issued to `stream` as
// any stream-ordered operation, run now or recorded into the stream's
// capture. Owns `arg` (free_arg frees it); returns a CUresult.
// `run` returns nullptr, or what went wrong (a failed operation, as a kernel's).
int rg_emu_stream_submit(const char* fn, void* stream, const char* (*run)(void*), void* arg, void (*free_arg)(void*)) {
    std::shared_ptr<void> a(arg, free_arg);
    return issue((CUstream)stream, fn, Op{fn, [a, run] {
        const char* err = run(a.get());
        return err ? std::string(err) : std::string();
    }}, LAUNCH_FAILED);
}
}  // extern "C"
