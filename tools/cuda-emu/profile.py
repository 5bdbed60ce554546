#!/usr/bin/env python3
"""Summarizes a CUDA_EMU_PROFILE file (tools/cuda-emu/profile.cpp) per kernel.

    python3 tools/cuda-emu/profile.py FILE

Columns: launches; MB requested (bytes the kernel's loads and stores name, a
broadcast read, every lane of a warp at one address, counted once);
bytes per request (of one warp's access, 128 for coalesced 4-byte accesses,
512 for 16-byte ones); coalescing, requested bytes / (32 x sectors fetched per
request), 1.00 when every fetched 32-byte sector is fully used; refetch,
sectors fetched / distinct sectors (how often caches must supply a sector again).
"""
import sys
from collections import defaultdict


def main(path):
    agg = defaultdict(lambda: [0, 0, 0, 0, 0])
    with open(path) as f:
        for line in f:
            name, _grid, _block, b, r, s, u = line.rstrip("\n").split("\t")
            a = agg[name]
            a[0] += 1
            a[1] += int(b)
            a[2] += int(r)
            a[3] += int(s)
            a[4] += int(u)
    print(f"{'kernel':28} {'launches':>8} {'MB':>9} {'B/request':>9} {'coalescing':>10} {'refetch':>8}")
    for name, (n, b, r, s, u) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:28} {n:8} {b / 1e6:9.2f} {b / max(r, 1):9.1f} {b / max(32 * s, 1):10.2f} {s / max(u, 1):8.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
