#!/usr/bin/env bash
# Builds Latte (Release, build/) and runs a benchmark suite, writing Google
# Benchmark JSON to bench-results/<suite>.json (kernels: the console table
# on stdout; model: each run's JSON):
#   scripts/bench.sh kernels   decode attention: ISAs x cache types x shapes
#                              x contexts x threads, oneDNN and scalar baselines
#   scripts/bench.sh model     a DeepSeek-V2-Lite-shaped model (4 layers, random
#                              weights, F16 and a Q8_0 copy): decode tok/s at
#                              depths 0, 4K, 16K, 32K and prefill tok/s of 512
#                              tokens at each depth, int8 and f16 caches, 2
#                              threads, the model read into huge pages
#                              (--no-mmap); then depth 0 alone, 128 steps best
#                              of 5, read and mapped (writes
#                              bench-results/model.json).
#                              Each run also measures the machine's read
#                              bandwidth before and after, over as many bytes
#                              as a decode step reads (read_GBps_*), and
#                              decode's weight stream against it; and decodes
#                              from depth 0 next to every deeper repetition
#                              (decode_depth0_adjacent_tok_s,
#                              decode_pct_of_adjacent_depth0), then alternates
#                              single steps at each depth with steps from
#                              depth 0 (decode_step_ms, decode_depth0_step_ms,
#                              decode_pct_of_interleaved_depth0: medians).
#                              Then the real-size DeepSeek-V2-Lite MoE (27
#                              layers, vocab 102400, random Q4_K weights,
#                              8.8 GiB, kept outside the repository and made
#                              once): prefill and decode at depths 0 and 4K,
#                              int8 cache, mapped.
# Extra arguments: kernels, to bench_mla_attn (e.g. --benchmark_filter=int8);
# model, to every `latte bench` run, so only options the script does not set
# itself (e.g. --prefill-chunk 256); depths and threads come from the env.
# Env: LATTE_BENCH_MIN_TIME (kernels: seconds per entry, default 0.05),
# LATTE_BENCH_DEPTHS and LATTE_BENCH_THREADS (model: default 0,4096,16384,32768
# and 2), LATTE_BENCH_MOE_MODEL (model: where the real-size MoE file is kept,
# made there if missing; default ~/.cache/latte/v2-lite-moe-27l-Q4_K.gguf;
# "none": leave it out), LATTE_BENCH_MOE_DEPTHS (default 0,4096), LATTE_JOBS,
# LATTE_POOL_SPIN_US and LATTE_POOL_ADAPT (the thread pool's polling and
# governor: see below).
set -euo pipefail
cd "$(dirname "$0")/.."
suite=${1:-}
if [ -z "$suite" ]; then
  echo "usage: scripts/bench.sh kernels|model [args...]" >&2
  exit 2
fi
shift
case "$suite" in
  kernels) target=bench_mla_attn ;;
  model) target=latte_cli ;;  # the `latte` program
  *) echo "bench.sh: unknown suite '$suite' (known: kernels, model)" >&2; exit 2 ;;
esac

# Google Benchmark for the kernels' suite (the default setup leaves it out).
if [ "$suite" = kernels ]; then scripts/setup.sh --bench >&2; fi
scripts/build_release.sh "$target"

# Latte's threads are its own (platform/thread_pool.h): they poll ~50 us
# between regions, then sleep, and while decoding a governor picks the
# threads or the caller alone (docs/performance.md, "Threads and other load
# on the cores"). LATTE_POOL_SPIN_US and LATTE_POOL_ADAPT=0 change that for
# measurements; the kernels' oneDNN baselines run on OpenMP (OMP_WAIT_POLICY).
# The variables in effect are recorded in the JSON (kernels: in its context;
# model: of every run).

mkdir -p bench-results
out="bench-results/$suite.json"

if [ "$suite" = model ]; then
  # The model: DeepSeek-V2-Lite's attention shapes (d 2048, 16 heads, no
  # q_lora, d_c 512, d_R 64, nope 128, v 128), 4 layers, dense SwiGLU 1408,
  # vocab 1024, random weights made with Latte's GGUF writer.
  mkdir -p bench-results/models
  for type in F16 Q8_0; do
    f=bench-results/models/v2-lite-4l-$type.gguf
    [ -f "$f" ] || build/bin/latte make-model --preset v2-lite --layers 4 --vocab 1024 --type "$type" -o "$f"
  done
  depths=${LATTE_BENCH_DEPTHS:-0,4096,16384,32768}
  threads=${LATTE_BENCH_THREADS:-2}
  runs=()
  for type in F16 Q8_0; do
    for cache in int8 f16; do
      echo "bench.sh: $type weights, $cache cache, depths $depths, $threads threads" >&2
      runs+=("$(build/bin/latte bench -m bench-results/models/v2-lite-4l-$type.gguf --depths "$depths" \
                 --cache-type "$cache" --threads "$threads" -p 512 -n 32 -r 2 --no-mmap --json "$@")")
    done
  done
  # Decode at depth 0 streams every weight per token and follows the shared
  # machine's memory bandwidth, which moves by tens of percent within a
  # minute: 32 steps are too few to see it at its best, so depth 0 again
  # with 128 steps, best of 5, read into huge pages and mapped (4 KiB pages).
  for type in F16 Q8_0; do
    for load in --no-mmap ""; do
      echo "bench.sh: $type weights ${load:-mapped}, int8 cache, depth 0, 128 steps, $threads threads" >&2
      runs+=("$(build/bin/latte bench -m bench-results/models/v2-lite-4l-$type.gguf --depths 0 \
                 --cache-type int8 --threads "$threads" -p 512 -n 128 -r 5 $load --json "$@")")
    done
  done
  # The real-size V2-Lite MoE (15.7B parameters, 64 routed experts of which
  # 6 run per token, 2 shared): what a user runs, and a file llama.cpp and
  # ik_llama.cpp load too (scripts/compare.sh). 8.8 GiB, so made once and
  # kept outside the repository; mapped (--no-mmap would hold a second copy
  # beside the page cache).
  moe=${LATTE_BENCH_MOE_MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/latte/v2-lite-moe-27l-Q4_K.gguf}
  if [ "$moe" != none ]; then
    if [ ! -f "$moe" ]; then
      mkdir -p "$(dirname "$moe")"
      free_kb=$(df -Pk "$(dirname "$moe")" | awk 'NR == 2 {print $4}')
      if [ "$free_kb" -lt $((10 * 1024 * 1024)) ]; then
        echo "bench.sh: the real-size MoE model needs 9 GiB and $(dirname "$moe") has $((free_kb / 1024)) MiB free;" \
             "set LATTE_BENCH_MOE_MODEL to a path with room, or to none to leave it out" >&2
        exit 1
      fi
      echo "bench.sh: making $moe once (8.8 GiB)" >&2
      build/bin/latte make-model --preset v2-lite-moe --layers 27 --vocab 102400 --type Q4_K -o "$moe"
    fi
    moe_depths=${LATTE_BENCH_MOE_DEPTHS:-0,4096}
    echo "bench.sh: real-size V2-Lite MoE Q4_K, int8 cache, depths $moe_depths, $threads threads" >&2
    runs+=("$(build/bin/latte bench -m "$moe" --depths "$moe_depths" \
               --cache-type int8 --threads "$threads" -p 512 -n 32 -r 2 --json "$@")")
  fi
  { echo '{"suite": "model", "runs": ['; (IFS=,; echo "${runs[*]}"); echo ']}'; } > "$out"
  # Each run's JSON on stdout too.
  for r in "${runs[@]}"; do echo "$r"; done
  echo "bench.sh: wrote $out" >&2
  exit 0
fi
build/"$target" \
  --benchmark_min_time="${LATTE_BENCH_MIN_TIME:-0.05}" \
  --benchmark_out="$out" --benchmark_out_format=json \
  --benchmark_counters_tabular=true "$@"
echo "bench.sh: wrote $out" >&2
