#!/usr/bin/env bash
# What durability costs: `runner run` on N entry jobs with and without --no-sync, with the
# output directory on a disk and on a tmpfs, and the time of the syncfs call itself.
#
# Serves an entry from the runner's fixture server on loopback, then runs
# the batch R times per case (round-robin), each into a fresh output directory. Prints a
# Markdown table of median wall times, and the median syncfs time as strace -T reports it.
#
# Usage: bash Tests/Benchmarks/sync-cost.sh [--entries N] [--runs R] [--disk DIR] [--tmpfs DIR]
#   --entries N   entry jobs in the batch (default 5000)
#   --runs R      runs per case; the median is shown (default 3)
#   --disk DIR    a folder on a disk (default: a new folder under the current one)
#   --tmpfs DIR   a folder on a tmpfs (default /dev/shm)
# RUNNER_BIN names the binary (default .build/release/runner, else .build/debug/runner).
# Needs curl, bc and python3; strace for the syncfs column (skipped without it).
set -euo pipefail
cd "$(dirname "$0")/../.."

entries=5000
runs=3
disk=""
tmpfs=/dev/shm
while [ $# -gt 0 ]; do
    case "$1" in
        --entries) entries=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --disk) disk=$2; shift 2 ;;
        --tmpfs) tmpfs=$2; shift 2 ;;
        -h|--help) sed -n '/^# Usage:/,/^# Needs/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "sync-cost.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
runner=${RUNNER_BIN:-}
if [ -z "$runner" ]; then
    runner=.build/release/runner
    [ -x "$runner" ] || runner=.build/debug/runner
fi
[ -x "$runner" ] || { echo "sync-cost.sh: no runner binary; build first or set RUNNER_BIN" >&2; exit 2; }
runner=$(realpath "$runner")

work=$(mktemp -d)
[ -n "$disk" ] || disk="$PWD/.sync-cost-$$"
mkdir -p "$disk/sync-cost-$$" "$tmpfs/sync-cost-$$"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work" "$disk/sync-cost-$$" "$tmpfs/sync-cost-$$"
    [ "$disk" = "$PWD/.sync-cost-$$" ] && rm -rf "$disk" || true
}
trap cleanup EXIT

# The fixture server (on a port it picks) answers every job with the same entry; each job
# writes its own payload and record, so the run writes 2N files and a run log.
setsid "$runner" fixture-server --port 0 >"$work/fixture.log" 2>&1 &
server_pid=$!
base=""
for _ in $(seq 1 100); do
    base=$(grep -o 'http://[0-9.:]*' "$work/fixture.log" 2>/dev/null | head -1) || true
    [ -n "$base" ] && curl -sf "$base/data.json" >/dev/null 2>&1 && break
    sleep 0.05
done
[ -n "$base" ] || { cat "$work/fixture.log" >&2; echo "sync-cost.sh: the fixture server did not start" >&2; exit 1; }
id=$(curl -sf "$base/data.json" | python3 -c '
import json, sys
def leaves(nodes):
    for node in nodes:
        if "id" in node: yield node["id"]
        yield from leaves(node.get("children", []))
print("\n".join(leaves(json.load(sys.stdin))))' | while read -r candidate; do
    curl -sf -o /dev/null "$base/entries/$candidate.json" && { echo "$candidate"; break; }
done)
[ -n "$id" ] || { echo "sync-cost.sh: no entry of the fixture answers" >&2; exit 1; }
seq 0 $((entries - 1)) | awk -v b="$base" -v id="$id" '{printf "{\"kind\": \"entry\", \"key\": \"entry:e%d\", \"id\": \"%s\", \"url\": \"%s/entries/{id}.json\", \"output\": \"entries/e%d.json\"}\n", $1, id, b, $1}' > "$work/batch.jsonl"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A wall syncfs
for round in $(seq "$runs"); do
    for place in disk tmpfs; do
        base=$([ "$place" = disk ] && echo "$disk/sync-cost-$$" || echo "$tmpfs/sync-cost-$$")
        for mode in sync no-sync; do
            out="$base/out-$round-$mode"
            flags=()
            [ "$mode" = no-sync ] && flags=(--no-sync)
            sync  # start each run with nothing dirty from the last
            start=$(date +%s.%N)
            if command -v strace >/dev/null 2>&1; then
                strace --seccomp-bpf -f -T -e trace=syncfs -o "$work/trace" "$runner" run "$work/batch.jsonl" --out "$out" --concurrency 32 "${flags[@]}" >/dev/null 2>&1 \
                    || { echo "sync-cost.sh: the run failed (see $out/runs)" >&2; exit 1; }
                t=$(grep -o 'syncfs([0-9]*) *= 0 <[0-9.]*>' "$work/trace" | sed 's/.*<\(.*\)>/\1/' | head -1 || true)
                syncfs[$place-$mode]+="${t:-0} "
            else
                "$runner" run "$work/batch.jsonl" --out "$out" --concurrency 32 "${flags[@]}" >/dev/null 2>&1 \
                    || { echo "sync-cost.sh: the run failed" >&2; exit 1; }
            fi
            end=$(date +%s.%N)
            wall[$place-$mode]+="$(echo "$end - $start" | bc) "
            rm -rf "$out"
        done
    done
done

fs() { df -T "$1" | awk 'NR==2 {print $2}'; }
echo "| output on | \`runner run\` (syncs) | \`--no-sync\` | the syncfs call |"
echo "| --- | ---: | ---: | ---: |"
for place in disk tmpfs; do
    base=$([ "$place" = disk ] && echo "$disk" || echo "$tmpfs")
    w1=$(tr ' ' '\n' <<<"${wall[$place-sync]}" | grep . | median)
    w2=$(tr ' ' '\n' <<<"${wall[$place-no-sync]}" | grep . | median)
    s1=$(tr ' ' '\n' <<<"${syncfs[$place-sync]:-0}" | grep . | median)
    printf '| %s (%s) | %.2f s | %.2f s | %.2f ms |\n' "$place" "$(fs "$base")" "$w1" "$w2" "$(echo "$s1 * 1000" | bc)"
done
echo
echo "$entries entry jobs, --concurrency 32, median of $runs runs; $(nproc) cores, $(uname -r); binary $(basename "$(dirname "$runner")")."
