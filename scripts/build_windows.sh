#!/usr/bin/env bash
# Cross-builds Latte for x86-64 Windows with Debian's mingw-w64
# (g++-mingw-w64-x86-64-posix) into build-windows/: bin/latte.exe, bin/latte.dll
# with its import library liblatte.dll.a, and the test programs. PCRE2 is
# built for mingw from Debian's own source package (apt-get source pcre2;
# cpp-httplib's header for `latte serve` likewise, nlohmann-json the host's)
# into build-windows/deps/, GoogleTest from Debian's /usr/src/googletest
# inside the build; oneDNN is off (LATTE_WITH_ONEDNN=OFF). Nothing is
# committed or installed outside build-windows/.
#   scripts/build_windows.sh [TARGET...]   default: latte_cli latte and the tests
# Environment: LATTE_JOBS (parallel jobs, default all cores), LATTE_WINDOWS_BUILD
# (the build folder, default build-windows).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${LATTE_WINDOWS_BUILD:-build-windows}
JOBS=${LATTE_JOBS:-$(nproc)}
MINGW=x86_64-w64-mingw32

for tool in $MINGW-g++-posix $MINGW-gcc-posix cmake dpkg-source; do
  if ! command -v "$tool" >/dev/null; then
    echo "build_windows: $tool not found: run scripts/setup.sh --windows" >&2
    exit 1
  fi
done
GEN=()
if command -v ninja >/dev/null; then GEN=(-G Ninja); fi
LAUNCH=()
if command -v ccache >/dev/null; then
  LAUNCH=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
mkdir -p "$BUILD"
DEPS=$ROOT/$BUILD/deps

# PCRE2, static, from Debian's source package (the version Linux builds use).
if [ ! -f "$DEPS/lib/libpcre2-8.a" ]; then
  src=$ROOT/$BUILD/deps-src
  rm -rf "$src" && mkdir -p "$src"
  # The version of the installed libpcre2-dev (what the Linux builds use)
  # first, then each version the deb-src entries list (a mirror may lack one).
  versions=$(dpkg-query -W -f='${source:Version}\n' libpcre2-dev 2>/dev/null || true)
  versions+=" $(apt-cache showsrc pcre2 2>/dev/null | sed -n 's/^Version: //p')"
  got=0
  for v in $(echo $versions | tr ' ' '\n' | awk '!seen[$0]++'); do
    echo "== build_windows: PCRE2 from Debian's source package (pcre2 $v)"
    if (cd "$src" && apt-get source -qq "pcre2=$v" >/dev/null 2>>"$src/apt.log"); then got=1; break; fi
  done
  if [ "$got" -eq 0 ]; then
    cat "$src/apt.log" >&2
    echo "build_windows: apt-get source pcre2 failed (no deb-src entry? run scripts/setup.sh --windows)" >&2
    exit 1
  fi
  pcre_dir=$(find "$src" -maxdepth 1 -mindepth 1 -type d -name 'pcre2-*' | head -n1)
  cmake -S "$pcre_dir" -B "$src/build" "${GEN[@]}" "${LAUNCH[@]}" \
    -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/x86_64-w64-mingw32.cmake" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$DEPS" -DBUILD_SHARED_LIBS=OFF -DBUILD_STATIC_LIBS=ON \
    -DPCRE2_BUILD_PCRE2_8=ON -DPCRE2_BUILD_PCRE2_16=OFF -DPCRE2_BUILD_PCRE2_32=OFF -DPCRE2_SUPPORT_JIT=ON \
    -DPCRE2_SUPPORT_UNICODE=ON -DPCRE2_BUILD_PCRE2GREP=OFF -DPCRE2_BUILD_TESTS=OFF >"$src/configure.log" ||
    { cat "$src/configure.log" >&2; exit 1; }
  cmake --build "$src/build" -j "$JOBS" >"$src/build.log" || { tail -n 40 "$src/build.log" >&2; exit 1; }
  cmake --install "$src/build" >/dev/null
fi

# cpp-httplib for `latte serve`: upstream's single header, from Debian's
# source package (the version the Linux builds use); nlohmann-json is
# header-only, the host's.
if [ ! -f "$DEPS/include/httplib.h" ]; then
  src=$ROOT/$BUILD/deps-src-httplib
  rm -rf "$src" && mkdir -p "$src"
  versions=$(dpkg-query -W -f='${source:Version}\n' libcpp-httplib-dev 2>/dev/null || true)
  versions+=" $(apt-cache showsrc cpp-httplib 2>/dev/null | sed -n 's/^Version: //p')"
  got=0
  for v in $(echo $versions | tr ' ' '\n' | awk '!seen[$0]++'); do
    echo "== build_windows: cpp-httplib from Debian's source package (cpp-httplib $v)"
    if (cd "$src" && apt-get source -qq "cpp-httplib=$v" >/dev/null 2>>"$src/apt.log"); then got=1; break; fi
  done
  if [ "$got" -eq 0 ]; then
    cat "$src/apt.log" >&2
    echo "build_windows: apt-get source cpp-httplib failed (no deb-src entry? run scripts/setup.sh --windows)" >&2
    exit 1
  fi
  mkdir -p "$DEPS/include"
  cp "$(find "$src" -maxdepth 2 -name httplib.h | head -n1)" "$DEPS/include/httplib.h"
fi
echo "== build_windows: Latte ($BUILD)"
cmake -S . -B "$BUILD" "${GEN[@]}" "${LAUNCH[@]}" \
  -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/x86_64-w64-mingw32.cmake" -DCMAKE_BUILD_TYPE=Release \
  -DLATTE_WINDOWS_DEPS="$DEPS" -DLATTE_WITH_ONEDNN=OFF -DBUILD_SHARED_LIBS=ON \
  -DLATTE_BUILD_TESTS=ON -DLATTE_BUILD_BENCH=OFF >/dev/null
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(latte latte_cli test_runtime test_kernels c_api_generate c_api_logits cpp_api_generate)
fi
cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}"
echo "build_windows: built ${targets[*]} in $BUILD/ (programs in $BUILD/bin/)"
