#!/usr/bin/env bash
# Installs what is missing, builds Latte, and runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >&2
GEN=()
if command -v ninja >/dev/null; then GEN=(-G Ninja); fi
cmake -S . -B build "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target latte >&2
exec build/latte demo "$@"
