// rgml CUDA emulator: what the driver (driver.cpp) needs from the runtime.
#pragma once
#include <string>

struct dim3;

namespace rg_emu {
using Invoke = void (*)(void* fn, void** params);
// One kernel compiled for the CPU: its module (kernels/<module>.cu), name and
// an invoker that unpacks cuLaunchKernel's parameter array by its signature.
struct Kernel {
    std::string module, name;
    void* fn;
    Invoke invoke;
    int nparams;
};
const Kernel* find_kernel(const char* name);
// Runs every block of a launch; returns "" or what went wrong.
std::string run_kernel(const Kernel& k, dim3 grid, dim3 block, unsigned smem_bytes, void** params);
}  // namespace rg_emu
