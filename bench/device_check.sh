#!/usr/bin/env bash
# One command for a machine with a GPU: build the CUDA backend (or take prebuilt binaries), run its
# tests, and benchmark it against PyTorch's FlexAttention and SDPA (n = 16384, d = 128, bf16,
# sliding window and BigBird), checking spattn's outputs at that size against an fp64 reference beside FlexAttention's; last, with the
# time left, compute-sanitizer's memcheck and racecheck on a few test cases. Designed to finish
# within 8 minutes on an H100/H200 with 16 cores; each step has its own time limit so that a hang
# cannot eat the budget.
#
#   bench/device_check.sh [BUILD_DIR] [OUT_DIR]      (defaults: build-device, $OUT or ./device_check)
#
# OUT_DIR receives two files: spattn_cuda.json (the benchmark's figures) and device_check_logs.tgz
# (every step's log); the masks and tensors the comparison reads stay in a scratch folder.
#
# SPATTN_PREBUILT=DIR: use the binaries in DIR (cuda_tile_math_test, cuda_api_test,
# cuda_attention_test, cuda_half_precision_test, cuda_flash_lists_test, spattn_cuda_bench, built elsewhere for this GPU's architecture against the
# same CUDA version) when they start here; otherwise build here.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-device}
out=${2:-${OUT:-device_check}}
work=$(mktemp -d "${TMPDIR:-/tmp}/spattn_device_check.XXXXXX")  # logs, masks, dumped tensors
logs=$work/logs
mkdir -p "$out" "$logs"
# Keep the logs whatever happens; remove the scratch (gigabytes of tensors).
trap 'tar -czf "$out/device_check_logs.tgz" -C "$work" logs; rm -rf "$work"' EXIT
jobs=$(nproc 2>/dev/null || echo 8)
status=0
budget=${DEVICE_CHECK_SECONDS:-470}  # the whole run stays under 8 minutes
log() { printf '\n==== %s (%s, %d s left)\n' "$1" "$(date +%T)" "$((budget - SECONDS))"; }
# A step's time limit: its own, or what is left of the budget when that is less.
limit() { local left=$((budget - SECONDS)); [ "$left" -lt 5 ] && left=5; [ "$1" -lt "$left" ] && echo "$1" || echo "$left"; }
cuda=${CUDA_HOME:-/usr/local/cuda}
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$cuda/lib64:$cuda/lib

log "setup"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>/dev/null || true
bin="$build/tests" bench_bin="$build/spattn_cuda_bench" tests=1
prebuilt=${SPATTN_PREBUILT:-}
if [ -n "$prebuilt" ] && [ -x "$prebuilt/spattn_cuda_bench" ] \
    && "$prebuilt/cuda_tile_math_test" --gtest_brief=1 > "$logs/prebuilt.log" 2>&1; then
  echo "using the prebuilt binaries in $prebuilt"
  bin=$prebuilt bench_bin=$prebuilt/spattn_cuda_bench
else
  [ -n "$prebuilt" ] && { echo "prebuilt binaries do not run here; building"; tail -5 "$logs/prebuilt.log"; }
  # Only this GPU's architecture (e.g. 90 on an H200): half the nvcc time of the default 80;90.
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
  archs=()
  [[ "$arch" =~ ^[0-9]+$ ]] && archs=(-DCMAKE_CUDA_ARCHITECTURES="$arch")
  # The GPU image may lack GoogleTest or the CLI's packages: without them, build the library alone,
  # skip the tests, and compile the benchmark by hand.
  if ! timeout "$(limit 120)" cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPATTN_CUDA=ON \
      ${archs[@]+"${archs[@]}"} > "$logs/configure.log" 2>&1; then
    echo "full configure failed (see configure.log); retrying without tests and CLI"
    tests=0
    timeout "$(limit 120)" cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPATTN_CUDA=ON \
      ${archs[@]+"${archs[@]}"} -DSPATTN_BUILD_TESTS=OFF -DSPATTN_BUILD_CLI=OFF > "$logs/configure.log" 2>&1 \
      || { tail -30 "$logs/configure.log"; echo "DEVICE CHECK FAILED: configure"; exit 1; }
  fi
  if [ $tests -eq 1 ]; then
    log "build (spattn, the CUDA tests, spattn_cuda_bench)"
    timeout "$(limit 300)" cmake --build "$build" -j "$jobs" --target spattn_cuda_bench cuda_attention_test \
      cuda_half_precision_test cuda_api_test cuda_tile_math_test cuda_flash_lists_test > "$logs/build.log" 2>&1 \
      || { tail -40 "$logs/build.log"; echo "DEVICE CHECK FAILED: build"; exit 1; }
  else
    log "build (spattn; the tests need GoogleTest: NOT RUN)"
    status=1
    timeout "$(limit 300)" cmake --build "$build" -j "$jobs" --target spattn > "$logs/build.log" 2>&1 \
      || { tail -40 "$logs/build.log"; echo "DEVICE CHECK FAILED: build"; exit 1; }
    g++ -std=c++17 -O2 -Iinclude -Isparse_formats/include bench/cuda/cuda_bench.cpp "$build/src/libspattn.a" \
      "$build/sparse_formats/libsparse_formats.a" -L"$cuda/lib64" -lcusparse -lcudart -lpthread \
      -o "$bench_bin" || { echo "DEVICE CHECK FAILED: benchmark build"; exit 1; }
  fi
fi

if [ $tests -eq 1 ]; then
  log "tests"
  for t in cuda_tile_math_test cuda_api_test cuda_attention_test cuda_half_precision_test cuda_flash_lists_test; do
    timeout "$(limit 150)" "$bin/$t" --gtest_brief=1 > "$logs/$t.log" 2>&1
    rc=$?
    tail -4 "$logs/$t.log"
    [ $rc -eq 0 ] || { echo "$t failed (rc $rc): see logs/$t.log"; grep -m 30 -B2 -A8 "Failure" "$logs/$t.log"; status=1; }
  done
  # Skipped device tests pass in ctest's eyes; here they mean the check did not happen.
  if grep -q "SKIPPED \]" "$logs/cuda_attention_test.log" "$logs/cuda_half_precision_test.log" "$logs/cuda_flash_lists_test.log"; then echo "device tests SKIPPED: no usable GPU"; status=1; fi
fi

log "spattn benchmark"
timeout "$(limit 150)" "$bench_bin" --out "$work" --n 16384 --d 128 --heads 16 --dtype bf16 --reps 5 \
  --dump "$work" 2>&1 | tee "$logs/spattn_bench.log" || status=1
cp "$work/spattn_cuda.json" "$out/" 2>/dev/null

log "PyTorch FlexAttention and SDPA on the same masks and inputs; outputs checked against fp64"
PYTHONUNBUFFERED=1 timeout "$(limit 240)" python3 bench/cuda/torch_compare.py "$work" 5 2>&1 \
  | tee "$logs/torch_compare.log" || status=1

# Out-of-bounds accesses (both algorithms) and shared-memory races (our kernels: racecheck on the
# small-cache path spends its time in cuSPARSE's own SDDMM kernel, whose hazards it reports as
# warnings) on small cases. A sanitizer that runs out of its time limit is reported, not failed: it
# slows kernels down 10-100x; any report it printed before counts.
if [ $tests -eq 1 ] && command -v compute-sanitizer > /dev/null; then
  for tool in memcheck racecheck; do
    log "compute-sanitizer --tool $tool"
    algorithms=flash,small_cache
    [ "$tool" = racecheck ] && algorithms=flash
    (  # a subshell: its exit is the step's status
      SPATTN_CUDA_TEST_ALGORITHMS=$algorithms timeout "$(limit 50)" compute-sanitizer --tool "$tool" \
        --error-exitcode 9 --print-limit 20 "$bin/cuda_attention_test" --gtest_brief=1 \
        --gtest_filter='*GroupedQuery*:*EmptyMasks*'
      first=$?
      SPATTN_CUDA_TEST_ALGORITHMS=$algorithms timeout "$(limit 50)" compute-sanitizer --tool "$tool" \
        --error-exitcode 9 --print-limit 20 "$bin/cuda_half_precision_test" --gtest_brief=1 \
        --gtest_filter='*TensorCoreKernelsWithGrouped*:*TensorCoreRunsAreBitIdentical*'
      second=$?
      [ $first -ne 0 ] && exit $first
      exit $second
    ) > "$logs/sanitizer_$tool.log" 2>&1
    rc=$?
    tail -3 "$logs/sanitizer_$tool.log"
    reports=$(grep -cE "Race reported|Invalid|Error:" "$logs/sanitizer_$tool.log")
    if [ "$reports" -gt 0 ]; then
      echo "$tool: FAILED ($reports reports): see logs/sanitizer_$tool.log"; status=1
    elif [ $rc -eq 0 ]; then echo "$tool: clean"
    elif [ $rc -eq 124 ]; then echo "$tool: stopped at its time limit, nothing reported before"
    else echo "$tool: FAILED (rc $rc): see logs/sanitizer_$tool.log"; status=1
    fi
  done
fi

if [ $status -eq 0 ]; then echo "DEVICE CHECK PASSED in ${SECONDS} s"; else echo "DEVICE CHECK FAILED (see above) after ${SECONDS} s"; fi
exit $status
