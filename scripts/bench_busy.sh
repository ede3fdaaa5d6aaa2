#!/usr/bin/env bash
# Latte's default threads against --threads 1 while other programs keep
# cores busy, the two alternated round by round (in both orders):
#   scripts/bench_busy.sh [-m MODEL] [--busy N] [--rounds R] [--latte PATH]
#                         [--perplexity FILE] [-n TOKENS] [--bench]
# N busy loops (default 1; 0: an idle machine) run during every measurement.
# Each round times `latte run` (decode tok/s of -n tokens, greedy, past EOS)
# and `latte perplexity -f FILE` (seconds), default threads and --threads 1,
# the order swapped every round; with --bench, `latte bench` decode at
# depth 0 instead of run (a large model). Prints every run, then the median
# of each. Without --latte it builds the Release CLI (scripts/build_release.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model="$root/models/latte-tiny-mla.gguf"
ppl_file="$root/models/heldout.txt"
busy=1 rounds=3 latte="" n_gen=200 bench=0
usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case $1 in
    -m) model=$2; shift ;;
    --busy) busy=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --latte) latte=$2; shift ;;
    --perplexity) ppl_file=$2; shift ;;
    -n) n_gen=$2; shift ;;
    --bench) bench=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "bench_busy: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
for v in "$busy" "$rounds" "$n_gen"; do
  [[ $v =~ ^[0-9]+$ ]] || { echo "bench_busy: '$v' is not a count" >&2; exit 2; }
done
[ -f "$model" ] || { echo "bench_busy: no model at $model" >&2; exit 2; }
if [ -z "$latte" ]; then
  "$root/scripts/build_release.sh" latte_cli
  latte="$root/build/bin/latte"
fi

pids=()
stop_busy() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap stop_busy EXIT
for ((i = 0; i < busy; i++)); do
  sh -c 'while :; do :; done' &
  pids+=($!)
done
echo "bench_busy: $busy busy loop(s), $(nproc) CPUs, $rounds rounds, $(basename "$model"), $latte"

# One measurement: prints the figure (tok/s, or seconds for perplexity).
measure() {  # kind threads
  local kind=$1 th=$2 out t0 t1
  case $kind in
    decode)
      if [ "$bench" -eq 1 ]; then
        out=$("$latte" bench -m "$model" --depths 0 -p 0 -n "$n_gen" -r 1 --threads "$th" --json 2>/dev/null)
        sed -n 's/.*"decode_tok_s": \([0-9.]*\).*/\1/p' <<<"$out" | head -1
      else
        out=$("$latte" run -m "$model" -p "And it came to pass" -n "$n_gen" --temp 0 --seed 1 --ignore-eos \
              --threads "$th" 2>&1 >/dev/null)
        sed -n 's/.*generated: [0-9]* tokens, \([0-9.]*\) tok\/s.*/\1/p' <<<"$out" | tail -1
      fi ;;
    perplexity)
      t0=$(date +%s.%N)
      "$latte" perplexity -m "$model" -f "$ppl_file" -c 256 --threads "$th" >/dev/null 2>&1
      t1=$(date +%s.%N)
      awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f\n", b - a }' ;;
  esac
}

declare -A all
kinds=(decode)
[ "$bench" -eq 1 ] || kinds+=(perplexity)
for ((r = 1; r <= rounds; r++)); do
  order=(0 1)
  if [ $((r % 2)) -eq 0 ]; then order=(1 0); fi
  for kind in "${kinds[@]}"; do
    for th in "${order[@]}"; do
      label=$([ "$th" -eq 0 ] && echo default || echo "--threads 1")
      v=$(measure "$kind" "$th")
      [ -n "$v" ] || { echo "bench_busy: $kind with $label gave no figure" >&2; exit 1; }
      echo "round $r: $kind, $label: $v"
      all["$kind/$th"]+="$v "
    done
  done
done
median() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo "medians over $rounds rounds ($busy busy loop(s)):"
for kind in "${kinds[@]}"; do
  unit=$([ "$kind" = decode ] && echo "tok/s" || echo "s")
  printf '  %-10s default %8s %s   --threads 1 %8s %s\n' "$kind" "$(median "${all[$kind/0]}")" "$unit" \
    "$(median "${all[$kind/1]}")" "$unit"
done
