#!/usr/bin/env bash
# Latte beside llama.cpp and ik_llama.cpp on one model file: prefill and
# decode tok/s at each depth, the engines alternating round by round, one
# table, Latte over the best peer.
#
#   scripts/compare.sh -m FILE --llama-bench PATH [--ik-bench PATH]
#                      [--depths 0,4096,16384] [-p 512] [-n 32] [--rounds 2]
#                      [--reps 2] [-t THREADS] [--json OUT] [--raw-dir DIR] ...
#
# The peers' llama-bench programs are built by the user from their own
# sources, outside this repository (docs/performance.md, "Against llama.cpp
# and ik_llama.cpp", has the build commands). --help lists every option.
#
# Each round runs every engine once, in the order of the round before
# reversed, so a drift of the machine's speed during the run does not always
# favour the same engine; each engine's figure is the best of its rounds.
# Within a round every engine repeats each test --reps times (-r, default
# 2) and the best counts. Both warm up with a whole unmeasured prompt
# before they time one (`latte bench` times that first prefill after load
# apart, as "cold": the JSON's prefill_cold_tok_s, kept in --raw-dir), so
# the repetitions are there for the noise of a shared machine. Latte runs
# with its defaults (the file read into memory where it fits, else mapped)
# unless --latte-args says otherwise.
#
# What each engine measures at depth D (tokens already in the cache):
#   Latte          `latte bench --depths D`: prefill of -p tokens at D, and
#                  -n decode steps from D.
#   llama.cpp      llama-bench -d D: the same two tests (pp@dD, tg@dD).
#   ik_llama.cpp   its llama-bench has no depth option. Decode at D is its
#                  -gp D,N (a prompt of D tokens, then N decode steps timed
#                  alone); prefill at D > 0 cannot be asked of it, and the
#                  table says n/a there.
# The engines run in this script's environment: the peers' threads are
# OpenMP's where they were built with it (llama.cpp's default), and on a
# machine whose cores other programs use, OpenMP threads that spin while
# they wait take the core from the thread they wait for; Latte's threads are
# its own (docs/performance.md, "Threads and other load on the cores"). The
# table and the JSON record OMP_WAIT_POLICY, GOMP_SPINCOUNT and Latte's
# LATTE_POOL_SPIN_US and LATTE_POOL_ADAPT (null: unset).
#
# With --batch 1,2,4,8 it compares aggregate decode of N sequences instead:
# `latte bench --batch` against each peer's llama-batched-bench (-npp D:
# each sequence's own prompt of D tokens, then -ntg N steps of all of them;
# its S_TG t/s), at each depth D of --depths (512 unless given).
# Needs python3 (the JSON is read with it) and bash 4.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/compare.sh -m FILE (--llama-bench PATH | --ik-bench PATH)... [options]

Runs Latte (`latte bench`) and each peer's llama-bench on the same GGUF file,
the engines alternating round by round, and prints one table: tok/s per
engine, the best peer, and Latte over it.

  -m, --model FILE      GGUF model file (required)
  --llama-bench PATH    llama.cpp's llama-bench (run with -fa 1: flash
                        attention, f16 cache)
  --ik-bench PATH       ik_llama.cpp's llama-bench (run with -mla 3 -fa 1
                        -fmoe 1, once as is and once with -rtr 1,
                        run-time repacking, unless --no-ik-rtr)
                        (at least one of the two peers is required)
  --latte PATH          the latte program (default: build Release with
                        scripts/build_release.sh and use build/bin/latte)
  --depths LIST         context depths, comma-separated (default 0,4096,16384)
  -p N                  prompt tokens of the prefill test (default 512; 0: none)
  -n N                  decode steps of the decode test (default 32; 0: none)
  --rounds N            rounds, each running every engine once (default 2)
  --reps N              repetitions of each test within a round (-r; default
                        2; ik_llama.cpp's -gp prompt is processed again each)
  -t, --threads N       threads for every engine (default: nproc)
  --cache-type T        Latte's latent cache: int8, int4, f16 or f32 (default
                        int8); with int4 the peers run their 4-bit caches
                        (llama.cpp -ctk q4_0 -ctv q4_0, ik_llama.cpp -ctk q4_0)
  --no-ik-rtr           leave out the ik_llama.cpp -rtr 1 run
  --latte-args "ARGS"   more arguments for `latte bench` (e.g. "--mmap")
  --llama-args "ARGS"   more arguments for llama.cpp's llama-bench
  --ik-args "ARGS"      more arguments for ik_llama.cpp's llama-bench
  --json OUT            also write the points as JSON to OUT
  --raw-dir DIR         keep every run's output (JSON and log) in DIR
  --batch LIST          aggregate decode of N sequences stepped together,
                        for each N in LIST (e.g. 1,2,4,8), each sequence at
                        each depth of --depths (default 512 here); the peers
                        are then their llama-batched-bench programs:
  --llama-batched PATH  llama.cpp's llama-batched-bench (-fa on)
  --ik-batched PATH     ik_llama.cpp's llama-batched-bench (-mla 3 -fa 1,
                        as is and with -rtr (run-time repacking) unless --no-ik-rtr)
  -h, --help            this help

JSON: {"points": [{"test": "prefill"|"decode", "depth": N, "latte_tok_s": x,
"best_peer": NAME, "best_peer_tok_s": y, "ratio": x/y, "peers": {NAME: tok/s
or null}}, ...], "not_comparable": [...], "engines": [...], ...}; a point no
peer measured has best_peer, best_peer_tok_s and ratio null.
EOF
}

die() { echo "compare.sh: $*" >&2; exit 2; }
need_arg() { [ "$#" -ge 2 ] && [ -n "$2" ] || die "$1 needs a value (see --help)"; }

[ "${BASH_VERSINFO[0]}" -ge 4 ] || die "needs bash 4 or newer (this is $BASH_VERSION; on macOS: brew install bash)"
repo=$(cd "$(dirname "$0")/.." && pwd)
model="" llama="" ik="" latte="" depths="" n_prompt=512 batch="" llama_batched="" ik_batched=""
n_prompt=512 n_gen=32 rounds=2 reps=2
threads="" cache=int8 ik_rtr=1 latte_args="" llama_args="" ik_args="" json_out="" raw_dir=""
[ "$#" -gt 0 ] || { usage >&2; exit 2; }
while [ "$#" -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    -m|--model) need_arg "$@"; model=$2; shift 2 ;;
    --llama-bench) need_arg "$@"; llama=$2; shift 2 ;;
    --ik-bench) need_arg "$@"; ik=$2; shift 2 ;;
    --latte) need_arg "$@"; latte=$2; shift 2 ;;
    --depths) need_arg "$@"; depths=$2; shift 2 ;;
    -p|--n-prompt) need_arg "$@"; n_prompt=$2; shift 2 ;;
    -n|--n-gen) need_arg "$@"; n_gen=$2; shift 2 ;;
    --rounds) need_arg "$@"; rounds=$2; shift 2 ;;
    --reps) need_arg "$@"; reps=$2; shift 2 ;;
    -t|--threads) need_arg "$@"; threads=$2; shift 2 ;;
    --cache-type) need_arg "$@"; cache=$2; shift 2 ;;
    --no-ik-rtr) ik_rtr=0; shift ;;
    --latte-args) [ "$#" -ge 2 ] || die "$1 needs a value"; latte_args=$2; shift 2 ;;
    --llama-args) [ "$#" -ge 2 ] || die "$1 needs a value"; llama_args=$2; shift 2 ;;
    --ik-args) [ "$#" -ge 2 ] || die "$1 needs a value"; ik_args=$2; shift 2 ;;
    --json) need_arg "$@"; json_out=$2; shift 2 ;;
    --raw-dir) need_arg "$@"; raw_dir=$2; shift 2 ;;
    --batch) need_arg "$@"; batch=$2; shift 2 ;;
    --llama-batched) need_arg "$@"; llama_batched=$2; shift 2 ;;
    --ik-batched) need_arg "$@"; ik_batched=$2; shift 2 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

# ---------------------------------------------------------------- checks
command -v python3 >/dev/null || die "python3 is needed to read the engines' JSON, and was not found"
[ -n "$model" ] || die "no model: give -m FILE"
[ -e "$model" ] || die "model file '$model' does not exist"
[ -f "$model" ] && [ -r "$model" ] || die "model '$model' is not a readable regular file"
[ "$(head -c 4 "$model")" = GGUF ] || die "model '$model' is not a GGUF file (it does not start with 'GGUF')"
if [ -n "$batch" ]; then
  [ -n "$llama_batched$ik_batched" ] || die "--batch: give --llama-batched PATH and/or --ik-batched PATH"
  [ -z "$llama$ik" ] || die "--batch compares with llama-batched-bench: give --llama-batched/--ik-batched, not --llama-bench/--ik-bench"
  [[ "$batch" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "bad --batch '$batch': want positive integers separated by commas, e.g. 1,2,4,8"
  batch=$(tr , '\n' <<<"$batch" | while read -r b; do
    [ "${#b}" -le 3 ] && [ $((10#$b)) -ge 1 ] || die "bad --batch: $b (want 1 to 999)"
    echo $((10#$b)); done | sort -n -u | paste -sd, -)
  depths=${depths:-512}
else
  [ -z "$llama_batched$ik_batched" ] || die "--llama-batched and --ik-batched go with --batch"
  [ -n "$llama$ik" ] || die "no peer: give --llama-bench PATH and/or --ik-bench PATH"
  depths=${depths:-0,4096,16384}
fi
check_prog() {  # option, path
  [ -e "$2" ] || die "$1 '$2' does not exist"
  [ -f "$2" ] && [ -x "$2" ] || die "$1 '$2' is not an executable file"
}
[ -z "$llama" ] || check_prog --llama-bench "$llama"
[ -z "$ik" ] || check_prog --ik-bench "$ik"
[ -z "$llama_batched" ] || check_prog --llama-batched "$llama_batched"
[ -z "$ik_batched" ] || check_prog --ik-batched "$ik_batched"
[ -z "$latte" ] || check_prog --latte "$latte"
[[ "$depths" =~ ^[0-9]+(,[0-9]+)*$ ]] ||
  die "bad --depths '$depths': want non-negative integers separated by commas, e.g. 0,4096,16384"
# Sorted, without repeats, leading zeros gone (10# reads 010 as ten).
depths=$(tr , '\n' <<<"$depths" | while read -r d; do
  [ "${#d}" -le 9 ] || die "bad --depths: $d is too deep"
  echo $((10#$d)); done | sort -n -u | paste -sd, -)
is_uint() { [[ "$2" =~ ^[0-9]+$ ]] && [ "${#2}" -le 7 ] || die "bad $1 '$2': want a non-negative integer"; }
is_uint -p "$n_prompt"; is_uint -n "$n_gen"; is_uint --rounds "$rounds"; is_uint --reps "$reps"
n_prompt=$((10#$n_prompt)) n_gen=$((10#$n_gen)) rounds=$((10#$rounds)) reps=$((10#$reps))
[ "$n_prompt" -gt 0 ] || [ "$n_gen" -gt 0 ] || die "-p and -n are both 0: nothing to measure"
[ "$rounds" -ge 1 ] || die "bad --rounds 0: want at least 1"
[ "$reps" -ge 1 ] && [ "$reps" -le 100 ] || die "bad --reps $reps: want 1 to 100"
if [ -z "$threads" ]; then threads=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN); fi
is_uint --threads "$threads"; threads=$((10#$threads))
[ "$threads" -ge 1 ] || die "bad --threads 0: want at least 1"
case "$cache" in int8|int4|f16|f32) ;; *) die "bad --cache-type '$cache': want int8, int4, f16 or f32" ;; esac
# Against Latte's int4 cache, the peers' 4-bit ones: llama.cpp's q4_0 K and V
# (deepseek2's automatic Hadamard rotation with it), ik_llama.cpp's q4_0 MLA
# cache (-mla 3 keeps K alone; its flash attention takes q4_0 only when built
# with -DGGML_IQK_FA_ALL_QUANTS=ON, else it stops with "Fatal error").
if [ "$cache" = int4 ]; then
  llama_args="-ctk q4_0 -ctv q4_0 $llama_args"
  ik_args="-ctk q4_0 $ik_args"
fi

if [ -z "$latte" ]; then
  "$repo/scripts/build_release.sh" latte_cli
  latte=$repo/build/bin/latte
fi

# The engines run in the work folder (llama-batched-bench writes llama.log
# where it runs), so every path they get is absolute.
model=$(realpath "$model")
for v in llama ik llama_batched ik_batched latte; do [ -z "${!v}" ] || printf -v "$v" '%s' "$(realpath "${!v}")"; done
work=$(mktemp -d "${TMPDIR:-/tmp}/latte-compare.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [ -n "$raw_dir" ]; then mkdir -p "$raw_dir" || die "cannot make --raw-dir '$raw_dir'"; fi

# ---------------------------------------------------------------- engines
# Each engine: a name, a kind (latte, llama, ik) and its argument list; the
# list is kept in engines.tsv for the reader below.
IFS=, read -r -a depth_list <<<"$depths"
has_depth0=0
for d in "${depth_list[@]}"; do [ "$d" -eq 0 ] && has_depth0=1; done
deep=()  # the depths above 0
for d in "${depth_list[@]}"; do [ "$d" -gt 0 ] && deep+=("$d"); done

names=() kinds=() progs=() notes=()
declare -A argv  # name -> arguments, one per line
add_engine() {  # name kind prog args...
  names+=("$1"); kinds+=("$2"); progs+=("$3")
  argv[$1]=$(printf '%s\n' "${@:4}")
}
read -r -a extra_latte <<<"$latte_args"
if [ -n "$batch" ]; then
  [ "$n_gen" -gt 0 ] || die "--batch measures decode: -n must be > 0"
  add_engine latte latte "$latte" bench -m "$model" --batch "$batch" --depths "$depths" --cache-type "$cache" \
    --threads "$threads" -n "$n_gen" -r "$reps" --json "${extra_latte[@]}"
  # Room for the largest batch of the deepest sequences (llama-batched-bench
  # gives each sequence its own prompt).
  max_b=${batch##*,} max_d=${depths##*,}
  ctx=$((max_b * (max_d + n_gen) + 16))
  bb_common=(-m "$model" -c "$ctx" -b 2048 -ub 512 -npp "$depths" -ntg "$n_gen" -npl "$batch" -t "$threads")
  if [ -n "$llama_batched" ]; then
    help=$(cd "$work" && "$llama_batched" --help 2>&1 || true)
    [[ "$help" == *-npl* ]] || die "--llama-batched '$llama_batched' does not look like llama-batched-bench: its --help has no -npl"
    fa=(-fa); [[ "$help" == *"--flash-attn [on|off|auto]"* || "$help" == *"-fa, --flash-attn FA"* ]] && fa=(-fa on)
    read -r -a extra <<<"$llama_args"
    add_engine llama.cpp llama "$llama_batched" "${bb_common[@]}" "${fa[@]}" "${extra[@]}"
  fi
  if [ -n "$ik_batched" ]; then
    help=$(cd "$work" && "$ik_batched" --help 2>&1 || true)
    [[ "$help" == *-npl* && "$help" == *-mla* ]] ||
      die "--ik-batched '$ik_batched' does not look like ik_llama.cpp's llama-batched-bench: its --help has no -npl or -mla"
    read -r -a extra <<<"$ik_args"
    add_engine ik_llama.cpp ik "$ik_batched" "${bb_common[@]}" -mla 3 -fa 1 "${extra[@]}"
    [ "$ik_rtr" = 0 ] || add_engine "ik_llama.cpp -rtr" ik "$ik_batched" "${bb_common[@]}" -mla 3 -fa 1 -rtr "${extra[@]}"
  fi
else
add_engine latte latte "$latte" bench -m "$model" --depths "$depths" --cache-type "$cache" \
  --threads "$threads" -p "$n_prompt" -n "$n_gen" -r "$reps" --json "${extra_latte[@]}"

llama_depth=0
if [ -n "$llama" ]; then
  help=$(cd "$work" && "$llama" --help 2>&1 || true)
  [[ "$help" == *--n-prompt* ]] || die "--llama-bench '$llama' does not look like llama-bench: its --help has no --n-prompt"
  [[ "$help" == *--n-depth* ]] && llama_depth=1
  read -r -a extra <<<"$llama_args"
  if [ "$llama_depth" = 1 ]; then
    add_engine llama.cpp llama "$llama" -m "$model" -p "$n_prompt" -n "$n_gen" -d "$depths" \
      -t "$threads" -r "$reps" -fa 1 -o json "${extra[@]}"
  elif [ "$has_depth0" = 1 ]; then
    notes+=("llama.cpp: this llama-bench has no -d/--n-depth, so it is measured at depth 0 only")
    add_engine llama.cpp llama "$llama" -m "$model" -p "$n_prompt" -n "$n_gen" \
      -t "$threads" -r "$reps" -fa 1 -o json "${extra[@]}"
  else
    notes+=("llama.cpp: this llama-bench has no -d/--n-depth and depth 0 was not asked for: not run")
  fi
fi
if [ -n "$ik" ]; then
  help=$(cd "$work" && "$ik" --help 2>&1 || true)
  [[ "$help" == *--n-prompt* ]] || die "--ik-bench '$ik' does not look like llama-bench: its --help has no --n-prompt"
  [[ "$help" == *-gp* && "$help" == *-mla* ]] ||
    die "--ik-bench '$ik' does not look like ik_llama.cpp's llama-bench: its --help has no -gp or -mla"
  read -r -a extra <<<"$ik_args"
  # Depth 0 through -p/-n; each deeper depth through -gp DEPTH,N (decode).
  ik_common=(-m "$model" -t "$threads" -r "$reps" -mla 3 -fa 1 -fmoe 1 -o json)
  if [ "$has_depth0" = 1 ]; then ik_common+=(-p "$n_prompt" -n "$n_gen"); else ik_common+=(-p 0 -n 0); fi
  if [ "$n_gen" -gt 0 ]; then for d in "${deep[@]}"; do ik_common+=(-gp "$d,$n_gen"); done; fi
  if [ "$n_prompt" -gt 0 ] && [ "${#deep[@]}" -gt 0 ]; then
    notes+=("ik_llama.cpp: its llama-bench has no depth option; -gp DEPTH,N times decode only, so prefill at a depth above 0 is n/a")
  fi
  if [ "$has_depth0" = 1 ] || { [ "$n_gen" -gt 0 ] && [ "${#deep[@]}" -gt 0 ]; }; then
    add_engine ik_llama.cpp ik "$ik" "${ik_common[@]}" "${extra[@]}"
    [ "$ik_rtr" = 0 ] || add_engine "ik_llama.cpp -rtr" ik "$ik" "${ik_common[@]}" -rtr 1 "${extra[@]}"
  else
    notes+=("ik_llama.cpp: nothing it can measure was asked for (prefill at depths above 0 only): not run")
  fi
fi
fi
if [ "${#names[@]}" -lt 2 ]; then
  printf 'compare.sh: %s\n' "${notes[@]}" >&2
  die "no peer is left to run"
fi

# The machine, for the table's header.
cpu=$( (grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //') || true)
[ -n "$cpu" ] || cpu=$( (sysctl -n machdep.cpu.brand_string 2>/dev/null) || true)
[ -n "$cpu" ] || cpu=$(uname -m)
isa=""
if [ -r /proc/cpuinfo ]; then
  flags=" $(grep -m1 -E '^(flags|Features)' /proc/cpuinfo | sed 's/.*: //') "
  for f in avx2 avx512f avx512_bf16 avx512_vnni asimd asimddp sve; do
    [[ "$flags" == *" $f "* ]] && isa+="${isa:+ }$f"
  done
fi
machine="$cpu, $(nproc 2>/dev/null || echo ?) CPUs${isa:+ ($isa)}"
date_utc=$(date -u +%Y-%m-%dT%H:%MZ)

# ---------------------------------------------------------------- rounds
{ for i in "${!names[@]}"; do printf '%s\t%s\t%s\n' "$i" "${names[$i]}" "${kinds[$i]}"; done; } > "$work/engines.tsv"
order=("${!names[@]}")
for ((r = 1; r <= rounds; r++)); do
  for i in "${order[@]}"; do
    name=${names[$i]}
    mapfile -t args <<<"${argv[$name]}"
    echo "compare.sh: round $r/$rounds: $name: ${progs[$i]} ${args[*]}" >&2
    out=$work/$i-r$r.json log=$work/$i-r$r.log
    rc=0
    (cd "$work" && "${progs[$i]}" "${args[@]}") >"$out" 2>"$log" </dev/null || rc=$?
    if [ -n "$raw_dir" ]; then
      safe=${name// /_}
      cp "$out" "$raw_dir/$safe-r$r.json"; cp "$log" "$raw_dir/$safe-r$r.log"
    fi
    if [ "$rc" -ne 0 ]; then
      echo "compare.sh: $name failed (exit $rc); the end of what it said:" >&2
      tail -n 20 "$log" >&2
      exit 1
    fi
  done
  # The next round runs them in the reverse order.
  rev=(); for ((k = ${#order[@]} - 1; k >= 0; k--)); do rev+=("${order[$k]}"); done
  order=("${rev[@]}")
done

# ---------------------------------------------------------------- batch table
if [ -n "$batch" ]; then
  COMPARE_MODEL=$model COMPARE_DEPTHS=$depths COMPARE_BATCH=$batch COMPARE_N=$n_gen COMPARE_ROUNDS=$rounds \
  COMPARE_THREADS=$threads COMPARE_CACHE=$cache COMPARE_MACHINE=$machine COMPARE_DATE=$date_utc \
    python3 - "$work" "$json_out" <<'PY'
import json, os, re, sys

work, json_out = sys.argv[1], sys.argv[2]
env = os.environ
depths = [int(d) for d in env["COMPARE_DEPTHS"].split(",")]
batches = [int(b) for b in env["COMPARE_BATCH"].split(",")]
rounds = int(env["COMPARE_ROUNDS"])
engines = [l.rstrip("\n").split("\t") for l in open(os.path.join(work, "engines.tsv"))]


def fail(msg):
    print("compare.sh: " + msg, file=sys.stderr)
    sys.exit(1)


# llama-batched-bench's rows: |PP|TG|B|N_KV|T_PP s|S_PP t/s|T_TG s|S_TG t/s|T s|S t/s| (on
# stdout or stderr, with its log around them).
row = re.compile(r"^\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|" + r"\s*([\d.]+)\s*\|" * 6)
best, bound = {}, {}
for i, name, kind in engines:
    best[name] = {}
    for r in range(1, rounds + 1):
        out, log = (open(os.path.join(work, f"{i}-r{r}.{ext}"), errors="replace").read() for ext in ("json", "log"))
        if kind == "latte":
            try:
                doc = json.loads(out)
            except ValueError:
                fail(f"latte: its output is not JSON")
            for rec in doc["batch"]:
                key = (rec["depth"], rec["n"])
                if rec["decode_tok_s"] > best[name].get(key, 0):
                    best[name][key] = rec["decode_tok_s"]
                    bound[key] = rec["bound_pct"]
            continue
        for line in (out + "\n" + log).splitlines():
            m = row.match(line.strip())
            if m:
                key = (int(m.group(1)), int(m.group(3)))
                best[name][key] = max(best[name].get(key, 0.0), float(m.group(8)))
peers = [name for _, name, kind in engines if kind != "latte"]
rows, points = [], []
for d in depths:
    for b in batches:
        x = best["latte"].get((d, b))
        if x is None:
            fail(f"latte reported no batch of {b} at depth {d}")
        vals = {p: best[p].get((d, b)) for p in peers}
        have = {p: v for p, v in vals.items() if v}
        bp = max(have, key=have.get) if have else None
        ratio = x / have[bp] if bp else None
        points.append({"depth": d, "n": b, "latte_tok_s": round(x, 2), "latte_bound_pct": bound.get((d, b)),
                       "best_peer": bp, "best_peer_tok_s": round(have[bp], 2) if bp else None,
                       "ratio": round(ratio, 3) if ratio else None, "peers": vals})
        rows.append([str(d), str(b), f"{x:.2f}", f"{bound.get((d, b), 0):.0f}%"] +
                    [f"{vals[p]:.2f}" if vals[p] else "missing" for p in peers] +
                    [bp or "-", f"{ratio:.2f}x" if ratio else "n/a"])
print(f"model {env['COMPARE_MODEL']}")
print(f"machine {env['COMPARE_MACHINE']}; {env['COMPARE_DATE']}")
print(f"{env['COMPARE_THREADS']} threads; aggregate decode of N sequences, -n {env['COMPARE_N']} steps; best of "
      f"{rounds} round(s), engines alternating; Latte {env['COMPARE_CACHE']} cache")
head = ["depth", "N", "latte", "of bound"] + peers + ["best peer", "latte/best"]
widths = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(head)]
fmt = lambda r: " | ".join(c.rjust(w) for c, w in zip(r, widths))
print(fmt(head))
print("-+-".join("-" * w for w in widths))
for r in rows: print(fmt(r))
print("(tok/s of all N sequences together; of bound: Latte against the bytes its steps read at the plain read "
      "bandwidth; peers: llama-batched-bench's S_TG)")
if json_out:
    with open(json_out, "w") as f:
        json.dump({"batch_points": points, "model": env["COMPARE_MODEL"], "machine": env["COMPARE_MACHINE"],
                   "date": env["COMPARE_DATE"], "threads": int(env["COMPARE_THREADS"]), "n_gen": int(env["COMPARE_N"]),
                   "rounds": rounds, "latte_cache_type": env["COMPARE_CACHE"],
                   "engines": [{"name": n, "kind": k} for _, n, k in engines]}, f, indent=2)
        f.write("\n")
    print(f"compare.sh: wrote {json_out}", file=sys.stderr)
PY
  exit 0
fi

# ---------------------------------------------------------------- table
printf '%s\n' "${notes[@]}" > "$work/notes.txt"
peer_desc=""
[ -z "$llama" ] || peer_desc+="llama.cpp $llama -fa 1${llama_args:+ $llama_args}; "
if [ -n "$ik" ]; then
  peer_desc+="ik_llama.cpp $ik -mla 3 -fa 1 -fmoe 1${ik_args:+ $ik_args}"
  if [ "$ik_rtr" = 1 ]; then peer_desc+=" (and with -rtr 1)"; fi
  peer_desc+="; "
fi
COMPARE_MODEL=$model COMPARE_DEPTHS=$depths COMPARE_P=$n_prompt COMPARE_N=$n_gen COMPARE_ROUNDS=$rounds \
COMPARE_REPS=$reps COMPARE_THREADS=$threads COMPARE_CACHE=$cache COMPARE_MACHINE=$machine COMPARE_DATE=$date_utc \
COMPARE_LATTE="$latte${latte_args:+ $latte_args}" COMPARE_PEERS=$peer_desc \
  python3 - "$work" "$json_out" <<'PY'
import json, os, sys

work, json_out = sys.argv[1], sys.argv[2]
env = os.environ
depths = [int(d) for d in env["COMPARE_DEPTHS"].split(",")]
n_prompt, n_gen, rounds = int(env["COMPARE_P"]), int(env["COMPARE_N"]), int(env["COMPARE_ROUNDS"])
engines = []
with open(os.path.join(work, "engines.tsv")) as f:
    for line in f:
        i, name, kind = line.rstrip("\n").split("\t")
        engines.append((i, name, kind))
with open(os.path.join(work, "notes.txt")) as f:
    notes = [l.strip() for l in f if l.strip()]


def fail(msg):
    print("compare.sh: " + msg, file=sys.stderr)
    sys.exit(1)


def load(path, name):
    text = open(path).read()
    try:
        return json.loads(text)
    except ValueError:
        pass
    # Stray lines on stdout: before the document (a log line), or inside it
    # (ik_llama.cpp's llama-bench prints "WARNING: ... ggml_calloc!" after
    # its opening "["). llama-bench writes every key, bracket and brace of
    # its JSON at the start of a line, so the lines that start with a letter
    # go.
    lines = [l for l in text.splitlines() if not l.strip() or not l.lstrip()[0].isalpha()]
    while lines and lines[0].strip() not in ("[", "{") and not lines[0].startswith(("[", "{")):
        lines.pop(0)
    try:
        return json.loads("\n".join(lines))
    except ValueError:
        fail(f"{name}: its output {path} is not JSON")


def rate(rec):
    s = rec.get("samples_ts")
    return max(s) if s else float(rec["avg_ts"])


def points_of(kind, doc, name):
    """{(test, depth): tok/s} of one run."""
    got = {}
    if kind == "latte":
        for r in doc["results"]:
            if r.get("prefill_tok_s") is not None: got[("prefill", r["depth"])] = r["prefill_tok_s"]
            if r.get("decode_tok_s") is not None: got[("decode", r["depth"])] = r["decode_tok_s"]
        return got
    if not isinstance(doc, list):
        fail(f"{name}: expected llama-bench's JSON array")
    for rec in doc:
        p, n = int(rec["n_prompt"]), int(rec["n_gen"])
        test = str(rec.get("test", ""))
        if kind == "llama":
            d = int(rec.get("n_depth", 0))
            if n == 0 and p == n_prompt: got[("prefill", d)] = rate(rec)
            elif p == 0 and n == n_gen: got[("decode", d)] = rate(rec)
        else:  # ik: pp, tg at depth 0; tgN@ppD is decode at depth D
            if n == 0 and p == n_prompt: got[("prefill", 0)] = rate(rec)
            elif p == 0 and n == n_gen: got[("decode", 0)] = rate(rec)
            elif "@pp" in test and n == n_gen: got[("decode", p)] = rate(rec)
    return got


best = {name: {} for _, name, _ in engines}
commits = {}
for i, name, kind in engines:
    for r in range(1, rounds + 1):
        doc = load(os.path.join(work, f"{i}-r{r}.json"), name)
        for key, v in points_of(kind, doc, name).items():
            best[name][key] = max(best[name].get(key, 0.0), float(v))
        if kind != "latte" and isinstance(doc, list) and doc:
            commits[name] = str(doc[0].get("build_commit", "?"))

tests = [t for t, on in (("prefill", n_prompt > 0), ("decode", n_gen > 0)) if on]
peers = [name for _, name, kind in engines if kind != "latte"]
kind_of = {name: kind for _, name, kind in engines}


def why_missing(name, test, depth):
    if kind_of[name] == "ik" and test == "prefill" and depth > 0:
        return "n/a (no depth option)"
    if kind_of[name] == "llama" and depth > 0 and any("no -d" in n for n in notes):
        return "n/a (no -d)"
    return "missing"


points, rows = [], []
for test in tests:
    for d in depths:
        x = best["latte"].get((test, d))
        if x is None:
            fail(f"latte reported no {test} at depth {d}")
        vals = {p: best[p].get((test, d)) for p in peers}
        for p in peers:
            if vals[p] is None and why_missing(p, test, d) == "missing":
                print(f"compare.sh: warning: {p} reported no {test} at depth {d}", file=sys.stderr)
        have = {p: v for p, v in vals.items() if v is not None}
        bp = max(have, key=have.get) if have else None
        y = have[bp] if bp else None
        ratio = x / y if y else None
        points.append({"test": test, "depth": d, "latte_tok_s": round(x, 2), "best_peer": bp,
                       "best_peer_tok_s": round(y, 2) if y else None,
                       "ratio": round(ratio, 3) if ratio else None,
                       "peers": {p: (round(v, 2) if v is not None else None) for p, v in vals.items()}})
        rows.append([test, str(d), f"{x:.2f}"] +
                    [f"{vals[p]:.2f}" if vals[p] is not None else why_missing(p, test, d) for p in peers] +
                    [bp or "-", f"{ratio:.2f}x" if ratio else "n/a"])

print(f"model {env['COMPARE_MODEL']}")
print(f"machine {env['COMPARE_MACHINE']}; {env['COMPARE_DATE']}")
print(f"{env['COMPARE_THREADS']} threads; prefill -p {n_prompt}, decode -n {n_gen}; best of {rounds} "
      f"round(s) x {env['COMPARE_REPS']} repetition(s), engines alternating; Latte {env['COMPARE_CACHE']} cache")
omp = {k: env.get(k) for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "LATTE_POOL_SPIN_US", "LATTE_POOL_ADAPT")}
print("threads' environment: " + ", ".join(f"{k}={v if v is not None else '(unset)'}" for k, v in omp.items()))
for name in peers:
    if name in commits: print(f"{name}: build {commits[name]}")
head = ["test", "depth", "latte"] + peers + ["best peer", "latte/best"]
widths = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(head)]
fmt = lambda r: " | ".join(c.rjust(w) if k >= 1 else c.ljust(w) for k, (c, w) in enumerate(zip(r, widths)))
print(fmt(head))
print("-+-".join("-" * w for w in widths))
for r in rows: print(fmt(r))
print("(tok/s; latte/best: Latte over the fastest peer at that point)")
for n in notes: print("note: " + n)

if json_out:
    doc = {"points": points, "not_comparable": notes, "model": env["COMPARE_MODEL"],
           "machine": env["COMPARE_MACHINE"], "date": env["COMPARE_DATE"], "threads": int(env["COMPARE_THREADS"]),
           "n_prompt": n_prompt, "n_gen": n_gen, "rounds": rounds, "reps": int(env["COMPARE_REPS"]), "latte_cache_type": env["COMPARE_CACHE"],
           **omp,
           "engines": [{"name": name, "kind": kind, "build_commit": commits.get(name)} for _, name, kind in engines],
           "latte": env["COMPARE_LATTE"], "peers": env["COMPARE_PEERS"]}
    with open(json_out, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print(f"compare.sh: wrote {json_out}", file=sys.stderr)
PY
