#!/usr/bin/env python3
"""`rgml bench`'s workloads against ggml's CPU backend on the same shapes.

Builds scripts/ggml_bench.c against the libggml of a llama-cpp-python install
(ggml 0.25.3 in llama-cpp-python 0.3.36), then alternates rounds of
`ggml_bench N THREADS REPS` and `rgml bench --json --n N --threads THREADS
--reps REPS`, so that a machine whose speed drifts moves both alike. The
ratio is ggml seconds / rgml seconds (above 1: rgml is faster), taken round
by round; the report is the median over the rounds and the spread.

  python3 scripts/compare_ggml.py [--venv /work/venv-noamx] [--rgml target/release/rgml]
      [--n 4096] [--threads 2] [--reps 15] [--rounds 3] [--json] [--types q5_1,q6_K,...]

--types times only the products of those weight types with --act-rows
activation rows (default 1: matrix-vector; `rgml bench --types`, `ggml_bench ...
TYPES ROWS`).

The repacked rows of `rgml bench` (-rp) are compared with ggml's plain ones:
ggml repacks only through llama.cpp's extra buffer types, which its graph API
does not use.
"""

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys


def build(venv, out):
    sites = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages"))
    site = next((s for s in sites if os.path.isdir(os.path.join(s, "llama_cpp", "lib"))), None)
    if site is None:
        sys.exit(f"compare_ggml: no llama_cpp/lib under {venv}; install llama-cpp-python there")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ggml_bench.c")
    lib = os.path.join(site, "llama_cpp", "lib")
    cmd = ["cc", "-O2", "-I" + os.path.join(site, "include"), src, "-L" + lib,
           "-lggml", "-lggml-base", "-lggml-cpu", "-Wl,-rpath," + lib, "-o", out]
    subprocess.run(cmd, check=True)


def json_lines(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return {r["name"]: r for r in map(json.loads, filter(str.strip, out.splitlines()))}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--venv", default="/work/venv-noamx")
    ap.add_argument("--rgml", default="target/release/rgml")
    ap.add_argument("--harness", default="target/ggml_bench", help="where the built harness goes")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="one JSON object per workload")
    ap.add_argument("--types", help="only the products of these weight types (comma-separated)")
    ap.add_argument("--act-rows", type=int, default=1, help="with --types: activation rows")
    a = ap.parse_args()
    build(a.venv, a.harness)
    ratios, times = {}, {}
    for r in range(a.rounds):
        types = [a.types, str(a.act_rows)] if a.types else []
        g = json_lines([a.harness, str(a.n), str(a.threads), str(a.reps)] + types)
        rgml = [a.rgml, "bench", "--json", "--n", str(a.n), "--threads", str(a.threads), "--reps", str(a.reps)]
        m = json_lines(rgml + (["--types", a.types, "--act-rows", str(a.act_rows)] if a.types else []))
        for name, row in m.items():
            base = g.get(name.removesuffix("-rp"))
            if base is None:
                continue
            ratios.setdefault(name, []).append(base["median_s"] / row["median_s"])
            times.setdefault(name, []).append((base["median_s"], row["median_s"]))
        print(f"round {r + 1}: " + " ".join(f"{k} {v[-1]:.2f}" for k, v in ratios.items()), file=sys.stderr)
    print(f"n {a.n}, {a.threads} threads, {a.reps} reps, {a.rounds} rounds; ratio = ggml time / rgml time")
    print(f"{'workload':<18} {'ggml ms':>10} {'rgml ms':>10} {'ratio':>7}  spread")
    for name, rs in ratios.items():
        gm = statistics.median(t[0] for t in times[name]) * 1e3
        rm = statistics.median(t[1] for t in times[name]) * 1e3
        med = statistics.median(rs)
        if a.json:
            print(json.dumps({"name": name, "ggml_ms": gm, "rgml_ms": rm, "ratio": med, "min": min(rs), "max": max(rs)}))
        else:
            print(f"{name:<18} {gm:>10.4f} {rm:>10.4f} {med:>7.2f}  {min(rs):.2f}-{max(rs):.2f}")


if __name__ == "__main__":
    main()
