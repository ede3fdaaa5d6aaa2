#!/usr/bin/env bash
# The logits' hashes (build/logit_hashes) under every ISA this machine runs,
# one file per ISA in OUT_DIR: run it before a refactor that must change no
# result, again after, and diff the folders (--against does it).
# Usage: scripts/logit_hashes.sh [--build DIR] [--filter SUBSTRING] [--against OLD_DIR] OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/.."

build=build filter="" against="" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --filter) filter=$2; shift 2 ;;
    --against) against=$2; shift 2 ;;
    -*) echo "logit_hashes.sh: unknown option $1" >&2; exit 2 ;;
    *) out=$1; shift ;;
  esac
done
[ -n "$out" ] || { echo "usage: scripts/logit_hashes.sh [--build DIR] [--filter S] [--against OLD_DIR] OUT_DIR" >&2; exit 2; }
[ -x "$build/logit_hashes" ] || { echo "logit_hashes.sh: no $build/logit_hashes (cmake --build $build --target logit_hashes)" >&2; exit 2; }
mkdir -p "$out"
models=$(mktemp -d)
trap 'rm -rf "$models"' EXIT

# The ISAs this CPU runs, worst to best, from the best one the program
# reports ("# kernels: VERSION (ISA)").
best=$("$build/logit_hashes" --dir "$models" --filter ' no case ' | sed -n 's/^# kernels: .*(\(.*\))$/\1/p')
case "$best" in
  avx512) isas="ref avx2 avx512" ;;
  avx2) isas="ref avx2" ;;
  neon) isas="ref asimd neon" ;;
  asimd) isas="ref asimd" ;;
  *) isas="ref" ;;
esac
status=0
for isa in $isas; do
  echo "logit_hashes.sh: $isa" >&2
  if ! LATTE_ISA=$isa "$build/logit_hashes" --dir "$models" --filter "$filter" > "$out/$isa.txt"; then
    echo "logit_hashes.sh: $isa: a run failed (see FAILED in $out/$isa.txt)" >&2
    status=1
  fi
  if [ -n "$against" ]; then
    if diff -u "$against/$isa.txt" "$out/$isa.txt" > "$out/$isa.diff"; then
      echo "logit_hashes.sh: $isa: identical to $against" >&2
      rm -f "$out/$isa.diff"
    else
      echo "logit_hashes.sh: $isa: $(grep -c '^+[^+]' "$out/$isa.diff") lines differ from $against ($out/$isa.diff)" >&2
      status=1
    fi
  fi
done
exit $status
