#!/usr/bin/env bash
# Checks an installed Latte the way an app uses it:
#   scripts/check_install.sh PREFIX [--static] [--deb] [--cross aarch64]
# Builds tests/c_api's programs outside Latte's tree against PREFIX with
# find_package(latte) (tests/install/CMakeLists.txt) and with pkg-config
# (shared: --cflags --libs; --static: pkg-config --static), generate.cpp over
# latte.hpp as C++17 both ways, then runs each: generate must print the tokens
# PREFIX/bin/latte prints for the same chat prompt (greedy and seeded), and
# logits must reproduce llama.cpp's logits for ../shared/testdata/tiny-dense
# within 1e-4 (f32 cache). For a shared library, also that it exports only
# latte_* and carries its SONAME. With --cross aarch64 everything is built
# with the aarch64 cross compiler and run under qemu-aarch64. The license:
# share/doc/latte/LICENSE (MIT) and the copyright file declaring it; --deb
# (an unpacked .deb's /usr): the copyright file alone, as Debian wants it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=""
static=0
deb=0
cross=""
while [ $# -gt 0 ]; do
  case $1 in
    --static) static=1 ;;
    --deb) deb=1 ;;
    --cross) cross=$2; shift ;;
    -*) echo "check_install: unknown option '$1'" >&2; exit 2 ;;
    *) prefix=$(cd "$1" && pwd) ;;
  esac
  shift
done
[ -n "$prefix" ] || { echo "usage: check_install.sh PREFIX [--static] [--deb] [--cross aarch64]" >&2; exit 2; }
testdata="$root/../shared/testdata"

CC=cc CXX=c++ run=() cmake_cross=() pc_env=()
if [ "$cross" = aarch64 ]; then
  CC=aarch64-linux-gnu-gcc CXX=aarch64-linux-gnu-g++
  if [ -e /lib/ld-linux-aarch64.so.1 ]; then run=(qemu-aarch64 -L /); else run=(qemu-aarch64 -L /usr/aarch64-linux-gnu); fi
  # The toolchain's linker does not search Debian's multiarch folder, where
  # liblatte's own dependencies (arm64 packages) are.
  # (The toolchain file roots package searches in the cross sysroot: the
  # package is named by its folder.)
  cmake_cross=(-DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake"
               -DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,/usr/lib/aarch64-linux-gnu)
  pc_env=(PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig)
  link_extra=(-Wl,-rpath-link,/usr/lib/aarch64-linux-gnu)
elif [ -n "$cross" ]; then
  echo "check_install: --cross takes aarch64" >&2; exit 2
else
  link_extra=()
fi

fail() { echo "check_install: $*" >&2; exit 1; }
pcfile=$(find "$prefix" -path '*/pkgconfig/latte.pc' | head -1)
[ -n "$pcfile" ] || fail "no latte.pc under $prefix"
libdir=$(dirname "$(dirname "$pcfile")")
for f in "$prefix/include/latte/latte.h" "$prefix/include/latte/latte.hpp" "$libdir/cmake/latte/latteConfig.cmake" \
         "$libdir/cmake/latte/latteConfigVersion.cmake" "$prefix/bin/latte" "$prefix/share/latte/latte-tiny-mla.gguf"; do
  [ -e "$f" ] || fail "$f is missing"
done
doc=$prefix/share/doc/latte
grep -qx 'License: MIT' "$doc/copyright" 2>/dev/null || fail "$doc/copyright does not declare 'License: MIT'"
if [ "$deb" -eq 1 ]; then
  [ ! -e "$doc/LICENSE" ] || fail "$doc/LICENSE is in the package: its copyright file carries the license"
else
  [ "$(head -1 "$doc/LICENSE" 2>/dev/null)" = "MIT License" ] || fail "$doc/LICENSE is missing or not the MIT license"
fi
if [ "$static" -eq 1 ]; then
  [ -f "$libdir/liblatte.a" ] || fail "$libdir/liblatte.a is missing"
else
  so=$(readlink -f "$libdir/liblatte.so")
  soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ -n "$soname" ] && [ -e "$libdir/$soname" ] || fail "$so: SONAME '$soname' missing or not installed"
  others=$(nm -D --defined-only "$so" | awk '{print $NF}' | grep -v '^latte_' || true)
  [ -z "$others" ] || fail "$so exports more than the C API: $(echo "$others" | head -5 | tr '\n' ' ')"
  echo "check_install: $so ($soname) exports $(nm -D --defined-only "$so" | wc -l) symbols, all latte_*"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "check_install: building the consumers in $work"
cmake -S "$root/tests/install" -B "$work/cmake" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
      ${cross:+-Dlatte_DIR="$libdir/cmake/latte"} \
      -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" "${cmake_cross[@]}" >"$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log"; fail "the find_package(latte) project does not configure"; }
cmake --build "$work/cmake" >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "the find_package(latte) project does not build"; }

pc_flags=(--cflags --libs)
if [ "$static" -eq 1 ]; then pc_flags=(--static --cflags --libs); fi
pc=$(env PKG_CONFIG_PATH="$libdir/pkgconfig" "${pc_env[@]}" pkg-config "${pc_flags[@]}" latte) ||
  fail "pkg-config ${pc_flags[*]} latte failed"
echo "check_install: pkg-config ${pc_flags[*]} latte: $pc"
if [ "$static" -eq 0 ] && [ -z "$cross" ]; then
  # A shared library's users need none of its dependencies' -dev packages:
  # with no other .pc file in sight, latte.pc must still answer.
  env PKG_CONFIG_LIBDIR="$libdir/pkgconfig" PKG_CONFIG_PATH= pkg-config --cflags --libs latte >/dev/null 2>"$work/pc-alone.log" ||
    fail "pkg-config --cflags --libs latte needs other packages' .pc files (a shared install): $(cat "$work/pc-alone.log")"
fi
mkdir -p "$work/pc"
# shellcheck disable=SC2086
"$CC" -std=c11 -O2 "$root/tests/c_api/generate.c" -o "$work/pc/generate" $pc -lm "${link_extra[@]}"
# shellcheck disable=SC2086
"$CC" -std=c11 -O2 "$root/tests/c_api/logits.c" -o "$work/pc/logits" $pc -lm "${link_extra[@]}"
# shellcheck disable=SC2086
"$CXX" -std=c++17 -O2 "$root/tests/c_api/generate.cpp" -o "$work/pc/generate_cpp" $pc "${link_extra[@]}"

# The shared library is found where it was installed (no rpath in the programs).
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export QEMU_LD_PREFIX="${run[2]:-}"
model="$prefix/share/latte/latte-tiny-mla.gguf"
checked=0
for seed in "" 2; do
  sample=(--temp 0)
  if [ -n "$seed" ]; then sample=(--seed "$seed"); fi
  # The installed CLI, with no -m: it must find the shipped model itself.
  want=$("${run[@]}" "$prefix/bin/latte" run --chat -p "Hello there" -n 24 "${sample[@]}" --print-ids 2>/dev/null)
  [ -n "$want" ] || fail "the installed latte generated nothing"
  for prog in "$work/cmake/generate" "$work/cmake/generate_cpp" "$work/pc/generate" "$work/pc/generate_cpp"; do
    got=$("${run[@]}" "$prog" "$model" "Hello there" 24 $seed | head -1)
    [ "$got" = "$want" ] || fail "$prog (seed '${seed:-greedy}') generated $got, latte run $want"
    checked=$((checked + 1))
  done
done
for prog in "$work/cmake/logits" "$work/pc/logits"; do
  "${run[@]}" "$prog" "$testdata/tiny-dense.gguf" "$testdata/tokens.txt" "$testdata/tiny-dense.logits.f32" ||
    fail "$prog does not reproduce llama.cpp's logits"
  checked=$((checked + 1))
done
echo "check_install: $prefix: $checked consumer runs agree (find_package and pkg-config${cross:+, $cross under qemu})"
