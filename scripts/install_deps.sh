#!/usr/bin/env bash
# Installs the Debian packages spattn builds with (Debian 12). Run as root (or with sudo).
# The CUDA toolkit is optional and not installed here: the build finds /usr/local/cuda if present.
set -euo pipefail

packages=(
  cmake g++ make          # the build
  libcli11-dev            # the spattn command line
  nlohmann-json3-dev      # JSON output
  libgtest-dev googletest # the test suite
  gnuplot-nox             # spattn run/sweep --plot, spattn patterns --png (optional at build time)
  libopenblas-dev         # spattn_bench: the same-run sgemm roofline (optional at build time)
  libthrust-dev           # Thrust 1.17 for the host build of the device tile lists (tests/unit/thrust)
                          # where the CUDA toolkit's Thrust is absent (optional at build time)
  libtorch-dev python3-torch python3-pytest  # the PyTorch package and its tests (/usr/bin/python3)
  clang libclang-rt-14-dev  # scripts/fuzz.sh: libFuzzer and the sanitizer runtimes for clang
  valgrind                # tests/cache_sim: the ledger against callgrind's cache simulator (optional at build time)
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]} == 0)); then
  echo "install_deps: all packages present"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
echo "install_deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
