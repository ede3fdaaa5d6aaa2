#!/usr/bin/env bash
# Every script that runs build/bin/latte builds it first, through
# scripts/build_release.sh with the CLI's target, latte_cli: `latte` is the
# library's target, and building only that leaves build/bin/latte missing on
# a fresh checkout (run.sh and eval_tiny.sh once did). Checked on scripts/,
# and on two sample scripts the check must flag (one builds the library, one
# nothing), so the check itself can fail.
#   tests/scripts/cli_target_test.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
t=$(mktemp -d "${TMPDIR:-/tmp}/cli-target-test.XXXXXX")
trap 'rm -rf "$t"' EXIT
pass=0 fail=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1" >&2; fail=$((fail + 1)); }

# why FILE: prints what is wrong with a script that runs build/bin/latte
# (nothing for a good one, or one that does not run it).
why() {
  local code calls
  code=$(grep -v '^[[:space:]]*#' "$1" || true)  # comments left out
  [[ $code == *build/bin/latte* ]] || return 0
  calls=$(grep 'build_release\.sh' <<<"$code" || true)
  if [ -z "$calls" ]; then echo "runs build/bin/latte without building it (scripts/build_release.sh latte_cli)"; return; fi
  # The target may be a variable the script sets: latte_cli must appear in it.
  if ! grep -w 'latte_cli' <<<"$code" >/dev/null; then
    echo "builds with build_release.sh, but never the CLI's target latte_cli: $(head -1 <<<"$calls" | sed 's/^ *//')"
  fi
}

n=0
for f in "$root"/scripts/*.sh; do
  [ "$(basename "$f")" = check_readme.sh ] && continue  # runs the user's build/bin/latte only for `latte info`
  grep -v '^[[:space:]]*#' "$f" | grep 'build/bin/latte' >/dev/null || continue
  n=$((n + 1))
  w=$(why "$f")
  if [ -z "$w" ]; then ok "scripts/$(basename "$f") builds latte_cli before it runs build/bin/latte"
  else bad "scripts/$(basename "$f"): $w"; fi
done
[ "$n" -ge 3 ] && ok "$n scripts run build/bin/latte (run.sh, eval_tiny.sh, bench.sh, compare.sh)" ||
  bad "only $n scripts run build/bin/latte: the search is broken"

printf '#!/bin/sh\nscripts/build_release.sh latte\nbuild/bin/latte run -p x\n' >"$t/library.sh"
printf '#!/bin/sh\nbuild/bin/latte run -p x\n' >"$t/nothing.sh"
for s in library nothing; do
  [ -n "$(why "$t/$s.sh")" ] && ok "a script that builds $s before running build/bin/latte is flagged" ||
    bad "a script that builds $s before running build/bin/latte passes the check"
done

echo "cli_target_test: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
