#!/usr/bin/env bash
# Fuzzes what reads untrusted input (model files, session files, grammars)
# with libFuzzer:
#   scripts/fuzz.sh [GGUF_SECONDS [TOKENIZER_SECONDS]]   (defaults 60 and 30)
#   scripts/fuzz.sh --long   every target for an hour each (two at a time)
#  - gguf_fuzz (fuzz/gguf_fuzz.cpp): the GGUF reader, and the tokenizer of any
#    file that parses and carries one, on a seed corpus of small valid GGUF
#    files and truncated copies written by fuzz/make_seeds.cpp;
#  - tokenizer_fuzz (fuzz/tokenizer_fuzz.cpp): Tokenizer::create and
#    encode/decode over vocabularies and texts the input describes, from the
#    inputs in fuzz/seeds/tokenizer/ (a set-cover merge of earlier runs'
#    corpora: from them a run starts with 1650 edges covered, from nothing
#    with about 100).
#  - grammar_fuzz (fuzz/grammar_fuzz.cpp): GBNF text or a JSON Schema turned
#    into a grammar, then bytes walked through its matcher (20 s by default:
#    LATTE_FUZZ_GRAMMAR_SECONDS);
#  - session_fuzz (fuzz/session_fuzz.cpp): sequences of C API calls on a
#    session (prefill, decode, truncate, reset, save, load) with invalid
#    arguments too, checking latte.h's promises (20 s by default:
#    LATTE_FUZZ_SESSION_SECONDS);
#  - session_file_fuzz (fuzz/session_file_fuzz.cpp): the session-file loader
#    (--long only). These two link the whole runtime: built by CMake with
#    clang (LATTE_FUZZ=ON, ASan+UBSan) in build-fuzz/cmake.
# The first three are built with clang (-fsanitize=fuzzer,address,undefined)
# from the sources they need only (no xsimd/OpenMP/oneDNN; PCRE2 for the
# pre-tokenizer) in build-fuzz/. Any crash, sanitizer report, timeout or
# oversized allocation fails the script; the input that caused it is left in
# build-fuzz/ (crash-*, oom-*, timeout-*).
set -euo pipefail
cd "$(dirname "$0")/.."

LONG=0
if [ "${1:-}" = "--long" ]; then LONG=1; shift; fi
GGUF_SECS=${1:-60}
TOK_SECS=${2:-30}
SESSION_SECS=${LATTE_FUZZ_SESSION_SECONDS:-20}
GRAMMAR_SECS=${LATTE_FUZZ_GRAMMAR_SECONDS:-20}
if [ "$LONG" -eq 1 ]; then GGUF_SECS=3600 TOK_SECS=3600 SESSION_SECS=3600 GRAMMAR_SECS=3600; fi
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

READER=(runtime/gguf/gguf_file.cpp tools/gguf_writer.cpp platform/atomic_file_posix.cpp platform/read_only_file_posix.cpp
        platform/file_map_posix.cpp platform/memory_posix.cpp platform/memory.cpp platform/thread_pool.cpp
        platform/thread_pool_posix.cpp platform/alloc_hook.cpp runtime/error.cpp quant/ggml_types.cpp)
TOKENIZER=(runtime/tokenizer/tokenizer.cpp runtime/tokenizer/pretokenizer.cpp)
# The grammar compiler and its byte matcher; not the token-level parts
# (token_constraint, vocab_index), which need a vocabulary. The pre-tokenizer
# for its UTF-8 encoder (JSON strings' escapes).
GRAMMAR=(runtime/grammar/gbnf.cpp runtime/grammar/grammar.cpp runtime/grammar/json_schema.cpp
         runtime/grammar/json_value.cpp runtime/grammar/parse_automaton.cpp runtime/tokenizer/pretokenizer.cpp)
PCRE2=(-DPCRE2_CODE_UNIT_WIDTH=8 -lpcre2-8)
FLAGS=(-std=c++20 -g -O1 -fno-omit-frame-pointer -pthread -I. -Wall -Wextra -Wno-unused-parameter)
SAN=(-fsanitize=address,undefined -fno-sanitize-recover=all)

mkdir -p "$OUT"
echo "== fuzz: building with $CXX"
pids=()
"$CXX" "${FLAGS[@]}" "${SAN[@]}" -fsanitize=fuzzer fuzz/gguf_fuzz.cpp "${READER[@]}" runtime/model/vocab.cpp "${TOKENIZER[@]}" \
  "${PCRE2[@]}" -o "$OUT/gguf_fuzz" & pids+=($!)
"$CXX" "${FLAGS[@]}" "${SAN[@]}" -fsanitize=fuzzer fuzz/tokenizer_fuzz.cpp runtime/error.cpp "${TOKENIZER[@]}" \
  "${PCRE2[@]}" -o "$OUT/tokenizer_fuzz" & pids+=($!)
"$CXX" "${FLAGS[@]}" "${SAN[@]}" -fsanitize=fuzzer fuzz/grammar_fuzz.cpp runtime/error.cpp "${GRAMMAR[@]}" \
  "${PCRE2[@]}" -o "$OUT/grammar_fuzz" & pids+=($!)
"$CXX" "${FLAGS[@]}" "${SAN[@]}" fuzz/make_seeds.cpp "${READER[@]}" "${TOKENIZER[@]}" "${PCRE2[@]}" -o "$OUT/make_seeds" & pids+=($!)
for p in "${pids[@]}"; do wait "$p"; done
# The targets over the whole runtime: CMake, clang. The scalar kernels and
# Latte's own GEMM only: the targets fuzz the API's and the loader's logic
# (every ISA's kernels are checked against those by the test suites), and
# the build takes half the time.
CC_FUZZ=${CXX/clang++/clang}
cmake -S . -B "$OUT/cmake" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER="$CC_FUZZ" \
  -DCMAKE_CXX_COMPILER="$CXX" -DLATTE_SANITIZE=ON -DLATTE_FUZZ=ON -DLATTE_BUILD_TESTS=ON -DLATTE_BUILD_BENCH=OFF \
  -DBUILD_SHARED_LIBS=OFF -DLATTE_REF_KERNELS_ONLY=ON -DLATTE_WITH_ONEDNN=OFF >/dev/null
cmake --build "$OUT/cmake" --target session_fuzz session_file_fuzz

rm -rf "$OUT/seeds"
mkdir -p "$OUT/seeds" "$OUT/corpus" "$OUT/corpus-tokenizer"
"$OUT/make_seeds" "$OUT/seeds"

# run_fuzzer NAME SECONDS DICT CORPUS... : new inputs go to the first corpus
# folder (kept between runs); the others are read only. Returns libFuzzer's
# exit status; its summary lines go to stdout. DICT "" : none; FUZZ_MAX_LEN
# overrides the longest input (8192).
# -malloc_limit_mb: nothing may allocate more than its input can justify.
run_fuzzer() {
  local name=$1 secs=$2 dict=$3; shift 3
  echo "== fuzz: running $name for ${secs}s"
  local rc=0
  local dict_arg=()
  if [ -n "$dict" ]; then dict_arg=(-dict="$dict"); fi
  ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  "$OUT/$name" "$@" \
    "${dict_arg[@]}" -max_total_time="$secs" -max_len="${FUZZ_MAX_LEN:-8192}" -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=256 -print_final_stats=1 \
    -artifact_prefix="$OUT/" >"$OUT/$name.log" 2>&1 || rc=$?
  grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)" "$OUT/$name.log" || true
  if [ "$rc" -ne 0 ]; then
    echo "fuzz.sh: $name failed (exit $rc); the last lines of $OUT/$name.log:"
    tail -60 "$OUT/$name.log"
  else
    echo "== fuzz: $name: no crash in ${secs}s"
  fi
  return "$rc"
}

# Side by side, one process each (libFuzzer runs one thread): the two-core CI
# machine spends max(60, 30) s here instead of 90 of its 15-minute budget.
rc_gguf=0 rc_tok=0
run_fuzzer gguf_fuzz "$GGUF_SECS" fuzz/gguf.dict "$OUT/corpus" "$OUT/seeds" >"$OUT/gguf_fuzz.summary" 2>&1 &
pid_gguf=$!
run_fuzzer tokenizer_fuzz "$TOK_SECS" fuzz/tokenizer.dict "$OUT/corpus-tokenizer" fuzz/seeds/tokenizer \
  >"$OUT/tokenizer_fuzz.summary" 2>&1 &
pid_tok=$!
wait "$pid_gguf" || rc_gguf=$?
wait "$pid_tok" || rc_tok=$?
cat "$OUT/gguf_fuzz.summary" "$OUT/tokenizer_fuzz.summary"

# Then the sessions' call sequences and the grammars side by side, the same
# way; --long adds the session-file loader after them (an hour each).
# run_fuzzer's binaries are under $OUT: the session targets are linked there.
ln -sf cmake/session_fuzz "$OUT/session_fuzz"
ln -sf cmake/session_file_fuzz "$OUT/session_file_fuzz"
mkdir -p "$OUT/corpus-session" "$OUT/corpus-session-file" "$OUT/seeds-session-file" "$OUT/corpus-grammar"
rc_session=0 rc_grammar=0 rc_file=0
run_fuzzer session_fuzz "$SESSION_SECS" "" "$OUT/corpus-session" >"$OUT/session_fuzz.summary" 2>&1 &
pid_session=$!
run_fuzzer grammar_fuzz "$GRAMMAR_SECS" "" "$OUT/corpus-grammar" fuzz/seeds/grammar \
  >"$OUT/grammar_fuzz.summary" 2>&1 || rc_grammar=$?
wait "$pid_session" || rc_session=$?
cat "$OUT/session_fuzz.summary" "$OUT/grammar_fuzz.summary"
if [ "$LONG" -eq 1 ]; then
  LATTE_SESSION_SEEDS="$OUT/seeds-session-file" FUZZ_MAX_LEN=131072 run_fuzzer session_file_fuzz "$SESSION_SECS" "" \
    "$OUT/corpus-session-file" "$OUT/seeds-session-file" >"$OUT/session_file_fuzz.summary" 2>&1 || rc_file=$?
  cat "$OUT/session_file_fuzz.summary"
fi
if [ "$rc_session" -ne 0 ] || [ "$rc_grammar" -ne 0 ] || [ "$rc_file" -ne 0 ]; then rc_gguf=1; fi

if [ "$rc_gguf" -ne 0 ] || [ "$rc_tok" -ne 0 ]; then
  echo "fuzz.sh: a fuzzer failed (see above)" >&2
  exit 1
fi
