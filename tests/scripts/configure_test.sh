#!/usr/bin/env bash
# The default configuration, configured (not built) in a temporary folder:
#   - with only the build packages (GoogleTest and Google Benchmark hidden
#     from CMake, as if not installed) it configures: a shared liblatte, no
#     tests or benchmarks, and a message for each saying what to install;
#   - -DLATTE_BUILD_TESTS=ON / -DLATTE_BUILD_BENCH=ON then fail naming the
#     package; a value other than AUTO, ON or OFF is refused;
#   - with the packages found (scripts/setup.sh --test), the default has the
#     tests and benchmarks;
#   - without cpp-httplib it configures the CLI without `latte serve`, saying so;
#   - as a subproject (tests/install/subproject), Latte leaves the parent's
#     BUILD_SHARED_LIBS alone and builds a static library unless the parent
#     asks for shared ones.
#   tests/scripts/configure_test.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
t=$(mktemp -d "${TMPDIR:-/tmp}/configure-test.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$t"' EXIT
command -v ninja >/dev/null || { echo "configure_test: needs ninja (scripts/setup.sh)" >&2; exit 2; }
pass=0 fail=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1" >&2; fail=$((fail + 1)); }

# configure NAME ARGS...: configures $root into $t/NAME with Ninja; the exit
# status is the configure's, its output in $t/NAME.log.
configure() {
  local name=$1; shift
  cmake -S "$root" -B "$t/$name" -G Ninja "$@" >"$t/$name.log" 2>&1
}
# (grep reads all of it: with -q, ninja could die of SIGPIPE and pipefail fail the test.)
has_target() { ninja -C "$t/$1" -t targets all 2>/dev/null | grep "^$2:" >/dev/null; }
cached() { sed -n "s/^$2:[A-Z]*=//p" "$t/$1/CMakeCache.txt"; }

# Only the build packages.
if configure bare -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON; then
  ok "configures without GoogleTest and Google Benchmark"
  [ "$(cached bare BUILD_SHARED_LIBS)" = ON ] && has_target bare liblatte.so &&
    ok "the default library is shared (liblatte.so)" || bad "the default library is not shared"
  grep -q "latte: tests not built: GoogleTest not found (the Debian package libgtest-dev: scripts/setup.sh --test" "$t/bare.log" &&
    ok "says the tests are left out and how to get them" || bad "no message about the tests left out"
  grep -q "latte: benchmarks not built: Google Benchmark not found (the Debian package libbenchmark-dev" "$t/bare.log" &&
    ok "says the benchmarks are left out and how to get them" || bad "no message about the benchmarks left out"
  if has_target bare test_runtime || has_target bare bench_matvec; then bad "test or benchmark targets defined without their packages"
  else ok "no test or benchmark targets"; fi
  has_target bare bin/latte && ok "the CLI is there" || bad "no CLI target (bin/latte)"
else
  bad "does not configure without GoogleTest and Google Benchmark:"; tail -n 20 "$t/bare.log" >&2
fi

# Without cpp-httplib: the CLI without `latte serve`, and a message saying so.
if configure no-httplib -DCMAKE_DISABLE_FIND_PACKAGE_CppHttplib=ON -DLATTE_BUILD_TESTS=OFF; then
  grep -q "latte: \`latte serve\` not built: cpp-httplib (libcpp-httplib-dev) or nlohmann-json" "$t/no-httplib.log" &&
    ok "without cpp-httplib: says serve is left out and how to get it" || bad "no message about serve left out"
  if has_target no-httplib bin/latte && ! has_target no-httplib liblatte_server.a; then ok "without cpp-httplib: the CLI, no server"
  else bad "without cpp-httplib: no CLI, or a server target anyway"; fi
else
  bad "does not configure without cpp-httplib:"; tail -n 20 "$t/no-httplib.log" >&2
fi

# Asked for, and missing: a clear error.
if configure tests-on -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DLATTE_BUILD_TESTS=ON; then
  bad "-DLATTE_BUILD_TESTS=ON configured without GoogleTest"
elif grep -q "LATTE_BUILD_TESTS=ON: GoogleTest not found" "$t/tests-on.log"; then
  ok "-DLATTE_BUILD_TESTS=ON without GoogleTest: an error naming it"
else bad "-DLATTE_BUILD_TESTS=ON without GoogleTest failed without naming it"; tail -n 10 "$t/tests-on.log" >&2; fi
if configure bench-on -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON -DLATTE_BUILD_TESTS=OFF -DLATTE_BUILD_BENCH=ON; then
  bad "-DLATTE_BUILD_BENCH=ON configured without Google Benchmark"
elif grep -q "LATTE_BUILD_BENCH=ON: Google Benchmark not found" "$t/bench-on.log"; then
  ok "-DLATTE_BUILD_BENCH=ON without Google Benchmark: an error naming it"
else bad "-DLATTE_BUILD_BENCH=ON without Google Benchmark failed without naming it"; tail -n 10 "$t/bench-on.log" >&2; fi
if configure bad-value -DLATTE_BUILD_TESTS=maybe; then
  bad "-DLATTE_BUILD_TESTS=maybe configured"
elif grep -q "LATTE_BUILD_TESTS='maybe': expected AUTO, ON or OFF" "$t/bad-value.log"; then
  ok "-DLATTE_BUILD_TESTS=maybe: refused, naming the value"
else bad "-DLATTE_BUILD_TESTS=maybe failed without naming the value"; tail -n 10 "$t/bad-value.log" >&2; fi

# The packages found: the default has the tests and benchmarks.
if configure full; then
  has_target full test_runtime && ok "with GoogleTest found, the default builds the tests" ||
    bad "GoogleTest is installed, and the default has no test_runtime"
  if grep -q "latte: without oneDNN" "$t/full.log"; then
    ok "(benchmarks: oneDNN not found, so none expected)"
  else
    has_target full bench_matvec && ok "with Google Benchmark found, the default builds the benchmarks" ||
      bad "Google Benchmark is installed, and the default has no benchmarks"
  fi
else
  bad "the default configuration fails with every package installed:"; tail -n 20 "$t/full.log" >&2
fi

# As a subproject: the parent's BUILD_SHARED_LIBS decides, and stays unset
# when the parent sets none.
sub() {
  local name=$1; shift
  cmake -S "$root/tests/install/subproject" -B "$t/$name" -G Ninja -DLATTE_SOURCE_DIR="$root" "$@" >"$t/$name.log" 2>&1
}
if sub parent-default; then
  if grep -q "^BUILD_SHARED_LIBS:" "$t/parent-default/CMakeCache.txt"; then
    bad "as a subproject Latte put BUILD_SHARED_LIBS in the parent's cache"
  else ok "as a subproject, the parent's BUILD_SHARED_LIBS is left alone"; fi
  has_target parent-default latte/liblatte.a && ok "as a subproject, static by default" ||
    bad "as a subproject, the library is not static by default"
else bad "the subproject does not configure:"; tail -n 20 "$t/parent-default.log" >&2; fi
if sub parent-shared -DBUILD_SHARED_LIBS=ON; then
  has_target parent-shared latte/liblatte.so && ok "as a subproject, shared when the parent asks" ||
    bad "as a subproject, -DBUILD_SHARED_LIBS=ON gave no liblatte.so"
else bad "the subproject does not configure with BUILD_SHARED_LIBS=ON:"; tail -n 20 "$t/parent-shared.log" >&2; fi

echo "configure_test: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
