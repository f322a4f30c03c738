#!/usr/bin/env bash
# Runs tests/cuda/cuda_attention_test.cpp on the CPU against an emulation of the flash path (no GPU, no
# driver): the real host code of src/cuda/{api,flash,runtime}.cu and the real kernel bodies of
# src/cuda/flash_kernels.cuh, compiled with g++ (prelude.hpp, emulation.cpp), blocks run one after
# another with one thread each. Needs the CUDA toolkit's headers and a built libspattn.a.
#
#   tests/cuda/emulation/run.sh BUILD_DIR [gtest arguments]     (takes about a minute to build)
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR [gtest arguments]}" && pwd)
shift
cuda=${CUDA_HOME:-/usr/local/cuda}
work="$build/cuda_emulation"
mkdir -p "$work"
flags=(-std=c++17 -O2 -I"$root/tests/cuda/emulation" -I"$root/src" -I"$root/include"
       -I"$root/sparse_formats/include" -I"$root/tests" -I"$cuda/include"
       -include "$root/tests/cuda/emulation/prelude.hpp" -DSPATTN_HAVE_CUDA=1)
sources=("$root/tests/cuda/emulation/emulation.cpp" "$root/src/cuda/api.cu" "$root/src/cuda/flash.cu"
         "$root/src/cuda/runtime.cu" "$root/tests/cuda/cuda_attention_test.cpp"
         "$root/tests/cuda/cuda_half_precision_test.cpp")
objects=()
for source in "${sources[@]}"; do  # one at a time: the build machines are small
  object="$work/$(basename "$source").o"
  g++ "${flags[@]}" -x c++ -c "$source" -o "$object"
  objects+=("$object")
done
g++ -o "$work/cuda_attention_emulated" "${objects[@]}" "$build/src/libspattn.a" \
  "$build/sparse_formats/libsparse_formats.a" -lgtest -lgtest_main -lpthread
SPATTN_CUDA_TEST_ALGORITHMS=flash "$work/cuda_attention_emulated" "$@"
