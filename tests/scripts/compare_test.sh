#!/usr/bin/env bash
# scripts/compare.sh against fake engines: a fake `latte bench`, a fake
# llama.cpp llama-bench (with -d) and a fake ik_llama.cpp llama-bench (with
# -gp, no -d). Each fake prints known figures that change from one call to
# the next, and logs its calls, so the test checks the best of the rounds,
# the best peer and the ratio at every point, the n/a for what ik cannot
# measure, the alternating order, the arguments each engine got, and the
# clear errors on bad input.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
compare=$here/../../scripts/compare.sh
t=$(mktemp -d "${TMPDIR:-/tmp}/compare-test.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$t"' EXIT
pass=0 fail=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1" >&2; fail=$((fail + 1)); }

printf 'GGUF\3\0\0\0fake' > "$t/model.gguf"
printf 'not a gguf' > "$t/junk.bin"

# A fake engine's call number (1, 2, ...), counted per name in $t.
cat > "$t/count.sh" <<'EOF'
c=$(( $(cat "$T/$1.count" 2>/dev/null || echo 0) + 1 )); echo "$c" > "$T/$1.count"
EOF

# Latte: prefill 50 then 60 at depth 0, 40 then 45 deeper; decode 8 then 6
# at depth 0, 5 then 4 deeper.
cat > "$t/latte" <<'EOF'
#!/usr/bin/env bash
set -euo pipefail
. "$T/count.sh" latte
echo "latte $*" >> "$T/calls"
depths="" batch=""
while [ $# -gt 0 ]; do [ "$1" = --depths ] && depths=$2; [ "$1" = --batch ] && batch=$2; shift; done
IFS=, read -r -a ds <<<"$depths"
if [ -n "$batch" ]; then  # aggregate decode: 10 x N, then 12 x N; bound 80% then 90%
  IFS=, read -r -a bs <<<"$batch"
  echo '{"batch": ['; sep=""
  for d in "${ds[@]}"; do for b in "${bs[@]}"; do
    echo "$sep{\"depth\": $d, \"n\": $b, \"decode_tok_s\": $(( (c == 1 ? 10 : 12) * b )), \"bound_pct\": $((c == 1 ? 80 : 90))}"; sep=","
  done; done
  echo ']}'
  exit 0
fi
echo '{"results": ['
sep=""
for d in "${ds[@]}"; do
  if [ "$d" = 0 ]; then p=$([ "$c" = 1 ] && echo 50 || echo 60); n=$([ "$c" = 1 ] && echo 8 || echo 6)
  else p=$([ "$c" = 1 ] && echo 40 || echo 45); n=$([ "$c" = 1 ] && echo 5 || echo 4); fi
  echo "$sep{\"depth\": $d, \"prefill_tok_s\": $p, \"decode_tok_s\": $n}"; sep=","
done
echo ']}'
EOF

# llama.cpp: prefill 30 then 35 at every depth (the best of its samples,
# each 5 below it); decode 10 at depth 0, 4 deeper.
cat > "$t/llama-bench" <<'EOF'
#!/usr/bin/env bash
set -euo pipefail
if [ "$1" = --help ]; then echo "  -p, --n-prompt <n>"; echo "  -d, --n-depth <n>"; exit 0; fi
. "$T/count.sh" llama
echo "llama.cpp $*" >> "$T/calls"
p=0 n=0 d=0
while [ $# -gt 0 ]; do case "$1" in -p) p=$2;; -n) n=$2;; -d) d=$2;; esac; shift; done
IFS=, read -r -a ds <<<"$d"
echo "a log line on stdout before the JSON"
echo '['
sep=""
for x in "${ds[@]}"; do
  pp=$([ "$c" = 1 ] && echo 30 || echo 35); tg=$([ "$x" = 0 ] && echo 10 || echo 4)
  echo "$sep{\"build_commit\": \"abc1234\", \"n_prompt\": $p, \"n_gen\": 0, \"n_depth\": $x, \"avg_ts\": 1, \"samples_ts\": [ $((pp - 5)), $pp ]}"; sep=","
  echo ",{\"build_commit\": \"abc1234\", \"n_prompt\": 0, \"n_gen\": $n, \"n_depth\": $x, \"avg_ts\": $tg}"
done
echo ']'
EOF

# ik_llama.cpp: without -rtr prefill 40, decode 9 at depth 0 and 5.5 then 3
# at depth (-gp); with -rtr 1 prefill 70, decode 7 and 5. Its stdout has a
# warning line inside the JSON, as the real one's has.
cat > "$t/ik-bench" <<'EOF'
#!/usr/bin/env bash
set -euo pipefail
if [ "$1" = --help ]; then echo "  -p, --n-prompt <n>"; echo "  -gp <pp,tg>"; echo "  -mla, --mla-use"; exit 0; fi
rtr=0; for a in "$@"; do [ "$a" = -rtr ] && rtr=1; done
. "$T/count.sh" "ik$rtr"
echo "ik_llama.cpp$([ $rtr = 1 ] && echo ' -rtr') $*" >> "$T/calls"
p=0 n=0 gps=()
while [ $# -gt 0 ]; do case "$1" in -p) p=$2;; -n) n=$2;; -gp) gps+=("$2");; esac; shift; done
if [ $rtr = 1 ]; then pp=70 tg=7 gp=5; else pp=40 tg=9 gp=$([ "$c" = 1 ] && echo 5.5 || echo 3); fi
echo '['
echo "WARNING: Behavior may be unexpected when allocating 0 bytes for ggml_calloc!"  # as ik's does, inside its JSON
echo "{\"build_commit\": \"ik5678\", \"n_prompt\": $p, \"n_gen\": 0, \"avg_ts\": $pp, \"test\": \"pp$p\"},"
echo "{\"build_commit\": \"ik5678\", \"n_prompt\": 0, \"n_gen\": $n, \"avg_ts\": $tg, \"test\": \"tg$n\"}"
for g in "${gps[@]}"; do
  echo ",{\"build_commit\": \"ik5678\", \"n_prompt\": ${g%,*}, \"n_gen\": ${g#*,}, \"avg_ts\": $gp, \"test\": \"tg${g#*,}@pp${g%,*}\"}"
done
echo ']'
EOF
printf '#!/bin/sh\necho "  --n-prompt"\necho "boom" >&2\nexit 3\n' > "$t/broken-bench"
# llama-batched-bench (llama.cpp's, and ik's with -mla): S_TG 9.5 x B, ik
# 11.5 x B (with -rtr 13.5 x B), its table on stderr among log lines.
cat > "$t/batched-bench" <<'EOF'
#!/usr/bin/env bash
set -euo pipefail
name=$(basename "$0")
if [ "$1" = --help ]; then echo "  -npl n0,n1,..."; [ "$name" = ik-batched ] && echo "  -mla, --mla-use"; exit 0; fi
rtr=0; for a in "$@"; do [ "$a" = -rtr ] && rtr=1; done
echo "$name$([ $rtr = 1 ] && echo ' -rtr') $*" >> "$T/calls"
npp="" npl=""; while [ $# -gt 0 ]; do case "$1" in -npp) npp=$2;; -npl) npl=$2;; esac; shift; done
k=$([ "$name" = ik-batched ] && { [ $rtr = 1 ] && echo 13 || echo 11; } || echo 9)
echo "llama_model_loader: - kv 0: general.architecture str = deepseek2" >&2
echo "|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |" >&2
echo "|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|" >&2
IFS=, read -r -a bs <<<"$npl"
for b in "${bs[@]}"; do
  echo "|   $npp |      8 |    $b |    999 |    1.000 |   100.00 |    1.000 |   $(( k * b )).50 |    2.000 |    50.00 |" >&2
done
EOF
cp "$t/batched-bench" "$t/ik-batched"
chmod +x "$t/latte" "$t/llama-bench" "$t/ik-bench" "$t/broken-bench" "$t/batched-bench" "$t/ik-batched"
export T=$t
unset OMP_WAIT_POLICY GOMP_SPINCOUNT LATTE_POOL_SPIN_US LATTE_POOL_ADAPT

# ---------------------------------------------------------------- a full run
if out=$(GOMP_SPINCOUNT=1000 LATTE_POOL_SPIN_US=20 "$compare" -m "$t/model.gguf" --latte "$t/latte" --llama-bench "$t/llama-bench" \
           --ik-bench "$t/ik-bench" --depths 4096,0 -p 64 -n 8 --rounds 2 -t 2 \
           --json "$t/out.json" 2>"$t/err"); then
  ok "a run with both peers exits 0"
else
  bad "a run with both peers failed: $(cat "$t/err")"
fi
echo "$out"
python3 - "$t/out.json" <<'PY' && ok "the JSON's points: best of the rounds, best peer, ratio, n/a" || bad "the JSON's points"
import json, sys
doc = json.load(open(sys.argv[1]))
pts = {(p["test"], p["depth"]): p for p in doc["points"]}
assert [(p["test"], p["depth"]) for p in doc["points"]] == \
    [("prefill", 0), ("prefill", 4096), ("decode", 0), ("decode", 4096)], doc["points"]
def check(key, latte, peer, y, ratio, peers):
    p = pts[key]
    assert p["latte_tok_s"] == latte, (key, p)
    assert p["best_peer"] == peer and p["best_peer_tok_s"] == y, (key, p)
    assert abs(p["ratio"] - ratio) < 1e-3, (key, p)
    assert p["peers"] == peers, (key, p)
check(("prefill", 0), 60, "ik_llama.cpp -rtr", 70, 60 / 70,
      {"llama.cpp": 35, "ik_llama.cpp": 40, "ik_llama.cpp -rtr": 70})
check(("prefill", 4096), 45, "llama.cpp", 35, 45 / 35,
      {"llama.cpp": 35, "ik_llama.cpp": None, "ik_llama.cpp -rtr": None})
check(("decode", 0), 8, "llama.cpp", 10, 0.8, {"llama.cpp": 10, "ik_llama.cpp": 9, "ik_llama.cpp -rtr": 7})
check(("decode", 4096), 5, "ik_llama.cpp", 5.5, 5 / 5.5, {"llama.cpp": 4, "ik_llama.cpp": 5.5, "ik_llama.cpp -rtr": 5})
assert any("ik_llama.cpp" in n and "prefill" in n for n in doc["not_comparable"]), doc["not_comparable"]
assert doc["rounds"] == 2 and doc["reps"] == 2 and doc["threads"] == 2 and doc["n_prompt"] == 64 and doc["n_gen"] == 8
assert doc["GOMP_SPINCOUNT"] == "1000" and doc["OMP_WAIT_POLICY"] is None, doc
assert doc["LATTE_POOL_SPIN_US"] == "20" and doc["LATTE_POOL_ADAPT"] is None, doc
commits = {e["name"]: e["build_commit"] for e in doc["engines"]}
assert commits == {"latte": None, "llama.cpp": "abc1234", "ik_llama.cpp": "ik5678", "ik_llama.cpp -rtr": "ik5678"}, commits
PY
grep -Eq '^prefill +\| +4096 \| +45\.00 \| +35\.00 \| n/a \(no depth option\) \| n/a \(no depth option\) \| +llama\.cpp \| +1\.29x$' <<<"$out" &&
  ok "the table's prefill row at depth 4096" || bad "the table's prefill row at depth 4096"
grep -q '^note: ik_llama.cpp: its llama-bench has no depth option' <<<"$out" && ok "the table's note on ik" || bad "the note on ik"
order=$(cut -d' ' -f1 "$t/calls" | paste -sd' ')
[ "$(sed 's/ -rtr//g' "$t/calls" | cut -d' ' -f1 | paste -sd' ')" = \
  "latte llama.cpp ik_llama.cpp ik_llama.cpp ik_llama.cpp ik_llama.cpp llama.cpp latte" ] &&
  grep -n -- '-rtr 1' "$t/calls" | cut -d: -f1 | paste -sd' ' | grep -qx '4 5' &&
  ok "the engines alternate: round 2 runs round 1's order reversed" || bad "the order of the runs: $order"
# What each engine was asked: sorted depths, the threads, one repetition.
grep -q -- '^latte bench -m .*model.gguf --depths 0,4096 --cache-type int8 --threads 2 -p 64 -n 8 -r 2 --json$' "$t/calls" &&
  ok "latte's arguments" || bad "latte's arguments: $(grep ^latte "$t/calls" | head -1)"
grep -q -- '^llama.cpp -m .* -p 64 -n 8 -d 0,4096 -t 2 -r 2 -fa 1 -o json$' "$t/calls" &&
  ok "llama.cpp's arguments" || bad "llama.cpp's arguments: $(grep ^llama "$t/calls" | head -1)"
grep -q -- '^ik_llama.cpp -m .* -t 2 -r 2 -mla 3 -fa 1 -fmoe 1 -o json -p 64 -n 8 -gp 4096,8$' "$t/calls" &&
  grep -q -- '^ik_llama.cpp -rtr -m .* -gp 4096,8 -rtr 1$' "$t/calls" &&
  ok "ik_llama.cpp's arguments (-gp for decode at a depth; -rtr 1 on the second)" ||
  bad "ik_llama.cpp's arguments: $(grep ^ik "$t/calls" | head -2)"

# Decode only, depths above 0 only, one peer, --no-ik-rtr: ik runs -gp alone.
rm -f "$t"/*.count "$t/calls"
if "$compare" -m "$t/model.gguf" --latte "$t/latte" --ik-bench "$t/ik-bench" --no-ik-rtr --depths 4096 \
     -p 0 -n 8 --rounds 1 --reps 1 -t 1 --json "$t/out2.json" >/dev/null 2>"$t/err"; then
  python3 - "$t/out2.json" <<'PY' && ok "decode only at a depth, ik alone" || bad "decode only at a depth, ik alone"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["points"] == [{"test": "decode", "depth": 4096, "latte_tok_s": 5, "best_peer": "ik_llama.cpp",
                          "best_peer_tok_s": 5.5, "ratio": round(5 / 5.5, 3), "peers": {"ik_llama.cpp": 5.5}}], doc["points"]
PY
  grep -q -- '-r 1 -mla 3 -fa 1 -fmoe 1 -o json -p 0 -n 0 -gp 4096,8$' "$t/calls" && [ "$(wc -l < "$t/calls")" = 2 ] &&
    ok "ik gets -p 0 -n 0 when depth 0 is not asked for, and no -rtr run" || bad "ik's arguments: $(cat "$t/calls")"
else
  bad "decode only at a depth failed: $(cat "$t/err")"
fi

# ---------------------------------------------------------------- --batch
rm -f "$t"/*.count "$t/calls"
if out=$(cd "$t" && "$compare" -m model.gguf --latte "$t/latte" --llama-batched "$t/batched-bench" --ik-batched "$t/ik-batched" \
           --batch 4,1 -n 8 --rounds 2 --reps 1 -t 2 --json "$t/batch.json" 2>"$t/err"); then
  ok "a --batch run exits 0"
  python3 - "$t/batch.json" <<'PY' && ok "--batch: best of the rounds per N, the best peer, the ratio" || bad "--batch's JSON"
import json, sys
doc = json.load(open(sys.argv[1]))
pts = [(p["depth"], p["n"], p["latte_tok_s"], p["latte_bound_pct"], p["best_peer"], p["best_peer_tok_s"], p["ratio"])
       for p in doc["batch_points"]]
assert pts == [(512, 1, 12, 90, "ik_llama.cpp -rtr", 13.5, round(12 / 13.5, 3)),
               (512, 4, 48, 90, "ik_llama.cpp -rtr", 52.5, round(48 / 52.5, 3))], pts
assert doc["batch_points"][0]["peers"] == {"llama.cpp": 9.5, "ik_llama.cpp": 11.5, "ik_llama.cpp -rtr": 13.5}
PY
  grep -q -- "^latte bench -m $t/model.gguf --batch 1,4 --depths 512 --cache-type int8 --threads 2 -n 8 -r 1 --json$" "$t/calls" &&
    grep -q -- '^batched-bench -m .* -c 2096 -b 2048 -ub 512 -npp 512 -ntg 8 -npl 1,4 -t 2 -fa$' "$t/calls" &&
    grep -q -- '^ik-batched -rtr -m .* -npl 1,4 -t 2 -mla 3 -fa 1 -rtr$' "$t/calls" &&
    ok "--batch: each engine's arguments (the model's path made absolute; room for 4 sequences of 512 + 8)" ||
    bad "--batch arguments: $(cat "$t/calls")"
  grep -Eq '^ +512 \| +4 \| +48\.00 \| +90% \| +36\.50 \| +44\.50 \| +52\.50 \| ik_llama.cpp -rtr \| +0\.91x$' <<<"$out" &&
    ok "--batch: the table's row" || bad "--batch: the table: $out"
else
  bad "a --batch run failed: $(cat "$t/err")"
fi

# ---------------------------------------------------------------- bad input
expect_error() {  # what, expected text, args...
  local what=$1 want=$2 rc=0; shift 2
  "$compare" "$@" >"$t/out" 2>"$t/err" </dev/null || rc=$?
  if [ "$rc" -ne 0 ] && grep -qF -- "$want" "$t/err"; then ok "$what"
  else bad "$what: exit $rc, said: $(cat "$t/err" "$t/out")"; fi
}
base=(--latte "$t/latte" --llama-bench "$t/llama-bench")
expect_error "no arguments: usage" "usage: scripts/compare.sh"
expect_error "no model" "no model: give -m FILE" "${base[@]}"
expect_error "a missing model file" "model file '$t/nope.gguf' does not exist" -m "$t/nope.gguf" "${base[@]}"
expect_error "a model that is not GGUF" "is not a GGUF file" -m "$t/junk.bin" "${base[@]}"
expect_error "no peer" "no peer: give --llama-bench PATH and/or --ik-bench PATH" -m "$t/model.gguf" --latte "$t/latte"
expect_error "a missing llama-bench" "--llama-bench '$t/none' does not exist" -m "$t/model.gguf" --latte "$t/latte" --llama-bench "$t/none"
expect_error "a missing ik llama-bench" "--ik-bench '$t/none' does not exist" -m "$t/model.gguf" "${base[@]}" --ik-bench "$t/none"
expect_error "an ik llama-bench that is not ik's" "does not look like ik_llama.cpp's llama-bench" -m "$t/model.gguf" --latte "$t/latte" --ik-bench "$t/llama-bench"
expect_error "a missing latte" "--latte '$t/none' does not exist" -m "$t/model.gguf" --latte "$t/none" --llama-bench "$t/llama-bench"
expect_error "bad --depths" "bad --depths '0,4k'" -m "$t/model.gguf" "${base[@]}" --depths 0,4k
expect_error "empty --depths" "--depths needs a value" -m "$t/model.gguf" "${base[@]}" --depths ""
expect_error "negative -p" "bad -p '-1'" -m "$t/model.gguf" "${base[@]}" -p -1
expect_error "-p 0 -n 0" "-p and -n are both 0" -m "$t/model.gguf" "${base[@]}" -p 0 -n 0
expect_error "--rounds 0" "bad --rounds 0" -m "$t/model.gguf" "${base[@]}" --rounds 0
expect_error "--reps 0" "bad --reps 0" -m "$t/model.gguf" "${base[@]}" --reps 0
expect_error "bad --cache-type" "bad --cache-type 'q4'" -m "$t/model.gguf" "${base[@]}" --cache-type q4
expect_error "an unknown option" "unknown argument '--fast'" -m "$t/model.gguf" "${base[@]}" --fast
expect_error "a value left out at the end" "--json needs a value" -m "$t/model.gguf" "${base[@]}" --json
expect_error "an old llama-bench, no depth 0 asked for: nothing left" "no -d/--n-depth and depth 0 was not asked for" -m "$t/model.gguf" --latte "$t/latte" --llama-bench "$t/broken-bench" --depths 4096
bb=(--latte "$t/latte" --llama-batched "$t/batched-bench")
expect_error "--batch without a batched peer" "--batch: give --llama-batched PATH and/or --ik-batched PATH" -m "$t/model.gguf" --latte "$t/latte" --batch 1,2
expect_error "--batch with llama-bench" "give --llama-batched/--ik-batched, not --llama-bench" -m "$t/model.gguf" "${base[@]}" --llama-batched "$t/batched-bench" --batch 1,2
expect_error "bad --batch" "bad --batch '1,x'" -m "$t/model.gguf" "${bb[@]}" --batch 1,x
expect_error "--batch 0" "bad --batch: 0" -m "$t/model.gguf" "${bb[@]}" --batch 0,2
expect_error "--llama-batched without --batch" "--llama-batched and --ik-batched go with --batch" -m "$t/model.gguf" "${base[@]}" --llama-batched "$t/batched-bench"
expect_error "a batched ik that is not ik's" "does not look like ik_llama.cpp's llama-batched-bench" -m "$t/model.gguf" --latte "$t/latte" --ik-batched "$t/batched-bench" --batch 1
expect_error "a peer that fails" "llama.cpp failed (exit 3)" -m "$t/model.gguf" --latte "$t/latte" --llama-bench "$t/broken-bench" --rounds 1
grep -q boom "$t/err" && ok "a failing peer's own message is shown" || bad "a failing peer's message: $(cat "$t/err")"
"$compare" --help > "$t/out" && grep -q -- "--ik-bench PATH" "$t/out" && ok "--help" || bad "--help"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
