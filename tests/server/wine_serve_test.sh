#!/usr/bin/env bash
# latte.exe serve under wine: one streamed request over loopback (the
# Windows build serves too). scripts/test.sh's Windows stage runs it.
#   tests/server/wine_serve_test.sh LATTE_EXE MODEL
set -euo pipefail
exe=$1 model=$2
t=$(mktemp -d "${TMPDIR:-/tmp}/latte-wine-serve.XXXXXX")
wine "$exe" serve -m "$model" --port 0 --port-file "$(winepath -w "$t/port" 2>/dev/null || echo "$t/port")" \
  --parallel 2 --threads 2 >"$t/log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true; rm -rf "$t"' EXIT
for _ in $(seq 1 600); do
  [ -s "$t/port" ] && break
  kill -0 $pid 2>/dev/null || { cat "$t/log" >&2; echo "FAIL: latte.exe serve exited" >&2; exit 1; }
  sleep 0.2
done
[ -s "$t/port" ] || { cat "$t/log" >&2; echo "FAIL: latte.exe serve did not listen within 120 s" >&2; exit 1; }
port=$(tr -d '\r\n' <"$t/port")
curl -sN --max-time 60 "http://127.0.0.1:$port/v1/chat/completions" -d '{"model":"latte-tiny-mla","stream":true,
  "max_tokens":16,"temperature":0,"messages":[{"role":"user","content":"Who was David?"}]}' >"$t/sse"
if grep -q '"content":"[^"]' "$t/sse" && [ "$(grep '^data: ' "$t/sse" | tail -1 | tr -d '\r')" = "data: [DONE]" ]; then
  echo "ok: latte.exe serve under wine streamed $(grep -c '^data: {' "$t/sse") chunks and [DONE]"
else
  cat "$t/sse" "$t/log" >&2
  echo "FAIL: latte.exe serve under wine: no streamed reply" >&2
  exit 1
fi
