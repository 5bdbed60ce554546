// rgml CUDA emulator: what the two halves of libcuda.so's driver API share.
// driver.cpp holds init, device, context, memory, modules and launches;
// capture.cpp holds streams, events, stream capture and graphs. The helpers
// below are in namespace rg_emu_driver, hidden: libcuda.so exports only the
// driver API (and the kernel modules linked into it see none of this).
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
// One operation of a captured graph, run again at each replay: what it is
// (for messages), how it runs ("" or what went wrong), and the host memory a
// copy reads or writes (it must be cuMemHostAlloc's, at record and replay).
struct Op {
    std::string what;
    std::function<std::string()> run;
    const void* host = nullptr;
    size_t host_bytes = 0;
    bool kernel = false;
};
// A stream capture from cuStreamBeginCapture to cuStreamEndCapture.
struct Capture {
    unsigned long long id;
    int mode;
    std::thread::id thread;
    bool invalidated;
    std::vector<Op> ops;
};
struct CUctx_st { int device; };
struct CUstream_st { int flags; std::unique_ptr<Capture> capture; };
// `capture`: the id of the capture the event was last recorded in (0: none).
struct CUevent_st { double ms; unsigned long long capture; };
struct CUmod_st;        // driver.cpp
struct CUfunc_st;       // driver.cpp
struct CUgraph_st;      // capture.cpp
struct CUgraphExec_st;  // capture.cpp
typedef CUctx_st* CUcontext;
typedef CUstream_st* CUstream;
typedef CUevent_st* CUevent;
typedef CUmod_st* CUmodule;
typedef CUfunc_st* CUfunction;
typedef CUgraph_st* CUgraph;
typedef CUgraphExec_st* CUgraphExec;

enum {
    OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, INVALID_DEVICE = 101,
    INVALID_IMAGE = 200, INVALID_CONTEXT = 201, INVALID_PTX = 218, INVALID_HANDLE = 400, ILLEGAL_STATE = 401,
    NOT_FOUND = 500, LAUNCH_FAILED = 719, NOT_SUPPORTED = 801,
    CAPTURE_UNSUPPORTED = 900, CAPTURE_INVALIDATED = 901, CAPTURE_MERGE = 902, CAPTURE_ISOLATION = 905,
    CAPTURE_IMPLICIT = 906, CAPTURED_EVENT = 907, CAPTURE_WRONG_THREAD = 908,
};
enum { MODE_GLOBAL = 0, MODE_THREAD_LOCAL = 1, MODE_RELAXED = 2 };

namespace rg_emu_driver __attribute__((visibility("hidden"))) {
// driver.cpp: this thread's current context (cuCtxSetCurrent), and `why` on
// stderr as "cuda-emu: <fn>: <why>", returning `r`.
extern thread_local CUcontext current;
CUresult say(CUresult r, const char* fn, const std::string& why);

// capture.cpp: the capture rules the driver.cpp calls obey.
// A potentially unsafe call during a GLOBAL or THREAD_LOCAL capture.
CUresult unsafe_call(const char* fn);
// Stream-ordered work to `s`: recorded into s's capture, or run now.
CUresult issue(CUstream s, const char* fn, Op op, CUresult fail);
// cuMemAllocAsync and cuMemFreeAsync on `s` (none in a capture).
CUresult async_alloc_ok(CUstream s, const char* fn);
// cuCtxSynchronize: fails, invalidating every capture, while any is active.
CUresult sync_context(const char* fn);
// The host allocations of cuMemHostAlloc (start -> bytes), the only host
// memory a captured copy may name: add one; remove one (false: not one).
void pin_host(void* p, size_t bytes);
bool unpin_host(void* p);
}  // namespace rg_emu_driver
