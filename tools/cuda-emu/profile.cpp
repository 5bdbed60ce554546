// rgml CUDA emulator: memory-access profile of each launch (CUDA_EMU_PROFILE=FILE).
// Accesses to device memory are grouped as the GPU's load/store unit sees
// them: one request per (warp, instruction, n-th execution of it by each
// lane). Per launch it appends one tab-separated line to FILE:
//   kernel grid block bytes requests sectors unique_sectors
// where bytes sums, over requests, the bytes of the distinct addresses a
// request names (a broadcast read counts once), sectors the distinct 32-byte
// sectors a request touches, and unique_sectors counts distinct sectors over
// the whole launch.
// bytes / (32 * sectors) is the coalescing efficiency (1: every fetched
// sector fully used); 32 * unique_sectors is the least DRAM traffic.
// tools/cuda-emu/profile.py summarizes the file per kernel.
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "emu.h"
#include "runtime.h"

namespace rg_emu {
namespace {
struct Key {
    size_t warp;
    uintptr_t pc;
    unsigned k;
    bool operator==(const Key& o) const { return warp == o.warp && pc == o.pc && k == o.k; }
};
struct KeyHash {
    size_t operator()(const Key& x) const { return (x.pc * 0x9E3779B97F4A7C15ull) ^ (x.warp << 20) ^ x.k; }
};
// One request: the sectors it touches and the distinct addresses its lanes name.
struct Request {
    std::vector<uintptr_t> sectors, addrs;
};
struct LaunchStats {
    unsigned long long bytes = 0, requests = 0, sectors = 0;
    std::unordered_set<uintptr_t> unique;
    // the running block: each request; each thread's executions per instruction
    std::unordered_map<Key, Request, KeyHash> groups;
    std::vector<std::unordered_map<uintptr_t, unsigned>> seen;
};
thread_local LaunchStats stats;

FILE* out() {
    static FILE* f = [] {
        const char* p = std::getenv("CUDA_EMU_PROFILE");
        return p && *p ? std::fopen(p, "a") : nullptr;
    }();
    return f;
}
}  // namespace

bool profiling() { return out() != nullptr; }

void profile_access(uintptr_t a, size_t n, uintptr_t pc) {
    size_t t = current_thread();
    if (stats.seen.size() <= t) stats.seen.resize(t + 1);
    unsigned k = stats.seen[t][pc]++;
    auto& g = stats.groups[Key{t / 32, pc, k}];
    for (uintptr_t s = a / 32; s <= (a + n - 1) / 32; s++) {
        bool have = false;
        for (uintptr_t x : g.sectors) have |= x == s;
        if (!have) g.sectors.push_back(s);
        stats.unique.insert(s);
    }
    // lanes naming the same address (a broadcast) count its bytes once
    bool seen = false;
    for (uintptr_t x : g.addrs) seen |= x == a;
    if (!seen) {
        g.addrs.push_back(a);
        stats.bytes += n;
    }
}

void profile_block_end() {
    for (auto& [key, g] : stats.groups) stats.sectors += g.sectors.size();
    stats.requests += stats.groups.size();
    stats.groups.clear();
    for (auto& m : stats.seen) m.clear();
}

void profile_launch_end(const Kernel& k, dim3 grid, dim3 block) {
    static std::mutex mu;
    profile_block_end();
    {
        std::lock_guard<std::mutex> g(mu);
        std::fprintf(out(), "%s\t%u,%u,%u\t%u,%u,%u\t%llu\t%llu\t%llu\t%zu\n", k.name.c_str(), grid.x, grid.y, grid.z,
                     block.x, block.y, block.z, stats.bytes, stats.requests, stats.sectors, stats.unique.size());
        std::fflush(out());
    }
    stats = LaunchStats{};
}
}  // namespace rg_emu
