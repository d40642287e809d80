#!/usr/bin/env bash
# Kinds from files against the built-ins: a declarative kind (Jobs/kinds/json-entry.json) against
# the built-in `entry` it mirrors, on compare.sh-sized work (2000 entries, 32 at once), and jobs per
# second of a trivial executable kind (one process per job).
#
# Usage: bash Tests/Benchmarks/kinds.sh [--jobs N] [--runs R] [--no-build]
#   --jobs N     jobs per run (default 2000)
#   --runs R     runs per variant, alternating; the median is shown (default 5)
#   --no-build   use the existing .build/release/runner
# Serves the entries with `runner fixture-server` on 127.0.0.1; writes to /dev/shm when there is one.
set -euo pipefail
cd "$(dirname "$0")/../.."
jobs=2000
runs=5
build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --jobs) jobs=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --no-build) build=0; shift ;;
        *) echo "kinds.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
[ "$build" = 1 ] && swift build -c release --product runner >&2
runner=$PWD/.build/release/runner
kinds=$PWD/Jobs/kinds
base_dir=/tmp
[ -d /dev/shm ] && base_dir=/dev/shm
work=$(mktemp -d "$base_dir/runner-kinds-bench-XXXXXX")
server_pid=
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

"$runner" fixture-server --port 0 >"$work/server.txt" &
server_pid=$!
for _ in $(seq 100); do grep -q listening "$work/server.txt" 2>/dev/null && break; sleep 0.05; done
base=$(sed -n 's/.*listening on //p' "$work/server.txt")
[ -n "$base" ] || { echo "kinds.sh: the fixture server did not start" >&2; exit 1; }

ids=(imgly.A.1 imgly.A.2 imgly.A.3 imgly.B.1 imgly.B.3.1 9e.A.1)
: >"$work/builtin.jsonl"; : >"$work/declared.jsonl"; : >"$work/exec.jsonl"
for i in $(seq "$jobs"); do
    id=${ids[$((i % ${#ids[@]}))]}
    echo "{\"kind\": \"entry\", \"id\": \"$id\", \"key\": \"entry:n$i\", \"url\": \"$base/entries/{id}.json?n=$i\"}" >>"$work/builtin.jsonl"
    echo "{\"kind\": \"json-entry\", \"id\": \"$id\", \"key\": \"json-entry:n$i\", \"url\": \"$base/entries/{id}.json?n=$i\"}" >>"$work/declared.jsonl"
    echo "{\"kind\": \"trivial\", \"name\": \"n$i\", \"url\": \"$base/entries/$id.json?n=$i\"}" >>"$work/exec.jsonl"
done
mkdir -p "$work/exec-kinds"
cat >"$work/exec-kinds/trivial.json" <<'KIND'
{"kind": "trivial", "summary": "Answers succeeded without reading the payload.",
 "parameters": {"name": {"type": "string", "required": true}}, "key": "trivial:{name}",
 "exec": ["sh", "-c", "cat >/dev/null; echo '{\"status\": \"succeeded\"}'"]}
KIND

# Wall time of one run into a fresh output folder, in seconds.
timed() {
    local out=$work/out-$RANDOM$RANDOM
    local start end
    start=$(date +%s.%N)
    "$runner" run "$@" --out "$out" --concurrency 32 >/dev/null 2>"$work/stderr" || { cat "$work/stderr" >&2; exit 1; }
    end=$(date +%s.%N)
    rm -rf "$out"
    echo "$end - $start" | bc -l
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

: >"$work/t-builtin"; : >"$work/t-declared"; : >"$work/t-exec"
for _ in $(seq "$runs"); do
    timed "$work/builtin.jsonl" >>"$work/t-builtin"
    timed "$work/declared.jsonl" --kinds "$kinds" >>"$work/t-declared"
done
for _ in $(seq "$runs"); do timed "$work/exec.jsonl" --kinds "$work/exec-kinds" >>"$work/t-exec"; done
b=$(median <"$work/t-builtin"); d=$(median <"$work/t-declared"); e=$(median <"$work/t-exec")
echo "| what | median wall (s) of $runs runs | jobs/s |"
echo "| --- | ---: | ---: |"
printf '| built-in entry, %d jobs | %.3f | %.0f |\n' "$jobs" "$b" "$(echo "$jobs / $b" | bc -l)"
printf '| declarative json-entry, %d jobs | %.3f (%.2f× the built-in) | %.0f |\n' "$jobs" "$d" "$(echo "$d / $b" | bc -l)" "$(echo "$jobs / $d" | bc -l)"
printf '| executable kind (sh), %d jobs | %.3f | %.0f |\n' "$jobs" "$e" "$(echo "$jobs / $e" | bc -l)"
echo "all runs (s): built-in $(tr '\n' ' ' <"$work/t-builtin"); declarative $(tr '\n' ' ' <"$work/t-declared"); executable $(tr '\n' ' ' <"$work/t-exec")"
