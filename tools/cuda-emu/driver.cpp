// rgml CUDA emulator: the part of the CUDA driver API that cudarc and rgml
// call, on the CPU. Device memory is host memory (256-byte aligned); streams
// run synchronously (memory.cpp holds device memory); modules are NVRTC's
// real CUBINs or PTX, whose kernel names are looked up in the kernels
// compiled for the CPU (runtime.cpp). Launches are
// checked against an H100/H200's limits (block and grid sizes, shared memory).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "emu.h"
#include "runtime.h"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
struct CUctx_st { int device; };
struct CUstream_st { int flags; };
struct CUevent_st { double ms; };
struct CUmod_st { std::set<std::string> entries; };
struct CUfunc_st { const rg_emu::Kernel* k; int max_dynamic_smem; };
typedef CUctx_st* CUcontext;
typedef CUstream_st* CUstream;
typedef CUevent_st* CUevent;
typedef CUmod_st* CUmodule;
typedef CUfunc_st* CUfunction;

enum {
    OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, INVALID_DEVICE = 101,
    INVALID_IMAGE = 200, INVALID_CONTEXT = 201, INVALID_PTX = 218, INVALID_HANDLE = 400, NOT_FOUND = 500,
    LAUNCH_FAILED = 719, NOT_SUPPORTED = 801,
};
static const int SMEM_DEFAULT = 48 * 1024, SMEM_OPTIN = 227 * 1024;
static const unsigned long long TOTAL_MEM = 64ull << 30;

static bool initialized = false;
static CUctx_st primary{0};
static thread_local CUcontext current = nullptr;

static CUresult say(CUresult r, const char* fn, const std::string& why) {
    std::fprintf(stderr, "cuda-emu: %s: %s\n", fn, why.c_str());
    return r;
}
static double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
using rg_emu::in_device;

extern "C" {
CUresult cuInit(unsigned flags) {
    if (flags != 0) return INVALID_VALUE;
    initialized = true;
    return OK;
}
CUresult cuDriverGetVersion(int* v) { *v = 13000; return OK; }
CUresult cuDeviceGetCount(int* n) { *n = 1; return initialized ? OK : NOT_INITIALIZED; }
CUresult cuDeviceGet(CUdevice* d, int ordinal) {
    if (!initialized) return NOT_INITIALIZED;
    if (ordinal != 0) return INVALID_DEVICE;
    *d = 0;
    return OK;
}
CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
    if (d != 0) return INVALID_DEVICE;
    std::snprintf(name, len, "rgml CUDA emulator (CPU, reports compute capability 9.0)");
    return OK;
}
CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice d) { *bytes = TOTAL_MEM; return d == 0 ? OK : INVALID_DEVICE; }
CUresult cuDeviceGetAttribute(int* v, int attr, CUdevice d) {
    if (d != 0) return INVALID_DEVICE;
    switch (attr) {
    case 1: *v = 1024; break;                   // max threads per block
    case 2: case 3: *v = 1024; break;           // max block dim x, y
    case 4: *v = 64; break;                     // max block dim z
    case 5: *v = 2147483647; break;             // max grid dim x
    case 6: case 7: *v = 65535; break;          // max grid dim y, z
    case 8: *v = SMEM_DEFAULT; break;           // shared memory per block
    case 10: *v = 32; break;                    // warp size
    case 16: *v = 132; break;                   // multiprocessors
    case 38: *v = 60 << 20; break;              // L2 bytes
    case 75: *v = 9; break;                     // compute capability
    case 76: *v = 0; break;
    case 97: *v = SMEM_OPTIN; break;            // opt-in shared memory per block
    case 115: *v = 1; break;                    // memory pools (cuMemAllocAsync)
    default: *v = 0; break;
    }
    return OK;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) {
    if (d != 0) return INVALID_DEVICE;
    *c = &primary;
    return OK;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { return d == 0 ? OK : INVALID_DEVICE; }
CUresult cuCtxSetCurrent(CUcontext c) { current = c; return OK; }
CUresult cuCtxGetCurrent(CUcontext* c) { *c = current; return OK; }
CUresult cuCtxGetDevice(CUdevice* d) {
    if (!current) return INVALID_CONTEXT;
    *d = current->device;
    return OK;
}
CUresult cuCtxSynchronize() { return current ? OK : INVALID_CONTEXT; }

CUresult cuStreamCreate(CUstream* s, unsigned flags) {
    if (!current) return INVALID_CONTEXT;
    *s = new CUstream_st{(int)flags};
    return OK;
}
CUresult cuStreamCreateWithPriority(CUstream* s, unsigned flags, int) { return cuStreamCreate(s, flags); }
CUresult cuStreamDestroy_v2(CUstream s) { delete s; return OK; }
CUresult cuStreamSynchronize(CUstream) { return OK; }
CUresult cuStreamWaitEvent(CUstream, CUevent e, unsigned) { return e ? OK : INVALID_HANDLE; }
CUresult cuStreamQuery(CUstream) { return OK; }

CUresult cuEventCreate(CUevent* e, unsigned) { *e = new CUevent_st{0.0}; return OK; }
CUresult cuEventDestroy_v2(CUevent e) { delete e; return OK; }
CUresult cuEventRecord(CUevent e, CUstream) {
    if (!e) return INVALID_HANDLE;
    e->ms = now_ms();
    return OK;
}
CUresult cuEventQuery(CUevent e) { return e ? OK : INVALID_HANDLE; }
CUresult cuEventSynchronize(CUevent e) { return e ? OK : INVALID_HANDLE; }
CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
    if (!a || !b) return INVALID_HANDLE;
    *ms = (float)(b->ms - a->ms);
    return OK;
}
CUresult cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) { return cuEventElapsedTime(ms, a, b); }

CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
    if (!current) return INVALID_CONTEXT;
    if (bytes == 0) return INVALID_VALUE;  // as the driver: a zero-byte allocation is an error
    CUdeviceptr m = rg_emu::device_alloc(bytes, TOTAL_MEM);
    if (!m) return OUT_OF_MEMORY;
    *p = m;
    return OK;
}
CUresult cuMemAllocAsync(CUdeviceptr* p, size_t bytes, CUstream) { return cuMemAlloc_v2(p, bytes); }
CUresult cuMemFree_v2(CUdeviceptr p) {
    if (!rg_emu::device_free(p)) return say(INVALID_VALUE, "cuMemFree", "not the start of a live allocation");
    return OK;
}
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream) { return cuMemFree_v2(p); }
CUresult cuMemGetInfo_v2(size_t* free_b, size_t* total) {
    *free_b = TOTAL_MEM - rg_emu::device_bytes();
    *total = TOTAL_MEM;
    return OK;
}
CUresult cuMemHostAlloc(void** p, size_t bytes, unsigned) {
    *p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096 + 4096);
    return *p ? OK : OUT_OF_MEMORY;
}
CUresult cuMemFreeHost(void* p) { std::free(p); return OK; }

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream) {
    if (n == 0) return OK;
    if (!in_device(dst, n)) return say(INVALID_VALUE, "cuMemcpyHtoD", "destination outside every device allocation");
    std::memcpy((void*)dst, src, n);
    return OK;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) { return cuMemcpyHtoDAsync_v2(dst, src, n, nullptr); }
CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream) {
    if (n == 0) return OK;
    if (!in_device(src, n)) return say(INVALID_VALUE, "cuMemcpyDtoH", "source outside every device allocation");
    std::memcpy(dst, (const void*)src, n);
    return OK;
}
CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) { return cuMemcpyDtoHAsync_v2(dst, src, n, nullptr); }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream) {
    if (n == 0) return OK;
    if (!in_device(src, n) || !in_device(dst, n)) return say(INVALID_VALUE, "cuMemcpyDtoD", "a range outside every device allocation");
    std::memmove((void*)dst, (const void*)src, n);
    return OK;
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) { return cuMemcpyDtoDAsync_v2(dst, src, n, nullptr); }
CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream) {
    if (n == 0) return OK;
    if (!in_device(dst, n)) return say(INVALID_VALUE, "cuMemsetD8", "range outside every device allocation");
    std::memset((void*)dst, v, n);
    return OK;
}
CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) { return cuMemsetD8Async(dst, v, n, nullptr); }
CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned v, size_t n, CUstream) {
    if (n == 0) return OK;
    if (dst % 4 || !in_device(dst, n * 4)) return say(INVALID_VALUE, "cuMemsetD32", "misaligned or outside every allocation");
    for (size_t i = 0; i < n; i++) ((unsigned*)dst)[i] = v;
    return OK;
}

// The global function symbols of a 64-bit ELF image (a CUBIN): its kernels.
static bool cubin_entries(const unsigned char* e, std::set<std::string>& out) {
    auto u16 = [&](size_t at) { unsigned short v; std::memcpy(&v, e + at, 2); return (size_t)v; };
    auto u32 = [&](size_t at) { unsigned v; std::memcpy(&v, e + at, 4); return (size_t)v; };
    auto u64 = [&](size_t at) { unsigned long long v; std::memcpy(&v, e + at, 8); return (size_t)v; };
    if (e[4] != 2 || u16(18) != 190) return false;  // ELFCLASS64, EM_CUDA
    size_t shoff = u64(0x28), shentsize = u16(0x3A), shnum = u16(0x3C);
    for (size_t i = 0; i < shnum; i++) {
        size_t sh = shoff + i * shentsize;
        if (u32(sh + 4) != 2) continue;  // SHT_SYMTAB
        size_t off = u64(sh + 24), size = u64(sh + 32), ent = u64(sh + 56);
        size_t str = shoff + u32(sh + 40) * shentsize, stroff = u64(str + 24);
        for (size_t k = 0; ent && k < size / ent; k++) {
            size_t sym = off + k * ent;
            unsigned char info = e[sym + 4];
            if ((info & 15) == 2 && (info >> 4) == 1) out.insert((const char*)e + stroff + u32(sym));  // FUNC, GLOBAL
        }
    }
    return true;
}

// A module is NVRTC's output: PTX text (its `.entry` names, and a target the
// device runs) or a CUBIN (its global functions).
CUresult cuModuleLoadData(CUmodule* m, const void* image) {
    const char* ptx = (const char*)image;
    if (!ptx) return INVALID_VALUE;
    auto* mod = new CUmod_st;
    if (std::memcmp(ptx, "\x7f" "ELF", 4) == 0) {
        if (!cubin_entries((const unsigned char*)image, mod->entries)) {
            delete mod;
            return say(INVALID_IMAGE, "cuModuleLoadData", "not a 64-bit CUDA ELF image");
        }
        *m = mod;
        return OK;
    }
    if (!std::strstr(ptx, ".version")) {
        delete mod;
        return say(INVALID_IMAGE, "cuModuleLoadData", "neither PTX text nor a CUBIN");
    }
    const char* t = std::strstr(ptx, ".target sm_");
    if (!t || std::atoi(t + 11) > 90) {
        delete mod;
        return say(INVALID_PTX, "cuModuleLoadData", "PTX not for sm_90 or older");
    }
    for (const char* p = ptx; (p = std::strstr(p, ".entry ")); ) {
        p += 7;
        const char* e = p;
        while (*e && *e != '(' && *e != ' ' && *e != '\n') e++;
        mod->entries.insert(std::string(p, e));
    }
    *m = mod;
    return OK;
}
CUresult cuModuleUnload(CUmodule m) { delete m; return OK; }
CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
    if (!m) return INVALID_HANDLE;
    if (!m->entries.count(name)) return say(NOT_FOUND, "cuModuleGetFunction", std::string(name) + " is not in the module's image");
    const rg_emu::Kernel* k = rg_emu::find_kernel(name);
    if (!k) return say(NOT_FOUND, "cuModuleGetFunction", std::string(name) + " is in the image but was not compiled into the emulator");
    *f = new CUfunc_st{k, SMEM_DEFAULT};
    return OK;
}
CUresult cuFuncGetAttribute(int* v, int attr, CUfunction f) {
    if (!f) return INVALID_HANDLE;
    switch (attr) {
    case 0: *v = 1024; break;  // max threads per block
    case 8: *v = f->max_dynamic_smem; break;
    default: *v = 0; break;
    }
    return OK;
}
CUresult cuFuncSetAttribute(CUfunction f, int attr, int v) {
    if (!f) return INVALID_HANDLE;
    if (attr == 8) {  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        if (v < 0 || v > SMEM_OPTIN) return INVALID_VALUE;
        f->max_dynamic_smem = v;
    }
    return OK;
}
CUresult cuFuncSetCacheConfig(CUfunction, int) { return OK; }

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, CUstream, void** params, void** extra) {
    if (!f) return INVALID_HANDLE;
    const std::string who = "cuLaunchKernel(" + f->k->name + ")";
    if (extra) return say(NOT_SUPPORTED, who.c_str(), "the `extra` argument");
    if (!params && f->k->nparams > 0) return say(INVALID_VALUE, who.c_str(), "no parameters");
    if (!gx || !gy || !gz || !bx || !by || !bz) return say(INVALID_VALUE, who.c_str(), "a zero grid or block dimension");
    if (gx > 2147483647u || gy > 65535 || gz > 65535) return say(INVALID_VALUE, who.c_str(), "grid dimensions over the limits");
    if (bx > 1024 || by > 1024 || bz > 64 || (unsigned long long)bx * by * bz > 1024)
        return say(INVALID_VALUE, who.c_str(), "more than 1024 threads per block");
    if ((int)smem > f->max_dynamic_smem) return say(INVALID_VALUE, who.c_str(), "dynamic shared memory over the function's limit");
    std::string err = rg_emu::run_kernel(*f->k, dim3{gx, gy, gz}, dim3{bx, by, bz}, smem, params);
    if (!err.empty()) return say(LAUNCH_FAILED, who.c_str(), err);
    return OK;
}

CUresult cuGetErrorName(CUresult r, const char** s) {
    static char buf[64];
    std::snprintf(buf, sizeof buf, "CUDA_ERROR_%d (cuda-emu)", r);
    *s = buf;
    return OK;
}
CUresult cuGetErrorString(CUresult r, const char** s) { return cuGetErrorName(r, s); }
}  // extern "C"
