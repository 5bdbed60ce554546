#!/usr/bin/env bash
# CUDA checks for a lent GPU machine (which has no Rust toolchain).
#
# 1. Here (with cargo):      scripts/gpu-check.sh --build
#    builds the CUDA test binaries in release mode and copies them, stripped,
#    to .dev/bin/ (git-ignored; carry it to the GPU machine).
# 2. On the GPU machine:     bash scripts/gpu-check.sh
#    (with the device tool: command "bash scripts/gpu-check.sh", carry [".dev/bin"])
#    finds libcuda / libnvrtc / libcublas, runs every binary with
#    RGML_REQUIRE_CUDA=1 RGML_REQUIRE_NVRTC=1 (a skip is a failure there), and
#    prints one line per test and a summary. Full logs go to $OUT/gpu-check/
#    when $OUT is set (the device tool brings them back), else /tmp/gpu-check/.
# Exit status: 0 when every test passed.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=.dev/bin

if [ "${1:-}" = "--build" ]; then
    set -e
    mkdir -p "$BIN"
    cargo test --release --no-run --message-format=json -p rgml --lib --test cuda_ops --test cuda_kernels_compile \
        | python3 -c '
import json, sys, shutil
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"].get("test"):
        name = m["target"]["name"]
        name = "rgml_lib" if name == "rgml" else name
        shutil.copy(m["executable"], sys.argv[1] + "/" + name)
        print(sys.argv[1] + "/" + name)
' "$BIN"
    for f in "$BIN"/*; do strip --strip-debug "$f" 2>/dev/null || true; done
    ls -l "$BIN"
    du -sh "$BIN"
    exit 0
fi

LOG=${OUT:+$OUT/gpu-check}
LOG=${LOG:-/tmp/gpu-check}
mkdir -p "$LOG"

echo "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "(nvidia-smi not available)"

# Directories holding a library named $1 (a glob such as 'libnvrtc.so*').
find_lib_dirs() {
    local pat=$1 d
    {
        ldconfig -p 2>/dev/null | awk -v p="${pat%\*}" '$1 ~ "^"p {print $NF}' | xargs -r -n1 dirname
        for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/*/lib /usr/local/cuda-*/lib64 \
                 /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/lib/python3*/*-packages/nvidia/*/lib \
                 /usr/lib/python3*/*-packages/nvidia/*/lib /opt/conda/lib/python3*/site-packages/nvidia/*/lib \
                 "$HOME"/.local/lib/python3*/site-packages/nvidia/*/lib; do
            compgen -G "$d/$pat" >/dev/null && echo "$d"
        done
        python3 - "$pat" 2>/dev/null <<'PY'
import glob, os, sys
try:
    import nvidia
    for p in nvidia.__path__:
        for f in glob.glob(os.path.join(p, "*", "lib", sys.argv[1])):
            print(os.path.dirname(f))
except Exception:
    pass
PY
    } | awk '!seen[$0]++'
}

echo "== libraries"
dirs=""
for pat in 'libcuda.so*' 'libnvrtc.so*' 'libnvrtc-builtins.so*' 'libcublas.so*' 'libcublasLt.so*'; do
    found=$(find_lib_dirs "$pat" | head -n 3 | paste -sd: -)
    printf '  %-24s %s\n' "$pat" "${found:-NOT FOUND}"
    [ -n "$found" ] && dirs="${dirs:+$dirs:}$found"
done
export LD_LIBRARY_PATH="${dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export RGML_CUDA_LIB_DIR="$dirs"
export RGML_REQUIRE_CUDA=1 RGML_REQUIRE_NVRTC=1

if ! compgen -G "$BIN/*" >/dev/null; then
    echo "no test binaries in $BIN: run 'scripts/gpu-check.sh --build' on the build machine and carry .dev/bin" >&2
    exit 2
fi

echo "== tests"
pass=0; fail=0; rc=0
run() {   # run NAME FILTER...
    local name=$1; shift
    [ -x "$BIN/$name" ] || { printf '  %-20s MISSING\n' "$name"; fail=$((fail + 1)); rc=1; return; }
    local log="$LOG/$name.log" start end
    start=$(date +%s.%N)
    timeout 300 "$BIN/$name" "$@" --test-threads=1 >"$log" 2>&1
    local st=$?
    end=$(date +%s.%N)
    [ $st -ne 0 ] && rc=1
    while read -r _ t _ r; do
        printf '  %-20s %-52s %s\n' "$name" "$t" "$r"
        if [ "$r" = ok ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
    done < <(grep -E '^test .* \.\.\. ' "$log")
    printf '  %-20s exit %d in %.1fs (log: %s)\n' "$name" "$st" "$(awk -v a="$start" -v b="$end" 'BEGIN{print b-a}')" "$log"
    if [ $st -ne 0 ]; then
        grep -E -A2 "panicked" "$log" | head -n 30 | sed 's/^/      /'
    fi
}
run cuda_kernels_compile
run cuda_ops
run rgml_lib backend::cuda
echo "== summary: $pass passed, $fail failed"
exit $rc
