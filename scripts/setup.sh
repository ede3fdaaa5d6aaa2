#!/usr/bin/env bash
# Installs Latte's build and test dependencies from Debian packages.
# Idempotent: installs only what is missing; apt-get as root, sudo otherwise.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build
  libxsimd-dev      # SIMD kernels, one body per Arch
  libdnnl-dev       # oneDNN: baseline in the benchmarks
  ocl-icd-opencl-dev  # dnnl-config.cmake needs OpenCL (Debian builds oneDNN
                      # with its OCL GPU runtime); only recommended by libdnnl-dev
  libomp-dev        # OpenMP (GCC's libgomp is used with g++)
  libgtest-dev      # GoogleTest (also the source for the cross build)
  libbenchmark-dev  # Google Benchmark
  libpcre2-dev      # tokenizer regexes
  libcli11-dev      # command line
  g++-aarch64-linux-gnu qemu-user  # NEON cross build, run under emulation
  clang libclang-rt-14-dev  # libFuzzer (the runtime is only a recommendation of clang)
  python3           # scripts: the GGUF writer check, eval_tiny.sh
  python3-numpy     # the GGUF writer check's tensor part
)

if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then
  echo "setup: this is not a Debian system (no dpkg-query / apt-get): install by hand the" \
       "equivalents of: ${PACKAGES[*]}" >&2
  exit 1
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all dependencies present"
  exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "setup: missing packages: ${missing[*]}; run this script as root, or install sudo," \
         "or as root: apt-get install --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
  SUDO=(sudo)
fi
echo "setup: installing ${missing[*]}"
# Through env: sudo's env_reset would drop a DEBIAN_FRONTEND set in front of it.
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
