#!/usr/bin/env bash
# Makes Latte's Debian package:
#   scripts/package.sh [--arch amd64|arm64] [--build-dir DIR] [--out DIR]
# amd64 (the default on x86-64): build-package/latte_<version>_amd64.deb;
# arm64: build-package-arm64/latte_<version>_arm64.deb, from the aarch64 cross
# build (g++-aarch64-linux-gnu and Debian's arm64 libraries: setup.sh --cross).
# The package holds the shared library (oneDNN where the build has it),
# headers, latte.pc, the CMake package, the CLI and the shipped model under
# /usr; dpkg-shlibdeps computes its Depends. lintian then checks it, and any
# error fails the script. --build-dir reuses a configured build of the same
# architecture (it is reconfigured with a shared library and prefix /usr;
# scripts/test.sh passes its own builds); the package lands in --out (the
# build folder by default).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
arch=$(dpkg --print-architecture)
build=""
out=""
while [ $# -gt 0 ]; do
  case $1 in
    --arch) arch=$2; shift ;;
    --build-dir) build=$2; shift ;;
    --out) out=$2; shift ;;
    *) echo "package.sh: unknown argument '$1' (expected --arch, --build-dir, --out)" >&2; exit 2 ;;
  esac
  shift
done
native=$(dpkg --print-architecture)
cross=()
case $arch in
  "$native") build=${build:-build-package} ;;
  arm64) build=${build:-build-package-arm64}
         cross=(-DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake") ;;
  *) echo "package.sh: --arch $arch: this machine builds $native and arm64" >&2; exit 2 ;;
esac
out=${out:-$build}

if [ "$arch" = "$native" ]; then scripts/setup.sh --package >&2; else scripts/setup.sh --package --cross >&2; fi
GEN=()
if command -v ninja >/dev/null && [ ! -f "$build/CMakeCache.txt" ]; then GEN=(-G Ninja); fi
extra=()
if [ ! -f "$build/CMakeCache.txt" ]; then
  # A build of its own: nothing but what the package holds.
  extra=(-DLATTE_BUILD_TESTS=OFF -DLATTE_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Release)
fi
cmake -S . -B "$build" "${GEN[@]}" "${cross[@]}" "${extra[@]}" -DBUILD_SHARED_LIBS=ON \
      -DCMAKE_INSTALL_PREFIX=/usr -DLATTE_BUILD_CLI=ON -DLATTE_INSTALL=ON >/dev/null
cmake --build "$build" -j "${LATTE_JOBS:-$(nproc)}" --target latte latte_cli >&2

# dpkg-shlibdeps resolves the libraries of the package's architecture (the
# arm64 ones dpkg installed beside the native ones).
(cd "$build" && env DEB_HOST_ARCH="$arch" DEB_HOST_MULTIARCH="$(dpkg-architecture -qDEB_HOST_MULTIARCH -a"$arch" 2>/dev/null)" \
   cpack -G DEB -B "$root/$build/cpack" >cpack.log 2>&1) || { cat "$build/cpack.log" >&2; exit 1; }
deb=$(ls "$build"/cpack/latte_*_"$arch".deb)
mkdir -p "$out"
if [ "$(dirname "$deb")" != "$out" ]; then mv -f "$deb" "$out/"; deb="$out/$(basename "$deb")"; fi
echo "package.sh: $deb" >&2
dpkg-deb --field "$deb" Package Version Architecture Depends >&2

if command -v lintian >/dev/null; then
  # Errors fail; warnings are printed.
  lintian --tag-display-limit 0 "$deb" >"$build/lintian.log" 2>&1 || true
  cat "$build/lintian.log" >&2
  if grep -q '^E:' "$build/lintian.log"; then
    echo "package.sh: lintian reports errors on $deb" >&2
    exit 1
  fi
else
  echo "package.sh: lintian is not installed (apt-get install lintian): the package was not checked" >&2
fi
echo "$deb"
