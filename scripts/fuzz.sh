#!/usr/bin/env bash
# Fuzzes the GGUF reader with libFuzzer for N seconds (default 60):
#   scripts/fuzz.sh [SECONDS]
# Builds fuzz/gguf_fuzz.cpp with clang (-fsanitize=fuzzer,address,undefined)
# from the reader's sources only (no xsimd/OpenMP/oneDNN) in build-fuzz/,
# writes a seed corpus of small valid GGUF files and truncated copies with
# fuzz/make_seeds.cpp, then runs the fuzzer. Any crash, sanitizer report,
# timeout or oversized allocation fails the script; the input that caused it
# is left in build-fuzz/ (crash-*, oom-*, timeout-*).
set -euo pipefail
cd "$(dirname "$0")/.."

SECS=${1:-60}
OUT=build-fuzz
CXX=${LATTE_FUZZ_CXX:-}
if [ -z "$CXX" ]; then
  for c in clang++ clang++-14; do
    if command -v "$c" >/dev/null; then CXX=$c; break; fi
  done
fi
if [ -z "$CXX" ]; then echo "fuzz.sh: clang++ not found (apt-get install clang)" >&2; exit 1; fi
# libFuzzer ships in Debian's libclang-rt-14-dev (only a Recommends of clang).
fuzzer_lib=$("$CXX" -print-file-name="libclang_rt.fuzzer-$(uname -m).a")
if [ ! -f "$fuzzer_lib" ]; then
  echo "fuzz.sh: libFuzzer not found for $CXX (apt-get install libclang-rt-14-dev)" >&2
  exit 1
fi

SRCS=(runtime/gguf/gguf_file.cpp runtime/gguf/gguf_writer.cpp runtime/error.cpp runtime/huge_pages.cpp quant/ggml_types.cpp)
FLAGS=(-std=c++20 -g -O1 -fno-omit-frame-pointer -I. -Wall -Wextra -Wno-unused-parameter)
SAN=(-fsanitize=address,undefined -fno-sanitize-recover=all)

mkdir -p "$OUT"
echo "== fuzz: building with $CXX"
"$CXX" "${FLAGS[@]}" "${SAN[@]}" -fsanitize=fuzzer fuzz/gguf_fuzz.cpp "${SRCS[@]}" -o "$OUT/gguf_fuzz" &
build_fuzz=$!
"$CXX" "${FLAGS[@]}" "${SAN[@]}" fuzz/make_seeds.cpp "${SRCS[@]}" -o "$OUT/make_seeds" &
build_seeds=$!
wait "$build_fuzz"
wait "$build_seeds"

rm -rf "$OUT/seeds"
mkdir -p "$OUT/seeds" "$OUT/corpus"
"$OUT/make_seeds" "$OUT/seeds"

echo "== fuzz: running gguf_fuzz for ${SECS}s"
# New inputs go to corpus/ (kept between runs); seeds/ is read only.
# -malloc_limit_mb: the reader must never allocate more than its input can justify.
set +e
ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
"$OUT/gguf_fuzz" "$OUT/corpus" "$OUT/seeds" \
  -dict=fuzz/gguf.dict -max_total_time="$SECS" -max_len=8192 -timeout=10 \
  -rss_limit_mb=2048 -malloc_limit_mb=256 -print_final_stats=1 \
  -artifact_prefix="$OUT/" >"$OUT/fuzz.log" 2>&1
rc=$?
set -e
grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)" "$OUT/fuzz.log" || true
if [ "$rc" -ne 0 ]; then
  echo "fuzz.sh: gguf_fuzz failed (exit $rc); the last lines of $OUT/fuzz.log:" >&2
  tail -60 "$OUT/fuzz.log" >&2
  exit 1
fi
echo "== fuzz: no crash in ${SECS}s"
