// rgml CUDA emulator: kernel registry and the block scheduler (one fiber per
// CUDA thread, switched by a small x86-64 context switch).
#include "runtime.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "emu.h"

namespace rg_emu {
thread_local ThreadState* cur = nullptr;
thread_local uint3 block_idx;
thread_local uint3 block_dim;
thread_local uint3 grid_dim;
thread_local char* dynamic_smem = nullptr;
thread_local unsigned dynamic_smem_bytes = 0;

// ---- registry ----
static std::map<std::string, Kernel>& registry() {
    static std::map<std::string, Kernel> r;
    return r;
}
void register_kernel(const char* module, const char* name, void* fn, Invoke invoke, int nparams, const unsigned* param_sizes) {
    registry()[name] = Kernel{module, name, fn, invoke, std::vector<unsigned>(param_sizes, param_sizes + nparams)};
}
const Kernel* find_kernel(const char* name) {
    auto it = registry().find(name);
    return it == registry().end() ? nullptr : &it->second;
}

// ---- context switch: void rg_emu_swap(void** save_sp, void* load_sp) ----
extern "C" void rg_emu_swap(void** save_sp, void* load_sp);
asm(R"(
.text
.globl rg_emu_swap
.type rg_emu_swap,@function
rg_emu_swap:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size rg_emu_swap, .-rg_emu_swap
)");

namespace {
enum State { READY, AT_BARRIER, AT_WARP, DONE };
constexpr size_t STACK = 256 * 1024;

struct Fiber {
    ThreadState ts;
    void* sp = nullptr;
    char* stack = nullptr;  // mmap'd STACK bytes plus a guard page below
    State state = READY;
    // a pending warp operation
    int kind = 0, arg = 0, width = 32;
    unsigned mask = 0;
    unsigned long long value = 0, result = 0;
};

struct Launch {
    const Kernel* k = nullptr;
    void** params = nullptr;
    std::vector<Fiber> fibers;
    size_t current = 0;
    void* sched_sp = nullptr;
    std::string error;
};
thread_local Launch* launch = nullptr;
thread_local std::vector<char*> stack_pool;

[[noreturn]] void fiber_main() {
    Launch* l = launch;
    Fiber& f = l->fibers[l->current];
    l->k->invoke(l->k->fn, l->params);
    f.state = DONE;
    rg_emu_swap(&f.sp, l->sched_sp);
    std::abort();  // a finished fiber is never resumed
}

void* fresh_stack_top(char* stack) {
    // 16-aligned top; rg_emu_swap pops mxcsr/fcw, six registers, then returns
    // into fiber_main with %rsp = 8 (mod 16) as after a call
    uintptr_t top = ((uintptr_t)(stack + STACK)) & ~(uintptr_t)15;
    uint64_t* sp = (uint64_t*)(top - 72);
    sp[0] = 0x037f00001f80ull;  // mxcsr 0x1f80 (low dword), x87 control word 0x037f
    for (int i = 1; i <= 6; i++) sp[i] = 0;
    sp[7] = (uint64_t)(uintptr_t)&fiber_main;
    return sp;
}

char* take_stack(size_t i) {
    while (stack_pool.size() <= i) {
        long page = sysconf(_SC_PAGESIZE);
        char* p = (char*)mmap(nullptr, STACK + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) fail("mmap of a fiber stack failed");
        mprotect(p, page, PROT_NONE);  // guard page: a stack overflow faults
        stack_pool.push_back(p + page);
    }
    return stack_pool[i];
}

// CUDA_EMU_SCHEDULE=reverse runs a block's threads last to first between
// barriers (default: first to last). A missing barrier shows up as a wrong
// result in one order or the other, depending on which thread writes first.
bool reverse_order() {
    static const bool reverse = [] {
        const char* v = std::getenv("CUDA_EMU_SCHEDULE");
        return v && std::string(v) == "reverse";
    }();
    return reverse;
}

void suspend(Fiber& f) {
    rg_emu_swap(&f.sp, launch->sched_sp);
}

// Completes the pending warp operation of warp `w` when every lane it waits
// for has arrived; returns whether it did.
bool try_complete_warp(Launch& l, size_t w, size_t nthreads) {
    size_t base = w * 32, lanes = nthreads - base < 32 ? nthreads - base : 32;
    unsigned waiting = 0, live = 0;
    for (size_t i = 0; i < lanes; i++) {
        if (l.fibers[base + i].state != DONE) live |= 1u << i;
        if (l.fibers[base + i].state == AT_WARP) waiting |= 1u << i;
    }
    if (!waiting) return false;
    // every waiting lane's mask (restricted to live lanes) must be fully waiting
    for (size_t i = 0; i < lanes; i++) {
        if (!(waiting >> i & 1)) continue;
        Fiber& f = l.fibers[base + i];
        unsigned need = f.mask & live;
        if ((need & waiting) != need) return false;
        if (!(f.mask >> i & 1)) {
            l.error = "a warp operation's mask leaves out the calling lane";
            return false;
        }
    }
    unsigned ballot = 0;
    for (size_t i = 0; i < lanes; i++) {
        Fiber& f = l.fibers[base + i];
        if ((waiting >> i & 1) && f.kind == 5 && f.value) ballot |= 1u << i;
    }
    for (size_t i = 0; i < lanes; i++) {
        if (!(waiting >> i & 1)) continue;
        Fiber& f = l.fibers[base + i];
        for (size_t j = 0; j < lanes; j++) {
            if ((waiting >> j & 1) && (f.mask >> j & 1) && l.fibers[base + j].kind != f.kind) {
                l.error = "lanes of one warp wait at different warp operations";
                return false;
            }
        }
        int width = f.width;
        if (width <= 0 || width > 32 || (width & (width - 1))) {
            l.error = "a shuffle width that is not a power of two <= 32";
            return false;
        }
        int lane = (int)i, seg = lane & ~(width - 1), src = lane;
        switch (f.kind) {
        case 0: src = seg + (f.arg & (width - 1)); break;
        case 1: src = lane ^ f.arg; if (src >= seg + width) src = lane; break;
        case 2: src = lane + f.arg; if (src >= seg + width) src = lane; break;
        case 3: src = lane - f.arg; if (src < seg) src = lane; break;
        default: break;
        }
        if (f.kind <= 3) {
            if (src < 0 || src >= 32 || !(waiting >> src & 1) || !(f.mask >> src & 1)) {
                l.error = "a shuffle reads a lane that is not taking part (exited, absent or outside the mask)";
                return false;
            }
            f.result = l.fibers[base + src].value;
        } else {
            f.result = ballot;
        }
    }
    for (size_t i = 0; i < lanes; i++) {
        if (waiting >> i & 1) l.fibers[base + i].state = READY;
    }
    return true;
}
}  // namespace

void syncthreads() {
    Fiber& f = launch->fibers[launch->current];
    f.state = AT_BARRIER;
    suspend(f);
}

unsigned long long warp_op(int kind, unsigned mask, unsigned long long value, int arg, int width) {
    Fiber& f = launch->fibers[launch->current];
    f.kind = kind;
    f.mask = mask;
    f.value = value;
    f.arg = arg;
    f.width = width;
    f.state = AT_WARP;
    suspend(f);
    return f.result;
}

bool launch_running() { return launch != nullptr; }
size_t current_thread() { return launch->current; }

[[noreturn]] void kill_thread(const char* why) {
    Fiber& f = launch->fibers[launch->current];
    if (launch->error.empty()) {
        char buf[80];
        std::snprintf(buf, sizeof buf, " (thread %u,%u,%u)", f.ts.tid.x, f.ts.tid.y, f.ts.tid.z);
        launch->error = std::string(why) + buf;
    }
    f.state = DONE;
    rg_emu_swap(&f.sp, launch->sched_sp);
    std::abort();  // never resumed
}

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "cuda-emu: %s\n", what);
    std::abort();
}

std::string run_kernel(const Kernel& k, dim3 grid, dim3 block, unsigned smem_bytes, void** params) {
    size_t nthreads = (size_t)block.x * block.y * block.z;
    Launch l;
    l.k = &k;
    l.params = params;
    l.fibers.resize(nthreads);
    // 64 guard bytes after the dynamic shared memory: memory.cpp reports an
    // access up to 64 bytes past its end as out of bounds, so no other object
    // (a launch's parameter copies, say) may lie there
    std::vector<char> smem(smem_bytes + 64);
    snapshot_allocations();
    Launch* saved_launch = launch;
    ThreadState* saved_cur = cur;
    launch = &l;
    grid_dim = uint3{grid.x, grid.y, grid.z};
    block_dim = uint3{block.x, block.y, block.z};
    dynamic_smem = smem.data();
    dynamic_smem_bytes = smem_bytes;
    for (size_t i = 0; i < nthreads; i++) l.fibers[i].stack = take_stack(i);
    for (unsigned bz = 0; bz < grid.z && l.error.empty(); bz++)
    for (unsigned by = 0; by < grid.y && l.error.empty(); by++)
    for (unsigned bx = 0; bx < grid.x && l.error.empty(); bx++) {
        block_idx = uint3{bx, by, bz};
        // uninitialized shared memory on a GPU: make reliance on zeros visible
        std::memset(smem.data(), 0xA5, smem.size());
        for (size_t i = 0; i < nthreads; i++) {
            Fiber& f = l.fibers[i];
            f.ts.tid = uint3{(unsigned)(i % block.x), (unsigned)(i / block.x % block.y), (unsigned)(i / ((size_t)block.x * block.y))};
            f.state = READY;
            f.sp = fresh_stack_top(f.stack);
        }
        size_t done = 0;
        while (done < nthreads && l.error.empty()) {
            bool ran = false;
            for (size_t n = 0; n < nthreads; n++) {
                size_t i = reverse_order() ? nthreads - 1 - n : n;
                Fiber& f = l.fibers[i];
                if (f.state != READY) continue;
                l.current = i;
                cur = &f.ts;
                rg_emu_swap(&l.sched_sp, f.sp);
                ran = true;
                if (f.state == DONE) done++;
            }
            if (done == nthreads || !l.error.empty()) break;
            bool released = false;
            for (size_t w = 0; w * 32 < nthreads; w++) released |= try_complete_warp(l, w, nthreads);
            if (!released) {
                size_t at_barrier = 0, at_warp = 0;
                for (auto& f : l.fibers) {
                    at_barrier += f.state == AT_BARRIER;
                    at_warp += f.state == AT_WARP;
                }
                if (at_barrier == nthreads - done) {
                    for (auto& f : l.fibers) if (f.state == AT_BARRIER) f.state = READY;
                } else if (!ran && l.error.empty()) {
                    char buf[200];
                    std::snprintf(buf, sizeof buf, "deadlock: %zu threads at __syncthreads, %zu at warp operations, %zu exited",
                                  at_barrier, at_warp, done);
                    l.error = buf;
                }
            }
        }
        if (profiling()) profile_block_end();
        if (!l.error.empty()) {
            char buf[120];
            std::snprintf(buf, sizeof buf, " (block %u,%u,%u)", bx, by, bz);
            l.error += buf;
        }
    }
    if (profiling()) profile_launch_end(k, grid, block);
    launch = saved_launch;
    cur = saved_cur;
    return l.error;
}
}  // namespace rg_emu
