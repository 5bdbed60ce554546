// rgml CUDA emulator: what the driver (driver.cpp) needs from the runtime.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

struct dim3;

namespace rg_emu {
using Invoke = void (*)(void* fn, void** params);
// One kernel compiled for the CPU: its module (kernels/<module>.cu), name and
// an invoker that unpacks cuLaunchKernel's parameter array by its signature,
// and each parameter's byte size (a captured launch copies the values).
struct Kernel {
    std::string module, name;
    void* fn;
    Invoke invoke;
    std::vector<unsigned> param_sizes;
};
const Kernel* find_kernel(const char* name);
// Runs every block of a launch; returns "" or what went wrong.
std::string run_kernel(const Kernel& k, dim3 grid, dim3 block, unsigned smem_bytes, void** params);
// Whether a kernel is running on this OS thread, and which of its block's
// threads (flat index) is.
bool launch_running();
size_t current_thread();

// The access profile (profile.cpp), when CUDA_EMU_PROFILE names a file.
bool profiling();
void profile_access(uintptr_t a, size_t n, uintptr_t pc);
void profile_block_end();
void profile_launch_end(const Kernel& k, dim3 grid, dim3 block);
// Ends the running CUDA thread and fails its launch with `why` (memory.cpp's checks).
[[noreturn]] void kill_thread(const char* why);

// Device memory (memory.cpp): allocations of `bytes` (0 when more than
// `limit` bytes would be live), freeing, and whether [p, p + n) lies in one
// live allocation.
unsigned long long device_alloc(size_t bytes, size_t limit);
bool device_free(unsigned long long p);
bool in_device(unsigned long long p, size_t n);
size_t device_bytes();
// Takes the list of live allocations the running launch's accesses are checked against.
void snapshot_allocations();
}  // namespace rg_emu
