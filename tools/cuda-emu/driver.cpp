// rgml CUDA emulator: the part of the CUDA driver API that cudarc and rgml
// call, on the CPU. Device memory is host memory (256-byte aligned); streams
// run synchronously (memory.cpp holds device memory); modules are NVRTC's
// real CUBINs or PTX, whose kernel names are looked up in the kernels
// compiled for the CPU (runtime.cpp). Launches are
// checked against an H100/H200's limits (block and grid sizes, shared memory).
// Streams, events, stream capture and graphs: capture.cpp (the types and
// helpers the two share: driver.h).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "driver.h"
#include "emu.h"
#include "runtime.h"

using namespace rg_emu_driver;

struct CUmod_st { std::set<std::string> entries; };
struct CUfunc_st { const rg_emu::Kernel* k; int max_dynamic_smem; };

static const int SMEM_DEFAULT = 48 * 1024, SMEM_OPTIN = 227 * 1024;
static const unsigned long long TOTAL_MEM = 64ull << 30;

static bool initialized = false;
static CUctx_st primary{0};
thread_local CUcontext rg_emu_driver::current = nullptr;

CUresult rg_emu_driver::say(CUresult r, const char* fn, const std::string& why) {
    std::fprintf(stderr, "cuda-emu: %s: %s\n", fn, why.c_str());
    return r;
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
// Synchronizing the context would wait on every capture in it, whatever its mode.
CUresult cuCtxSynchronize() {
    if (!current) return INVALID_CONTEXT;
    return sync_context("cuCtxSynchronize");
}

static CUresult alloc(CUdeviceptr* p, size_t bytes) {
    if (!current) return INVALID_CONTEXT;
    if (bytes == 0) return INVALID_VALUE;  // as the driver: a zero-byte allocation is an error
    CUdeviceptr m = rg_emu::device_alloc(bytes, TOTAL_MEM);
    if (!m) return OUT_OF_MEMORY;
    *p = m;
    return OK;
}
static CUresult free_device(CUdeviceptr p) {
    if (!rg_emu::device_free(p)) return say(INVALID_VALUE, "cuMemFree", "not the start of a live allocation");
    return OK;
}
CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
    if (CUresult r = unsafe_call("cuMemAlloc")) return r;
    return alloc(p, bytes);
}
CUresult cuMemAllocAsync(CUdeviceptr* p, size_t bytes, CUstream s) {
    if (CUresult r = async_alloc_ok(s, "cuMemAllocAsync")) return r;
    return alloc(p, bytes);
}
CUresult cuMemFree_v2(CUdeviceptr p) {
    if (CUresult r = unsafe_call("cuMemFree")) return r;
    return free_device(p);
}
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) {
    if (CUresult r = async_alloc_ok(s, "cuMemFreeAsync")) return r;
    return free_device(p);
}
CUresult cuMemGetInfo_v2(size_t* free_b, size_t* total) {
    *free_b = TOTAL_MEM - rg_emu::device_bytes();
    *total = TOTAL_MEM;
    return OK;
}
CUresult cuMemHostAlloc(void** p, size_t bytes, unsigned) {
    if (CUresult r = unsafe_call("cuMemHostAlloc")) return r;
    *p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096 + 4096);
    if (!*p) return OUT_OF_MEMORY;
    pin_host(*p, bytes);
    return OK;
}
CUresult cuMemFreeHost(void* p) {
    if (CUresult r = unsafe_call("cuMemFreeHost")) return r;
    if (!unpin_host(p)) return say(INVALID_VALUE, "cuMemFreeHost", "not memory from cuMemHostAlloc");
    std::free(p);
    return OK;
}

// The stream-ordered copies and memsets: arguments checked at once, the work
// run now or recorded (and the ranges checked again when it runs).
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
    if (n == 0) return OK;
    if (!in_device(dst, n)) return say(INVALID_VALUE, "cuMemcpyHtoD", "destination outside every device allocation");
    return issue(s, "cuMemcpyHtoD", Op{"copy host to device", [=] {
        if (!in_device(dst, n)) return std::string("destination outside every device allocation");
        std::memcpy((void*)dst, src, n);
        return std::string();
    }, src, n}, INVALID_VALUE);
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
    if (CUresult r = unsafe_call("cuMemcpyHtoD")) return r;
    return cuMemcpyHtoDAsync_v2(dst, src, n, nullptr);
}
CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream s) {
    if (n == 0) return OK;
    if (!in_device(src, n)) return say(INVALID_VALUE, "cuMemcpyDtoH", "source outside every device allocation");
    return issue(s, "cuMemcpyDtoH", Op{"copy device to host", [=] {
        if (!in_device(src, n)) return std::string("source outside every device allocation");
        std::memcpy(dst, (const void*)src, n);
        return std::string();
    }, dst, n}, INVALID_VALUE);
}
CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
    if (CUresult r = unsafe_call("cuMemcpyDtoH")) return r;
    return cuMemcpyDtoHAsync_v2(dst, src, n, nullptr);
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    if (n == 0) return OK;
    if (!in_device(src, n) || !in_device(dst, n)) return say(INVALID_VALUE, "cuMemcpyDtoD", "a range outside every device allocation");
    return issue(s, "cuMemcpyDtoD", Op{"copy device to device", [=] {
        if (!in_device(src, n) || !in_device(dst, n)) return std::string("a range outside every device allocation");
        std::memmove((void*)dst, (const void*)src, n);
        return std::string();
    }}, INVALID_VALUE);
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    if (CUresult r = unsafe_call("cuMemcpyDtoD")) return r;
    return cuMemcpyDtoDAsync_v2(dst, src, n, nullptr);
}
CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
    if (n == 0) return OK;
    if (!in_device(dst, n)) return say(INVALID_VALUE, "cuMemsetD8", "range outside every device allocation");
    return issue(s, "cuMemsetD8", Op{"memset", [=] {
        if (!in_device(dst, n)) return std::string("range outside every device allocation");
        std::memset((void*)dst, v, n);
        return std::string();
    }}, INVALID_VALUE);
}
CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
    if (CUresult r = unsafe_call("cuMemsetD8")) return r;
    return cuMemsetD8Async(dst, v, n, nullptr);
}
CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned v, size_t n, CUstream s) {
    if (n == 0) return OK;
    if (dst % 4 || !in_device(dst, n * 4)) return say(INVALID_VALUE, "cuMemsetD32", "misaligned or outside every allocation");
    return issue(s, "cuMemsetD32", Op{"memset", [=] {
        if (!in_device(dst, n * 4)) return std::string("range outside every device allocation");
        for (size_t i = 0; i < n; i++) ((unsigned*)dst)[i] = v;
        return std::string();
    }}, INVALID_VALUE);
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

// A kernel's parameter values (in 16-byte slots) and the array of pointers
// to them that its invoker takes: a launch copies them, as the driver does.
struct Params {
    struct alignas(16) Slot { char b[16]; };
    std::vector<Slot> bytes;
    std::vector<void*> ptrs;
};

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, CUstream s, void** params, void** extra) {
    if (!f) return INVALID_HANDLE;
    const rg_emu::Kernel* k = f->k;
    const std::string who = "cuLaunchKernel(" + k->name + ")";
    if (extra) return say(NOT_SUPPORTED, who.c_str(), "the `extra` argument");
    if (!params && !k->param_sizes.empty()) return say(INVALID_VALUE, who.c_str(), "no parameters");
    if (!gx || !gy || !gz || !bx || !by || !bz) return say(INVALID_VALUE, who.c_str(), "a zero grid or block dimension");
    if (gx > 2147483647u || gy > 65535 || gz > 65535) return say(INVALID_VALUE, who.c_str(), "grid dimensions over the limits");
    if (bx > 1024 || by > 1024 || bz > 64 || (unsigned long long)bx * by * bz > 1024)
        return say(INVALID_VALUE, who.c_str(), "more than 1024 threads per block");
    if ((int)smem > f->max_dynamic_smem) return say(INVALID_VALUE, who.c_str(), "dynamic shared memory over the function's limit");
    auto p = std::make_shared<Params>();
    size_t slots = 0;
    for (unsigned n : k->param_sizes) slots += (n + 15) / 16;
    p->bytes.resize(slots);
    char* at = (char*)p->bytes.data();
    for (size_t i = 0; i < k->param_sizes.size(); i++) {
        std::memcpy(at, params[i], k->param_sizes[i]);
        p->ptrs.push_back(at);
        at += (k->param_sizes[i] + 15) / 16 * 16;
    }
    const dim3 grid{gx, gy, gz}, block{bx, by, bz};
    // CUDA_EMU_SKIP_KERNELS=1: launches are checked and counted but not run (a
    // timing aid: what remains is the host's cost per launch; results are garbage)
    static const bool skip = std::getenv("CUDA_EMU_SKIP_KERNELS") && std::string(std::getenv("CUDA_EMU_SKIP_KERNELS")) == "1";
    Op op{"kernel " + k->name, [=] { return skip ? std::string() : rg_emu::run_kernel(*k, grid, block, smem, p->ptrs.data()); }};
    op.kernel = true;
    return issue(s, who.c_str(), std::move(op), LAUNCH_FAILED);
}

// Whether [p, p + n) lies in one live device allocation (libcublas.so's checks).
int rg_emu_in_device(unsigned long long p, size_t n) { return in_device(p, n) ? 1 : 0; }

CUresult cuGetErrorName(CUresult r, const char** s) {
    static char buf[64];
    std::snprintf(buf, sizeof buf, "CUDA_ERROR_%d (cuda-emu)", r);
    *s = buf;
    return OK;
}
CUresult cuGetErrorString(CUresult r, const char** s) { return cuGetErrorName(r, s); }
}  // extern "C"
