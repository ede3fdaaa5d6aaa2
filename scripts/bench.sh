#!/usr/bin/env bash
# Builds Latte (Release, build/) and runs a benchmark suite, writing Google
# Benchmark JSON to bench-results/<suite>.json (the console table goes to
# stdout):
#   scripts/bench.sh kernels   decode attention: ISAs x cache types x shapes
#                              x contexts x threads, oneDNN and scalar baselines
# Extra arguments go to the benchmark binary (e.g. --benchmark_filter=int8).
# Env: LATTE_BENCH_MIN_TIME (seconds per entry, default 0.05), LATTE_JOBS,
# OMP_WAIT_POLICY (default passive, see below).
set -euo pipefail
cd "$(dirname "$0")/.."
suite=${1:-}
if [ -z "$suite" ]; then
  echo "usage: scripts/bench.sh kernels [benchmark args...]" >&2
  exit 2
fi
shift
case "$suite" in
  kernels) target=bench_kernels ;;
  *) echo "bench.sh: unknown suite '$suite' (known: kernels)" >&2; exit 2 ;;
esac

scripts/setup.sh >&2
GEN=()
if command -v ninja >/dev/null; then GEN=(-G Ninja); fi
cmake -S . -B build "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "${LATTE_JOBS:-$(nproc)}" --target "$target" >&2

# Idle OpenMP threads sleep instead of spinning (override by setting it): on a
# shared machine a spinning thread takes the core from the one holding work,
# which made 2-thread timings here 3-10x slower than with passive waiting.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

mkdir -p bench-results
out="bench-results/$suite.json"
build/"$target" \
  --benchmark_min_time="${LATTE_BENCH_MIN_TIME:-0.05}" \
  --benchmark_out="$out" --benchmark_out_format=json \
  --benchmark_counters_tabular=true "$@"
echo "bench.sh: wrote $out" >&2
