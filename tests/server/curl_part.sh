# The raw HTTP side with curl (sourced by server_test.sh): the SSE stream as
# bytes, error objects, limits, the API key, /health, /metrics, /tokenize,
# /detokenize, the page, and a clean SIGTERM while a stream runs.
start_server --api-key k3y --parallel 2 --max-body 65536
auth=(-H "Authorization: Bearer k3y")
id=$(curl -sf "${auth[@]}" "$base/v1/models" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
check "GET /v1/models names the model ('$id')" "[ -n '$id' ]"

# The raw event stream: every event a data: line, then data: [DONE].
curl -sN -D "$t/h" "${auth[@]}" -H 'Content-Type: application/json' "$base/v1/chat/completions" \
  -d "{\"model\":\"$id\",\"stream\":true,\"max_tokens\":12,\"temperature\":0,\"stream_options\":{\"include_usage\":true},\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}]}" >"$t/sse"
check "SSE: Content-Type text/event-stream" "grep -qi '^content-type: text/event-stream' '$t/h'"
check "SSE: events separated by blank lines, each a data: line (or a keep-alive comment)" \
  "[ \$(grep -c '^data: ' '$t/sse') -ge 4 ] && [ \$(grep -vc '^data: \|^\$\|^: keep-alive\$' '$t/sse') -eq 0 ]"
check "SSE: the last event is data: [DONE]" "[ \"\$(grep '^data: ' '$t/sse' | tail -1)\" = 'data: [DONE]' ]"
check "SSE: the first chunk gives the assistant role" "grep -m1 '^data: ' '$t/sse' | grep -q '\"role\":\"assistant\"'"
check "SSE: a chunk with finish_reason" "grep -q '\"finish_reason\":\"\\(stop\\|length\\)\"' '$t/sse'"
check "SSE: the usage chunk before [DONE]" \
  "grep '^data: ' '$t/sse' | tail -2 | head -1 | grep -q '\"choices\":\[\],.*\"completion_tokens\":[1-9]'"
# The streamed text is the non-streamed reply (greedy); JSON read by node.
streamed=$(grep '^data: {' "$t/sse" | node -e '
  let s = "";
  for (const l of require("fs").readFileSync(0, "utf8").split("\n"))
    if (l) { const c = JSON.parse(l.slice(6)).choices[0]; if (c && c.delta.content) s += c.delta.content; }
  process.stdout.write(s);')
whole=$(curl -sf "${auth[@]}" "$base/v1/chat/completions" -d "{\"model\":\"$id\",\"max_tokens\":12,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}]}" |
  node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(0, "utf8")).choices[0].message.content)')
check "SSE: the streamed text equals the whole reply ('$whole')" "[ -n \"\$whole\" ] && [ \"\$streamed\" = \"\$whole\" ]"

# Errors: status and OpenAI's error object.
# code ARGS: the HTTP status of a request with the key, its body in $t/body;
# code0: without the key.
code() { curl -s -o "$t/body" -w '%{http_code}' -H 'Authorization: Bearer k3y' "$@"; }
code0() { curl -s -o "$t/body" -w '%{http_code}' "$@"; }
is_error() { grep -q '"error":{' "$t/body" && grep -q '"message":' "$t/body" && grep -q '"type":' "$t/body"; }
check "no API key: 401 with an error object" "[ \$(code0 '$base/v1/models') = 401 ] && is_error"
check "a wrong API key: 401" "[ \$(code0 -H 'Authorization: Bearer nope' '$base/v1/models') = 401 ]"
check "/health needs no key" "[ \$(code0 '$base/health') = 200 ] && grep -q ok '$t/body'"
check "malformed JSON: 400" "[ \$(code -d '{\"model\":' '$base/v1/chat/completions') = 400 ] && is_error"
check "wrong type (temperature a string): 400 naming it" \
  "[ \$(code -d '{\"model\":\"$id\",\"temperature\":\"hot\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}' '$base/v1/chat/completions') = 400 ] && grep -q '\"param\":\"temperature\"' '$t/body'"
check "out of range (top_p 2): 400" \
  "[ \$(code -d '{\"model\":\"$id\",\"top_p\":2,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}' '$base/v1/chat/completions') = 400 ]"
check "n = 2: 400" \
  "[ \$(code -d '{\"model\":\"$id\",\"n\":2,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}' '$base/v1/chat/completions') = 400 ]"
check "no model named: the served one answers (200)" \
  "[ \$(code -d '{\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}' '$base/v1/chat/completions') = 200 ] && grep -q '\"model\":\"$id\"' '$t/body'"
check "unknown model: 404 model_not_found" \
  "[ \$(code -d '{\"model\":\"gpt-9\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}' '$base/v1/chat/completions') = 404 ] && grep -q model_not_found '$t/body'"
printf '{"model":"%s","messages":[{"role":"user","content":"\xff\xfe"}]}' "$id" >"$t/bad_utf8"
check "invalid UTF-8: 400" "[ \$(code --data-binary @'$t/bad_utf8' '$base/v1/chat/completions') = 400 ] && is_error"
head -c 70000 /dev/zero | tr '\0' 'a' >"$t/big"
check "a body over --max-body: 413 with an error object" "[ \$(code --data-binary @'$t/big' '$base/v1/completions') = 413 ] && is_error"
check "a GBNF grammar: the reply is one of its words" \
  "[ \$(code -d '{\"max_tokens\":20,\"seed\":5,\"grammar\":\"root ::= (\\\"yes\\\" | \\\"no\\\") \\\".\\\"\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}' '$base/v1/chat/completions') = 200 ] && grep -Eq '\"content\":\"(yes|no)\\.\"' '$t/body'"
check "a grammar that does not parse: 400 naming its line and column" \
  "[ \$(code -d '{\"grammar\":\"root ::= (\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}' '$base/v1/chat/completions') = 400 ] && grep -q 'grammar:1:' '$t/body' && grep -q invalid_grammar '$t/body'"
check "grammar and a JSON response_format together: 400" \
  "[ \$(code -d '{\"grammar\":\"root ::= \\\"a\\\"\",\"response_format\":{\"type\":\"json_object\"},\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}' '$base/v1/chat/completions') = 400 ]"
check "response_format text: 200" \
  "[ \$(code -d '{\"model\":\"$id\",\"max_tokens\":2,\"response_format\":{\"type\":\"text\"},\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}' '$base/v1/chat/completions') = 200 ]"
check "an unknown route: 404 with an error object" "[ \$(code '$base/v2/nothing') = 404 ] && is_error"

# /tokenize and /detokenize round trip.
toks=$(curl -sf "${auth[@]}" "$base/tokenize" -d '{"content":"Hello world"}' | sed -n 's/.*"tokens":\(\[[0-9,]*\]\).*/\1/p')
check "/tokenize gives ids ($toks)" "[ -n '$toks' ] && [ '$toks' != '[]' ]"
check "/detokenize gives the text back" "curl -sf -H 'Authorization: Bearer k3y' '$base/detokenize' -d '{\"tokens\":$toks}' | grep -q '\"content\":\"Hello world\"'"
check "/detokenize: an id outside the vocabulary is 400" "[ \$(code -d '{\"tokens\":[99999999]}' '$base/detokenize') = 400 ]"

# /metrics: Prometheus text with the counters the issue names.
curl -sf "${auth[@]}" "$base/metrics" >"$t/metrics"
for m in latte_requests_total latte_generated_tokens_total latte_tokens_per_second latte_queue_length latte_slots_busy; do
  check "/metrics has $m" "grep -q '^$m [0-9]' '$t/metrics'"
done
check "/metrics counted generated tokens" "grep -q '^latte_generated_tokens_total [1-9]' '$t/metrics'"
check "the page at / is HTML with the chat form, without the key" "[ \$(code0 '$base/') = 200 ] && grep -q 'id=\"prompt\"' '$t/body'"

# A client that leaves mid-stream (head reads the first bytes and exits):
# its generation (256 tokens: EOS, 2047 in the shipped model, banned) stops
# and its slot is free again.
curl -sN -H 'Authorization: Bearer k3y' "$base/v1/completions" \
  -d "{\"model\":\"$id\",\"prompt\":\"Once\",\"max_tokens\":256,\"stream\":true,\"logit_bias\":{\"2047\":-100}}" | head -c 100 >/dev/null || true
busy=1
for _ in $(seq 1 50); do
  busy=$(curl -sf -H 'Authorization: Bearer k3y' "$base/metrics" | sed -n 's/^latte_slots_busy \([0-9]*\).*/\1/p')
  [ "$busy" = 0 ] && break
  sleep 0.1
done
check "a client gone mid-stream: its slot is free again (slots busy $busy)" "[ '$busy' = 0 ]"
check "a client gone mid-stream: its generation was cancelled, not finished" \
  "curl -sf -H 'Authorization: Bearer k3y' '$base/metrics' | grep -q '^latte_cancelled_total 1'"

# SIGTERM while a stream runs: the server stops cleanly, the stream ends.
curl -sN "${auth[@]}" "$base/v1/completions" -d "{\"model\":\"$id\",\"prompt\":\"Once\",\"max_tokens\":256,\"stream\":true,\"logit_bias\":{\"2047\":-100}}" | (head -c 100; sleep 2; cat) >"$t/cut" &
cpid=$!
sleep 0.5
stop_server
wait "$cpid" || true
check "the stream was open when SIGTERM came" "grep -q '^data: {' '$t/cut'"
