#!/usr/bin/env bash
# Installs what is missing and builds the Release configuration in build/:
#   scripts/build_release.sh [TARGET...]   (no target: everything)
# Shared by run.sh, bench.sh and eval_tiny.sh; progress goes to stderr. The
# CLI's target is latte_cli (build/bin/latte); `latte` is the library.
# A build/ configured before (README's Install, scripts/test.sh) is reused
# with its own generator; a new one uses Ninja where it is installed.
# Env: LATTE_JOBS (parallel jobs, default: all cores).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >&2
GEN=()
if command -v ninja >/dev/null && [ ! -f build/CMakeCache.txt ]; then GEN=(-G Ninja); fi
cmake -S . -B build "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build -j "${LATTE_JOBS:-$(nproc)}" "${targets[@]}" >&2
