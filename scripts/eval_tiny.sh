#!/usr/bin/env bash
# Accuracy report of the shipped model, written to bench-results/eval_tiny.json
# and to README.md (between the eval_tiny markers):
#   - held-out perplexity computed by the PyTorch training code (from
#     models/latte-tiny-mla.eval.json, which scripts/train_tiny_mla.py wrote)
#     and by Latte replaying the same token windows, with f32, f16, int8 and
#     int4 caches, prefill in the naive and in the absorbed form, and token by
#     token through the absorbed decode kernel;
#   - greedy continuations (32 tokens) of the 20 held-out prompts: Latte f32
#     versus int8 and int4 caches, and Latte f32 versus PyTorch.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v python3 >/dev/null || { echo "eval_tiny.sh: needs python3 (scripts/setup.sh --test installs it)" >&2; exit 1; }
scripts/build_release.sh latte_cli  # build/bin/latte

model=${1:-models/latte-tiny-mla.gguf}
evaljson=${model%.gguf}.eval.json
[ -f "$model" ] && [ -f "$evaljson" ] || { echo "eval_tiny.sh: $model or $evaljson missing (scripts/train_tiny_mla.py makes them)" >&2; exit 1; }
work=build/eval_tiny
mkdir -p "$work" bench-results
# latte's messages go to a log, shown if a step fails.
log="$work/latte.log"
: > "$log"
trap 'echo "eval_tiny.sh: a step failed; latte said:" >&2; tail -20 "$log" >&2' ERR

python3 - "$evaljson" "$work" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1])); out = sys.argv[2]
open(out + "/windows.txt", "w").write("\n".join(",".join(map(str, w)) for w in ev["perplexity"]["windows"]) + "\n")
open(out + "/prompts.txt", "w").write("\n".join(",".join(map(str, c["prompt_ids"])) for c in ev["greedy"]["cases"]) + "\n")
PY

ppl_rows=()
for cache in f32 f16 int8 int4; do
  for form in naive absorbed; do
    echo "eval_tiny.sh: perplexity, $cache cache, $form prefill" >&2
    ppl_rows+=("$(build/bin/latte perplexity -m "$model" --windows "$work/windows.txt" --cache-type "$cache" --form "$form" --json 2>>"$log")")
  done
  echo "eval_tiny.sh: perplexity, $cache cache, token by token (decode kernel)" >&2
  ppl_rows+=("$(build/bin/latte perplexity -m "$model" --windows "$work/windows.txt" --cache-type "$cache" --decode --json 2>>"$log")")
done
printf '%s\n' "${ppl_rows[@]}" > "$work/ppl.jsonl"

n_new=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['greedy']['n_new'])" "$evaljson")
: > "$work/greedy.txt"
while IFS= read -r ids; do
  f32=$(build/bin/latte run -m "$model" --prompt-ids "$ids" --temp 0 -n "$n_new" --print-ids --ignore-eos --cache-type f32 -c 1024 2>>"$log")
  i8=$(build/bin/latte run -m "$model" --prompt-ids "$ids" --temp 0 -n "$n_new" --print-ids --ignore-eos --cache-type int8 -c 1024 2>>"$log")
  i4=$(build/bin/latte run -m "$model" --prompt-ids "$ids" --temp 0 -n "$n_new" --print-ids --ignore-eos --cache-type int4 -c 1024 2>>"$log")
  echo "$f32;$i8;$i4" >> "$work/greedy.txt"
done < "$work/prompts.txt"

python3 - "$evaljson" "$work" README.md bench-results/eval_tiny.json <<'PY'
import json, math, re, sys
ev = json.load(open(sys.argv[1])); work = sys.argv[2]; readme = sys.argv[3]; out = sys.argv[4]
torch_nll = ev["perplexity"]["mean_nll"]; torch_ppl = ev["perplexity"]["ppl"]
rows = [json.loads(l) for l in open(work + "/ppl.jsonl") if l.strip()]
def ppl(cache, form, decode):
    for r in rows:
        if r["cache_type"] == cache and r["form"] == form and r["decode"] == decode: return r["perplexity"]
f32_ref = ppl("f32", "naive", False)
cases = ev["greedy"]["cases"]
same_i8 = same_i4 = same_torch = total = 0
for line, case in zip(open(work + "/greedy.txt").read().splitlines(), cases):
    a, b, c = ([int(x) for x in part.split(",") if x] for part in line.split(";"))
    t = case["continuation_ids"]
    total += len(t)
    same_i8 += sum(1 for i in range(len(t)) if i < len(a) and i < len(b) and a[i] == b[i])
    same_i4 += sum(1 for i in range(len(t)) if i < len(a) and i < len(c) and a[i] == c[i])
    same_torch += sum(1 for i in range(len(t)) if i < len(a) and a[i] == t[i])
lines = ["| cache | prefill naive | prefill absorbed | token by token (decode kernel) | vs PyTorch (naive) |",
         "|---|---|---|---|---|"]
for cache in ("f32", "f16", "int8", "int4"):
    n, a, d = ppl(cache, "naive", False), ppl(cache, "absorbed", False), ppl(cache, "auto", True)
    lines.append("| %s | %.4f | %.4f | %.4f | %+.3f%% |" % (cache, n, a, d, 100 * (n / torch_ppl - 1)))
report = {
    "pytorch": {"mean_nll": torch_nll, "perplexity": torch_ppl, "windows": ev["perplexity"]["n_windows"],
                "predicted": ev["perplexity"]["n_predicted"]},
    "latte": rows,
    "f32_vs_pytorch_pct": 100 * (f32_ref / torch_ppl - 1),
    "int8_vs_f32_pct": 100 * (ppl("int8", "naive", False) / f32_ref - 1),
    "int8_decode_vs_f32_decode_pct": 100 * (ppl("int8", "auto", True) / ppl("f32", "auto", True) - 1),
    "int4_vs_f32_pct": 100 * (ppl("int4", "naive", False) / f32_ref - 1),
    "int4_decode_vs_f32_decode_pct": 100 * (ppl("int4", "auto", True) / ppl("f32", "auto", True) - 1),
    "greedy": {"prompts": len(cases), "tokens": total, "int8_equal_to_f32": same_i8 / total,
               "int4_equal_to_f32": same_i4 / total,
               "latte_f32_equal_to_pytorch": same_torch / total},
}
import datetime, subprocess
stamp_commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip() or "?"
stamp_date = datetime.date.today().strftime("%d %B %Y").lstrip("0")
report["commit"], report["date"] = stamp_commit, stamp_date
json.dump(report, open(out, "w"), indent=2)
text = "\n".join([
    "Held-out perplexity (%d held-out documents packed into %d windows of <= %d tokens, %d predicted tokens). "
    "PyTorch (the training code, float32): **%.4f**." % (ev["heldout"]["n_docs"],
                                                        ev["perplexity"]["n_windows"], ev["perplexity"]["n_ctx"],
                                                        ev["perplexity"]["n_predicted"], torch_ppl), "",
    *lines, "",
    "- Latte f32 vs PyTorch: %+.4f%%; int8 vs f32: %+.3f%% (prefill), %+.3f%% (token by token); "
    "int4 vs f32: %+.3f%% (prefill), %+.3f%% (token by token)." % (
        report["f32_vs_pytorch_pct"], report["int8_vs_f32_pct"], report["int8_decode_vs_f32_decode_pct"],
        report["int4_vs_f32_pct"], report["int4_decode_vs_f32_decode_pct"]),
    "- Greedy continuations of %d held-out prompts (%d tokens): int8 equal to f32 at %.1f%% of the tokens, "
    "int4 at %.1f%%; Latte f32 equal to PyTorch at %.1f%%." % (
        len(cases), total, 100 * same_i8 / total, 100 * same_i4 / total, 100 * same_torch / total),
    "",
    "(`scripts/eval_tiny.sh` at %s, %s.)" % (stamp_commit, stamp_date),
])
begin, end = "<!-- eval_tiny:begin -->", "<!-- eval_tiny:end -->"
src = open(readme).read()
if begin not in src or end not in src:
    sys.exit("eval_tiny.sh: %s has no %s ... %s markers to write the table between" % (readme, begin, end))
src = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda m: begin + "\n" + text + "\n" + end, src, flags=re.S)
open(readme, "w").write(src)
print(text)
PY
echo "eval_tiny.sh: wrote bench-results/eval_tiny.json" >&2
