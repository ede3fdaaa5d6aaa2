#!/usr/bin/env bash
# scripts/check_readme.sh must fail when what README shows is broken: on
# copies of README.md and docs/c-api.md with one fault each (a misspelt
# command, a wrong path, code that does not compile, a program that computes
# something else, a changed heading, output README no longer matches), run
# against an install of this tree, each run must fail and name the faulty
# line; the untouched copies must pass the same sections. A typo in the
# Install block's first command must stop the full check at once.
#   tests/scripts/check_readme_test.sh PREFIX
# PREFIX: a shared-library install of this tree (scripts/test.sh passes the
# one check_readme.sh made). The shipped model's case runs scripts/run.sh,
# which builds build/ when it is not there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
check=$root/scripts/check_readme.sh
prefix=$(realpath "${1:?usage: check_readme_test.sh PREFIX}")
[ -e "$(find "$prefix" -name 'liblatte.so' | head -1)" ] ||
  { echo "check_readme_test: $prefix holds no liblatte.so: the pkg-config cases need a shared install" >&2; exit 2; }
t=$(mktemp -d "${TMPDIR:-/tmp}/check-readme-test.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$t"' EXIT
pass=0 fail=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1" >&2; fail=$((fail + 1)); }

# The README line holding a fixed string (the labels name it).
line_of() { grep -nF -- "$2" "$1" | head -1 | cut -d: -f1; }
readme_line() { line_of "$root/README.md" "$1"; }
pc_line=$(readme_line 'cc app.c -o app $(pkg-config --cflags --libs latte)')
cmake_line=$(readme_line 'find_package(latte 0.2 REQUIRED)')
king_line=$(readme_line '$ scripts/run.sh -p "The king of Israel"')
setup_line=$(awk '/^## Install/{on = 1} on && $0 == "scripts/setup.sh" { print NR; exit }' "$root/README.md")
serve_line=$(readme_line 'latte serve -m model.gguf --parallel 4 &')
for v in pc_line cmake_line king_line setup_line serve_line; do
  [ -n "${!v}" ] || { echo "check_readme_test: README.md changed: no line for $v (update this test)" >&2; exit 2; }
done

# case NAME SECTIONS FILE SED EXPECT: FILE (readme or c-api) copied with SED
# applied must make `check_readme.sh --sections SECTIONS` fail with EXPECT in
# its output.
case_() {
  local name=$1 sections=$2 which=$3 expr=$4 expect=$5 d=$t/$1 rc=0
  mkdir -p "$d"
  cp "$root/README.md" "$d/README.md"
  cp "$root/docs/c-api.md" "$d/c-api.md"
  local f=$d/README.md
  if [ "$which" = c-api ]; then f=$d/c-api.md; fi
  sed -i -e "$expr" "$f"
  if cmp -s "$f" "$([ "$which" = c-api ] && echo "$root/docs/c-api.md" || echo "$root/README.md")"; then
    bad "$name: the fault '$expr' did not apply (the docs changed: update this test)"
    return
  fi
  local args=(--readme "$d/README.md" --c-api "$d/c-api.md" --work "$d/work" --sections "$sections")
  if [[ $sections != *install* ]]; then args+=(--installed "$prefix"); fi
  timeout -k 10 900 "$check" "${args[@]}" >"$d/log" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ]; then
    bad "$name: check_readme.sh passed"
  elif ! grep -qF -- "$expect" "$d/log"; then
    bad "$name: check_readme.sh failed (exit $rc) without '$expect'; its last lines:"
    tail -n 8 "$d/log" >&2
  else
    ok "$name: $(grep -m1 'FAILED' "$d/log" | cut -c1-160)"
  fi
}

# The untouched documents pass the sections the cases below break.
mkdir -p "$t/clean"
if "$check" --installed "$prefix" --sections embed,c-api --work "$t/clean/work" >"$t/clean/log" 2>&1; then
  ok "the untouched README.md and c-api.md pass embed and c-api"
else
  bad "the untouched README.md and c-api.md fail embed and c-api:"; tail -n 20 "$t/clean/log" >&2
fi

case_ pkg-config-typo embed readme "${pc_line}s/--libs latte)/--libs lattte)/" "README.md:$pc_line (Embed, pkg-config)"
case_ pkg-config-path embed readme 's|^export PKG_CONFIG_PATH=/opt/latte/lib/pkgconfig|export PKG_CONFIG_PATH=/opt/latte/lib64/pkgconfig|' \
  "README.md:$pc_line (Embed, pkg-config)"
case_ c-does-not-compile embed readme 's/latte_session_prefill(s, ids, n)/latte_session_prefil(s, ids, n)/' \
  "README.md:$pc_line (Embed, pkg-config)"
case_ c-not-greedy embed readme 's/sp.temperature = 0.0f;/sp.temperature = 0.9f;/' "does not begin latte run --temp 0's"
case_ app-wrong-model embed readme 's|^\(LD_LIBRARY_PATH=.*\)latte-tiny-mla.gguf|\1latte-tiny.gguf|' \
  "README.md:$pc_line (Embed, pkg-config)"
case_ cmake-target-typo embed readme 's/PRIVATE latte::latte)/PRIVATE latte::lattex)/' "README.md:$cmake_line (Embed, CMake)"
case_ cmake-prefix-path embed readme 's|(`-DCMAKE_PREFIX_PATH=/opt/latte`)|(`-DCMAKE_PREFIX_PATH=/opt/latte/nowhere`)|' \
  "README.md:$cmake_line (Embed, CMake)"
case_ embed-heading embed readme 's/^## Embed$/## Embedding/' "'## Embed' must hold one C block"
case_ c-api-chat-does-not-compile c-api c-api 's/latte_session_create(model, &so, &s)/latte_session_creat(model, \&so, \&s)/' \
  "(c program)"
case_ c-api-build-line c-api c-api 's/`cc chat.c $(pkg-config --cflags --libs$/`cc chat.c $(pkg-config --cflags$/' "(c program)"
case_ c-api-cpp-does-not-compile c-api c-api 's/  session.prefill(prompt);/  session.prefil(prompt);/' "(cpp program)"
case_ shipped-output shipped readme 's/Hear not the LORD God of hosts/Hear ye the LORD God of hosts/' \
  "README.md:$king_line (The shipped model)"
case_ serve-port serve readme 's|^curl http://127.0.0.1:8080/v1/chat|curl http://127.0.0.1:8081/v1/chat|' \
  "README.md:$serve_line-"
case_ serve-not-started serve readme 's|^latte serve -m model.gguf --parallel 4 &|latte serve -m model.gguf --parallel 4|' \
  "'## Serve' starts no server"
case_ install-typo install readme "${setup_line}s|^scripts/setup.sh\$|scripts/setpu.sh|" "README.md:$setup_line (Install)"
if grep -q 'cmake -B build' "$t/install-typo/log"; then bad "install-typo: commands after the failed one ran"; fi

echo "check_readme_test: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
