#!/usr/bin/env bash
# Installs what is missing, builds Latte, and generates text with the model
# shipped in models/ (extra arguments go to `latte run`, e.g. -p "..." -n 64).
set -euo pipefail
cd "$(dirname "$0")/.."
# OpenMP threads spin briefly between parallel regions, then sleep: a machine
# busy with other work does not stall every barrier (libgomp reads this at start).
export GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-10000}
scripts/build_release.sh latte

model=models/latte-tiny-mla.gguf
if [ ! -f "$model" ]; then
  echo "run.sh: $model is missing; running one MLA layer with random weights instead" >&2
  exec build/latte demo
fi
if [ $# -eq 0 ]; then
  set -- -p "A fortune for today:" -n 80 --temp 0.7 --seed 42
fi
exec build/latte run -m "$model" "$@"
