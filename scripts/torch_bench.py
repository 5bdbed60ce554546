#!/usr/bin/env python3
"""PyTorch on the GPU, timing the workloads of `rgml bench --backend cuda`.

Prints one JSON object per line with the same names and keys as rgml's
`--json` rows (name, what, median_s, bytes, gbps, memcpy_gbps, ratio, gflops),
so scripts/gpu-check.sh can pair them:

  copy            dst.copy_(src), n x n f32; GB/s of read + write bytes
  W1              x.t().contiguous()
  W2b             a + row (a broadcast row of n)
  W3              a.mul_(b)
  W7              x.half()
  MM-f16-<mm>     torch.matmul of two mm x mm f16 matrices; GFLOP/s
  MM-bf16-<mm>    the same in bf16
  MV-q4_0-<side>  torch has no Q4_0: the reference is the f16 matrix-vector
                  product of the same shape, with as many distinct weight
                  matrices per timed run as rgml uses; GB/s of weights read

Each is timed with CUDA events around one run (a loop of products for MV):
one warm-up run, then the median of --reps runs. memcpy_gbps is the copy
re-timed right after each workload; ratio = gbps / memcpy_gbps.
A workload that fails prints {"name": ..., "error": ...} and the rest go on.
Exit status: 0, or 2 when torch or a CUDA device is missing.
"""

import argparse
import json
import statistics
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=16384, help="side of the f32 matrices (default 16384: 1 GiB)")
    ap.add_argument("--mm", type=int, default=8192, help="M = K = N of the matrix products")
    ap.add_argument("--reps", type=int, default=15, help="timed runs per workload")
    ap.add_argument("--device", type=int, default=0, help="CUDA device ordinal")
    ap.add_argument(
        "--matvecs",
        default="4096:32,16384:4",
        help="side:count of each matvec row (count distinct weight matrices per run), as rgml uses",
    )
    a = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"torch_bench: cannot import torch: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available() or a.device >= torch.cuda.device_count():
        print(f"torch_bench: no CUDA device {a.device} (torch {torch.__version__})", file=sys.stderr)
        return 2
    dev = torch.device("cuda", a.device)
    torch.cuda.set_device(dev)
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(dev)}", file=sys.stderr)
    reps = max(1, a.reps)

    def timed(f):
        """Median seconds of one f() after a warm-up, timed with CUDA events."""
        f()
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            f()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        return statistics.median(times)

    n = a.n
    src = torch.rand(n, n, device=dev, dtype=torch.float32)
    dst = torch.empty_like(src)

    def copy_gbps():
        return 2 * src.numel() * 4 / timed(lambda: dst.copy_(src)) / 1e9

    def emit(name, what, t, nbytes, flops=None, base=None):
        base = base if base is not None else copy_gbps()
        gbps = nbytes / t / 1e9
        row = {
            "name": name,
            "what": what,
            "median_s": t,
            "bytes": nbytes,
            "gbps": gbps,
            "memcpy_gbps": base,
            "ratio": gbps / base,
            "gflops": None if flops is None else flops / t / 1e9,
        }
        print(json.dumps(row), flush=True)

    t = timed(lambda: dst.copy_(src))
    emit("copy", f"torch dst.copy_(src) {n}x{n} f32", t, 2 * n * n * 4, base=2 * n * n * 4 / t / 1e9)

    def memory_rows():
        # the seeds' `.to(device)`: 64 MiB from pageable and from pinned host memory
        h = torch.rand(16 << 20, dtype=torch.float32)
        yield "H2D", "torch host.to(device) 64 MiB f32 (pageable)", lambda: h.to(dev), h.numel() * 4
        hp = h.pin_memory()
        yield "H2D-pinned", "torch host.to(device) 64 MiB f32 (pinned)", lambda: hp.to(dev, non_blocking=True), h.numel() * 4
        d = h.to(dev)
        yield "D2H", "torch d.to('cpu') 64 MiB f32 (pageable)", lambda: d.to("cpu"), h.numel() * 4
        yield "D2H-pinned", "torch hp.copy_(d) 64 MiB f32 (pinned)", lambda: hp.copy_(d, non_blocking=True), h.numel() * 4
        x = torch.rand(n, n, device=dev, dtype=torch.float32)
        yield "W1", f"torch x.t().contiguous() {n}x{n} f32", lambda: x.t().contiguous(), 2 * n * n * 4
        row = torch.rand(1, n, device=dev, dtype=torch.float32)
        yield "W2b", f"torch x + row {n}x{n} + broadcast row {n} f32", lambda: x + row, 2 * n * n * 4 + n * 4
        ones = torch.ones(n, n, device=dev, dtype=torch.float32)
        yield "W3", f"torch x.mul_(ones) {n}x{n} f32", lambda: x.mul_(ones), 3 * n * n * 4
        del ones
        yield "W7", f"torch x.half() {n}x{n} f32->f16", lambda: x.half(), n * n * 6

    rows = memory_rows()
    while True:
        try:
            name, what, f, nbytes = next(rows)
        except StopIteration:
            break
        except Exception as e:  # an allocation failure while making the inputs
            print(json.dumps({"name": "memory-bound inputs", "error": str(e)}), flush=True)
            break
        try:
            emit(name, what, timed(f), nbytes)
        except Exception as e:
            print(json.dumps({"name": name, "error": str(e)}), flush=True)

    m = a.mm
    for dt, tn in ((torch.float16, "f16"), (torch.bfloat16, "bf16")):
        name = f"MM-{tn}-{m}"
        try:
            w = torch.rand(m, m, device=dev, dtype=dt) - 0.5
            x = torch.rand(m, m, device=dev, dtype=dt) - 0.5
            t = timed(lambda: torch.matmul(w, x))
            emit(name, f"torch.matmul {tn} {m}x{m} @ {m}x{m}", t, m * m * 2, flops=2 * m * m * m)
            del w, x
        except Exception as e:
            print(json.dumps({"name": name, "error": str(e)}), flush=True)

    for spec in a.matvecs.split(","):
        side, count = (int(v) for v in spec.split(":"))
        name = f"MV-q4_0-{side}"
        try:
            ws = [torch.rand(side, side, device=dev, dtype=torch.float16) - 0.5 for _ in range(count)]
            v = torch.rand(side, device=dev, dtype=torch.float16)

            def mvs():
                for w in ws:
                    torch.mv(w, v)

            what = f"torch reference (no Q4_0 in torch): {count} x f16 matvec {side}x{side} (distinct weights)"
            emit(name, what, timed(mvs), count * side * side * 2, flops=2 * count * side * side)
            del ws
        except Exception as e:
            print(json.dumps({"name": name, "error": str(e)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
