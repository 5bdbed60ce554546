#!/usr/bin/env python3
"""The final table of scripts/gpu-check.sh: rgml's CUDA bench rows against
PyTorch's and the performance targets of the CUDA issue.

usage: bench_table.py RGML_JSONL [TORCH_JSONL]

Both files hold one JSON object per line (`rgml bench --backend cuda --json`,
scripts/torch_bench.py); rows are paired by "name". Columns: workload, unit,
rgml, torch, ratio, of (what the ratio is taken against), target, result.

  copy            GB/s read+write; ratio = rgml copy / torch copy (a sanity check)
  W1 W2b W3 W7    GB/s read+write; ratio = rgml / the device copy of rgml's run; target 0.85
  MM-*            TFLOP/s; ratio = rgml / torch.matmul; target 0.90
  MV-q4_0-*       GB/s of weights read; ratio = rgml / the HBM read bound, taken to be
                  the copy's GB/s (read+write bytes per second); target 0.70. The torch
                  column is torch's f16 matvec of the same shape (torch has no Q4_0)
  MQ-q4_0-*       Q4_0 weights against a prompt's 512 rows: dequantized F16 GEMM, -dot: dot kernels (information)
  W6, overhead    microseconds per node / per graph run (information); -graph: with CUDA graphs
  llama-*         synthetic Q4_0 llama: generated tokens/s, with CUDA graphs off and on (information)
Exit status: 0 (the table is information; a missed target is printed as FAIL).
"""

import json
import sys

TARGETS = {"W1": 0.85, "W2b": 0.85, "W3": 0.85, "W7": 0.85}


def load(path):
    rows = {}
    if not path:
        return rows
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        r = json.loads(line)
                    except ValueError:
                        continue
                    if "name" in r:
                        rows[r["name"]] = r
    except OSError:
        pass
    return rows


def num(v, scale=1.0, digits=1):
    return "-" if v is None else f"{v * scale:.{digits}f}"


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    rg = load(argv[1])
    th = load(argv[2] if len(argv) > 2 else None)
    if not rg:
        print(f"  no rgml bench rows in {argv[1]}")
        return 0
    names = [n for n in rg] + [n for n in th if n not in rg]
    head = f"{'workload':<20} {'unit':<8} {'rgml':>9} {'torch':>9} {'ratio':>6}  {'of':<11} {'target':>6}  result"
    print(head)
    print("-" * len(head))
    met = total = 0
    for name in names:
        r, t = rg.get(name, {}), th.get(name, {})
        unit, rv, tv, ratio, of, target, note = "", None, None, None, "", None, ""
        if "error" in r:
            note = "ERROR: " + str(r["error"])[:70]
        elif not r:
            note = "not in rgml's rows"
        if "error" in t:
            note += ("; " if note else "") + "torch error: " + str(t["error"])[:50]
        if name == "copy":
            unit, rv, tv, of = "GB/s", r.get("gbps"), t.get("gbps"), "torch copy"
            if rv and tv:
                ratio = rv / tv
        elif name in TARGETS:
            unit, rv, tv, ratio, of, target = "GB/s", r.get("gbps"), t.get("gbps"), r.get("ratio"), "rgml copy", 0.85
            if t.get("ratio") is not None:
                note = note or f"torch: {t['ratio']:.2f} of its copy"
        elif name.startswith("MM-"):
            unit, of, target = "TFLOP/s", "torch", 0.90
            rv = r.get("gflops") and r["gflops"] / 1e3
            tv = t.get("gflops") and t["gflops"] / 1e3
            if rv and tv:
                ratio = rv / tv
            elif r and not t:
                note = note or "no torch row: ratio n/a"
        elif name.startswith("MQ-"):
            unit, rv = "TFLOP/s", r.get("gflops") and r["gflops"] / 1e3
        elif name.startswith("MV-"):
            unit, rv, tv, ratio, of, target = "GB/s(w)", r.get("gbps"), t.get("gbps"), r.get("ratio"), "HBM=copy", 0.70
            note = note or "torch: f16 matvec (no Q4_0)"
        elif name in ("W6", "W6-graph"):
            unit, rv = "us/node", r.get("us_per_node")
        elif name in ("overhead", "overhead-graph"):
            unit, rv = "us/run", r.get("us_per_node")
        elif name.startswith("llama-"):
            unit, rv = "tok/s gen", r.get("gen_tps")
            note = note or (f"prompt {r['prompt_tps']:.0f} tok/s" if r.get("prompt_tps") else "")
        else:
            unit, rv, tv, ratio = "GB/s", r.get("gbps"), t.get("gbps"), r.get("ratio")
        if target is not None:
            total += 1
            if ratio is None:
                result = "n/a"
            elif ratio >= target:
                result, met = "PASS", met + 1
            else:
                result = "FAIL"
        else:
            result = "info"
        digits = 2 if unit.startswith("us") else 1
        print(
            f"{name:<20} {unit:<8} {num(rv, digits=digits):>9} {num(tv, digits=digits):>9} "
            f"{num(ratio, digits=2):>6}  {of:<11} {num(target, digits=2):>6}  {result}"
            + (f"  ({note})" if note else "")
        )
    print(f"performance targets met: {met} of {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
