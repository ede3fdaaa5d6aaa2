#!/usr/bin/env bash
# Installs what building needs (scripts/setup.sh without extras), builds the
# `latte` program (target latte_cli) in build/, and generates text with the
# model shipped in models/. Extra arguments go to `latte run` (e.g. -p "..."
# -n 64, or -m FILE for another model); it may be called from any folder, and
# relative paths in the arguments are the caller's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build_release.sh" latte_cli

has_model=0
for a in "$@"; do
  case "$a" in -m | --model | --model=* | -m?*) has_model=1 ;; esac
done
model="$root/models/latte-tiny-mla.gguf"
if [ "$has_model" -eq 0 ] && [ ! -f "$model" ]; then
  if [ $# -gt 0 ]; then
    echo "run.sh: $model is missing: give a model with -m FILE" >&2
    exit 1
  fi
  echo "run.sh: $model is missing; running one MLA layer with random weights instead" >&2
  exec "$root/build/bin/latte" demo
fi
# The shipped model continues text in the King James Bible's English: one
# verse (it stops at the verse's end), sampled with a repetition penalty.
if [ $# -eq 0 ]; then
  set -- -p "And it came to pass" -n 80 --temp 0.6 --top-p 0.9 --repeat-penalty 1.2 --seed 42
fi
if [ "$has_model" -eq 0 ]; then set -- -m "$model" "$@"; fi
exec "$root/build/bin/latte" run "$@"
