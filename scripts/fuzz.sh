#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz for a bounded time and fails on any finding.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 60 s, every target)
#
# Builds build-fuzz with clang (-DSPATTN_FUZZ=ON: the library instrumented for coverage, with
# AddressSanitizer and UndefinedBehaviorSanitizer), then runs each <target>_fuzzer from its seed
# corpus (tests/fuzz/corpus/<target>) and the earlier findings (tests/fuzz/regressions/<target>)
# with -rss_limit_mb=1024 -timeout=5. New corpus entries go to build-fuzz/corpus (the repository's
# corpus is not changed). A crash, leak, timeout, out-of-memory or sanitizer report stops the
# target; its input is left as build-fuzz/findings/<target>/crash-* (add it to
# tests/fuzz/regressions/<target>/ with the fix), and the script exits 1 after running the rest.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=(matrix_market npy pattern_spec csr attention); fi

mkdir -p build-fuzz
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DSPATTN_FUZZ=ON -DSPATTN_CUDA=OFF -DSPATTN_TORCH=OFF \
  -DSPATTN_BUILD_CLI=OFF -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g -O1" > build-fuzz/configure.log
cmake --build build-fuzz -j2 --target "${targets[@]/%/_fuzzer}"

failed=()
for target in "${targets[@]}"; do
  corpus="build-fuzz/corpus/$target"
  findings="build-fuzz/findings/$target"
  mkdir -p "$corpus" "$findings"
  seeds=(tests/fuzz/corpus/"$target")
  if [ -d tests/fuzz/regressions/"$target" ]; then seeds+=(tests/fuzz/regressions/"$target"); fi
  echo "== $target: $seconds s"
  if ! ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
      "build-fuzz/tests/fuzz/${target}_fuzzer" "$corpus" "${seeds[@]}" -max_total_time="$seconds" \
      -rss_limit_mb=1024 -timeout=5 -artifact_prefix="$findings/" -print_final_stats=1 2> "build-fuzz/$target.log"; then
    failed+=("$target")
    tail -40 "build-fuzz/$target.log"
  fi
  grep -E "^stat::number_of_executed_units|^Done" "build-fuzz/$target.log" || true
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz findings in: ${failed[*]} (inputs in build-fuzz/findings/)"
  exit 1
fi
echo "fuzz: no finding in ${targets[*]} ($seconds s each)"
