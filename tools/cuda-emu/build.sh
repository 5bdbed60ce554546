#!/usr/bin/env bash
# Builds the CUDA emulator: a libcuda.so and a libcublas.so that run rgml's
# kernels on the CPU (see tools/cuda-emu/README.md).
#   tools/cuda-emu/build.sh [OUT_DIR]      (default target/cuda-emu)
# Then point rgml at it: RGML_CUDA_LIB_DIR=OUT_DIR (NVRTC stays the real one).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-target/cuda-emu}
EMU=tools/cuda-emu
CXX=${CXX:-c++}
FLAGS=(-std=c++17 -g -fPIC -ffp-contract=off -fno-fast-math -Wall -Wno-unknown-pragmas -Wno-unused-function
       -Wno-unused-variable -Wno-unused-but-set-variable -Wno-sign-compare -Wno-maybe-uninitialized -I"$EMU")
# kernels: every load and store calls memory.cpp's checks (-O1: no merged
# loads that the GPU would not make)
KERNEL_FLAGS=(-O1 -fno-tree-sra -fsanitize=kernel-address --param asan-instrumentation-with-call-threshold=0
              --param asan-stack=0 --param asan-globals=0)
mkdir -p "$OUT/obj"
# the headers and the modules they go to, as HEADERS in src/backend/cuda/kernels.rs says:
# one "file module module ..." line per header
HEADERS=$(grep -oE 'Header \{ file: "[a-z_0-9.]+".*modules: &\[[^]]*\]' src/backend/cuda/kernels.rs \
          | sed -E 's/Header \{ file: "([^"]+)".*modules: &\[([^]]*)\]/\1 \2/' | tr -d '",')
[ -n "$HEADERS" ] || { echo "cuda-emu: no HEADERS found in src/backend/cuda/kernels.rs" >&2; exit 1; }
objs=()
for cu in kernels/*.cu; do
    m=$(basename "$cu" .cu)
    src="$OUT/obj/$m.cpp"
    {
        echo "#include \"emu.h\""
        echo "namespace rg_module_$m {"
        echo "#line 1 \"kernels/prelude.cuh\""
        cat kernels/prelude.cuh
        while read -r h mods; do
            if [[ " $mods " == *" $m "* ]]; then
                echo "#line 1 \"kernels/$h\""
                cat "kernels/$h"
            fi
        done <<<"$HEADERS"
        echo "#line 1 \"$cu\""
        cat "$cu"
    } >"$src"
    # every extern "C" kernel (macros expanded) gets a registration line
    names=$($CXX "${FLAGS[@]}" -E -P "$src" | grep -oE 'extern "C" +void +[A-Za-z_][A-Za-z_0-9]* *\(' \
            | sed -E 's/extern "C" +void +([A-Za-z_0-9]+).*/\1/' | sort -u)
    [ -n "$names" ] || { echo "cuda-emu: no kernels found in $cu" >&2; exit 1; }
    { for n in $names; do echo "RG_EMU_KERNEL(\"$m\", $n)"; done; echo "}"; } >>"$src"
    $CXX "${FLAGS[@]}" "${KERNEL_FLAGS[@]}" -c "$src" -o "$OUT/obj/$m.o" &
    objs+=("$OUT/obj/$m.o")
done
for f in runtime memory profile driver capture cublas; do $CXX "${FLAGS[@]}" -O2 -c "$EMU/$f.cpp" -o "$OUT/obj/$f.o" & done
for job in $(jobs -p); do wait "$job"; done
$CXX -shared -o "$OUT/libcuda.so" -Wl,-soname,libcuda.so "$OUT/obj/runtime.o" "$OUT/obj/memory.o" "$OUT/obj/profile.o" "$OUT/obj/driver.o" \
    "$OUT/obj/capture.o" "${objs[@]}"
# libcublas.so issues its work through libcuda.so's streams (stream capture);
# rgml loads libcuda.so from the same directory first, so the loader reuses it
$CXX -shared -o "$OUT/libcublas.so" -Wl,-soname,libcublas.so "$OUT/obj/cublas.o" -L"$OUT" -lcuda -Wl,-rpath,'$ORIGIN'
echo "$OUT/libcuda.so $OUT/libcublas.so"
