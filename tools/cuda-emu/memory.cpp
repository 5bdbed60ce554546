// rgml CUDA emulator: device memory, and the check of every memory access a
// kernel makes. Device allocations come from one reserved address range (an
// arena): each is mapped on allocation and unmapped (PROT_NONE) on free, and
// addresses are never reused, so a stale pointer faults. The kernels are
// compiled with GCC's -fsanitize=kernel-address in callback mode (build.sh),
// which calls the __asan_* functions below before every load and store; an
// access into the arena must lie inside one live allocation, and an access of
// 2, 4, 8 or 16 bytes to device or dynamic shared memory must be naturally
// aligned, as the GPU requires. A failed check ends the launch with
// CUDA_ERROR_LAUNCH_FAILED and names the kernel, thread and address.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <vector>

#include "emu.h"
#include "runtime.h"

namespace rg_emu {
namespace {
constexpr uintptr_t ARENA_BYTES = 1ull << 40;  // address space only (PROT_NONE, no reserve)
std::mutex mu;
uintptr_t arena_base = 0, arena_next = 0;
std::map<uintptr_t, size_t> live;  // start -> bytes
size_t live_bytes = 0;

void reserve() {
    if (arena_base) return;
    void* p = mmap(nullptr, ARENA_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) fail("cannot reserve the device address range");
    arena_base = arena_next = (uintptr_t)p;
}
size_t page() {
    static const size_t p = (size_t)sysconf(_SC_PAGESIZE);
    return p;
}
// The allocations of the running launch, sorted (taken when it starts: a
// launch's own buffers cannot be freed while it runs).
thread_local std::vector<std::pair<uintptr_t, size_t>> snapshot;
}  // namespace

unsigned long long device_alloc(size_t bytes, size_t limit) {
    std::lock_guard<std::mutex> g(mu);
    reserve();
    if (live_bytes + bytes > limit) return 0;
    size_t span = (bytes + page() - 1) / page() * page();
    // a guard page after each allocation
    if (arena_next + span + page() > arena_base + ARENA_BYTES) return 0;
    uintptr_t p = arena_next;
    if (mprotect((void*)p, span, PROT_READ | PROT_WRITE) != 0) return 0;
    arena_next += span + page();
    std::memset((void*)p, 0xCD, bytes);  // device memory starts as garbage, not zeros
    live[p] = bytes;
    live_bytes += bytes;
    return p;
}

bool device_free(unsigned long long p) {
    std::lock_guard<std::mutex> g(mu);
    auto it = live.find(p);
    if (it == live.end()) return false;
    size_t span = (it->second + page() - 1) / page() * page();
    madvise((void*)p, span, MADV_DONTNEED);
    mprotect((void*)p, span, PROT_NONE);
    live_bytes -= it->second;
    live.erase(it);
    return true;
}

bool in_device(unsigned long long p, size_t n) {
    std::lock_guard<std::mutex> g(mu);
    auto it = live.upper_bound(p);
    if (it == live.begin()) return false;
    --it;
    return p >= it->first && p + n <= it->first + it->second;
}

size_t device_bytes() {
    std::lock_guard<std::mutex> g(mu);
    return live_bytes;
}

void snapshot_allocations() {
    std::lock_guard<std::mutex> g(mu);
    snapshot.assign(live.begin(), live.end());
}

namespace {
[[noreturn]] void bad_access(const char* what, uintptr_t a, size_t n, bool store) {
    char buf[240];
    auto it = std::upper_bound(snapshot.begin(), snapshot.end(), std::make_pair(a, ~(size_t)0));
    if (it != snapshot.begin()) {
        --it;
        std::snprintf(buf, sizeof buf, "%s: %zu-byte %s at 0x%lx, byte %ld of a %zu-byte allocation", what, n,
                      store ? "store" : "load", (unsigned long)a, (long)(a - it->first), it->second);
    } else {
        std::snprintf(buf, sizeof buf, "%s: %zu-byte %s at 0x%lx, before every allocation", what, n,
                      store ? "store" : "load", (unsigned long)a);
    }
    kill_thread(buf);
}

inline void check(uintptr_t a, size_t n, bool sized, bool store, void* pc) {
    if (!launch_running()) return;
    if (a - arena_base < ARENA_BYTES) {
        auto it = std::upper_bound(snapshot.begin(), snapshot.end(), std::make_pair(a, ~(size_t)0));
        bool inside = it != snapshot.begin() && a + n <= std::prev(it)->first + std::prev(it)->second;
        if (!inside) bad_access("out-of-bounds device memory access", a, n, store);
        if (sized && a % n) bad_access("misaligned device memory access", a, n, store);
        if (profiling()) profile_access(a, n, (uintptr_t)pc);
        return;
    }
    uintptr_t s = (uintptr_t)dynamic_smem;
    if (a - s < (uintptr_t)dynamic_smem_bytes + 64) {  // near or in the dynamic shared memory
        if (a + n > s + dynamic_smem_bytes) bad_access("out-of-bounds dynamic shared memory access", a, n, store);
        if (sized && a % n) bad_access("misaligned shared memory access", a, n, store);
    }
}
}  // namespace
}  // namespace rg_emu

// GCC's -fsanitize=kernel-address callbacks (see the top of the file).
extern "C" {
#define RG_EMU_ACCESS(size)                                                                               \
    void __asan_load##size##_noabort(uintptr_t a) { rg_emu::check(a, size, true, false, __builtin_return_address(0)); } \
    void __asan_store##size##_noabort(uintptr_t a) { rg_emu::check(a, size, true, true, __builtin_return_address(0)); }
RG_EMU_ACCESS(1)
RG_EMU_ACCESS(2)
RG_EMU_ACCESS(4)
RG_EMU_ACCESS(8)
RG_EMU_ACCESS(16)
void __asan_loadN_noabort(uintptr_t a, size_t n) { rg_emu::check(a, n, false, false, __builtin_return_address(0)); }
void __asan_storeN_noabort(uintptr_t a, size_t n) { rg_emu::check(a, n, false, true, __builtin_return_address(0)); }
void __asan_handle_no_return() {}
void __asan_before_dynamic_init(const char*) {}
void __asan_after_dynamic_init() {}
}
