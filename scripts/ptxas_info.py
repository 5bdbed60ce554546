#!/usr/bin/env python3
"""Registers, spills and shared memory of every kernel, as ptxas reports them
for a real architecture (default sm_90), through NVRTC: no GPU needed.

    RGML_NVRTC_LIB_DIR=.../nvidia/cu13/lib python3 scripts/ptxas_info.py [module ...] [--arch sm_90]

Modules are kernels/*.cu stems (default: all); the source is assembled as
src/backend/cuda/kernels.rs does (the prelude, then the HEADERS listed for it).
The NVRTC library directory must also be on LD_LIBRARY_PATH (for
libnvrtc-builtins), as .ci/run sets it.
"""
import ctypes
import glob
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def source(module):
    k = open(os.path.join(ROOT, "src/backend/cuda/kernels.rs")).read()
    parts = [open(os.path.join(ROOT, "kernels/prelude.cuh")).read()]
    for file, mods in re.findall(r'Header \{ file: "([^"]+)".*modules: &\[([^\]]*)\]', k):
        if f'"{module}"' in mods:
            parts.append(open(os.path.join(ROOT, "kernels", file)).read())
    parts.append(open(os.path.join(ROOT, f"kernels/{module}.cu")).read())
    return "\n".join(parts)


def ptxas_log(lib, module, arch):
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), source(module).encode(), f"{module}.cu".encode(), 0, None, None):
        sys.exit(f"nvrtcCreateProgram failed for {module}")
    opts = [f"--gpu-architecture={arch}".encode(), b"--std=c++17", b"-Xptxas", b"-v"]
    rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, buf)
    if rc:
        sys.exit(f"{module}: NVRTC error {rc}\n{buf.value.decode()}")
    return buf.value.decode()


def main():
    args = sys.argv[1:]
    arch = "sm_90"
    if "--arch" in args:
        i = args.index("--arch")
        arch = args[i + 1]
        del args[i : i + 2]
    libdir = os.environ.get("RGML_NVRTC_LIB_DIR", "")
    libs = sorted(glob.glob(os.path.join(libdir, "libnvrtc.so*")))
    if not libs:
        sys.exit("set RGML_NVRTC_LIB_DIR to the directory of libnvrtc.so")
    lib = ctypes.CDLL(libs[0])
    modules = args or sorted(os.path.basename(f)[:-3] for f in glob.glob(os.path.join(ROOT, "kernels/*.cu")))
    print(f"{'kernel':32} {'regs':>5} {'spill B':>8} {'smem B':>7}   ({arch})")
    for m in modules:
        name = None
        for line in ptxas_log(lib, m, arch).splitlines():
            e = re.search(r"Compiling entry function '(\w+)'", line)
            if e:
                name = e.group(1)
            s = re.search(r"(\d+) bytes spill stores", line)
            if s and name:
                spill = int(s.group(1))
            u = re.search(r"Used (\d+) registers", line)
            if u and name:
                smem = re.search(r"(\d+) bytes smem", line)
                print(f"{name:32} {u.group(1):>5} {spill:>8} {smem.group(1) if smem else '0':>7}")
                name = None


if __name__ == "__main__":
    main()
