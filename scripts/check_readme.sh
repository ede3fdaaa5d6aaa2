#!/usr/bin/env bash
# Runs README's commands and programs as README prints them (scripts/test.sh's
# first stage), so a README command that breaks fails CI:
#   scripts/check_readme.sh [--readme FILE] [--c-api FILE] [--work DIR]
#                           [--installed PREFIX] [--sections LIST]
# The commands and code come from the fenced blocks of README.md and
# docs/c-api.md, under these headings (LIST picks some, comma-separated;
# default all):
#   install  "## Install": every line of its sh blocks, in the repository
#            root; `sudo apt install ./FILE.deb` is not run (it would change
#            this machine's /usr; test.sh's package stage unpacks and runs
#            the package): FILE must be there and be latte's package
#   run      "## Run": every line; `latte` is the install's (PREFIX/bin first
#            on the PATH); a line with -i gets two lines of input, one with
#            --session runs twice, the file written and then grown; a
#            scripts/run.sh line with a --seed also runs from another folder
#            and must print the same text
#   embed    "## Embed": its C program as app.c, built with each pkg-config
#            line of its sh block (a static install: the --static ones, and
#            app must not need liblatte.so) and with its CMake snippet (and
#            the -DCMAKE_PREFIX_PATH its text gives), each run with the
#            block's ./app line: exit 0, and the text a prefix of what
#            `latte run --temp 0` generates for the same model and prompt
#   c-api    docs/c-api.md's complete programs (its C and C++ blocks with a
#            main): the C one built with the `cc ...` line its text gives, the
#            C++ one as C++17 (what latte.hpp promises), run with the
#            installed model and two lines of input: exit 0, text printed
#   serve    "## Serve": its sh block as one script: its `latte serve ... &`
#            line started (the install's latte, the placeholders replaced),
#            then, once the server answers /health (60 s at most), each
#            other line: a curl must print a reply with text in it, and the
#            block must stop the server it started (its `kill %1`)
#   shipped  "## The shipped model": each `$ CMD` line of its text block run,
#            its output the lines below it (what the model wrote after the
#            prompt); a line with `# = ARGS` also run with ARGS. Sampled
#            lines (no --temp 0) are compared where the CPU runs the kernels
#            README's text was made with (SHIPPED_ISA), else checked for text
# README's placeholders are replaced by the table in substitute(). PREFIX:
# the install the Install block made (/opt/latte there: WORK/opt/latte), or
# --installed PREFIX, an existing install (shared or static) for the other
# sections. WORK (default build-readme/ in the repository) holds the install,
# the programs and their logs. Any failure stops the script, naming the
# README line; exit 0 only when everything ran and agreed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
readme=$root/README.md
capi=$root/docs/c-api.md
work=$root/build-readme
installed=""
sections=install,run,serve,embed,c-api,shipped
while [ $# -gt 0 ]; do
  case $1 in
    --readme) readme=$(realpath "$2"); shift ;;
    --c-api) capi=$(realpath "$2"); shift ;;
    --work) work=$(realpath -m "$2"); shift ;;
    --installed) installed=$(realpath "$2"); shift ;;
    --sections) sections=$2; shift ;;
    *) echo "check_readme: unknown argument '$1' (expected --readme, --c-api, --work, --installed, --sections)" >&2
       exit 2 ;;
  esac
  shift
done
for s in ${sections//,/ }; do
  case $s in install | run | serve | embed | c-api | shipped) ;;
    *) echo "check_readme: unknown section '$s' (known: install, run, serve, embed, c-api, shipped)" >&2; exit 2 ;;
  esac
done
want() { [[ ",$sections," == *",$1,"* ]]; }
if want install && [ -n "$installed" ]; then
  echo "check_readme: --installed names an install, and the install section makes one: give --sections without install" >&2
  exit 2
fi
for f in "$readme" "$capi"; do [ -f "$f" ] || { echo "check_readme: $f not found" >&2; exit 2; }; done

# The kernels README's sampled continuations were made with.
SHIPPED_ISA=avx512
# Each command's time limit, seconds (the Install block builds everything).
LIMIT=${LATTE_README_TIMEOUT:-3600}
# Input for the programs that read turns from stdin.
CHAT_INPUT=$'In the beginning\nAnd God said\n'

if want install; then rm -rf "$work"; fi
mkdir -p "$work"
prefix=${installed:-$work/opt/latte}
run_dir=$(mktemp -d "$work/run.XXXXXX")
model=$root/models/latte-tiny-mla.gguf

# README's placeholders, and what stands in for each here.
substitute() {
  local s=$1
  s=${s//\/opt\/latte/$prefix}   # the install prefix: one under WORK (or --installed)
  s=${s//model.gguf/$model}       # "your own model": the shipped one
  s=${s//chat.bin/$run_dir/chat.bin}  # a session file
  printf '%s' "$s"
}

checked=0
skipped=()
fail() { echo "check_readme: FAILED: $*" >&2; exit 1; }
say() { echo "check_readme: $*"; }

# The fenced blocks of a Markdown file: DIR/<n> holds block n, DIR/index a
# line "n<TAB>first line<TAB>language<TAB>section" (the "## " heading above).
extract() {
  mkdir -p "$2"
  awk -v dir="$2" '
    /^## / && !inblock { section = substr($0, 4) }
    /^```/ {
      if (!inblock) {
        inblock = 1; n++; lang = substr($0, 4); gsub(/[ \t]+$/, "", lang)
        file = dir "/" n; printf "" > file
        printf "%d\t%d\t%s\t%s\n", n, NR + 1, lang, section > (dir "/index")
      } else { inblock = 0; close(file) }
      next
    }
    inblock { print > file }
  ' "$1"
  touch "$2/index"
}
# blocks DIR SECTION LANG: the numbers of that section's blocks in that language.
blocks() { awk -F'\t' -v s="$2" -v l="$3" '$4 == s && $3 == l { print $1 }' "$1/index"; }
first_line() { awk -F'\t' -v n="$2" '$1 == n { print $2 }' "$1/index"; }
# The text of a section outside its code blocks, one line.
section_text() {
  awk -v s="$2" '/^## /{ on = (substr($0, 4) == s) } /^```/{ code = !code; next } on && !code' "$1" | tr '\n' ' '
}
# commands DIR N: the block's commands, one per line as "line<TAB>command":
# continuation lines joined, blank lines and comment lines left out.
commands() {
  awk -v base="$(first_line "$1" "$2")" '
    { line = $0 }
    held != "" { cmd = cmd " " line } held == "" { cmd = line; start = NR }
    /\\$/ { sub(/\\$/, "", cmd); held = 1; next }
    { held = ""; if (cmd !~ /^[ \t]*(#|$)/) printf "%d\t%s\n", base + start - 1, cmd }
  ' "$1/$2"
}

extract "$readme" "$run_dir/readme"
extract "$capi" "$run_dir/capi"
rname=$(basename "$readme")

# run WHERE LABEL COMMANDS [STDIN]: runs the commands (lines) with bash -e in
# folder WHERE, their stdout kept in $run_dir/out (and shown), stderr in
# $run_dir/err.
run() {
  local where=$1 label=$2 cmd=$3 input=${4:-/dev/null} rc=0
  echo "== check_readme: $label"
  sed 's/^/$ /' <<<"$cmd"
  (cd "$where" && timeout -k 30 "$LIMIT" bash -e -o pipefail -c "$cmd" <"$input" >"$run_dir/out" 2>"$run_dir/err") || rc=$?
  cat "$run_dir/out"
  if [ -s "$run_dir/out" ] && [ -n "$(tail -c 1 "$run_dir/out")" ]; then echo; fi
  if [ "$rc" -ne 0 ]; then
    echo "--- its stderr (last 40 lines):" >&2
    tail -n 40 "$run_dir/err" >&2
    fail "$label: exit $rc: $cmd"
  fi
  checked=$((checked + 1))
}
has_text() { grep -Eq '[A-Za-z]{3,}' "$run_dir/out"; }

need_prefix() {
  [ -x "$prefix/bin/latte" ] && [ -f "$prefix/include/latte/latte.h" ] ||
    fail "no install at $prefix (run the install section, or give --installed PREFIX)"
}

# ---------------------------------------------------------------- install
if want install; then
  ns=$(blocks "$run_dir/readme" Install sh)
  [ -n "$ns" ] || fail "$rname has no sh block under '## Install'"
  for n in $ns; do
    while IFS=$'\t' read -r line cmd; do
      label="$rname:$line (Install)"
      if [[ $cmd =~ ^sudo\ apt(-get)?\ install\ (\./[^ ]+\.deb)( |$) ]]; then
        deb=${BASH_REMATCH[2]}
        [ -f "$root/$deb" ] || fail "$label: $deb, which '$cmd' installs, was not made"
        [ "$(dpkg-deb -f "$root/$deb" Package)" = latte ] || fail "$label: $deb is not latte's package"
        why="$label: '$cmd' not run: it would install into this machine's /usr (scripts/test.sh's package stage unpacks the package and runs it); $deb is there"
        say "$why"
        skipped+=("$why")
        continue
      fi
      if [[ $cmd == sudo\ * ]]; then
        if [ "$(id -u)" -ne 0 ]; then
          why="$label: '$cmd' needs root"
          say "skipped: $why"; skipped+=("$why"); continue
        fi
        cmd=${cmd#sudo }
      fi
      run "$root" "$label" "$(substitute "$cmd")"
    done < <(commands "$run_dir/readme" "$n")
  done
  need_prefix
fi

# ---------------------------------------------------------------- run
if want run; then
  need_prefix
  ns=$(blocks "$run_dir/readme" Run sh)
  [ -n "$ns" ] || fail "$rname has no sh block under '## Run'"
  export PATH="$prefix/bin:$PATH"
  mkdir -p "$run_dir/elsewhere"
  printf '%s' "$CHAT_INPUT" >"$run_dir/chat-input"
  for n in $ns; do
    while IFS=$'\t' read -r line cmd; do
      label="$rname:$line (Run)"
      sub=$(substitute "$cmd")
      if [[ $cmd =~ ^latte[[:space:]] ]] && [ "$(command -v latte)" != "$prefix/bin/latte" ]; then
        fail "$label: 'latte' on the PATH is $(command -v latte), not the install's $prefix/bin/latte"
      fi
      input=/dev/null
      if [[ " $cmd " =~ [[:space:]](-i|--interactive)[[:space:]] ]]; then input=$run_dir/chat-input; fi
      session=""
      if [[ $sub =~ --session[[:space:]]+([^[:space:]]+) ]]; then session=${BASH_REMATCH[1]}; rm -f "$session"; fi
      run "$root" "$label" "$sub" "$input"
      has_text || fail "$label: printed no text"
      if [ -n "$session" ]; then
        [ -s "$session" ] || fail "$label: wrote no session file $session"
        size=$(stat -c %s "$session")
        run "$root" "$label, run again: the conversation goes on" "$sub" "$input"
        [ "$(stat -c %s "$session")" -gt "$size" ] || fail "$label: the second run did not add to $session"
      fi
      if [[ $cmd =~ ^scripts/run\.sh[[:space:]].*--seed ]]; then
        cp "$run_dir/out" "$run_dir/out-root"
        run "$run_dir/elsewhere" "$label, from another folder" "$root/${sub}"
        cmp -s "$run_dir/out" "$run_dir/out-root" || fail "$label: from another folder it printed other text"
      fi
    done < <(commands "$run_dir/readme" "$n")
  done
fi

# ---------------------------------------------------------------- serve
# The block runs as one bash script (its job, %1, is the server), with a
# wait for /health after the line that starts the server: a user types the
# next line seconds later, a script does not.
if want serve; then
  need_prefix
  ns=$(blocks "$run_dir/readme" Serve sh)
  [ "$(echo "$ns" | wc -w)" -eq 1 ] || fail "$rname: '## Serve' must hold one sh block"
  export PATH="$prefix/bin:$PATH"
  script=$run_dir/serve.sh
  # A failed line must not leave the server running.
  printf '%s\n' "trap 'kill \$(jobs -p) 2>/dev/null || true' EXIT" >"$script"
  lines=()
  started=0
  while IFS=$'\t' read -r line cmd; do
    lines+=("$line")
    cmd=${cmd%%[[:space:]]#*}  # its comment
    sub=$(substitute "$cmd")
    if [[ $cmd =~ ^latte[[:space:]]+serve[[:space:]].*\&[[:space:]]*$ ]]; then
      url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' <<<"$(sed -n "${line}p" "$readme")" | head -1)
      [ -n "$url" ] || fail "$rname:$line (Serve): the line that starts the server names no http://127.0.0.1:PORT"
      ! curl -s -o /dev/null "$url/health" || fail "$rname:$line (Serve): something already answers at $url"
      printf '%s >"%s" 2>&1 &\nfor i in $(seq 120); do curl -sf -o /dev/null %s/health && break; sleep 0.5; done\n' \
        "${sub%&*}" "$run_dir/serve.log" "$url" >>"$script"
      printf 'curl -sf -o /dev/null %s/health || { echo "the server did not answer /health within 60 s" >&2; exit 1; }\n' \
        "$url" >>"$script"
      started=1
    elif [[ $cmd =~ ^curl[[:space:]] ]]; then
      printf '%s | tee -a "%s"\necho >>"%s"\n' "$sub" "$run_dir/serve-replies" "$run_dir/serve-replies" >>"$script"
    else
      printf '%s\n' "$sub" >>"$script"
    fi
  done < <(commands "$run_dir/readme" "$ns")
  [ "$started" -eq 1 ] || fail "$rname: '## Serve' starts no server (a 'latte serve ... &' line)"
  printf 'wait\n' >>"$script"
  : >"$run_dir/serve-replies"
  run "$root" "$rname:${lines[0]}-${lines[-1]} (Serve)" "$(cat "$script")"
  grep -q '"content":"[^"]*[A-Za-z]' "$run_dir/serve-replies" ||
    fail "$rname:${lines[0]} (Serve): no reply with text: $(head -c 300 "$run_dir/serve-replies")"
  grep -q 'stopped by signal' "$run_dir/serve.log" ||
    fail "$rname:${lines[0]} (Serve): the server did not stop cleanly: $(tail -n 3 "$run_dir/serve.log")"
fi

# ---------------------------------------------------------------- embed
# app_check LABEL: the program's output ($run_dir/out) against the installed
# latte's greedy continuation of the same model and prompt (the run line's).
app_check() {
  local label=$1 args
  has_text || fail "$label: printed no text"
  eval "args=(${run_args})"
  [ ${#args[@]} -eq 2 ] || fail "$label: the ./app line gives ${#args[@]} arguments; README's program takes MODEL PROMPT"
  "$prefix/bin/latte" run -m "${args[0]}" -p "${args[1]}" --temp 0 -n 200 --seed 1 </dev/null 2>/dev/null >"$run_dir/want" ||
    fail "$label: the installed latte run failed on ${args[0]}"
  local got
  got=$(cat "$run_dir/out")
  [[ "$(cat "$run_dir/want")" == "$got"* ]] ||
    fail "$label: printed '$got', which does not begin latte run --temp 0's '$(cat "$run_dir/want")'"
}
static=0
if want embed || want c-api; then
  need_prefix
  libdir=$(dirname "$(dirname "$(find "$prefix" -path '*/pkgconfig/latte.pc' | head -1)")")
  if [ ! -e "$libdir/liblatte.so" ] && [ -e "$libdir/liblatte.a" ]; then static=1; fi
fi
if want embed; then
  c=$(blocks "$run_dir/readme" Embed c)
  cm=$(blocks "$run_dir/readme" Embed cmake)
  ns=$(blocks "$run_dir/readme" Embed sh)
  [ "$(echo "$c" | wc -w)" -eq 1 ] || fail "$rname: '## Embed' must hold one C block (it has $(echo "$c" | wc -w))"
  [ "$(echo "$cm" | wc -w)" -eq 1 ] || fail "$rname: '## Embed' must hold one cmake block (it has $(echo "$cm" | wc -w))"
  [ -n "$ns" ] || fail "$rname has no sh block under '## Embed'"
  envs=() compiles=() runs=()
  for n in $ns; do
    while IFS=$'\t' read -r line cmd; do
      if [[ $cmd =~ ^export[[:space:]] ]]; then envs+=("$(substitute "$cmd")")
      elif [[ $cmd == *pkg-config* ]]; then compiles+=("$line"$'\t'"$cmd")
      elif [[ $cmd == *./app* ]]; then runs+=("$(substitute "$cmd")")
      else fail "$rname:$line (Embed): '$cmd': neither an export, a pkg-config build nor a ./app run (teach scripts/check_readme.sh)"
      fi
    done < <(commands "$run_dir/readme" "$n")
  done
  [ ${#compiles[@]} -gt 0 ] || fail "$rname: '## Embed' shows no pkg-config line"
  [ ${#runs[@]} -eq 1 ] || fail "$rname: '## Embed' must show one ./app line (it shows ${#runs[@]})"
  run_line=${runs[0]}
  run_args=${run_line#*./app}
  env_part=""
  for e in "${envs[@]}"; do env_part+="$e"$'\n'; done

  k=0
  for entry in "${compiles[@]}"; do
    line=${entry%%$'\t'*} cmd=${entry#*$'\t'}
    label="$rname:$line (Embed, pkg-config)"
    if [ "$static" -eq 1 ] && [[ $cmd != *--static* ]]; then
      why="$label: not for a static install ($prefix): '$cmd'"
      say "skipped: $why"; skipped+=("$why"); continue
    fi
    k=$((k + 1))
    d=$run_dir/embed-pc-$k
    mkdir -p "$d"
    cp "$run_dir/readme/$c" "$d/app.c"
    run "$d" "$label, then its ./app line" "$env_part$(substitute "$cmd")"$'\n'"$run_line"
    app_check "$label"
    if [ "$static" -eq 1 ] && readelf -d "$d/app" | grep 'NEEDED.*liblatte' >/dev/null; then
      fail "$label: linked against a static install, app still needs liblatte.so"
    fi
  done

  # The CMake snippet in a project of its own around app.c, configured as
  # the section's text says.
  pp=$(section_text "$readme" Embed | grep -o -- '-DCMAKE_PREFIX_PATH=[^` ]*' | head -1)
  [ -n "$pp" ] || fail "$rname: '## Embed' does not say the -DCMAKE_PREFIX_PATH=... to configure with"
  d=$run_dir/embed-cmake
  mkdir -p "$d"
  cp "$run_dir/readme/$c" "$d/app.c"
  { echo "cmake_minimum_required(VERSION 3.16)"
    echo "project(app C)"
    echo "add_executable(app app.c)"
    cat "$run_dir/readme/$cm"; } >"$d/CMakeLists.txt"
  label="$rname:$(first_line "$run_dir/readme" "$cm") (Embed, CMake)"
  run "$d" "$label: configure and build" "cmake -S . -B build $(substitute "$pp")"$'\n'"cmake --build build"
  mkdir -p "$d/build"
  run "$d/build" "$label, then its ./app line" "$env_part$run_line"
  app_check "$label"
fi

# ---------------------------------------------------------------- c-api
if want c-api; then
  cname=$(basename "$capi")
  cc_line=$(tr '\n' ' ' <"$capi" | grep -o '`cc [^`]*`' | head -1 | tr -d '`' | tr -s ' ')
  [ -n "$cc_line" ] || fail "$cname gives no \`cc ...\` line to build its C program with"
  if [ "$static" -eq 1 ]; then cc_line=${cc_line/pkg-config --cflags/pkg-config --static --cflags}; fi
  cfile=$(echo "$cc_line" | awk '{ print $2 }')
  [[ $cfile == *.c ]] || fail "$cname: its line '$cc_line' builds no .c file"
  printf '%s' "$CHAT_INPUT" >"$run_dir/chat-input"
  progs=0
  for lang in c cpp; do
    for n in $(awk -F'\t' -v l="$lang" '$3 == l { print $1 }' "$run_dir/capi/index"); do
      grep -q 'int main(' "$run_dir/capi/$n" || continue
      progs=$((progs + 1))
      d=$run_dir/c-api-$n
      mkdir -p "$d"
      label="$cname:$(first_line "$run_dir/capi" "$n") ($lang program)"
      if [ "$lang" = c ]; then
        cp "$run_dir/capi/$n" "$d/$cfile"
        build="$cc_line -o prog"
      else
        cp "$run_dir/capi/$n" "$d/app.cpp"
        pcs="--cflags --libs"
        if [ "$static" -eq 1 ]; then pcs="--static $pcs"; fi
        build="c++ -std=c++17 app.cpp -o prog \$(pkg-config $pcs latte)"
      fi
      # Its arguments from its usage line: MODEL.gguf the installed model, PROMPT a prompt.
      usage=$(grep -o 'usage: [^\\"]*' "$run_dir/capi/$n" | head -1)
      [ -n "$usage" ] || fail "$label: no 'usage: ...' line to take its arguments from"
      args=""
      for a in $(echo "$usage" | cut -d' ' -f3-); do
        case $a in
          MODEL.gguf) args+=" $prefix/share/latte/latte-tiny-mla.gguf" ;;
          PROMPT) args+=" 'And it came to pass'" ;;
          *) fail "$label: its usage '$usage' names '$a', which this checker cannot fill in" ;;
        esac
      done
      run "$d" "$label: built as its text says, run with two lines of input" \
        "export PKG_CONFIG_PATH='$libdir/pkgconfig' LD_LIBRARY_PATH='$libdir'"$'\n'"$build"$'\n'"./prog$args" \
        "$run_dir/chat-input"
      has_text || fail "$label: printed no text"
      if [ "$static" -eq 1 ] && readelf -d "$d/prog" | grep 'NEEDED.*liblatte' >/dev/null; then
        fail "$label: linked against a static install, it still needs liblatte.so"
      fi
    done
  done
  [ "$progs" -ge 2 ] || fail "$cname: $progs complete programs (blocks with a main) found, expected its C and C++ ones"
fi

# ---------------------------------------------------------------- shipped
if want shipped; then
  n=$(blocks "$run_dir/readme" "The shipped model" text)
  [ "$(echo "$n" | wc -w)" -eq 1 ] || fail "$rname: '## The shipped model' must hold one text block"
  # Each "$ CMD" line: DIR/<k>.line (its README line), <k>.cmd, <k>.want
  # (the lines below it).
  sd=$run_dir/shipped
  mkdir -p "$sd"
  awk -v base="$(first_line "$run_dir/readme" "$n")" -v dir="$sd" '
    /^\$ / { k++; print base + NR - 1 > (dir "/" k ".line"); print substr($0, 3) > (dir "/" k ".cmd")
             printf "" > (dir "/" k ".want"); next }
    k { print > (dir "/" k ".want") }
  ' "$run_dir/readme/$n"
  [ -f "$sd/1.cmd" ] || fail "$rname: the shipped model's block has no \$ lines"
  isa=""
  # prompt_of WORDS...: the value of -p.
  prompt_of() { while [ $# -gt 0 ]; do if [ "$1" = -p ]; then echo "${2:-}"; return; fi; shift; done; }
  for ((k = 1; ; k++)); do
    [ -f "$sd/$k.cmd" ] || break
    label="$rname:$(cat "$sd/$k.line") (The shipped model)"
    cmd=$(cat "$sd/$k.cmd")
    expect=$(cat "$sd/$k.want")
    [ -n "$expect" ] || fail "$label: no output shown under '$cmd'"
    alias_args=""
    if [[ $cmd == *"# = "* ]]; then alias_args=${cmd#*# = }; fi
    cmd=${cmd%%#*}
    cmd=${cmd%"${cmd##*[![:space:]]}"}
    for variant in main alias; do
      if [ "$variant" = alias ]; then
        [ -n "$alias_args" ] || continue
        cmd="scripts/run.sh $alias_args"
        label="$label, as its comment spells it"
      fi
      eval "words=(${cmd})"
      prompt=$(prompt_of "${words[@]}")
      if [ -z "$prompt" ] && [ -n "$alias_args" ]; then
        eval "words=(${alias_args})"
        prompt=$(prompt_of "${words[@]}")
      fi
      run "$root" "$label" "$(substitute "$cmd")"
      got=$(cat "$run_dir/out")
      if [ -z "$isa" ]; then
        isa=$("$root/build/bin/latte" info "$model" 2>/dev/null </dev/null | sed -n 's/^kernels: *\([a-z0-9]*\).*/\1/p')
      fi
      if [ "$got" = "$expect" ] || [ "$prompt$got" = "$expect" ]; then
        continue
      elif ! [[ "$cmd " =~ --temp[[:space:]]+0[[:space:]] ]] && [ "$isa" != "$SHIPPED_ISA" ]; then
        has_text || fail "$label: printed no text"
        why="$label: sampled with the ${isa:-unknown} kernels, README's text was made with $SHIPPED_ISA's: text checked, not compared"
        say "$why"; skipped+=("$why")
      else
        fail "$label: printed '$got'; README shows '$expect'"
      fi
    done
  done
fi

echo "check_readme: $checked commands and programs from $rname and $(basename "$capi") ran as printed${skipped[*]:+; ${#skipped[@]} not run or not compared (above)}"
