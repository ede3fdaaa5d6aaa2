#!/usr/bin/env bash
# `latte serve` figures for docs/server.md: starts the server on a free
# loopback port with MODEL and runs scripts/bench_server.js (TTFT and tok/s
# per stream at 1, 4 and 8 streams; a second turn's TTFT with and without
# prefix reuse), then stops it.
#   scripts/bench_server.sh MODEL [--latte PATH] [-- SERVE_ARGS...]
# Without --latte it builds the Release CLI (scripts/build_release.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=$1; shift
latte=""
if [ "${1:-}" = --latte ]; then latte=$2; shift 2; fi
[ "${1:-}" = -- ] && shift
if [ -z "$latte" ]; then
  "$root/scripts/build_release.sh" latte_cli
  latte=$root/build/bin/latte
fi
t=$(mktemp -d)
"$latte" serve -m "$model" --port 0 --port-file "$t/port" --parallel 8 "$@" 2>"$t/log" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null || true; rm -rf "$t"' EXIT
for _ in $(seq 1 1200); do [ -s "$t/port" ] && break; kill -0 $pid || { cat "$t/log"; exit 1; }; sleep 0.5; done
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg): $("$latte" --version)"
node "$root/scripts/bench_server.js" "http://127.0.0.1:$(cat "$t/port")"
