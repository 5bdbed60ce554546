// rgml CUDA emulator: the device-side environment that lets kernels/*.cu
// compile as C++ and run on the CPU. Included (with -include) before the
// prelude when tools/cuda-emu/build.sh compiles a kernel module; never seen
// by NVRTC. The kernels themselves are unchanged; where they need inline PTX
// the prelude has an `#ifdef RG_EMU` branch.
//
// A thread block runs as one fiber per CUDA thread on the calling OS thread
// (runtime.cpp). `__syncthreads` and the warp operations suspend the fiber
// until every thread they wait for has arrived, so divergent barriers,
// shuffles from lanes that have exited and deadlocks are reported instead of
// silently computing something.
#pragma once
#define RG_EMU 1

#include <cmath>
#include <math.h>  // the C float functions (expf, sqrtf…) in the global namespace, as in CUDA
#include <cstdint>
#include <cstring>
#include <type_traits>

struct uint3 { unsigned int x, y, z; };
struct dim3 { unsigned int x, y, z; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(8) uint2 { unsigned int x, y; };
struct alignas(16) uint4 { unsigned int x, y, z, w; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

namespace rg_emu {
// The running CUDA thread's indices (set by the scheduler before it resumes a fiber).
struct ThreadState {
    uint3 tid;
};
extern thread_local ThreadState* cur;
extern thread_local uint3 block_idx;
extern thread_local uint3 block_dim;
extern thread_local uint3 grid_dim;
extern thread_local char* dynamic_smem;
extern thread_local unsigned dynamic_smem_bytes;

void syncthreads();
// Warp operations: `kind` 0 shfl (arg = source lane), 1 shfl_xor (arg = lane
// mask), 2 shfl_down, 3 shfl_up, 4 syncwarp, 5 ballot (value = predicate).
unsigned long long warp_op(int kind, unsigned mask, unsigned long long value, int arg, int width);
[[noreturn]] void fail(const char* what);
}  // namespace rg_emu

#define threadIdx (rg_emu::cur->tid)
#define blockIdx (rg_emu::block_idx)
#define blockDim (rg_emu::block_dim)
#define gridDim (rg_emu::grid_dim)
#define warpSize 32

#define __global__
// inline: also on member functions; build.sh puts each module in its own
// namespace, so same-named helpers of different modules do not collide.
#define __device__ inline
#define __host__
#define __forceinline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __launch_bounds__(...)
// Shared memory: one copy per OS thread; blocks run one after another there.
#define __shared__ static thread_local
#define __constant__ static const

inline void __syncthreads() { rg_emu::syncthreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { rg_emu::warp_op(4, mask, 0, 0, 32); }

template <class T>
inline T rg_emu_shfl(int kind, unsigned mask, T v, int arg, int width) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a type over 8 bytes");
    unsigned long long bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    bits = rg_emu::warp_op(kind, mask, bits, arg, width);
    T out;
    std::memcpy(&out, &bits, sizeof(T));
    return out;
}
template <class T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) { return rg_emu_shfl(0, mask, v, src, width); }
template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int m, int width = 32) { return rg_emu_shfl(1, mask, v, m, width); }
template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) { return rg_emu_shfl(2, mask, v, (int)d, width); }
template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32) { return rg_emu_shfl(3, mask, v, (int)d, width); }
inline unsigned __ballot_sync(unsigned mask, int pred) { return (unsigned)rg_emu::warp_op(5, mask, pred != 0, 0, 32); }
inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) == (mask & __ballot_sync(mask, 1)); }

// Fibers of one block never run at the same time, so atomics are plain.
template <class T>
inline T atomicExch(T* p, T v) { T old = *p; *p = v; return old; }
template <class T>
inline T atomicAdd(T* p, T v) { T old = *p; *p = old + v; return old; }
template <class T>
inline T atomicMax(T* p, T v) { T old = *p; *p = old > v ? old : v; return old; }
template <class T>
inline T atomicMin(T* p, T v) { T old = *p; *p = old < v ? old : v; return old; }
template <class T>
inline T atomicOr(T* p, T v) { T old = *p; *p = old | v; return old; }
inline int atomicCAS(int* p, int cmp, int v) { int old = *p; if (old == cmp) *p = v; return old; }

// Rounding-mode intrinsics: the build uses -ffp-contract=off, so each is one
// IEEE operation rounded to nearest even, as on the GPU.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __expf(float a) { return std::exp(a); }
inline float __logf(float a) { return std::log(a); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float a) { return 1.0f / std::sqrt(a); }
inline int __float2int_rz(float a) { return (int)a; }
inline int __float2int_rn(float a) { return (int)std::nearbyint(a); }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline int __float_as_int(float f) { int u; std::memcpy(&u, &f, 4); return u; }
inline float __int_as_float(int u) { float f; std::memcpy(&f, &u, 4); return f; }
inline long long __double_as_longlong(double d) { long long u; std::memcpy(&u, &d, 8); return u; }
inline double __longlong_as_double(long long u) { double d; std::memcpy(&d, &u, 8); return d; }
template <class T>
inline T __ldg(const T* p) { return *p; }

// CUDA's integer min/max overloads (float ones come from <cmath>).
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }

// The kernel registry: build.sh appends one RG_EMU_KERNEL(name) per exported
// kernel to each module's translation unit.
namespace rg_emu {
using Invoke = void (*)(void* fn, void** params);
// `param_sizes`: the byte size of each of the kernel's nparams parameters
// (a launch captured into a graph keeps copies of their values).
void register_kernel(const char* module, const char* name, void* fn, Invoke invoke, int nparams, const unsigned* param_sizes);

template <class... A, unsigned long... I>
inline void call_with(void (*f)(A...), void** params, std::integer_sequence<unsigned long, I...>) {
    f(*static_cast<std::remove_reference_t<A>*>(params[I])...);
}
template <class... A>
inline void invoke_as(void* fn, void** params) {
    call_with(reinterpret_cast<void (*)(A...)>(fn), params, std::make_integer_sequence<unsigned long, sizeof...(A)>());
}
template <class... A>
struct Registrar {
    Registrar(const char* module, const char* name, void (*f)(A...)) {
        static_assert(((alignof(std::remove_reference_t<A>) <= 16) && ...), "a kernel parameter aligned over 16 bytes");
        static const unsigned sizes[sizeof...(A) + 1] = {(unsigned)sizeof(std::remove_reference_t<A>)...};  // + 1: no empty array
        register_kernel(module, name, reinterpret_cast<void*>(f), &invoke_as<A...>, (int)sizeof...(A), sizes);
    }
};
template <class... A>
Registrar(const char*, const char*, void (*)(A...)) -> Registrar<A...>;
}  // namespace rg_emu
#define RG_EMU_KERNEL(module, name) static rg_emu::Registrar rg_emu_reg_##name(module, #name, &name);
