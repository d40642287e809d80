#!/usr/bin/env bash
# Spool latency: from a job file's arrival in inbox/ (the rename that puts it there) to the start
# of its job, as `runner watch` measures it for every file (the file's ctime, set by the rename,
# against the moment the engine starts the job). Files arrive one at a time, 50 ms apart, each with
# one image job against the fixture server on loopback; the script prints a small table.
#
#   bash Tests/Benchmarks/spool-latency.sh [FILES]      (default 100; builds runner in release)
set -euo pipefail
cd "$(dirname "$0")/../.."
files=${1:-100}
swift build -c release --product runner >/dev/null
runner="$(swift build -c release --show-bin-path)/runner"

work=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
cleanup() {
    [[ -n "${watch_pid:-}" ]] && kill "$watch_pid" 2>/dev/null || true
    [[ -n "${server_pid:-}" ]] && kill "$server_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

"$runner" fixture-server --port "$port" >"$work/server.log" 2>&1 &
server_pid=$!
"$runner" watch --spool "$work/spool" --out "$work/out" 2>"$work/watch.log" &
watch_pid=$!
for _ in $(seq 100); do [[ -d "$work/spool/inbox" ]] && grep -q watching "$work/watch.log" && break; sleep 0.05; done

for i in $(seq "$files"); do
    printf '{"kind": "image", "key": "image:bench-%d", "url": "http://127.0.0.1:%d/images/png.png"}\n' "$i" "$port" >"$work/job-$i.json"
    mv "$work/job-$i.json" "$work/spool/inbox/job-$i.json"
    sleep 0.05
done
for _ in $(seq 200); do
    [[ $(grep -c 'first job started' "$work/watch.log" || true) -ge $files ]] && break
    sleep 0.05
done
kill "$watch_pid"; wait "$watch_pid" || true; watch_pid=

grep -o 'started [0-9.]* ms after arrival' "$work/watch.log" | awk '{print $2}' | sort -n >"$work/latencies"
n=$(wc -l <"$work/latencies")
pick() { awk -v q="$1" -v n="$n" 'NR == int((n - 1) * q) + 1 {print; exit}' "$work/latencies"; }
echo "arrival in inbox/ -> job start, $n files, one at a time ($(nproc) cores)"
printf '%-8s %10s\n' "" "ms"
printf '%-8s %10s\n' min "$(pick 0)" median "$(pick 0.5)" p90 "$(pick 0.9)" p99 "$(pick 0.99)" max "$(pick 1)"
