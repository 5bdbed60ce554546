#!/usr/bin/env bash
# Tests the emulator's stream capture and graphs (capture_test.cpp) against
# its own libcuda.so and libcublas.so, and the CUDA_EMU_STATS line at exit.
#   tools/cuda-emu/test.sh [OUT_DIR]   (default: a build in a temporary
#   directory; an OUT_DIR is rebuilt when a source is newer than its libraries)
set -euo pipefail
cd "$(dirname "$0")/../.."
EMU=tools/cuda-emu
CXX=${CXX:-c++}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
OUT=${1:-$WORK/emu}
stale=$(find "$EMU" kernels src/backend/cuda/kernels.rs ! -name capture_test.cpp ! -name test.sh ! -name '*.md' ! -name '*.py' \
        -newer "$OUT/libcublas.so" -print -quit 2>/dev/null || echo missing)
if [ ! -f "$OUT/libcuda.so" ] || [ -n "$stale" ]; then
    "$EMU/build.sh" "$OUT" >/dev/null
fi
OUT=$(cd "$OUT" && pwd)
$CXX -std=c++17 -O1 -g -Wall -o "$WORK/capture_test" "$EMU/capture_test.cpp" -L"$OUT" -lcuda -lcublas \
    -Wl,-rpath,"$OUT" -pthread
if ! CUDA_EMU_STATS="$WORK/stats" "$WORK/capture_test" 2>"$WORK/stderr" | tee "$WORK/stdout"; then
    echo "--- stderr:"; tail -20 "$WORK/stderr"
    exit 1
fi
want=$(sed -n 's/^EXPECT_STATS //p' "$WORK/stdout")
got=$(cat "$WORK/stats")
if [ -z "$want" ] || [ "$got" != "$want" ]; then
    echo "FAIL CUDA_EMU_STATS line: got '$got', want '$want'"
    exit 1
fi
echo "PASS CUDA_EMU_STATS: $got"
# a rejected call says why on stderr
grep -q "cuda-emu: cuMemAlloc: not permitted during stream capture" "$WORK/stderr" \
    || { echo "FAIL no cuda-emu message for a rejected call"; cat "$WORK/stderr"; exit 1; }
echo "PASS rejected calls are explained on stderr"
