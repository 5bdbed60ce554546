#!/usr/bin/env bash
# CUDA checks for a lent GPU machine (which has no Rust toolchain).
#
# 1. Here (with cargo):      scripts/gpu-check.sh --build
#    builds the CUDA test binaries and the `rgml` CLI in release mode and copies
#    them, stripped, to .dev/bin/ and packs them into .dev/bin.tar.xz (git-ignored;
#    about 5 MB: carry that, as the tree and .dev/bin together exceed what a
#    device call takes).
# 2. On the GPU machine:     bash scripts/gpu-check.sh
#    (with the device tool: command "bash scripts/gpu-check.sh", carry [".dev/bin.tar.xz"];
#    the script unpacks it when .dev/bin is absent)
#    finds libcuda / libnvrtc / libcublas, then runs these stages, each under
#    its own `timeout` and all within GPU_CHECK_BUDGET seconds (default 540;
#    a stage that would not fit is skipped and says so):
#      tests  every test binary with RGML_REQUIRE_CUDA=1 RGML_REQUIRE_NVRTC=1
#             (a skip is a failure there), one line per test
#      eval   rgml eval --backend cuda on tests/fixtures/graph_cases_dev.jsonl
#             (expects "80 passed, 0 failed")
#      llama  rgml run --backend cuda on the tiny F32 llama, logits against
#             llama.cpp's (max abs diff <= 1e-4), all layers on the GPU and
#             split (--n-gpu-layers 1: the rest on the CPU)
#      models rgml bench --model on a synthetic 1B Q4_0 llama written there,
#             all layers on the GPU and split (--n-gpu-layers 8)
#      train  examples/digits.rs on the device (expects test accuracy >= 0.97;
#             emulated: 2 epochs, not judged)
#      bench  rgml bench --backend cuda --json --llama (the llama rows: a synthetic
#             Q4_0 llama's prompt and decode speed, CUDA graphs off and on);
#             on a GPU also the staged dot kernels off (mmvq A/B) and
#             mul_mat_id's decode time against a dense mul_mat (moe)
#      torch  scripts/torch_bench.py, when torch imports and sees the GPU
#    and ends with a table: workload, rgml, torch, ratio, target, pass/fail.
#    GPU_CHECK_STAGES="eval bench" (say) runs only those stages.
#    Full logs go to $OUT/gpu-check/ when $OUT is set (the device tool brings
#    them back), else /tmp/gpu-check/.
# Emulated (no GPU): RGML_CUDA_EMU=DIR, a directory built by
#   tools/cuda-emu/build.sh DIR, runs every stage against the CPU emulator of
#   the driver and cuBLAS (the real NVRTC still compiles every kernel), with
#   small bench sizes and no torch stage. .ci/run does this, so the script and
#   the CUDA executor are exercised on every change; figures from it are not
#   GPU figures.
# Exit status: 0 when every test, eval case, the llama comparison and every
# bench workload passed or ran; a performance target missed is reported in the
# table but does not change it.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=.dev/bin

if [ "${1:-}" = "--build" ]; then
    set -e
    mkdir -p "$BIN"
    copy_tests() {   # the test executables of a `cargo test --no-run --message-format=json`, into $BIN
        python3 -c '
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
    }
    cargo test --release --no-run --message-format=json -p rgml --lib --test cuda_ops --test cuda_quant --test cuda_matmul --test cuda_attention \
        --test cuda_graphs --test train | copy_tests
    cargo test --release --no-run --message-format=json -p rgml-models --test llama_cuda --test split --test arch_cuda | copy_tests
    cargo build --release -p rgml-cli --bin rgml
    cargo build --release -p rgml-models --example synthetic_llama
    cargo build --release -p rgml --example digits
    cp target/release/examples/digits "$BIN/digits"
    cp target/release/rgml "$BIN/rgml"
    cp target/release/examples/synthetic_llama "$BIN/synthetic_llama"
    echo "$BIN/rgml"
    for f in "$BIN"/*; do strip --strip-all "$f" 2>/dev/null || true; done
    ls -l "$BIN"
    tar -C .dev -cJf .dev/bin.tar.xz bin
    ls -l .dev/bin.tar.xz
    exit 0
fi
[ -d "$BIN" ] || [ ! -f .dev/bin.tar.xz ] || tar -C .dev -xJf .dev/bin.tar.xz

LOG=${OUT:+$OUT/gpu-check}
LOG=${LOG:-/tmp/gpu-check}
mkdir -p "$LOG"
T0=$SECONDS
BUDGET=${GPU_CHECK_BUDGET:-540}
STAGES=" ${GPU_CHECK_STAGES:-tests eval llama models train bench torch} "

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
BENCH_ARGS=(--llama)   # and the synthetic llama's decode, CUDA graphs off and on
MODEL_ARGS=(--1b)      # the models stage's synthetic llama, its passes and its split
MODEL_BENCH=(--prompt-tokens 64 --gen-tokens 32 --reps 3)
SPLIT_LAYERS=8
TEST_THREADS=1   # one test at a time on a GPU (one device, timings undisturbed)
if [ -n "${RGML_CUDA_EMU:-}" ]; then
    TEST_THREADS=$(nproc 2>/dev/null || echo 2)   # the emulator runs a launch on one CPU
    echo "  EMULATED: libcuda and libcublas from $RGML_CUDA_EMU (tools/cuda-emu), not a GPU"
    [ -f "$RGML_CUDA_EMU/libcuda.so" ] || { echo "no $RGML_CUDA_EMU/libcuda.so: run tools/cuda-emu/build.sh $RGML_CUDA_EMU" >&2; exit 2; }
    dirs=$(cd "$RGML_CUDA_EMU" && pwd)
    BENCH_ARGS=(--n 512 --mm 64 --matvec 256 --reps 3)
    MODEL_ARGS=(--tiny)   # a 4-layer llama of width 256, a few tokens
    MODEL_SHAPE=tiny
    MODEL_BENCH=(--prompt-tokens 4 --gen-tokens 2 --reps 1)
    SPLIT_LAYERS=2
    STAGES=${STAGES/ torch / }
fi
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

want() { [[ "$STAGES" == *" $1 "* ]]; }

# limit WANTED: WANTED seconds, or what is left of the budget (less 15 s for the
# table); 0 when under 10 s would be left.
limit() {
    local left=$((BUDGET - (SECONDS - T0) - 15))
    [ "$left" -gt "$1" ] && left=$1
    [ "$left" -lt 10 ] && left=0
    echo "$left"
}

# timed LOGFILE SECONDS CMD...: runs CMD under `timeout` (output to LOGFILE),
# prints how it ended; returns its status (124: timed out, 125: no time left).
timed() {
    local log=$1 secs start st
    secs=$(limit "$2")
    shift 2
    if [ "$secs" -eq 0 ]; then
        echo "SKIPPED: the ${BUDGET}s budget is spent" >"$log"
        return 125
    fi
    start=$SECONDS
    timeout -k 10 "$secs" "$@" >"$log" 2>&1
    st=$?
    if [ $st -eq 124 ] || [ $st -eq 137 ]; then
        echo "  TIMED OUT after ${secs}s (log: $log)"
    else
        echo "  exit $st in $((SECONDS - start))s (log: $log)"
    fi
    return $st
}

rc=0
results=()   # one "stage: result" line each, for the summary

pass=0; fail=0
run() {   # run NAME FILTER...
    local name=$1; shift
    [ -x "$BIN/$name" ] || { printf '  %-20s MISSING\n' "$name"; fail=$((fail + 1)); rc=1; return; }
    local log="$LOG/$name.log" secs start end
    secs=$(limit 300)
    if [ "$secs" -eq 0 ]; then printf '  %-20s SKIPPED (budget spent)\n' "$name"; fail=$((fail + 1)); rc=1; return; fi
    start=$(date +%s.%N)
    timeout -k 10 "$secs" "$BIN/$name" "$@" --test-threads="$TEST_THREADS" >"$log" 2>&1
    local st=$?
    end=$(date +%s.%N)
    [ $st -ne 0 ] && rc=1
    while read -r _ t _ r; do
        printf '  %-20s %-52s %s\n' "$name" "$t" "$r"
        if [ "$r" = ok ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
    done < <(grep -E '^test .* \.\.\. ' "$log")
    printf '  %-20s exit %d in %.1fs (log: %s)\n' "$name" "$st" "$(awk -v a="$start" -v b="$end" 'BEGIN{print b-a}')" "$log"
    if [ $st -ne 0 ]; then
        [ $st -eq 124 ] && echo "      TIMED OUT after ${secs}s"
        grep -E -A2 "panicked" "$log" | head -n 30 | sed 's/^/      /'
    fi
}
if want tests; then
    echo "== tests"
    run cuda_ops
    run cuda_quant
    run cuda_matmul
    run cuda_attention
    run cuda_graphs
    run train
    run rgml_lib backend::
    run llama_cuda
    run split
    run arch_cuda
    echo "== tests: $pass passed, $fail failed"
    results+=("tests: $pass passed, $fail failed")
fi

RGML=$BIN/rgml
have_rgml() {
    [ -x "$RGML" ] && return 0
    echo "  FAIL: no $RGML (run 'scripts/gpu-check.sh --build' on the build machine)"
    return 1
}

if want eval; then
    echo "== eval: rgml eval --backend cuda tests/fixtures/graph_cases_dev.jsonl"
    res=FAIL; last=""
    if have_rgml; then
        timed "$LOG/eval.log" 150 "$RGML" eval --backend cuda tests/fixtures/graph_cases_dev.jsonl
        last=$(tail -n 1 "$LOG/eval.log")
        grep -E '^FAIL ' "$LOG/eval.log" | head -n 20 | sed 's/^/    /'
        echo "  $last"
        [ "$last" = "80 passed, 0 failed" ] && res=PASS
    fi
    [ $res = PASS ] || rc=1
    results+=("eval: $res (${last:-no output})")
fi

if want llama; then
    echo "== llama: tiny llama F32 on CUDA vs llama.cpp's logits (all layers, then split: one layer on the GPU)"
    fx=tests/fixtures/tiny_llama
    for ngl in all 1; do
        res=FAIL
        split=(); [ "$ngl" = all ] || split=(--n-gpu-layers "$ngl")
        if have_rgml; then
            tokens=$(tr -d '[] \n' <"$fx/tokens.json")
            rm -f "$LOG/tiny_llama_cuda.f32"
            timed "$LOG/llama_$ngl.log" 90 "$RGML" run "$fx/tiny_llama_f32.gguf" --backend cuda ${split[@]+"${split[@]}"} \
                --tokens "$tokens" --kv-type f32 --logits "$LOG/tiny_llama_cuda.f32"
            # max abs diff of two little-endian f32 files of the same length
            if python3 - "$LOG/tiny_llama_cuda.f32" "$fx/logits_f32_llamacpp.f32" <<'PY'; then res=PASS; fi
import array, sys
try:
    got, want = (array.array("f", open(p, "rb").read()) for p in sys.argv[1:3])
except OSError as e:
    print(f"  no logits: {e}"); sys.exit(1)
if sys.byteorder != "little":
    got.byteswap(); want.byteswap()
if len(got) != len(want):
    print(f"  {len(got)} logits, llama.cpp has {len(want)}"); sys.exit(1)
d = max((abs(a - b) for a, b in zip(got, want)), default=float("nan"))
print(f"  {len(got)} logits, max abs diff {d:.3g} (limit 1e-4)")
sys.exit(0 if d <= 1e-4 else 1)
PY
        fi
        [ $res = PASS ] || { rc=1; tail -n 5 "$LOG/llama_$ngl.log" 2>/dev/null | sed 's/^/    /'; }
        results+=("llama (gpu layers: $ngl): $res")
    done
fi

if want models; then
    # the synthetic 1B-class Q4_0 llama, written here (no file crosses to the
    # device), on the GPU whole and split (half its 16 layers on the CPU)
    echo "== models: a synthetic ${MODEL_SHAPE:-1B} Q4_0 llama, prompt and decode tok/s, GPU-only and split"
    res=FAIL
    if have_rgml && "$BIN/synthetic_llama" "$LOG/synth.gguf" q4_0 ${MODEL_ARGS[@]+"${MODEL_ARGS[@]}"} >"$LOG/synth.log" 2>&1; then
        res=ran
        for split in all "$SPLIT_LAYERS"; do
            ngl=(); [ "$split" = all ] || ngl=(--n-gpu-layers "$split")
            timed "$LOG/model_$split.err" 120 bash -c 'out=$1; shift; "$@" >"$out"' _ "$LOG/model_$split.json" \
                "$RGML" bench --model "$LOG/synth.gguf" --backend cuda ${ngl[@]+"${ngl[@]}"} --json \
                "${MODEL_BENCH[@]}" || res=FAIL
            python3 - "$LOG/model_$split.json" "$split" <<'PY' || tail -n 3 "$LOG/model_$split.err" | sed 's/^/    /'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"  gpu layers {sys.argv[2]:>3}: prompt {r['prompt_tok_s']:.1f} tok/s, decode {r['gen_tok_s']:.1f} tok/s")
PY
        done
    fi
    rm -f "$LOG/synth.gguf"
    [ $res = ran ] || rc=1
    results+=("models: $res")
fi

if want train; then
    # the digits MLP of examples/digits.rs trained on the device (emulated: 2 epochs)
    echo "== train: the digits MLP (examples/digits.rs) on CUDA"
    res=FAIL
    epochs=40; [ -n "${RGML_CUDA_EMU:-}" ] && epochs=2
    if [ -x "$BIN/digits" ] && timed "$LOG/train.log" 240 "$BIN/digits" --cuda --epochs "$epochs"; then
        res=ran
        acc=$(sed -n 's/^test accuracy: //p' "$LOG/train.log")
        if [ -z "${RGML_CUDA_EMU:-}" ]; then
            python3 -c "import sys; sys.exit(0 if float('${acc:-0}') >= 0.97 else 1)" && res=PASS || res=FAIL
        fi
    fi
    grep -E "^(digits on|time per epoch|test accuracy)" "$LOG/train.log" 2>/dev/null | sed 's/^/  /'
    [ $res = FAIL ] && rc=1
    results+=("train: $res (test accuracy ${acc:-?})")
fi

if want bench; then
    echo "== bench: rgml bench --backend cuda --json"
    res=FAIL
    if have_rgml; then
        timed "$LOG/bench_rgml.err" 270 bash -c 'out=$1; shift; "$@" >"$out"' _ "$LOG/bench_rgml.jsonl" \
            "$RGML" bench --backend cuda --json ${BENCH_ARGS[@]+"${BENCH_ARGS[@]}"} && res=ran
        grep -v '^{' "$LOG/bench_rgml.err" | tail -n 8 | sed 's/^/    /'
    fi
    [ $res = ran ] || rc=1
    results+=("bench: $res")
fi

if want bench && [ -z "${RGML_CUDA_EMU:-}" ]; then
    echo "== mmvq A/B: the MV rows again with RGML_CUDA_MMVQ=generic (staged dot kernels off)"
    if have_rgml; then
        timed "$LOG/bench_generic.txt" 150 env RGML_CUDA_MMVQ=generic "$RGML" bench --backend cuda --n 1024 --mm 64 --reps 5
        grep -E '^(name|copy|MV-)' "$LOG/bench_generic.txt" | sed 's/^/    /'
    fi
fi

if want bench && [ -z "${RGML_CUDA_EMU:-}" ]; then
    echo "== moe: mul_mat_id (128 experts, top-8, Q4_0) against a dense mul_mat of the same rows (tests/cuda_ops/moe.rs)"
    if [ -x "$BIN/cuda_ops" ]; then
        export RGML_MOE_TIMING=1
        timed "$LOG/moe_bench.txt" 120 "$BIN/cuda_ops" moe_decode_time_against_dense --nocapture --test-threads=1
        grep -E '^moe:' "$LOG/moe_bench.txt" | sed 's/^/    /'
    fi
fi

if want torch; then
    echo "== torch: scripts/torch_bench.py"
    if timeout 90 python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
        timed "$LOG/bench_torch.err" 200 bash -c 'python3 scripts/torch_bench.py >"$1"' _ "$LOG/bench_torch.jsonl"
        st=$?
        tail -n 3 "$LOG/bench_torch.err" | sed 's/^/    /'
        results+=("torch: exit $st")
    else
        echo "  torch does not import or sees no GPU: no torch column"
        rm -f "$LOG/bench_torch.jsonl"
        results+=("torch: not available")
    fi
fi

if want bench; then
    echo "== table (rgml bench --backend cuda vs PyTorch, same machine, same run)${RGML_CUDA_EMU:+ — EMULATED on the CPU: not GPU figures}"
    python3 scripts/bench_table.py "$LOG/bench_rgml.jsonl" "$LOG/bench_torch.jsonl" | tee "$LOG/table.txt"
fi

echo "== summary"
for r in "${results[@]}"; do echo "  $r"; done
echo "  exit $rc (logs: $LOG)"
exit $rc
