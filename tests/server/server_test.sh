#!/usr/bin/env bash
# `latte serve` tests, each on loopback with a free port and a bounded run:
#   tests/server/server_test.sh LATTE MODEL PART [NODE_DIR]
# PART: curl (the raw SSE stream, errors, limits, auth, SIGTERM), queue (503
# beyond the slots and the queue), openai (the
# official npm client), load (200+ requests from 16 clients, disconnects,
# malformed bodies, replies against the same requests alone, memory),
# context (a conversation that outgrows the context), page (the chat page in
# headless Chromium). NODE_DIR: where `openai` (and for the page test
# puppeteer-core) are installed (tests/server/setup_node.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
latte=$1 model=$2 part=$3 node_dir=${4:-}
t=$(mktemp -d "${TMPDIR:-/tmp}/latte-serve-test.XXXXXX")
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -rf "$t"
}
trap cleanup EXIT
fails=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1" >&2; fails=$((fails + 1)); }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

# start_server ARGS...: latte serve on a free port; sets pid, port, base.
start_server() {
  rm -f "$t/port"
  "$latte" serve -m "$model" --port 0 --port-file "$t/port" --threads 2 "$@" >"$t/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do
    [ -s "$t/port" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$t/server.log" >&2; echo "FAIL: the server exited at start" >&2; exit 1; }
    sleep 0.1
  done
  [ -s "$t/port" ] || { echo "FAIL: the server did not listen within 30 s" >&2; exit 1; }
  port=$(cat "$t/port")
  base="http://127.0.0.1:$port"
}
# stop_server: SIGTERM, then it must exit 0 within 10 s.
stop_server() {
  kill -TERM "$pid"
  local rc=0
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then bad "SIGTERM: the server still runs after 10 s"; kill -KILL "$pid"; fi
  wait "$pid" || rc=$?
  check "SIGTERM: the server exits with status 0 (got $rc)" "[ $rc -eq 0 ]"
  pid=""
}
node_test() {  # script args...
  NODE_PATH="$node_dir/node_modules" node "$here/$1" "${@:2}" || bad "node $1"
}

case $part in
  curl) source "$here/curl_part.sh" ;;
  openai)
    start_server --api-key test-key --parallel 2
    node_test openai_test.js "$base" test-key
    stop_server ;;
  load)
    start_server --parallel 4 --queue 64 --cache-type ${LOAD_CACHE:-f32}
    node_test load_test.js "$base" "$pid"
    check "the server still runs after the load" "kill -0 $pid"
    stop_server ;;
  context)
    start_server --parallel 2 --ctx 256
    node_test context_test.js "$base"
    stop_server ;;
  queue)
    # Beyond --parallel 1 and --queue 2: 503 with an error object, the
    # others answered in full. 24 clients at once, 256-token replies.
    start_server --parallel 1 --queue 2
    body='{"model":"latte-tiny-mla","prompt":"Once","max_tokens":256,"logit_bias":{"2047":-100}}'
    for i in $(seq 1 24); do
      curl -s -o "$t/r$i" -w '%{http_code}\n' "$base/v1/completions" -d "$body" >"$t/c$i" &
    done
    wait $(jobs -p | grep -vx "$pid") 2>/dev/null || true
    n200=$(cat "$t"/c* | grep -c '^200$' || true)
    n503=$(cat "$t"/c* | grep -c '^503$' || true)
    check "24 requests at once: $n200 answered, $n503 refused with 503, none else" "[ \$((n200 + n503)) -eq 24 ] && [ $n503 -ge 1 ] && [ $n200 -ge 3 ]"
    check "a 503 carries OpenAI's error object (code server_busy)" "grep -l '\"code\":\"server_busy\"' '$t'/r* >/dev/null"
    check "every 200 is a whole reply of 256 tokens" \
      "[ \$(grep -l '\"completion_tokens\":256' '$t'/r* | wc -l) -eq $n200 ]"
    check "/metrics counted the refusals" "curl -sf '$base/metrics' | grep -q '^latte_requests_rejected_total $n503\$'"
    stop_server ;;
  page)
    command -v chromium >/dev/null || { echo "FAIL: chromium not found (scripts/setup.sh --test installs it)" >&2; exit 1; }
    start_server --parallel 2
    node_test page_test.js "$base"
    stop_server ;;
  *) echo "unknown part '$part'" >&2; exit 2 ;;
esac
if [ "$fails" -ne 0 ]; then echo "--- server log" >&2; tail -30 "$t/server.log" >&2 || true; exit 1; fi
echo "server $part: all passed"
